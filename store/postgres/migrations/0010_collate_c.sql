-- ax schema v10 for PostgreSQL: the text columns that ax's indexes order by compare
-- bytes (COLLATE "C"), not by the database's locale. Like v1, nothing names a schema.
--
-- From v10 on, too, Finish leaves the execution record of a success as its start wrote
-- it (RUNNING): its task, SUCCEEDED with that execution id, says how and when it ended.
-- Older ax reads such a record as still running, which is one more reason it refuses a
-- schema newer than itself.

-- Every index of ax_tasks but the primary key leads with the namespace, and the
-- business key orders by name and key too; ax_executions' primary key is the execution
-- id. Each task's claim and finish insert entries into several of them, and under a
-- locale's collation every comparison on the way down a B-tree is a strcoll() call on
-- copies of both strings (even with C.UTF-8, which PostgreSQL 15 does not treat as
-- "C"): a fifth or more of the server's CPU per drained task went there. The values are
-- names, keys, statuses and UUIDs, which nothing sorts for people by locale, and
-- equality is the same under either collation, so the rows mean what they meant.
-- Ordering by these columns is now by bytes, as on SQLite.
--
-- The type stays text, so the table is not rewritten; the indexes on these columns
-- are rebuilt, under an ACCESS EXCLUSIVE lock on each table for as long as that takes
-- (6 s for a million tasks with their executions on a 2-core machine): run it (ax
-- migrate) when such a pause is acceptable.
ALTER TABLE ax_tasks
    ALTER COLUMN namespace TYPE text COLLATE "C",
    ALTER COLUMN name TYPE text COLLATE "C",
    ALTER COLUMN key TYPE text COLLATE "C",
    ALTER COLUMN status TYPE text COLLATE "C",
    ALTER COLUMN task_key TYPE text COLLATE "C";
ALTER TABLE ax_executions
    ALTER COLUMN id TYPE text COLLATE "C";

-- Changing a column's collation drops its statistics, and autovacuum would not gather
-- them again before enough rows change: the queries by status, namespace and key
-- (Tasks, CountTasks, TaskStats, Prune) would be planned on defaults until then.
ANALYZE ax_tasks, ax_executions;
