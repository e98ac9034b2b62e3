-- ax schema v10 for MySQL / MariaDB: snoozes. Harmless to rerun when a migration
-- resumes at it: an ADD COLUMN that took effect answers "duplicate column" (1060),
-- taken as done (see 0004_namespaces.sql). The column is added at the end of the
-- table with a constant default: instant on MariaDB 10.3+ and MySQL 8.0.12+.

-- snoozes counts the times a task's handler asked to run again later without
-- spending a business retry (store.Task.Snoozes). An execution record's status can
-- now be SNOOZED as well; the column has no check to widen.
ALTER TABLE ax_tasks
    ADD COLUMN snoozes INT NOT NULL DEFAULT 0;
