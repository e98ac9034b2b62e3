-- ax schema v13 for MySQL / MariaDB: what operators set per task name. Harmless to
-- rerun: the table is created only if it does not exist.

-- One row per (namespace, name) an operator ever paused (store.NameKeeper); the claim
-- reads it by this primary key for each task it locks. namespace and name are typed
-- as in ax_tasks, so that the probe compares like with like.
CREATE TABLE IF NOT EXISTS ax_names (
    namespace  VARBINARY(200) NOT NULL,
    name       VARCHAR(200)   CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    paused     BOOLEAN        NOT NULL DEFAULT FALSE,
    changed_by VARCHAR(200)   CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL DEFAULT '',
    changed_at DATETIME(6)    NOT NULL,
    PRIMARY KEY (namespace, name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {{bin}} ROW_FORMAT = DYNAMIC;
