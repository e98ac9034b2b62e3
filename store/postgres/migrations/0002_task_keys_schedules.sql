-- ax schema v2 for PostgreSQL: task keys with overlap policies, and durable
-- schedules (DESIGN.md §8). Like v1, nothing names a schema.

-- A task's mutual-exclusion key and what happens when it comes due while another
-- task with the key is DISPATCHING or RUNNING (see doc.go, "Task keys"). Both are ''
-- for a task without a key, which is what every row written by v1 gets. A constant
-- default adds a column without rewriting the table, and the CHECKs are NOT VALID
-- so that adding them does not scan it either: they hold for every row written from
-- now on, and the old rows ('', '') satisfy them anyway.
ALTER TABLE ax_tasks
    ADD COLUMN task_key text NOT NULL DEFAULT '',
    ADD COLUMN overlap  text NOT NULL DEFAULT '';
ALTER TABLE ax_tasks
    ADD CONSTRAINT ax_tasks_overlap_check CHECK (overlap IN ('', 'skip', 'queue', 'allow')) NOT VALID,
    ADD CONSTRAINT ax_tasks_task_key_overlap_check CHECK ((task_key = '') = (overlap = '')) NOT VALID;
-- Who holds a key: Claim and Trigger look up the DISPATCHING and RUNNING tasks of
-- the keys they are about to hand out. Only those rows, and only the ones with a
-- key, are in the index, so it stays as small as the work in flight.
CREATE INDEX ax_tasks_key_held ON ax_tasks (task_key, id)
    WHERE status IN ('DISPATCHING', 'RUNNING') AND task_key <> '';

-- One row per periodic task (store.Schedule). next_fire_at is the first slot not
-- yet materialised as an ax_tasks row; FireSchedule advances it by compare-and-set
-- in the transaction that inserts the occurrences.
CREATE TABLE ax_schedules (
    name         text        PRIMARY KEY,
    spec         text        NOT NULL,
    time_zone    text        NOT NULL,
    overlap      text        NOT NULL CHECK (overlap IN ('skip', 'queue', 'allow')),
    misfire      text        NOT NULL CHECK (misfire IN ('fire_once', 'skip', 'catch_up')),
    payload      bytea,
    paused       boolean     NOT NULL DEFAULT false,
    next_fire_at timestamptz NOT NULL,
    last_fire_at timestamptz,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);
