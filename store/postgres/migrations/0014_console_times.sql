-- ax schema v14 for PostgreSQL: what the console shows of each attempt and each
-- replica. Like v1, nothing names a schema.

-- due_at and claimed_at are the task's due_at and dispatched_at as the attempt
-- started (store.Execution.DueAt, ClaimedAt), written by the INSERT that records the
-- execution: started_at - due_at is the attempt's lateness. NULL on the records
-- written before v14. Nullable columns without a default: the table is not
-- rewritten, and the ALTER holds its lock only for the catalog change.
ALTER TABLE ax_executions ADD COLUMN due_at timestamptz,
    ADD COLUMN claimed_at timestamptz;

-- clock_offset is the store's clock minus the replica's, in microseconds, as the
-- replica last measured it (store.NodeInfo.ClockOffset), written by each registry
-- heartbeat. A constant default: the table is not rewritten.
ALTER TABLE ax_nodes ADD COLUMN clock_offset bigint NOT NULL DEFAULT 0;
