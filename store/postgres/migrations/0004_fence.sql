-- ax schema v4 for PostgreSQL: fencing of leader-only writes (store.Fence, see doc.go,
-- "Fencing"). Like v1, nothing names a schema: the functions are created in the
-- current schema and read its ax_leader.

-- The fence lock of a namespace is a transaction-level advisory lock on one bigint key,
-- a hash of the namespace seeded by the schema (single-key advisory locks never equal
-- the two-key ones of the refill cursor, the task keys and the migrations). A fenced
-- write takes it shared, RaiseFence and AcquireLease exclusively; the lock manager
-- queues a new shared request behind a waiting exclusive one, so a raise is never
-- starved by a stream of fenced writes.

-- ax_fence is the first statement of every fenced write's transaction: it takes the
-- fence lock shared and then, in a snapshot taken after the lock was granted (every
-- statement of a VOLATILE function takes its own), reads the namespace's epoch. A
-- token below it raises SQLSTATE AXF01, which aborts the transaction before it wrote
-- anything; DETAIL carries "<epoch> <token> <namespace>" for the driver's error. No
-- row counts as epoch 0.
CREATE OR REPLACE FUNCTION ax_fence(ns text, token bigint) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    recorded bigint;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtextextended(ns, hashtext('ax fence ' || current_schema())));
    SELECT l.epoch INTO recorded FROM ax_leader l WHERE l.namespace = ns;
    IF recorded > token THEN
        RAISE EXCEPTION 'fencing token % below epoch % of namespace %', token, recorded, quote_literal(ns)
            USING ERRCODE = 'AXF01', DETAIL = recorded || ' ' || token || ' ' || ns;
    END IF;
END
$$;

-- ax_fence_lock takes the fence lock of a namespace exclusively, waiting for the
-- fenced writes in flight to end, and returns clock_timestamp() as of then: the "now"
-- of a statement that raises the namespace's epoch, which takes it before it locks
-- the ax_leader row (the one lock order everywhere: fence lock, then rows).
CREATE OR REPLACE FUNCTION ax_fence_lock(ns text) RETURNS timestamptz
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(ns, hashtext('ax fence ' || current_schema())));
    RETURN clock_timestamp();
END
$$;
