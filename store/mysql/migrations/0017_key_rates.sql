-- ax schema v17 for MySQL / MariaDB: a rate limit per task key of a task name
-- (store.NameKeeper.SetKeyRate). Harmless to rerun when a migration resumes at it (see
-- 0004_namespaces.sql): the ALTER that took effect answers "duplicate column" (1060),
-- and the table is created only if it does not exist.
--
-- At most key_rate claims of the name's tasks sharing a task key in any window of
-- key_rate_per_us microseconds, for each key; 0, what every older row gets, is no
-- limit (and key_rate_per_us is then 0 too). Columns with a constant default at the
-- end of ax_names, which has no virtual column, are added instantly.
ALTER TABLE ax_names
    ADD COLUMN key_rate        INT    NOT NULL DEFAULT 0,
    ADD COLUMN key_rate_per_us BIGINT NOT NULL DEFAULT 0;

-- The times of the last claims of a name's tasks with a task key, one row per (namespace,
-- name, task key) ever claimed under a rate per key: starts as driverkit.EncodeStarts
-- writes them (8 bytes each, at most key_rate of them: up to 80,000 bytes at
-- store.MaxRate, hence MEDIUMBLOB, as ax_names.rate_starts), last_at the last of them.
-- The claims of the key read and write its row under the key's lock row in
-- ax_task_keys (and the name's in ax_names); PruneKeyStarts deletes the rows no window
-- reaches any more, found by ax_key_starts_last. namespace, name and task_key are typed
-- as in ax_tasks: 202 + 802 + 2002 = 3006 bytes of primary key, under InnoDB's 3072.
CREATE TABLE IF NOT EXISTS ax_key_starts (
    namespace VARBINARY(200) NOT NULL,
    name      VARCHAR(200)   CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    task_key  VARCHAR(500)   CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    starts    MEDIUMBLOB     NOT NULL,
    last_at   DATETIME(6)    NOT NULL,
    PRIMARY KEY (namespace, name, task_key),
    KEY ax_key_starts_last (namespace, last_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {{bin}} ROW_FORMAT = DYNAMIC;
