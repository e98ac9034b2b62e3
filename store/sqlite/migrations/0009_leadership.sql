-- ax schema v9 for SQLite: the leadership history of each namespace
-- (store.LeadershipLog). Times in microseconds.

-- Two rows per term: "acquired", appended by RaiseFence in its transaction, and
-- "ended", appended by the leader when its term ends (none when it crashed). A term is
-- (namespace, epoch), so the primary key makes each append happen once, and its
-- backward scan serves the newest first: epoch descending, "ended" before "acquired".
-- Pruned oldest first, by count and age, in the same order.
CREATE TABLE ax_leadership (
    namespace TEXT    NOT NULL,
    epoch     INTEGER NOT NULL,
    kind      TEXT    NOT NULL,
    holder    TEXT    NOT NULL,
    at        INTEGER NOT NULL,
    reason    TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (namespace, epoch, kind)
) WITHOUT ROWID;
