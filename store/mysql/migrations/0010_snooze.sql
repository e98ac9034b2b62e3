-- ax schema v10 for MySQL / MariaDB: snoozes. Every statement is harmless to rerun
-- when a migration resumes at it (see 0004_namespaces.sql): the lone DROP KEY answers
-- "can't drop" (1091), an ADD COLUMN that took effect "duplicate column" (1060), the
-- ADD KEY "duplicate key name" (1061).
--
-- snoozes counts the times a task's handler asked to run again later without
-- spending a business retry (store.Task.Snoozes). An execution record's status can
-- now be SNOOZED as well; the column has no check to widen. A column with a constant
-- default at the end of the table is added instantly; as in v4 and v5, MariaDB cannot
-- add one instantly to a table with an indexed virtual column, so ax_tasks_held_key
-- is dropped first and rebuilt after, an ALTER of a secondary index only: online, no
-- table rebuild.
ALTER TABLE ax_tasks
    DROP KEY ax_tasks_held_key;

ALTER TABLE ax_tasks
    ADD COLUMN snoozes INT NOT NULL DEFAULT 0;

ALTER TABLE ax_tasks
    ADD KEY ax_tasks_held_key (namespace, held_key);
