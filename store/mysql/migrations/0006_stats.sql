-- ax schema v6: per-minute execution statistics (store.StatsKeeper). Harmless to rerun
-- when a migration resumes at it (see 0004_namespaces.sql).
--
-- One row per (namespace, minute, node): what the node's executions did in that
-- minute, written whole by the node (its cumulative totals, replacing the row) and
-- read an hour at a time by the console through the primary key, which holds the rows
-- (InnoDB's clustered index). max_lateness is in microseconds; lateness holds the
-- store.LatenessBuckets counts, comma-separated; failures the failing names (at most
-- store.MaxStatsNames of store.MaxNameLen bytes) as "count name" lines, most first.
CREATE TABLE IF NOT EXISTS ax_stats (
    namespace    VARBINARY(200) NOT NULL,
    minute       DATETIME(6)    NOT NULL,
    node         VARCHAR(200)   CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    succeeded    BIGINT         NOT NULL DEFAULT 0,
    failed       BIGINT         NOT NULL DEFAULT 0,
    panicked     BIGINT         NOT NULL DEFAULT 0,
    timed_out    BIGINT         NOT NULL DEFAULT 0,
    released     BIGINT         NOT NULL DEFAULT 0,
    orphaned     BIGINT         NOT NULL DEFAULT 0,
    retried      BIGINT         NOT NULL DEFAULT 0,
    early        BIGINT         NOT NULL DEFAULT 0,
    max_lateness BIGINT         NOT NULL DEFAULT 0,
    lateness     VARCHAR(1000)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    failures     TEXT           CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    PRIMARY KEY (namespace, minute, node)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {{bin}} ROW_FORMAT = DYNAMIC;
