-- ax schema v10 for SQLite: what the console shows of each attempt and each replica.
-- Times in microseconds.

-- due_at and claimed_at are the task's due_at and dispatched_at as the attempt
-- started (store.Execution.DueAt, ClaimedAt), written by the INSERT that records the
-- execution: started_at - due_at is the attempt's lateness. NULL on the records
-- written before v10. (ADD COLUMN changes only the schema; no row is rewritten.)
ALTER TABLE ax_executions ADD COLUMN due_at INTEGER;
ALTER TABLE ax_executions ADD COLUMN claimed_at INTEGER;

-- clock_offset is the store's clock minus the replica's, in microseconds, as the
-- replica last measured it (store.NodeInfo.ClockOffset), written by each registry
-- heartbeat.
ALTER TABLE ax_nodes ADD COLUMN clock_offset INTEGER NOT NULL DEFAULT 0;
