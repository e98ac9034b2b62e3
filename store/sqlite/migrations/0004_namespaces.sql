-- ax schema v4 for SQLite: namespaces, and the node registry.
-- Times are INTEGER microseconds since the Unix epoch, UTC.

-- Every task belongs to a namespace; rows written before v4 belong to 'default'.
-- ADD COLUMN with a constant default only changes the table's definition in
-- sqlite_master: existing rows are not rewritten, they read the default.
ALTER TABLE ax_tasks ADD COLUMN namespace TEXT NOT NULL DEFAULT 'default';

-- The indexes of v1 and v2 get the namespace as their leading column, so that each
-- namespace's scans stay range scans of its own rows. Same WHERE clauses as before
-- (SQLite uses a partial index only for a query whose WHERE contains the index's).
DROP INDEX ax_tasks_name_key;
DROP INDEX ax_tasks_scheduled_due;
DROP INDEX ax_tasks_scheduled_seq;
DROP INDEX ax_tasks_running_heartbeat;
DROP INDEX ax_tasks_dispatching_since;
DROP INDEX ax_tasks_key_holder;
-- The business key, unique per namespace.
CREATE UNIQUE INDEX ax_tasks_ns_name_key ON ax_tasks (namespace, name, key);
-- The window scan and TaskStats's oldest due task.
CREATE INDEX ax_tasks_ns_scheduled_due ON ax_tasks (namespace, due_at, id) WHERE status = 'SCHEDULED';
-- The incremental refill.
CREATE INDEX ax_tasks_ns_scheduled_seq ON ax_tasks (namespace, seq) WHERE status = 'SCHEDULED';
-- The inspector (Stale).
CREATE INDEX ax_tasks_ns_running_heartbeat ON ax_tasks (namespace, heartbeat_at) WHERE status = 'RUNNING';
CREATE INDEX ax_tasks_ns_dispatching_since ON ax_tasks (namespace, dispatched_at) WHERE status = 'DISPATCHING';
-- The holders of a task key: keys are scoped per namespace.
CREATE INDEX ax_tasks_ns_key_holder ON ax_tasks (namespace, task_key)
    WHERE status IN ('DISPATCHING', 'RUNNING') AND task_key <> '';

-- Schedules become unique per (namespace, name). SQLite cannot change a table's
-- primary key in place, so ax_schedules is rebuilt: it holds one row per periodic
-- task, a few rows, not the task table.
CREATE TABLE ax_schedules_v4 (
    namespace    TEXT    NOT NULL DEFAULT 'default',
    name         TEXT    NOT NULL,
    spec         TEXT    NOT NULL,
    time_zone    TEXT    NOT NULL,
    overlap      TEXT    NOT NULL,
    misfire      TEXT    NOT NULL,
    payload      BLOB,
    paused       INTEGER NOT NULL DEFAULT 0,
    next_fire_at INTEGER NOT NULL,
    last_fire_at INTEGER,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (namespace, name)
);
INSERT INTO ax_schedules_v4 (namespace, name, spec, time_zone, overlap, misfire, payload, paused,
        next_fire_at, last_fire_at, created_at, updated_at)
    SELECT 'default', name, spec, time_zone, overlap, misfire, payload, paused,
        next_fire_at, last_fire_at, created_at, updated_at
    FROM ax_schedules;
DROP TABLE ax_schedules;
ALTER TABLE ax_schedules_v4 RENAME TO ax_schedules;

-- The registry of executors: one row per (namespace, node), replaced by each of the
-- node's heartbeats. handlers holds the sorted task names as a JSON array of strings
-- ('[]' for none), so that no name, whatever its characters, can split another.
CREATE TABLE ax_nodes (
    namespace    TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    advertise    TEXT    NOT NULL DEFAULT '',
    handlers     TEXT    NOT NULL DEFAULT '[]',
    capacity     INTEGER NOT NULL DEFAULT 0,
    in_flight    INTEGER NOT NULL DEFAULT 0,
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    PRIMARY KEY (namespace, name)
);
