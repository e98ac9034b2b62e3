-- ax schema v12 for SQLite: cancelling a running task. Times in microseconds.

-- cancelled_by and cancel_requested_at say who asked to cancel a task and when
-- (store.Task.CancelledBy, CancelRequestedAt). On a RUNNING task they are the request
-- that its heartbeat passes to the executor and that Finish honours.
ALTER TABLE ax_tasks ADD COLUMN cancelled_by TEXT NOT NULL DEFAULT '';
ALTER TABLE ax_tasks ADD COLUMN cancel_requested_at INTEGER;
