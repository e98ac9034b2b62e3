-- ax schema v7 for SQLite: per-minute execution statistics (store.StatsKeeper).

-- One row per (namespace, minute, node): what the node's executions did in that
-- minute, written whole by the node (its cumulative totals, replacing the row) and
-- read an hour at a time through the primary key, which holds the rows (WITHOUT
-- ROWID). minute is in Unix microseconds like every time here, max_lateness in
-- microseconds; lateness holds the store.LatenessBuckets counts, comma-separated;
-- failures the failing names as "count name" lines, most first.
CREATE TABLE ax_stats (
    namespace    TEXT    NOT NULL,
    minute       INTEGER NOT NULL,
    node         TEXT    NOT NULL,
    succeeded    INTEGER NOT NULL DEFAULT 0,
    failed       INTEGER NOT NULL DEFAULT 0,
    panicked     INTEGER NOT NULL DEFAULT 0,
    timed_out    INTEGER NOT NULL DEFAULT 0,
    released     INTEGER NOT NULL DEFAULT 0,
    orphaned     INTEGER NOT NULL DEFAULT 0,
    retried      INTEGER NOT NULL DEFAULT 0,
    early        INTEGER NOT NULL DEFAULT 0,
    max_lateness INTEGER NOT NULL DEFAULT 0,
    lateness     TEXT    NOT NULL DEFAULT '',
    failures     TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (namespace, minute, node)
) WITHOUT ROWID;
