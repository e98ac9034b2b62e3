-- ax schema v1 for PostgreSQL. Every object is created in the connection's current
-- schema (the first schema of search_path); nothing names a schema.

-- The refill sequence: every write that leaves a row SCHEDULED stamps it with a
-- fresh value (see doc.go, "The refill cursor"). CACHE 1 (the default) is required:
-- the cursor relies on nextval being linearizable across sessions.
CREATE SEQUENCE ax_seq AS bigint CACHE 1;

CREATE TABLE ax_tasks (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name             text        NOT NULL,
    key              text        NOT NULL,
    payload          bytea,
    status           text        NOT NULL CHECK (status IN
                         ('SCHEDULED', 'DISPATCHING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'SKIPPED')),
    due_at           timestamptz NOT NULL,
    attempt          integer     NOT NULL DEFAULT 0,
    max_retry        integer     NOT NULL DEFAULT 0,
    dispatch_retries integer     NOT NULL DEFAULT 0,
    execution_id     text,
    owner_service    text        NOT NULL DEFAULT '',
    last_error       text        NOT NULL DEFAULT '',
    timeout_us       bigint      NOT NULL DEFAULT 0,
    backoff_us       bigint[]    NOT NULL DEFAULT '{}',
    seq              bigint      NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    dispatched_at    timestamptz,
    started_at       timestamptz,
    heartbeat_at     timestamptz,
    finished_at      timestamptz,
    triggered_at     timestamptz
) WITH (
    -- Room on each page for the new row versions of a task's life (claim, start,
    -- heartbeats, finish), so updates stay on the page.
    fillfactor = 80,
    -- A queue table: rows die at the head of the indexes all the time, and dead
    -- index entries there made an empty due-window scan 70x slower (DESIGN.md §11).
    -- Vacuum after 1% of the table (at least 1000 rows) changed, and do not sleep.
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);
-- The business key.
CREATE UNIQUE INDEX ax_tasks_name_key ON ax_tasks (name, key);
-- The window scan and the claim: "SCHEDULED and due before T" is a range scan.
CREATE INDEX ax_tasks_scheduled_due ON ax_tasks (due_at, id) WHERE status = 'SCHEDULED';
-- The incremental refill: scheduled rows stamped after a sequence cursor.
CREATE INDEX ax_tasks_scheduled_seq ON ax_tasks (seq) WHERE status = 'SCHEDULED';
-- The inspector: orphaned executions and stuck claims, oldest first.
CREATE INDEX ax_tasks_running_heartbeat ON ax_tasks (heartbeat_at, id) WHERE status = 'RUNNING';
CREATE INDEX ax_tasks_dispatching_since ON ax_tasks (dispatched_at, id) WHERE status = 'DISPATCHING';

CREATE TABLE ax_executions (
    id           text        PRIMARY KEY,
    task_id      bigint      NOT NULL,
    attempt      integer     NOT NULL,
    node         text        NOT NULL DEFAULT '',
    status       text        NOT NULL CHECK (status IN ('RUNNING', 'SUCCEEDED', 'FAILED')),
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz,
    finished_at  timestamptz,
    error        text        NOT NULL DEFAULT ''
) WITH (fillfactor = 90);
CREATE INDEX ax_executions_task ON ax_executions (task_id, started_at);
