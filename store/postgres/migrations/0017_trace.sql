-- ax schema v17 for PostgreSQL: the trace context a task was submitted under, and the
-- one a schedule was registered under (store.Task.Trace, store.Schedule.Trace). Like
-- v1, nothing names a schema.

-- NULL when there is none, as on every row written before v17: a scheduler without a
-- tracer writes nothing, and the readers take NULL for ''. Nullable columns without
-- a default: the tables are not rewritten, and each ALTER holds its lock only for
-- the catalog change.
ALTER TABLE ax_tasks ADD COLUMN trace text;
ALTER TABLE ax_schedules ADD COLUMN trace text;
