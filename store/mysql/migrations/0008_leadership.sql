-- ax schema v8 for MySQL / MariaDB: the leadership history of each namespace
-- (store.LeadershipLog). One statement, harmless to rerun.

-- Two rows per term: "acquired", appended by RaiseFence in its transaction (with the
-- namespace's ax_leader row locked), and "ended", appended by the leader when its term
-- ends (none when it crashed). A term is (namespace, epoch), so the primary key makes
-- each append happen once, and its backward scan serves the newest first: epoch
-- descending, "ended" before "acquired". Pruned oldest first, by count and age, in
-- the same order. holder takes store.MaxLeadershipHolder characters (as ax_leader's
-- holder), reason store.MaxLeadershipReason.
CREATE TABLE IF NOT EXISTS ax_leadership (
    namespace VARBINARY(200) NOT NULL,
    epoch     BIGINT         NOT NULL,
    kind      VARCHAR(16)    CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    holder    VARCHAR(500)   CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    at        DATETIME(6)    NOT NULL,
    reason    VARCHAR(1000)  CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    PRIMARY KEY (namespace, epoch, kind)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {{bin}} ROW_FORMAT = DYNAMIC;
