-- ax schema v7 for PostgreSQL: an index of the finished tasks. Like v1, nothing names
-- a schema.

-- The finished tasks by namespace, outcome and time: what Tasks' queries by a
-- terminal status (or a finished range) and CountTasks' terminal counts read, and
-- what pruning by age reads. Each finished task adds one entry when it finishes; the
-- tasks in flight are in the partial indexes of their own status already.
-- (CREATE INDEX holds off writers of ax_tasks while it is built, once.)
CREATE INDEX ax_tasks_finished ON ax_tasks (namespace, status, finished_at)
    WHERE status IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'SKIPPED');
