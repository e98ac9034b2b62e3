-- ax schema v11 for PostgreSQL: per-minute execution statistics (store.StatsKeeper).
-- Like v1, nothing names a schema.

-- One row per (namespace, minute, node): what the node's executions did in that
-- minute, written whole by the node (its cumulative totals, replacing the row) and
-- read an hour at a time by the console through the primary key. lateness holds the
-- store.LatenessBuckets counts, comma-separated; failures the failing names as
-- "count name" lines, most first; max_lateness is in microseconds. Pruned by age
-- through the primary key.
CREATE TABLE ax_stats (
    namespace    text COLLATE "C" NOT NULL,
    minute       timestamptz      NOT NULL,
    node         text COLLATE "C" NOT NULL,
    succeeded    bigint           NOT NULL DEFAULT 0,
    failed       bigint           NOT NULL DEFAULT 0,
    panicked     bigint           NOT NULL DEFAULT 0,
    timed_out    bigint           NOT NULL DEFAULT 0,
    released     bigint           NOT NULL DEFAULT 0,
    orphaned     bigint           NOT NULL DEFAULT 0,
    retried      bigint           NOT NULL DEFAULT 0,
    early        bigint           NOT NULL DEFAULT 0,
    max_lateness bigint           NOT NULL DEFAULT 0,
    lateness     text             NOT NULL DEFAULT '',
    failures     text             NOT NULL DEFAULT '',
    PRIMARY KEY (namespace, minute, node)
);
