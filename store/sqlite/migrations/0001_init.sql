-- ax schema v1 for SQLite. Times are INTEGER microseconds since the Unix epoch, UTC.
CREATE TABLE ax_tasks (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    name             TEXT    NOT NULL,
    key              TEXT    NOT NULL,
    payload          BLOB,
    status           TEXT    NOT NULL,
    due_at           INTEGER NOT NULL,
    attempt          INTEGER NOT NULL DEFAULT 0,
    max_retry        INTEGER NOT NULL DEFAULT 0,
    dispatch_retries INTEGER NOT NULL DEFAULT 0,
    execution_id     TEXT,
    owner_service    TEXT    NOT NULL DEFAULT '',
    last_error       TEXT    NOT NULL DEFAULT '',
    timeout_us       INTEGER NOT NULL DEFAULT 0,
    backoff          TEXT    NOT NULL DEFAULT '',
    seq              INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    dispatched_at    INTEGER,
    started_at       INTEGER,
    heartbeat_at     INTEGER,
    finished_at      INTEGER,
    triggered_at     INTEGER
);
-- The business key.
CREATE UNIQUE INDEX ax_tasks_name_key ON ax_tasks (name, key);
-- The window scan and the claim: "SCHEDULED and due before T" is a range scan.
CREATE INDEX ax_tasks_scheduled_due ON ax_tasks (due_at, id) WHERE status = 'SCHEDULED';
-- The incremental refill: scheduled rows changed after a sequence cursor.
CREATE INDEX ax_tasks_scheduled_seq ON ax_tasks (seq) WHERE status = 'SCHEDULED';
-- The inspector: orphaned executions and stuck claims.
CREATE INDEX ax_tasks_running_heartbeat ON ax_tasks (heartbeat_at) WHERE status = 'RUNNING';
CREATE INDEX ax_tasks_dispatching_since ON ax_tasks (dispatched_at) WHERE status = 'DISPATCHING';

CREATE TABLE ax_executions (
    id           TEXT    PRIMARY KEY,
    task_id      INTEGER NOT NULL,
    attempt      INTEGER NOT NULL,
    node         TEXT    NOT NULL DEFAULT '',
    status       TEXT    NOT NULL,
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER,
    finished_at  INTEGER,
    error        TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX ax_executions_task ON ax_executions (task_id, started_at);

-- Counters: 'seq' hands out the refill sequence numbers.
CREATE TABLE ax_counters (
    name  TEXT    PRIMARY KEY,
    value INTEGER NOT NULL
);
INSERT INTO ax_counters (name, value) VALUES ('seq', 0);
