-- ax schema v8 for PostgreSQL: a business key can be used again once its task has
-- finished (store.KeyHold). Like v1, nothing names a schema.

-- key_slot is 0 for the task holding its key (at most one per key: the unique index
-- below) and the task's own id once a newer task of the key took it over. key_hold
-- and key_until are the task's store.KeyHold and KeyUntil. Columns with a constant
-- default: the table is not rewritten.
ALTER TABLE ax_tasks ADD COLUMN key_slot bigint NOT NULL DEFAULT 0,
    ADD COLUMN key_hold text NOT NULL DEFAULT '',
    ADD COLUMN key_until timestamptz;

-- Periodic occurrences (their task key is their name, the schedule's) keep their
-- keys for good, as every task did before v8; every other finished task gives its
-- key up when the key is submitted again.
UPDATE ax_tasks SET key_hold = 'forever' WHERE task_key = name;

-- (CREATE INDEX holds off writers of ax_tasks while it is built, once.)
CREATE UNIQUE INDEX ax_tasks_name_key_v8 ON ax_tasks (namespace, name, key, key_slot);
DROP INDEX ax_tasks_name_key;
ALTER INDEX ax_tasks_name_key_v8 RENAME TO ax_tasks_name_key;

-- ax_key_freed raises the error (SQLSTATE AXK01) by which an Insert learns, in the
-- statement that inserts, that a key it could not write is held by a task that no
-- longer holds it: the Insert then runs again, moving such holders off their keys
-- first (see "Reusing a business key" in the package doc).
CREATE FUNCTION ax_key_freed(name text, key text) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'ax: the task holding %/% has given the key up', name, key USING ERRCODE = 'AXK01';
END
$$;

-- The audit log of the operations API (store.Auditor): one row per mutating call,
-- allowed or refused. Read newest first by id, pruned by age (ax_audit_at).
CREATE TABLE ax_audit (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace     text        NOT NULL,
    at            timestamptz NOT NULL,
    actor         text        NOT NULL,
    role          text        NOT NULL,
    action        text        NOT NULL,
    target        text        NOT NULL,
    reason        text        NOT NULL DEFAULT '',
    result        text        NOT NULL,
    status_before text        NOT NULL DEFAULT '',
    status_after  text        NOT NULL DEFAULT '',
    execution_id  text        NOT NULL DEFAULT ''
);
CREATE INDEX ax_audit_at ON ax_audit (namespace, at);
