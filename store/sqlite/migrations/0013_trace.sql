-- ax schema v13 for SQLite: the trace context a task was submitted under, and the one
-- a schedule was registered under (store.Task.Trace, store.Schedule.Trace).
--
-- NULL when there is none, as on every row written before v13: a scheduler without a
-- tracer writes no text at all. The readers take NULL for ''. (ADD COLUMN changes
-- only the schema; no row is rewritten.)
ALTER TABLE ax_tasks ADD COLUMN trace TEXT;
ALTER TABLE ax_schedules ADD COLUMN trace TEXT;
