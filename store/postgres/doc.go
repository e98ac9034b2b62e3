// Package postgres is ax's PostgreSQL store (pgx v5): the store for several replicas
// of a service sharing one database. It implements store.Store, store.TxStore
// (transactional submit), store.Notifier (LISTEN/NOTIFY wake-ups), store.Namespaced
// (several services on one schema) and store.NodeRegistry (ax_nodes). It needs
// PostgreSQL 13 or later and is tested on 15.
//
//	st, err := postgres.Open(ctx, "postgres://ax@db/orders?search_path=ax")
//	// or, on a pool the application owns (Close leaves it open):
//	st, err := postgres.New(pool)
//
// # Schema
//
// Everything lives in the connection's current schema (the first existing schema of
// search_path); no statement names a schema, so one database can hold several
// isolated ax installations. The schema is versioned and embedded
// (migrations/0001_init.sql, 0002_task_keys_schedules.sql, … 0013_leadership.sql);
// New applies what is missing in one transaction that first takes
// pg_advisory_xact_lock on a key derived from the schema name, so several processes
// starting at once migrate it exactly once, and running it again is a no-op. A
// schema whose ax_schema_migrations records a version newer than this package knows
// is refused with store.ErrSchemaVersion. A schema that is up to date is opened
// without any DDL, so a role granted only SELECT, INSERT, UPDATE and DELETE on its
// tables and USAGE on ax_seq may run ax on a schema its owner migrated (ax migrate),
// bulk inserts by COPY included (copy.go).
//
//   - ax_tasks: one row per task. Same columns and meaning as the SQLite schema, in
//     native types: bigint id, timestamptz times (microseconds, returned as
//     UTC), bytea payload (NULL and empty stay distinct), text status with a CHECK,
//     bigint[] backoff in microseconds, and seq, the refill stamp (below). task_key
//     and overlap (both empty without a key, as on every row written before version
//     2) carry the overlap rule (see Task keys, below). namespace (version 5; 'default'
//     on every older row) is the view the row belongs to (see Namespaces, below).
//     The text columns its indexes order by (namespace, name, key, status, task_key)
//     compare bytes, COLLATE "C" (version 10), whatever the database's locale: B-tree
//     comparisons under a locale call strcoll() on copies of both strings, and each
//     task's claim and finish insert entries into several such indexes. Equality is
//     the same under either; ordering by them (none of them is sorted for people) is
//     by bytes, as on SQLite. Version 10 rebuilds those indexes under an exclusive
//     lock (6 s for a million tasks with their executions on 2 cores).
//   - ax_executions: one row per execution id (primary key, COLLATE "C" since
//     version 10), with its task, attempt, node, status (RUNNING, SUCCEEDED,
//     FAILED) and times; fillfactor 50 (version 6), so that closing an execution,
//     which changes no indexed column, is a HOT update on the row's own page. Since
//     version 10 only executions that failed are closed so; a succeeded one's row
//     stays RUNNING and reads as its SUCCEEDED task says (see The execution path).
//     due_at and claimed_at (version 14; NULL on older rows) are the task's due_at
//     and dispatched_at as the attempt started, written by the INSERT that records it.
//   - ax_schedules: one row per schedule, keyed by (namespace, name): spec, time_zone, overlap,
//     misfire, payload (bytea, NULL and empty distinct), paused, next_fire_at,
//     last_fire_at (NULL before the first occurrence), created_at, updated_at;
//     timestamptz like every time here. See Schedules, below.
//   - ax_seq: the sequence the refill stamps come from, and since version 9 the ids
//     of ax_tasks too (the column's default; before, an identity column's own
//     sequence), so that a bulk insert draws one value a task for both (copy.go).
//     Stop older ax processes before upgrading to version 9. The migration waits for
//     the transactions that drew from either sequence and holds off new draws while
//     it runs, so that no id or stamp is handed out twice; it then drops the
//     identity's sequence, and an older ax left running fails its bulk inserts by
//     COPY, writing nothing.
//   - ax_leader: one row per election namespace (primary key): holder, epoch (the
//     fencing token), expires_at, updated_at — the lease of elect/sqllease (store.Leaser),
//     changed only by conditional writes in clock_timestamp().
//   - ax_fence(namespace, token), ax_fence_lock(namespace): the PL/pgSQL functions of
//     fencing (version 4; see Fencing, below).
//   - ax_nodes: the node registry (version 5, store.NodeRegistry), keyed by
//     (namespace, name): advertise, handlers (the sorted task names joined with "\n",
//     which no name holds; empty for none), capacity, in_flight, started_at,
//     heartbeat_at (timestamptz, stamped with clock_timestamp()), clock_offset (version
//     14: the store's clock minus the node's, microseconds, as the node measured it).
//   - ax_stats: the per-minute execution statistics (version 11, store.StatsKeeper),
//     keyed by (namespace, minute, node): the counts by outcome, early starts,
//     max_lateness (microseconds), lateness (the histogram's bucket counts,
//     comma-separated) and failures (the most failing names as "count name" lines).
//     Each node replaces its own rows; the console reads an hour through the key.
//   - ax_leadership: the leadership history (version 13, store.LeadershipLog), keyed by
//     (namespace, epoch, kind): node, at, reason. See Fencing, below.
//   - ax_schema_migrations: the applied versions.
//
// Times the store stamps (created_at, dispatched_at, started_at, heartbeat_at,
// finished_at, …) and Now are clock_timestamp(), the real time, never now() (the
// start of the transaction). A statement reads clock_timestamp() once, in a CTE, so
// created_at = updated_at on insert and Claim compares every row with one "now": the
// claim requires due_at <= that time inside the statement, so the database clock has
// the final word on "never early".
//
// # Indexes
//
//	ax_tasks_pkey              (id)                                     Get, and every batch: id = ANY($1)
//	ax_tasks_name_key          UNIQUE (namespace, name, key, key_slot)  the business key: Lookup, Cancel, Insert's ON CONFLICT
//	                                                                    and release (key_slot 0: the task holding the key)
//	ax_tasks_scheduled_due     (namespace, due_at, id) WHERE status = 'SCHEDULED'
//	                                                                    the window scan (Refill.Entered), the claim's "due" test,
//	                                                                    TaskStats's oldest due task
//	ax_tasks_scheduled_seq     (namespace, seq) WHERE status = 'SCHEDULED'
//	                                                                    the incremental refill (Refill.Changed)
//	ax_tasks_running_heartbeat (namespace, heartbeat_at, id) WHERE status = 'RUNNING'
//	                                                                    the orphan scan (Stale RUNNING)
//	ax_tasks_dispatching_since (namespace, dispatched_at, id) WHERE status = 'DISPATCHING'
//	                                                                    the stuck-claim scan (Stale DISPATCHING)
//	ax_tasks_key_held          (namespace, task_key, id) WHERE status IN ('DISPATCHING', 'RUNNING') AND task_key <> ''
//	                                                                    who holds a task key (Claim, Trigger)
//	ax_schedules_pkey          (namespace, name)                        every schedule operation
//	ax_nodes_pkey              (namespace, name)                        every node registry operation
//	ax_stats_pkey              (namespace, minute, node)                every statistics operation (Stats: LIMIT store.MaxStatsRead)
//	ax_executions_task         (task_id, started_at)                    Executions
//	ax_audit_at                (namespace, at)                          AuditLog by time (backward, (at, id) sorted
//	                                                                    incrementally within one at), PruneAudit
//
// The namespace leads every index a scan reads (version 5 rebuilt those of versions
// 1 and 2 so), so each namespace's scans are range scans of its own part of the
// index, whatever the other namespaces hold. The partial indexes hold only the rows
// of one state, so they stay small however many finished rows the table keeps. Plans
// on 100k tasks (70% finished, 20% scheduled over a day, 5% running, 5% dispatching;
// 4% occurrences of 200 schedules, 100 of them held; 10% of each in a second
// namespace), of the default namespace, from TestExplain on PostgreSQL 15
// (EXPLAIN (ANALYZE, BUFFERS, COSTS OFF)), abridged:
//
//	-- window scan: Refill(AfterSeq -1, To now+5m, Limit 1000) → 305 rows
//	->  Index Only Scan using ax_tasks_scheduled_due on ax_tasks (actual time=0.023..0.064 rows=305 loops=1)
//	      Index Cond: ((namespace = 'default') AND (ROW(due_at, id) > ROW('0001-01-01 00:00:00+00', '0'))
//	                   AND (due_at < '2026-12-01 12:10:27.92376+00'))
//	      Heap Fetches: 0
//	      Buffers: shared hit=4
//
//	-- refill: Refill(AfterSeq = last 100 stamps)
//	->  Index Scan using ax_tasks_scheduled_seq on ax_tasks (actual time=0.026..0.026 rows=0 loops=1)
//	      Index Cond: ((namespace = 'default') AND (seq > '99900'::bigint))
//	      Filter: (due_at < '2026-12-01 12:10:27.92376+00')
//	      Rows Removed by Filter: 20
//	      Buffers: shared hit=6
//
//	-- claim: 200 due ids, one statement (3.3 ms, 200 rows claimed)
//	CTE l
//	  ->  LockRows (actual time=0.332..0.913 rows=200 loops=1)
//	        ->  Nested Loop (actual time=0.323..0.814 rows=200 loops=1)
//	              Join Filter: (t_1.due_at <= ts_1.now)
//	              ->  Index Scan using ax_tasks_pkey on ax_tasks t_1 (actual time=0.010..0.427 rows=200 loops=1)
//	                    Index Cond: (id = ANY ('{…200 ids…}'::bigint[]))
//	                    Filter: (status = 'SCHEDULED'::text)
//	CTE u
//	  ->  Update on ax_tasks t_2 (actual time=1.062..2.927 rows=200 loops=1)
//	        InitPlan 3 (returns $3)
//	          ->  Aggregate (actual time=0.972..0.972 rows=1 loops=1)
//	                ->  CTE Scan on l (actual time=0.332..0.955 rows=200 loops=1)
//	        ->  Result (actual time=1.003..1.337 rows=200 loops=1)
//	              One-Time Filter: ($3 >= 0)
//	              ->  Nested Loop (actual time=0.030..0.341 rows=200 loops=1)
//	                    Join Filter: (t_2.due_at <= ts_2.now)
//	                    ->  Nested Loop (actual time=0.028..0.315 rows=200 loops=1)
//	                          ->  Function Scan on c (actual time=0.025..0.061 rows=200 loops=1)
//	                          ->  Index Scan using ax_tasks_pkey on ax_tasks t_2 (actual time=0.001..0.001 rows=1 loops=200)
//	                                Index Cond: (id = c.id)
//	                                Filter: ((namespace = 'default') AND (status = 'SCHEDULED'::text) AND …)
//
//	-- orphan scan: Stale(RUNNING, now-5m, 100)
//	Limit (actual time=0.030..0.273 rows=100 loops=1)
//	  ->  Index Scan using ax_tasks_running_heartbeat on ax_tasks t (actual time=0.029..0.264 rows=100 loops=1)
//	        Index Cond: ((namespace = 'default') AND (heartbeat_at < '2026-12-01 12:00:27.92376+00'))
//
//	-- stuck-claim scan: Stale(DISPATCHING, now-5m, 100)
//	Limit (actual time=0.032..0.245 rows=100 loops=1)
//	  ->  Index Scan using ax_tasks_dispatching_since on ax_tasks t (actual time=0.032..0.235 rows=100 loops=1)
//	        Index Cond: ((namespace = 'default') AND (dispatched_at < '2026-12-01 12:00:27.92376+00'))
//
//	-- key holders: the keys of 20 due keyed tasks (Claim's and Trigger's keyed path)
//	GroupAggregate (actual time=0.075..0.079 rows=10 loops=1)
//	  Group Key: task_key
//	  ->  Sort (actual time=0.072..0.073 rows=10 loops=1)
//	        ->  Index Only Scan using ax_tasks_key_held on ax_tasks t (actual time=0.034..0.061 rows=10 loops=1)
//	              Index Cond: ((namespace = 'default') AND (task_key = ANY ('{schedule-0,schedule-7,…}'::text[])))
//	              Heap Fetches: 1
//	              Buffers: shared hit=25
//
//	-- keyed claim: 14 winners, 9 of them refused by NOT EXISTS (their key held)
//	Update on ax_tasks t (actual time=0.304..0.670 rows=5 loops=1)
//	  ->  Nested Loop Anti Join (actual time=0.110..0.344 rows=5 loops=1)
//	        ->  Nested Loop (actual time=0.069..0.264 rows=14 loops=1)
//	              ->  Function Scan on c (actual time=0.022..0.033 rows=14 loops=1)
//	              ->  Index Scan using ax_tasks_pkey on ax_tasks t (actual time=0.013..0.013 rows=1 loops=14)
//	        ->  Index Scan using ax_tasks_key_held on ax_tasks o (actual time=0.005..0.005 rows=1 loops=14)
//	              Index Cond: ((namespace = t.namespace) AND (task_key = t.task_key))
//
//	-- business key: Lookup("order.close", "order-4242")
//	Index Scan using ax_tasks_name_key on ax_tasks t (actual time=0.018..0.019 rows=1 loops=1)
//	  Index Cond: ((namespace = 'default') AND (name = 'order.close'::text) AND (key = 'order-4242'::text))
//	  Buffers: shared hit=4
//
//	-- task stats: TaskStats(now) → 4 statuses present; the counts read the table, the oldest due task one index entry
//	HashAggregate (actual time=90.344..90.348 rows=4 loops=1)
//	  Group Key: t.status
//	  InitPlan 2 (returns $1)
//	    ->  Result (actual time=0.045..0.046 rows=1 loops=1)
//	          InitPlan 1 (returns $0)
//	            ->  Limit (actual time=0.041..0.042 rows=1 loops=1)
//	                  ->  Index Only Scan using ax_tasks_scheduled_due on ax_tasks o (actual time=0.039..0.040 rows=1 loops=1)
//	                        Index Cond: ((namespace = 'default') AND (due_at IS NOT NULL) AND (due_at <= '2026-12-01 12:05:27.92376+00'))
//	                        Buffers: shared hit=4
//	  ->  Seq Scan on ax_tasks t (actual time=0.006..64.354 rows=90000 loops=1)
//	        Filter: (namespace = 'default'::text)
//	        Rows Removed by Filter: 10000
//	        Buffers: shared hit=3690
//
// The pkey scan with id = ANY returns rows in id order, so LockRows locks them in
// ascending id order without a Sort; the One-Time Filter runs the locking CTE to the
// end before the UPDATE reads its first row (see the execution path, below).
//
// TaskStats (the last plan) is one statement — SELECT t.status, count(*), (SELECT min(o.due_at)
// FROM ax_tasks o WHERE o.namespace = $2 AND o.status = 'SCHEDULED' AND o.due_at <= $1)
// FROM ax_tasks t WHERE t.namespace = $2 GROUP BY t.status — so one round trip and one
// snapshot. The uncorrelated subquery is an InitPlan run once, and min() becomes a
// LIMIT 1 on the due index; the counts are a sequential scan, no index serving all
// seven statuses (the terminal ones have none), so its cost grows with the table,
// finished rows and other namespaces' rows included: about 30 ms for 100k rows here
// (the run above was on a busy server). It is for metrics at scrape intervals, not
// the execution path.
//
// # Finding tasks
//
// Tasks is one SELECT with a LIMIT, its conditions written by store/internal/taskquery
// (shared with SQLite and MySQL) and planned for its arguments; the statuses are
// literals, so that a partial index's predicate matches them. CountTasks is one
// statement of seven scalar subqueries, each "count(*) FROM (SELECT 1 … WHERE
// status = '…' LIMIT atMost + 1)": an index-only scan of the status's partial index
// (ax_tasks_finished for the terminal ones, schema v7) that stops at the cap — or, for
// a status most rows are in, a sequential scan that the LIMIT stops as early. On
// 100,000 rows (TestExplain, AX_EXPLAIN_OUT=file writes the plans):
//
//	-- a name and a key prefix (the key compares bytes: COLLATE "C", schema v10)
//	Sort (top-N heapsort, id DESC)
//	  ->  Index Scan using ax_tasks_name_key
//	        Index Cond: (namespace = 'default' AND name = 'order.close' AND key >= 'order-42' AND key < 'order-43')
//	        Filter: starts_with(key, 'order-42')
//	-- SCHEDULED, soonest first
//	Limit -> Index Scan using ax_tasks_scheduled_due (Index Cond: namespace = 'default')
//	-- SUCCEEDED, finished in an hour
//	Sort (id DESC) -> Index Scan using ax_tasks_finished
//	        Index Cond: (namespace = 'default' AND status = 'SUCCEEDED' AND finished_at >= … AND finished_at < …)
//	-- everything, newest first, after a cursor
//	Limit -> Index Scan Backward using ax_tasks_pkey (Index Cond: id < 50000; Filter: namespace = 'default')
//	-- counts: per status, e.g.
//	Aggregate -> Limit -> Index Only Scan using ax_tasks_finished (Index Cond: namespace = 'default' AND status = 'SUCCEEDED')
//
// Before schema v10, under a database collation such as en_US or ICU's, the strings
// that start with a prefix need not have been one range of the index, and the prefix
// only filtered the rows of the name.
//
// # Autovacuum
//
// ax_tasks is a queue: every task's row is rewritten several times (claim and start,
// in one statement or two, heartbeats, finish) and leaves the partial indexes when it
// leaves a state, so dead index entries pile up exactly where the window scan and the
// claim start reading; they once made an empty due-window scan 70× slower (7.3 ms
// against 0.1 ms after a VACUUM). The table is therefore created with
//
//	fillfactor = 80                          -- room for new row versions on the same page
//	autovacuum_vacuum_scale_factor = 0.01    -- vacuum after 1% of the rows changed…
//	autovacuum_vacuum_threshold = 1000       -- …plus 1000, not the default 20%
//	autovacuum_vacuum_insert_scale_factor = 0.05
//	autovacuum_analyze_scale_factor = 0.02
//	autovacuum_vacuum_cost_delay = 0         -- do not throttle it
//
// Keep long-running transactions away from the database ax uses: no vacuum can remove
// rows they might still see.
//
// # The execution path
//
// Claim, Start, Heartbeat, Finish and Requeue sort their ids ascending and split them
// in chunks of at most store.MaxBatch; each chunk is one statement over unnest()ed
// arrays, and all chunks of a call go out pipelined in one transaction (BEGIN … COMMIT
// in one pgx batch: one round trip once the statements are prepared). Each statement
// first locks its candidate rows in a CTE, SELECT … ORDER BY id FOR NO KEY UPDATE, then
// applies the per-row CAS (UPDATE … WHERE id = c.id AND status = old AND execution_id =
// c.eid); concurrent batches therefore queue on each other in id order and cannot
// deadlock. The UPDATE refers to the locking CTE only through the variable-free (SELECT
// count(*) FROM l) >= 0, a one-time filter evaluated before it reads a row, and joins
// nothing but the unnest()ed input: joining a CTE, whose row count the planner guesses
// as 1, produced nested loops that rescanned it once per row (200 × 200 comparisons,
// 30 ms a batch on a fresh table). ClaimStart is the claiming statement itself: a
// claimed row whose claim asks to start, whose name has a handler in the claiming
// process and whose key does not restrict it (no task key, or Overlap allow) goes
// straight to RUNNING, and the same statement inserts its execution record, so such a
// task costs one write at claim and one at finish (and one per heartbeat); Start is for
// tasks that went through DISPATCHING, keyed ones included. Claim waits for a locked
// row rather than SKIP LOCKED: a skipped row would be reported neither claimed nor
// NotDue, and if its holder rolled back, the scheduler would have dropped a due task
// from its wheel. (Claims of several schedulers meet only on the rows due at once;
// Cancel and Trigger hold a row for one statement.) Start moves to RUNNING the view's
// tasks DISPATCHING with the given execution id and name whose id is not yet recorded,
// and records exactly those executions in the same statement; the others are read back
// as Duplicate (recorded for a task of the view) or Lost. Finish drops repeated results
// of one execution before its multi-row UPDATE, which would otherwise pick one
// arbitrarily. Finish closes the execution records of the results that did not succeed
// (FAILED, with the error and the finish time) and leaves a succeeded one's as its
// start wrote it, RUNNING: its task, SUCCEEDED with that execution id (a terminal state
// no statement leaves), says how it ended and when, and every reader of executions
// (Executions, Start's duplicates) reads it so (execCols). Since version 10: one row
// version and its WAL fewer for each task that succeeds. These statements compare the
// status with the empty string appended (as the claim does the namespace), so that no
// partial index on the status can serve them: every row they touch is reached by its
// primary key. A Finish written as t.status = 'RUNNING' was planned as a scan of every
// RUNNING row of ax_tasks_running_heartbeat, joined to the batch; with 20,000 tasks
// running, finishing cost 111 µs of server CPU per task instead of 48. They are not
// planned at every call (planning a claim took 0.3 ms, a Finish 0.2 ms, whatever their
// size: a fifth of the server's CPU per task at 20 workers). Each also names its rows
// as t.id = ANY($1) (and its execution rows as x.id = ANY(…)), and runs on its generic
// plan, cached per connection, with sequential scans, nested loops and merge joins
// disabled (executionPlans): the rows are reached by the primary key's index condition
// and joined to the unnest()ed input by hash, in time linear in the batch, whatever the
// table's statistics were when the plan was built. Left free, generic plans cached
// while the table was empty read the whole primary key for every batch later, or joined
// by nested loops that rescanned the input for every row
// (TestExecutionPathPlansOnStaleStatistics checks the plans). JIT compilation is off
// for every transaction: a disabled node's cost would otherwise have each call compile
// its expressions.
//
// Insert is one INSERT … SELECT FROM unnest(…) ON CONFLICT (namespace, name,
// key, key_slot) DO NOTHING per chunk, sorted by (name, key), returning only what the database
// chose for each row it wrote (id, created_at) with its name and key; the rest of
// each task is its input (store.Stored), as on SQLite and MySQL. The rows it did not
// write are duplicates, read in one more statement by (namespace, name, key) — of
// the same transaction for InsertTx, after the commit for Insert. That plan has no
// choice to make: Insert runs it on its generic plan, cached per connection
// (force_generic_plan; TestExplain and TestExecutionPathPlansOnStaleStatistics check
// it). Planning took longer than running the small inserts that group-committed
// single submits (Delay, At) are; without it PostgreSQL spent about 45 % less CPU
// per single submit (122 against 68 µs) and took 1.5 × as many. An Insert of 1,000
// tasks or more, no two with one (name, key), is first tried as a COPY straight into
// ax_tasks, with ids and refill stamps drawn beforehand in its transaction; if a task
// exists already the COPY fails, nothing is written, and the arrays above follow
// (copy.go). A transaction that fails with a deadlock (40P01) or a serialization
// failure (40001) runs again, after a jittered backoff, up to 5 times.
//
// # Reusing a business key
//
// The task holding its business key has key_slot 0; the unique index (namespace,
// name, key, key_slot) allows one such task per key. A holder that no longer holds
// its key (store.KeyHold.Frees: finished, by its key_hold, past its key_until) is
// moved off it by releaseSQL — key_slot = id, Superseded — in the transaction that
// inserts the key again, so the insert writes the new task at slot 0 and Lookup (the
// newest row of the key) finds it. Nothing else writes key_slot: the terminal
// transitions are as they were, and a finished task gives its key up only when the
// key is submitted again.
//
// Insert does not pay for that on new keys: its insert's ON CONFLICT is a DO UPDATE
// whose WHERE is the free condition and whose SET calls ax_key_freed (migration 8),
// which raises SQLSTATE AXK01. A key held by a live task is left alone — but its row
// locked until the commit (a DO UPDATE locks the rows it meets whatever its WHERE
// says), so a duplicate insert waits for a transaction that holds the live row, and
// the claim of that row for the insert's one round trip; one whose holder is free
// aborts the transaction, and Insert runs it again
// with releaseSQL before the inserts (whose ON CONFLICT is then DO NOTHING). So new
// keys cost what they did, a reused one a transaction more. InsertTx and FireSchedule
// run releaseSQL first (an error would abort the caller's transaction; occurrences are
// few): one probe of ax_tasks_name_key per key. Two Inserts of one freed key racing:
// the second waits for the old row's lock, finds it released, and its ON CONFLICT
// meets the first one's task, live: ErrDuplicate. Retry and Trigger require key_slot
// = 0, refusing a superseded task. Migration 8 marks the existing occurrences
// (task_key = name) key_hold 'forever', as every row was before.
//
// # Task keys
//
// A task with a TaskKey and Overlap skip or queue is claimed only while no other
// task of its namespace with that key is DISPATCHING or RUNNING (store.Store.Claim):
// keys are per namespace, like business keys, and every statement below names the
// view's namespace (omitted here). The claim
// statement above leaves such tasks alone (its UPDATE requires an empty task_key or
// overlap 'allow') and returns the due ones, so a call without them costs exactly
// what it did before keys existed: one round trip, one statement per chunk
// (TestClaimRoundTrips pins it). The keyed ones then go through a second READ
// COMMITTED transaction of two round trips:
//
//	BEGIN; SELECT set_config('plan_cache_mode', 'force_custom_plan', true), set_config('jit', 'off', true)
//	SELECT pg_advisory_xact_lock(<key class>, k) FROM unnest(<lock ids, ascending>) k
//	SELECT … FROM ax_tasks WHERE id = ANY(…) AND status = 'SCHEDULED' ORDER BY id FOR NO KEY UPDATE
//	SELECT task_key, min(id) FROM ax_tasks WHERE task_key = ANY(…) AND status IN ('DISPATCHING', 'RUNNING') GROUP BY task_key
//	-- in Go: store.ResolveKeys — per free key the first task by (due_at, id) wins
//	UPDATE … SET status = 'DISPATCHING' … WHERE id = c.id AND status = 'SCHEDULED' AND due_at <= now
//	    AND NOT EXISTS (SELECT 1 FROM ax_tasks o WHERE o.task_key = t.task_key AND o.status IN ('DISPATCHING', 'RUNNING'))
//	UPDATE … SET status = 'SKIPPED', last_error = store.SkipReason(…), finished_at = now … -- the skip losers
//	COMMIT
//
// The advisory lock is transaction-level, keyed (class, FNV-1a hash of the namespace
// and the key), so that one key in two namespaces is two locks and their claims do not
// serialise on each other; the class is a hash of the schema with the sign bit set, so
// it never equals a refill lock class (which Refill reads back from pg_locks) and
// schemas do not contend.
// Every statement after the lock takes its snapshot after the lock was granted, so
// it sees the committed claim of the previous holder of the lock: two claims of one
// key are serialized, and the second finds the first's task among the holders. The
// NOT EXISTS makes the rule part of the claiming write itself; under the lock it
// fails only if a task of the key with Overlap allow (which takes no lock) was
// claimed meanwhile, and the winner is then reported Blocked, to be asked for again.
// Losers with Overlap queue are left untouched and reported Blocked. Locks are
// taken in one order everywhere: key locks by ascending lock id (two keys with one
// hash share a lock, which costs contention, not correctness), then rows by
// ascending id, and a transaction that holds row locks never waits for a key lock,
// so claims cannot deadlock.
//
// Trigger uses the same lock: its first transaction, the one round trip of a task
// without a restricting key, leaves a keyed task alone as the claim statement does;
// a second moves it in one round trip (BEGIN; lock; holders; the UPDATE with the
// same NOT EXISTS; read; COMMIT) or refuses it with store.KeyHeld.
//
// The claim and the keyed claim are two transactions: should the second fail, Claim
// returns the error and the tasks the first claimed stay DISPATCHING, as after any
// error whose outcome is unknown (the stuck-claim scan hands them back).
//
// # Schedules
//
// A schedule is one row per (namespace, name); every statement below names the view's
// namespace, and a schedule's occurrences are the tasks of its namespace. RegisterSchedules
// is one INSERT … ON CONFLICT (namespace, name) DO UPDATE per chunk, sorted by name; its SET list reads the stored row, so a changed spec or time zone takes the
// given next_fire_at and an unchanged one keeps its own. FireSchedule is a
// compare-and-set, UPDATE ax_schedules … WHERE name = $1 AND next_fire_at = Expect AND
// NOT paused; only if it touched the row does the same transaction run Insert's
// statements (the announcing lock and the wake-up signal included), so the
// occurrences reach the refill like any inserted task. Concurrent fires with one
// Expect queue on the row lock, and every one after the first re-checks the
// condition on the row as the first left it: exactly one applies. PauseSchedule
// sets paused and then, in a statement of its own so that its snapshot includes the
// occurrences of a fire that committed while it waited for the row, cancels the
// SCHEDULED tasks whose name and task_key are the schedule's name (locked in id
// order). DeleteSchedule does the same with a DELETE of the row in place of the
// UPDATE: a fire that waited for the row then finds none and does not apply, and the
// occurrences of one that committed first are cancelled. Schedule names, like task
// keys, are at most 500 bytes.
//
// The gaps of a schedule (store.SlotHistory) live in ax_slot_gaps
// (migrations/0012_slot_gaps.sql): FireSchedule inserts FireParams.Gaps in the very
// statement of its compare-and-set (a data-modifying CTE, one row per gap for each
// schedule row it changed: none when it did not apply), and ResumeSchedule's statement
// locks the paused row, records the gap from its next_fire_at to the new one, and
// resumes it. SlotGaps reads ax_slot_gaps_schedule backwards; TasksByKeys probes
// ax_tasks_name_key once per key (key = ANY), TasksByKeyRange scans it backwards;
// PruneSlotGaps takes its ids from ax_slot_gaps_until.
//
// # Fencing
//
// Claim, FireSchedule, recovery's Finish and Requeue, and the Start of a leader's
// claims are fenced writes (store.Fence). With a positive token their transaction begins, in the same
// pipelined batch (one statement more, no round trip more; the zero Fence adds
// nothing), with
//
//	SELECT ax_fence(<namespace>, <token>)
//
// which takes the namespace's fence lock shared — a transaction-level advisory lock
// on one bigint key, hashtextextended(namespace, seed from the schema) — then reads
// the epoch of its ax_leader row (none counts as 0) in a snapshot taken after the
// lock was granted and, if the epoch is above the token, raises SQLSTATE AXF01 with
// both in its DETAIL. The error aborts the transaction before anything is written,
// the COMMIT queued behind it rolls it back (pgxpool then discards the connection,
// left in an aborted transaction), and the driver returns store.FencedError, which
// wraps store.ErrFenced and is not retried. Claim checks in both of its transactions;
// should a raise come between them, the tasks of the first stay claimed — they
// committed before the raise — and Claim fails with ErrFenced. RaiseFence is one
// statement:
//
//	WITH ts AS (SELECT ax_fence_lock(<namespace>) AS now)  -- the fence lock, exclusive; then the clock
//	INSERT INTO ax_leader … SELECT <namespace>, <holder>, <token>, ts.now, ts.now FROM ts
//	ON CONFLICT (namespace) DO UPDATE SET holder = …, epoch = GREATEST(<token>, epoch + 1), updated_at = …
//	WHERE holder <> <holder> OR epoch <> <token>  -- else the row is left alone
//
// and AcquireLease takes the same exclusive lock before its upsert. So a fenced
// write either took its shared lock first, and the raise waits for it to commit, or
// takes it after the raise committed and reads the new epoch: once RaiseFence has
// returned, no write with an older token commits. Concurrent raises queue on the
// lock and each computes its epoch from the row the previous one left. The lock is
// advisory rather than SELECT … FOR SHARE of the row for three reasons: it exists
// before the row does, so a raise that creates the row also waits; the lock manager
// queues a new shared request behind a waiting exclusive one, whereas a row share
// lock is granted past a waiting updater, so a stream of claims could starve the
// raise; and RenewLease and ReleaseLease, which update the row but raise no epoch,
// take no fence lock and never wait for the leader's writes. Locks are taken in one
// order: the fence lock, then key locks, then rows; nothing holding a row waits for
// the fence lock. The price: each AcquireLease attempt of a standby (every poll)
// waits for the fenced writes in flight and holds new ones back for as long.
// TestRaiseFenceWaitsForFencedWrites and TestLeaseAndFenceLock check it.
//
// RaiseFence also appends the term's "acquired" change to ax_leadership, in the same
// transaction: the raise above and, in the same round trip, a read of the
// namespace's newest change (its snapshot taken after the fence lock, so it sees
// every earlier raise's change); then, unless that change is of the raised epoch or
// a later one, an INSERT … ON CONFLICT DO NOTHING with the reason computed from it,
// and COMMIT: two round trips, once per term. EndLeadership is one INSERT … ON
// CONFLICT DO NOTHING; LeadershipHistory is a backward scan of the primary key with
// a LIMIT; PruneLeadership one DELETE over a range of the key.
//
// # The refill cursor
//
// Refill's Changed set must never skip a row: "a Refill never returns a cursor past a
// sequence number whose row is not yet visible". A sequence alone does not give that
// on PostgreSQL — nextval is not transactional, so a transaction that drew 10 and
// commits after another that drew 11 was read would be skipped. Neither does a cursor
// of transaction ids (stamp rows with pg_current_xact_id(), return
// pg_snapshot_xmin(pg_current_snapshot())): it is safe, but xids are cluster-wide, so
// any transaction anywhere on the server — another schema, another ax, a report —
// holds xmin back; the cursor then stalls behind it and every Refill re-reads what
// the last one returned, which the conformance suite's "nothing changed since"
// checks reject as soon as another transaction is open on the server (as in parallel
// tests; TestRefillIgnoresOtherSchemas builds that case).
//
// So the cursor is a sequence number, and the transactions that draw them announce
// themselves. Every transaction that stamps rows SCHEDULED (Insert, InsertTx, Finish
// with a retry, Requeue) first runs
//
//	SELECT pg_advisory_xact_lock_shared(<hash of schema>, (nextval('ax_seq') & 2147483647)::int4)
//
// drawing g and holding a shared advisory lock keyed (schema, g) until it ends; all
// its stamps, drawn afterwards, are greater than g. Refill runs three READ COMMITTED
// statements in order: v0 := the sequence's last value; the g of every such lock of
// this schema in pg_locks (visible before their transactions commit); then the scans,
// with a snapshot taken after both. The cursor it returns is at most
// w = min(v0, every g). A stamp x ≤ w was drawn before v0 was read, so its transaction
// had taken its lock before pg_locks was read; it is not among the lock holders
// (their stamps exceed their g ≥ w), so it had ended, and its commit is visible to
// the scans' later snapshot. Hence nothing at or below the cursor can appear later.
//
// The sequence and the announcing locks are the schema's, shared by all namespaces;
// only the scans filter by the view's namespace. The argument above is about stamps,
// whatever the namespace of their rows, so it holds for the rows a view's scans
// return. The locks are not per namespace because nothing needs them to be: a writer
// of another namespace holds a view's cursor back only while it runs, and the rows
// stamped above the cursor meanwhile are read again, never skipped. A page of Changed
// cut short at Limit continues after its last row; the stamps below it that it
// skipped belong to other namespaces' rows or to rows the scan does not want, as
// before.
//
// Only ax's own writers in the same schema hold the cursor back (of any namespace), and
// only while they run. Visible rows stamped above the cursor (committed while another
// writer is still open) are returned in Changed anyway and read again by the next
// Refill — harmless, the timing wheel dedupes; More is set only when the cursor itself
// moved to the last row of a full page. A negative AfterSeq returns w, taken before the
// window scan. Reading pg_locks costs in proportion to the locks held on the server,
// once per refill. The lock key carries the low 31 bits of g; Refill widens it to the
// value nearest v0, which is exact while fewer than 2^30 values of ax_seq (stamps, and
// since version 9 ids) are drawn during one writer transaction. The sequence must keep
// CACHE 1. TestRefillOpenTransaction and TestRefillConcurrentWriters check it (ignoring
// the announced bounds, the second loses most of its tasks).
//
// # Transactional submit
//
// InsertTx writes tasks inside a transaction of the caller's — a pgx.Tx, or a *sql.Tx
// of the pgx stdlib driver (stdlib.OpenDBFromPool(pool), sql.Open("pgx", dsn)) on the
// same database and schema — so "create the order" and "schedule its timeout" commit
// or roll back together. It runs the same statements as Insert, the announcing lock
// and the wake-up signal included: the tasks, the signal and the end of the lock all
// take effect when the caller commits. Anything else is store.ErrInvalid. A statement
// that fails aborts the caller's transaction, which the caller then rolls back. Keep
// such transactions short: while one is open, the refill cursor cannot pass its
// stamps (other changes still reach the schedulers, re-read until it ends).
//
// # Namespaces
//
// The store as opened is the view of store.DefaultNamespace; InNamespace returns the
// view of another (store.Namespaced): a *Store holding a pointer to the state every
// view of one Open or New shares (the pool, the schema's lock keys, the closed flag and
// the listeners) and its namespace, so a view costs nothing and closing any view closes
// all. ax_tasks, ax_schedules and ax_nodes carry the namespace (version 5 added it with
// DEFAULT 'default', which PostgreSQL keeps in the catalog: no table was rewritten, no
// row updated), and every index a scan reads leads with it. Insert, InsertTx,
// FireSchedule, RegisterSchedules and RegisterNode stamp the view's namespace; every
// read and every transition by name or task id carries "namespace = <view's>", so
// another namespace's row is not found, as a missing one is. Claim's statement still
// locks the ids it is given by primary key, whatever their namespace, and then claims
// or reports only the view's: another's is as good as not SCHEDULED. Start, Heartbeat,
// Finish and Requeue do the same with the state they move from, and Start reads the
// recorded executions of the view's tasks only. The leases and the fence ignore the
// view: they take their namespace as an argument. Task keys are per namespace (their
// advisory locks included); the refill sequence, its announcing locks and the wake-up
// channel are the schema's (see The refill cursor, and Wake-ups).
//
// # Wake-ups
//
// Every transaction that inserts tasks or makes them SCHEDULED calls pg_notify with an
// empty payload on the channel "ax_" + schema, whatever its namespace: a signal wakes
// the listeners of every namespace of the schema (signals may be spurious). PostgreSQL
// delivers it when the transaction commits, not before, folds repeats within one
// transaction into one, and drops it on rollback. Listen takes a connection out of the
// pool for itself, LISTENs, and calls f per notification until its context ends or the
// store closes; each scheduler refills at once instead of waiting for its next periodic
// refill, which remains the guarantee.
package postgres
