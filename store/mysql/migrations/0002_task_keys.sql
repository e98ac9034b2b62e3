-- ax schema v2: task keys with overlap policies, and durable schedules.
-- ALTER TABLE cannot say IF NOT EXISTS on MySQL 8, so the two ALTERs are made
-- harmless to rerun another way: each is one atomic DDL statement (MySQL 8.0,
-- MariaDB 10.6), and when a migration resumes at a statement that already took effect
-- (a crash between the statement and its step record) its "duplicate column" (1060)
-- or "duplicate key" (1061) error is taken as done (see migrate in mysql.go).

-- Rows written by version 1 get task_key '' and overlap '': no key.
ALTER TABLE ax_tasks
    ADD COLUMN task_key VARCHAR(500) CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL DEFAULT '',
    ADD COLUMN overlap  VARCHAR(8)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '';

-- "Which task holds key k": MySQL and MariaDB have no partial index, so the index is
-- on a virtual column that is the task key while the row is DISPATCHING or RUNNING
-- with a key, and NULL otherwise. A row without a key keeps NULL for life, so its
-- transitions never touch this index; a lookup by key reads the holders only.
ALTER TABLE ax_tasks
    ADD COLUMN held_key VARCHAR(500) CHARACTER SET utf8mb4 COLLATE {{bin}}
        GENERATED ALWAYS AS (IF(task_key <> '' AND status IN ('DISPATCHING', 'RUNNING'), task_key, NULL)) VIRTUAL,
    ADD KEY ax_tasks_held_key (held_key);

-- One lock row per distinct task key ever used: Claim and Trigger lock the rows of
-- their keys (ascending) before they read the holders, so claims of one key
-- serialise across processes. Rows are never deleted; each is one short key.
CREATE TABLE IF NOT EXISTS ax_task_keys (
    task_key VARCHAR(500) CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    PRIMARY KEY (task_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {{bin}} ROW_FORMAT = DYNAMIC;

CREATE TABLE IF NOT EXISTS ax_schedules (
    name         VARCHAR(200) CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    spec         VARCHAR(500) CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    time_zone    VARCHAR(100) CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    overlap      VARCHAR(8)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    misfire      VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    payload      LONGBLOB     NULL,
    paused       BOOLEAN      NOT NULL DEFAULT FALSE,
    next_fire_at DATETIME(6)  NOT NULL,
    last_fire_at DATETIME(6)  NULL,
    created_at   DATETIME(6)  NOT NULL,
    updated_at   DATETIME(6)  NOT NULL,
    PRIMARY KEY (name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {{bin}} ROW_FORMAT = DYNAMIC;
