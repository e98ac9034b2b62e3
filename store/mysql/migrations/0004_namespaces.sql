-- ax schema v4: namespaces (store.Namespaced) and the node registry (store.NodeRegistry).
-- Every statement is harmless to rerun when a migration resumes at it (see migrate in
-- mysql.go): an ADD COLUMN that took effect answers "duplicate column" (1060), the lone
-- DROP KEY "can't drop" (1091), the index rebuild "duplicate key name" (1061), all taken
-- as done; a DROP PRIMARY KEY with its ADD PRIMARY KEY in one atomic statement simply
-- rebuilds the same key again.
--
-- namespace is VARBINARY(200): store.MaxNamespace bytes, compared byte for byte, and
-- narrow enough that the business key (namespace, name, key) is 202 + 802 + 2002 =
-- 3006 bytes, under InnoDB's 3072 (a utf8mb4 VARCHAR(200) would take 802).
--
-- Rows written before version 4 are in namespace 'default' (store.DefaultNamespace).
-- ADD COLUMN with a DEFAULT at the end of the table is instant on MariaDB 10.3+ and
-- MySQL 8.0.12+ (no table rebuild), except that MariaDB cannot add a column instantly
-- to a table with an indexed virtual column: ax_tasks_held_key is dropped first and
-- rebuilt, with namespace leading as every index of ax_tasks now has, in the one
-- ALTER that rebuilds the others. That ALTER changes only secondary indexes: online
-- (concurrent reads and writes go on), no table rebuild.
ALTER TABLE ax_tasks
    DROP KEY ax_tasks_held_key;

ALTER TABLE ax_tasks
    ADD COLUMN namespace VARBINARY(200) NOT NULL DEFAULT 'default';

-- The business key becomes unique per namespace, and the hot scans (the window scan
-- and the claim's due times, the change-sequence scan, Stale's two scans, the holders
-- of a task key) stay index range scans within one namespace.
ALTER TABLE ax_tasks
    DROP KEY ax_tasks_name_key,          ADD UNIQUE KEY ax_tasks_name_key (namespace, name, `key`),
    DROP KEY ax_tasks_status_due,        ADD KEY ax_tasks_status_due (namespace, status, due_at, id),
    DROP KEY ax_tasks_status_seq,        ADD KEY ax_tasks_status_seq (namespace, status, seq),
    DROP KEY ax_tasks_status_heartbeat,  ADD KEY ax_tasks_status_heartbeat (namespace, status, heartbeat_at, id),
    DROP KEY ax_tasks_status_dispatched, ADD KEY ax_tasks_status_dispatched (namespace, status, dispatched_at, id),
    ADD KEY ax_tasks_held_key (namespace, held_key);

-- Task keys are per namespace: one namespace's claims never wait on another's key lock.
-- The primary key change rebuilds this small table (one short row per key).
ALTER TABLE ax_task_keys
    ADD COLUMN namespace VARBINARY(200) NOT NULL DEFAULT 'default';

ALTER TABLE ax_task_keys
    DROP PRIMARY KEY, ADD PRIMARY KEY (namespace, task_key);

-- Schedules are unique per (namespace, name); the table is small (one row per schedule).
ALTER TABLE ax_schedules
    ADD COLUMN namespace VARBINARY(200) NOT NULL DEFAULT 'default';

ALTER TABLE ax_schedules
    DROP PRIMARY KEY, ADD PRIMARY KEY (namespace, name);

-- The registry of executors: one row per (namespace, node), replaced by each heartbeat.
-- handlers holds the sorted task names joined with '\n' (ax validates names as printable,
-- without control characters; the store refuses a name holding '\n'), '' for none.
-- Times are DATETIME(6) UTC in the database's clock, like every other time.
CREATE TABLE IF NOT EXISTS ax_nodes (
    namespace    VARBINARY(200) NOT NULL,
    name         VARCHAR(200) CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    advertise    TEXT         CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    handlers     MEDIUMTEXT   CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    capacity     INT          NOT NULL,
    in_flight    INT          NOT NULL,
    started_at   DATETIME(6)  NOT NULL,
    heartbeat_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (namespace, name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {{bin}} ROW_FORMAT = DYNAMIC;
