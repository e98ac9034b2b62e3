-- ax schema v12 for MySQL / MariaDB: the trace context a task was submitted under, and
-- the one a schedule was registered under (store.Task.Trace, store.Schedule.Trace).
-- Every statement is harmless to rerun when a migration resumes at it (see
-- 0004_namespaces.sql): the lone DROP KEY answers "can't drop" (1091), an ADD COLUMN
-- that took effect "duplicate column" (1060), the ADD KEY "duplicate key name" (1061).
--
-- trace is NULL when there is none, as on every row written before v12: a scheduler
-- without a tracer writes nothing, and the readers take NULL for ''. At most
-- store.MaxTraceLen (512) bytes, so 512 characters hold any. A NULL column at the end
-- of the table is added instantly; as in v4 and v5, MariaDB cannot add one instantly
-- to a table with an indexed virtual column, so ax_tasks_held_key is dropped first and
-- rebuilt after, an ALTER of a secondary index only: online, no table rebuild.
ALTER TABLE ax_tasks
    DROP KEY ax_tasks_held_key;

ALTER TABLE ax_tasks
    ADD COLUMN trace VARCHAR(512) CHARACTER SET utf8mb4 COLLATE {{bin}} NULL;

ALTER TABLE ax_tasks
    ADD KEY ax_tasks_held_key (namespace, held_key);

ALTER TABLE ax_schedules
    ADD COLUMN trace VARCHAR(512) CHARACTER SET utf8mb4 COLLATE {{bin}} NULL;
