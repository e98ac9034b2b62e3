-- ax schema v1 for MySQL 8 / MariaDB 10.6+. Times are DATETIME(6), UTC.
-- {{bin}} is a binary NO PAD collation: utf8mb4_0900_bin on MySQL, utf8mb4_nopad_bin on
-- MariaDB (utf8mb4_bin pads: 'k' and 'k ' would be one business key).
-- DDL auto-commits, so every statement is idempotent: a migration interrupted by a crash
-- resumes at the statement after the last one recorded, and rerunning that one is harmless.
CREATE TABLE IF NOT EXISTS ax_tasks (
    id               BIGINT       NOT NULL AUTO_INCREMENT,
    name             VARCHAR(200) CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    `key`            VARCHAR(500) CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    payload          LONGBLOB     NULL,
    status           VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    due_at           DATETIME(6)  NOT NULL,
    attempt          INT          NOT NULL DEFAULT 0,
    max_retry        INT          NOT NULL DEFAULT 0,
    dispatch_retries INT          NOT NULL DEFAULT 0,
    execution_id     VARCHAR(100) CHARACTER SET utf8mb4 COLLATE {{bin}} NULL,
    owner_service    VARCHAR(200) CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL DEFAULT '',
    last_error       MEDIUMTEXT   CHARACTER SET utf8mb4 NOT NULL,
    timeout_us       BIGINT       NOT NULL DEFAULT 0,
    backoff          TEXT         CHARACTER SET ascii NOT NULL,
    seq              BIGINT       NOT NULL DEFAULT 0,
    created_at       DATETIME(6)  NOT NULL,
    updated_at       DATETIME(6)  NOT NULL,
    dispatched_at    DATETIME(6)  NULL,
    started_at       DATETIME(6)  NULL,
    heartbeat_at     DATETIME(6)  NULL,
    finished_at      DATETIME(6)  NULL,
    triggered_at     DATETIME(6)  NULL,
    PRIMARY KEY (id),
    -- The business key: at most 4 × (200 + 500) = 2800 bytes, under InnoDB's 3072.
    UNIQUE KEY ax_tasks_name_key (name, `key`),
    -- The window scan and the claim: "SCHEDULED and due before T" is a range scan.
    KEY ax_tasks_status_due (status, due_at, id),
    -- The incremental refill: SCHEDULED rows changed after a sequence cursor.
    KEY ax_tasks_status_seq (status, seq),
    -- The inspector: orphaned executions and stuck claims.
    KEY ax_tasks_status_heartbeat (status, heartbeat_at, id),
    KEY ax_tasks_status_dispatched (status, dispatched_at, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {{bin}} ROW_FORMAT = DYNAMIC;

CREATE TABLE IF NOT EXISTS ax_executions (
    id           VARCHAR(100) CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL,
    task_id      BIGINT       NOT NULL,
    attempt      INT          NOT NULL,
    node         VARCHAR(200) CHARACTER SET utf8mb4 COLLATE {{bin}} NOT NULL DEFAULT '',
    status       VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    started_at   DATETIME(6)  NOT NULL,
    heartbeat_at DATETIME(6)  NULL,
    finished_at  DATETIME(6)  NULL,
    error        MEDIUMTEXT   CHARACTER SET utf8mb4 NOT NULL,
    PRIMARY KEY (id),
    KEY ax_executions_task (task_id, started_at, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = {{bin}} ROW_FORMAT = DYNAMIC;

-- Counters: 'seq' hands out the refill sequence numbers.
CREATE TABLE IF NOT EXISTS ax_counters (
    name  VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    value BIGINT      NOT NULL,
    PRIMARY KEY (name)
) ENGINE = InnoDB;

INSERT INTO ax_counters (name, value) VALUES ('seq', 0) ON DUPLICATE KEY UPDATE value = value;

-- Sequence ranges handed out to transactions that have not committed yet (see doc.go,
-- "The refill cursor"). A row is locked by its transaction until that commits (and
-- deletes it) or rolls back.
CREATE TABLE IF NOT EXISTS ax_seq_holds (
    lo         BIGINT      NOT NULL,
    hi         BIGINT      NOT NULL,
    created_at DATETIME(6) NOT NULL,
    PRIMARY KEY (lo)
) ENGINE = InnoDB;
