-- ax schema v6 for SQLite: a business key can be used again once its task has
-- finished (store.KeyHold).

-- key_slot is 0 for the task holding its key (at most one per key: the unique index
-- below) and the task's own id once a newer task of the key took it over. key_hold
-- and key_until are the task's store.KeyHold and KeyUntil (microseconds, NULL when
-- unset).
ALTER TABLE ax_tasks ADD COLUMN key_slot INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ax_tasks ADD COLUMN key_hold TEXT NOT NULL DEFAULT '';
ALTER TABLE ax_tasks ADD COLUMN key_until INTEGER;

-- Periodic occurrences (their task key is their name, the schedule's) keep their
-- keys for good, as every task did before v6; every other finished task gives its
-- key up when the key is submitted again.
UPDATE ax_tasks SET key_hold = 'forever' WHERE task_key = name;

DROP INDEX ax_tasks_ns_name_key;
CREATE UNIQUE INDEX ax_tasks_ns_name_key ON ax_tasks (namespace, name, key, key_slot);

-- The audit log of the operations API (store.Auditor): one row per mutating call,
-- allowed or refused. Read newest first by id, pruned by age (ax_audit_at). Times in
-- microseconds.
CREATE TABLE ax_audit (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace     TEXT    NOT NULL,
    at            INTEGER NOT NULL,
    actor         TEXT    NOT NULL,
    role          TEXT    NOT NULL,
    action        TEXT    NOT NULL,
    target        TEXT    NOT NULL,
    reason        TEXT    NOT NULL DEFAULT '',
    result        TEXT    NOT NULL,
    status_before TEXT    NOT NULL DEFAULT '',
    status_after  TEXT    NOT NULL DEFAULT '',
    execution_id  TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX ax_audit_at ON ax_audit (namespace, at);
