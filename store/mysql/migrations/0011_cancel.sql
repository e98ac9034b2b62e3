-- ax schema v11 for MySQL / MariaDB: cancelling a running task. Every statement is
-- harmless to rerun when a migration resumes at it (see 0004_namespaces.sql): the
-- lone DROP KEY answers "can't drop" (1091), an ADD COLUMN that took effect
-- "duplicate column" (1060), the ADD KEY "duplicate key name" (1061).
--
-- cancelled_by and cancel_requested_at say who asked to cancel a task and when
-- (store.Task.CancelledBy, CancelRequestedAt). On a RUNNING task they are the request
-- that its heartbeat passes to the executor and that Finish honours. Columns at the
-- end of the table, NULL or with a constant default, are added instantly, with
-- ax_tasks_held_key dropped first and rebuilt after as in v10.
ALTER TABLE ax_tasks
    DROP KEY ax_tasks_held_key;

ALTER TABLE ax_tasks
    ADD COLUMN cancelled_by        VARCHAR(200) NOT NULL DEFAULT '',
    ADD COLUMN cancel_requested_at DATETIME(6) NULL;

ALTER TABLE ax_tasks
    ADD KEY ax_tasks_held_key (namespace, held_key);
