-- ax schema v13 for PostgreSQL: the leadership history of each namespace
-- (store.LeadershipLog). Like v1, nothing names a schema.

-- Two rows per term: "acquired", appended by RaiseFence in its transaction (under the
-- namespace's fence lock), and "ended", appended by the leader when its term ends
-- (none when it crashed). A term is (namespace, epoch), so the primary key makes each
-- append happen once, and its backward scan serves the newest first: epoch
-- descending, "ended" before "acquired" (kind compares bytes, COLLATE "C"). Pruned
-- oldest first, by count and age, in the same order: a few rows per term, a thousand
-- per namespace.
CREATE TABLE ax_leadership (
    namespace text COLLATE "C" NOT NULL,
    epoch     bigint      NOT NULL,
    kind      text COLLATE "C" NOT NULL,
    holder    text        NOT NULL,
    at        timestamptz NOT NULL,
    reason    text        NOT NULL DEFAULT '',
    PRIMARY KEY (namespace, epoch, kind)
);
