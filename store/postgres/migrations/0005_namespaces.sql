-- ax schema v5 for PostgreSQL: namespaces (store.Namespaced) and the node registry
-- (store.NodeRegistry). Like v1, nothing names a schema.

-- Every task and schedule belongs to one namespace; the rows written before version 5
-- are in 'default' (store.DefaultNamespace). A constant default adds the column without
-- rewriting the table and without an UPDATE: PostgreSQL 11+ keeps the value in the
-- catalog for the rows that predate the column. A namespace never changes.
ALTER TABLE ax_tasks ADD COLUMN namespace text NOT NULL DEFAULT 'default';
ALTER TABLE ax_schedules ADD COLUMN namespace text NOT NULL DEFAULT 'default';

-- The indexes of version 1 and 2, rebuilt with namespace as their leading column, so
-- that each namespace's scans stay range scans of its own part of the index. Each is
-- built under a new name, the old one dropped, and the new one given the old name
-- (this transaction holds the migration lock; CREATE INDEX blocks writers of ax_tasks
-- while it runs). The conditions of the partial indexes are unchanged.

-- The business key, unique per namespace (every row, as before).
CREATE UNIQUE INDEX ax_tasks_name_key_v5 ON ax_tasks (namespace, name, key);
DROP INDEX ax_tasks_name_key;
ALTER INDEX ax_tasks_name_key_v5 RENAME TO ax_tasks_name_key;
-- The window scan and the claim.
CREATE INDEX ax_tasks_scheduled_due_v5 ON ax_tasks (namespace, due_at, id) WHERE status = 'SCHEDULED';
DROP INDEX ax_tasks_scheduled_due;
ALTER INDEX ax_tasks_scheduled_due_v5 RENAME TO ax_tasks_scheduled_due;
-- The incremental refill. The sequence stays one for all namespaces (see doc.go, "The
-- refill cursor").
CREATE INDEX ax_tasks_scheduled_seq_v5 ON ax_tasks (namespace, seq) WHERE status = 'SCHEDULED';
DROP INDEX ax_tasks_scheduled_seq;
ALTER INDEX ax_tasks_scheduled_seq_v5 RENAME TO ax_tasks_scheduled_seq;
-- The inspector (Stale).
CREATE INDEX ax_tasks_running_heartbeat_v5 ON ax_tasks (namespace, heartbeat_at, id) WHERE status = 'RUNNING';
DROP INDEX ax_tasks_running_heartbeat;
ALTER INDEX ax_tasks_running_heartbeat_v5 RENAME TO ax_tasks_running_heartbeat;
CREATE INDEX ax_tasks_dispatching_since_v5 ON ax_tasks (namespace, dispatched_at, id) WHERE status = 'DISPATCHING';
DROP INDEX ax_tasks_dispatching_since;
ALTER INDEX ax_tasks_dispatching_since_v5 RENAME TO ax_tasks_dispatching_since;
-- Who holds a task key: keys are per namespace.
CREATE INDEX ax_tasks_key_held_v5 ON ax_tasks (namespace, task_key, id)
    WHERE status IN ('DISPATCHING', 'RUNNING') AND task_key <> '';
DROP INDEX ax_tasks_key_held;
ALTER INDEX ax_tasks_key_held_v5 RENAME TO ax_tasks_key_held;

-- A schedule is unique per (namespace, name): the primary key is rebuilt on both.
CREATE UNIQUE INDEX ax_schedules_pkey_v5 ON ax_schedules (namespace, name);
ALTER TABLE ax_schedules DROP CONSTRAINT ax_schedules_pkey;
ALTER TABLE ax_schedules ADD CONSTRAINT ax_schedules_pkey PRIMARY KEY USING INDEX ax_schedules_pkey_v5;

-- The registry of executors: one row per (namespace, node), written by the node's
-- heartbeat (RegisterNode, an upsert stamping heartbeat_at = clock_timestamp()) and read
-- by the leader. handlers holds the node's task names, sorted and joined with '\n'
-- (a name holds no control character; '' is none). Times are timestamptz like
-- every time here.
CREATE TABLE ax_nodes (
    namespace    text        NOT NULL,
    name         text        NOT NULL,
    advertise    text        NOT NULL DEFAULT '',
    handlers     text        NOT NULL DEFAULT '',
    capacity     integer     NOT NULL CHECK (capacity >= 0),
    in_flight    integer     NOT NULL CHECK (in_flight >= 0),
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL,
    PRIMARY KEY (namespace, name)
);
