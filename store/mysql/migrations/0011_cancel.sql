-- ax schema v11 for MySQL / MariaDB: cancelling a running task. Harmless to rerun
-- when a migration resumes at it: an ADD COLUMN that took effect answers "duplicate
-- column" (1060), taken as done (see 0004_namespaces.sql). Columns added at the end,
-- NULL or with a constant default: instant on MariaDB 10.3+ and MySQL 8.0.12+.

-- cancelled_by and cancel_requested_at say who asked to cancel a task and when
-- (store.Task.CancelledBy, CancelRequestedAt). On a RUNNING task they are the request
-- that its heartbeat passes to the executor and that Finish honours.
ALTER TABLE ax_tasks
    ADD COLUMN cancelled_by        VARCHAR(200) NOT NULL DEFAULT '',
    ADD COLUMN cancel_requested_at DATETIME(6) NULL;
