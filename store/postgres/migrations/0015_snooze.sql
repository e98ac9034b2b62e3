-- ax schema v15 for PostgreSQL: snoozes. Like v1, nothing names a schema.

-- snoozes counts the times a task's handler asked to run again later without
-- spending a business retry (store.Task.Snoozes). A constant default: the table is
-- not rewritten.
ALTER TABLE ax_tasks ADD COLUMN snoozes integer NOT NULL DEFAULT 0;

-- An execution record can end SNOOZED (the handler snoozed the task) or CANCELLED (an
-- operator cancelled the running task). The old check is replaced by a wider one,
-- added NOT VALID and validated after: every row already satisfies it, and
-- VALIDATE reads the table without blocking writers.
ALTER TABLE ax_executions DROP CONSTRAINT ax_executions_status_check;
ALTER TABLE ax_executions ADD CONSTRAINT ax_executions_status_check
    CHECK (status IN ('RUNNING', 'SUCCEEDED', 'FAILED', 'SNOOZED', 'CANCELLED')) NOT VALID;
ALTER TABLE ax_executions VALIDATE CONSTRAINT ax_executions_status_check;
