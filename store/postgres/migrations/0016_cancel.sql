-- ax schema v16 for PostgreSQL: cancelling a running task. Like v1, nothing names a
-- schema.

-- cancelled_by and cancel_requested_at say who asked to cancel a task and when
-- (store.Task.CancelledBy, CancelRequestedAt). On a RUNNING task they are the request
-- that its heartbeat passes to the executor and that Finish honours. A constant
-- default and a nullable column: the table is not rewritten.
ALTER TABLE ax_tasks ADD COLUMN cancelled_by text NOT NULL DEFAULT '',
    ADD COLUMN cancel_requested_at timestamptz;
