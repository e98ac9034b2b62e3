-- ax schema v5 for SQLite: indexes of the finished tasks, one per outcome.

-- The finished tasks of each outcome by namespace and time: what Tasks' queries by a
-- terminal status (or a finished range) and CountTasks' terminal counts read, and
-- what pruning by age reads. One partial index per status, because SQLite uses a
-- partial index only when the query names its predicate's exact term (status = '…').
CREATE INDEX ax_tasks_ns_succeeded ON ax_tasks (namespace, finished_at) WHERE status = 'SUCCEEDED';
CREATE INDEX ax_tasks_ns_failed ON ax_tasks (namespace, finished_at) WHERE status = 'FAILED';
CREATE INDEX ax_tasks_ns_cancelled ON ax_tasks (namespace, finished_at) WHERE status = 'CANCELLED';
CREATE INDEX ax_tasks_ns_skipped ON ax_tasks (namespace, finished_at) WHERE status = 'SKIPPED';
