-- ax schema v9 for MySQL / MariaDB: what the console shows of each attempt and each
-- replica. Every statement is harmless to rerun when a migration resumes at it: an
-- ADD COLUMN that took effect answers "duplicate column" (1060), taken as done (see
-- 0004_namespaces.sql). Each adds its columns at the end of the table, NULL or with a
-- constant default: instant on MariaDB 10.3+ and MySQL 8.0.12+, no table rebuild
-- (neither table has an indexed virtual column).

-- due_at and claimed_at are the task's due_at and dispatched_at as the attempt
-- started (store.Execution.DueAt, ClaimedAt), written by the INSERT that records the
-- execution: started_at - due_at is the attempt's lateness. NULL on the records
-- written before v9.
ALTER TABLE ax_executions
    ADD COLUMN due_at     DATETIME(6) NULL,
    ADD COLUMN claimed_at DATETIME(6) NULL;

-- clock_offset is the store's clock minus the replica's, in microseconds, as the
-- replica last measured it (store.NodeInfo.ClockOffset), written by each registry
-- heartbeat.
ALTER TABLE ax_nodes
    ADD COLUMN clock_offset BIGINT NOT NULL DEFAULT 0;
