-- ax schema v11 for SQLite: snoozes.

-- snoozes counts the times a task's handler asked to run again later without
-- spending a business retry (store.Task.Snoozes). An execution record's status can
-- now be SNOOZED as well; the column has no check to widen.
ALTER TABLE ax_tasks ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0;
