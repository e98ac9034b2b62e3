// Package mysql is ax's store on MySQL 8.0.17+ or MariaDB 10.6+ (go-sql-driver/mysql), for
// replicas that share one database. It implements store.Store, store.TxStore,
// store.Leaser, store.Namespaced and store.NodeRegistry; it has no store.Notifier (MySQL has no LISTEN/NOTIFY): other replicas' submits reach the
// other schedulers through their periodic refill.
//
//	s, err := mysql.Open("ax:secret@tcp(db:3306)/ax") // owns its pool; Close closes it
//	s, err := mysql.New(db)                            // on the caller's *sql.DB
//
// # Schema
//
// migrations/0001_init.sql: ax_tasks and ax_executions with the columns and meaning of
// the SQLite schema; ax_counters (the 'seq' counter); ax_seq_holds (see "The refill
// cursor"); ax_schema_migrations (the version bookkeeping). InnoDB, ROW_FORMAT=DYNAMIC.
// Times are DATETIME(6) in UTC; ids BIGINT AUTO_INCREMENT; payload LONGBLOB, NULL for
// a nil payload and an empty string for an empty one. Names (≤ 200 bytes), keys (≤ 500 bytes),
// execution ids (≤ 100 bytes) and owners are utf8mb4 with a binary NO PAD collation —
// utf8mb4_0900_bin on MySQL, utf8mb4_nopad_bin on MariaDB — because utf8mb4_bin pads
// with spaces and would make the keys "k" and "k " one key. The unique (name, key)
// index is at most 4 × 700 = 2800 bytes, under InnoDB's 3072. Lengths, UTF-8 and the
// DATETIME range (years 1000–9999) are checked before writing, so a non-strict
// sql_mode cannot silently truncate a key. (Since version 4 the unique index is
// (namespace, name, key): see below.)
//
// migrations/0002_task_keys.sql adds the task keys and the schedules: ax_tasks gains
// task_key (≤ 500 bytes, empty without a key — what version 1 rows get), overlap
// (empty, skip, queue or allow) and held_key, a VIRTUAL generated column that is task_key
// while the row is DISPATCHING or RUNNING with a key and NULL otherwise, indexed as
// ax_tasks_held_key; ax_task_keys holds the per-key lock rows (see "Task keys");
// ax_schedules holds one row per schedule (name ≤ 200 bytes as the primary key, spec,
// time_zone, overlap, misfire, payload, paused, next_fire_at, last_fire_at NULL before
// the first fire, created_at, updated_at; DATETIME(6) UTC like every other time).
// migrations/0003_leader.sql: ax_leader holds one row per election namespace (primary
// key; holder, epoch, expires_at, updated_at), the lease of elect/sqllease
// (store.Leaser) and the fencing epoch, in UTC_TIMESTAMP(6).
//
// migrations/0004_namespaces.sql (see "Namespaces"): ax_tasks, ax_task_keys and
// ax_schedules gain namespace VARBINARY(200) NOT NULL DEFAULT 'default' —
// store.MaxNamespace bytes compared byte for byte, so that the business key (namespace,
// name, key) is 202 + 802 + 2002 = 3006 bytes, under InnoDB's 3072, where a utf8mb4
// VARCHAR(200) would not fit; every index of ax_tasks is rebuilt with namespace first
// (the business key is unique per namespace); ax_task_keys' primary key becomes
// (namespace, task_key) and ax_schedules' (namespace, name). ax_nodes is the node
// registry: (namespace, name) primary key, advertise, handlers (the sorted names
// joined with '\n', the empty string for none; a name holding '\n' is refused),
// capacity, in_flight, started_at and heartbeat_at (DATETIME(6) UTC, the database's
// clock).
//
// # Migrations
//
// New applies the missing migrations under GET_LOCK('ax_migrate_<database>', 60 s) on
// one connection, so several processes starting at once migrate exactly once; the
// others wait, then find nothing to do. MySQL commits every DDL statement on its own,
// so a migration cannot be one transaction: ax_schema_migrations records, per version,
// the statements done so far (step) and applied_at once all are. A process that dies
// mid-migration leaves applied_at NULL and the next New resumes at the next statement;
// every statement is written to be harmless when rerun (CREATE TABLE IF NOT EXISTS,
// INSERT … ON DUPLICATE KEY UPDATE), since a crash can fall between a statement and
// its step record. MySQL 8 has no ALTER TABLE … ADD COLUMN IF NOT EXISTS, so an ALTER
// only adds columns and keys, in one statement, which is atomic DDL on MySQL 8 and
// MariaDB 10.6: when New resumes at an ALTER that had taken effect, the "duplicate
// column" (1060), "duplicate key name" (1061) or, for a lone DROP KEY, "can't drop"
// (1091) it answers is taken as done — for the statement it resumes at only. An ALTER
// that drops a key and adds it again, or swaps the primary key, is harmless to rerun as
// it stands.
//
// Version 4 adds its columns with ADD COLUMN … DEFAULT at the end of the table, which
// MariaDB 10.3+ and MySQL 8.0.12+ do instantly, without rebuilding the table — except
// that MariaDB cannot add a column instantly to a table with an indexed virtual
// column, so ax_tasks_held_key is dropped first; the one ALTER that then rebuilds every
// index of ax_tasks with namespace first touches secondary indexes only (online: reads
// and writes go on; no copy of the table). TestMigrateNamespacesOnline checks both with
// ALGORITHM and LOCK clauses. While it runs, ax_tasks_held_key is missing, and a
// process of an older ax still running reads its indexes' old prefixes no more: its
// scans are slower until it is replaced, its results unchanged (its rows are the
// default namespace's). A database with a version this package does not know
// is refused with store.ErrSchemaVersion.
//
// # Indexes
//
// MySQL has no partial indexes, so the SQLite driver's "WHERE status = …" indexes
// become composites led by namespace and status: equalities on both, then a range on
// the next column, is one index range scan of one namespace in the order the queries
// want, with LIMIT stopping it early. (A generated column non-NULL only while SCHEDULED would not keep finished
// rows out of the index — InnoDB indexes NULLs too; with status first they are simply
// never in the scanned range.)
//
//	UNIQUE ax_tasks_name_key (namespace, name, key, key_slot)  Lookup, Cancel, Insert's duplicate check (key_slot 0: the holder)
//	ax_tasks_status_due (namespace, status, due_at, id)        window scan; Claim's rows come by primary key
//	ax_tasks_status_seq (namespace, status, seq)               Refill's changed set
//	ax_tasks_status_heartbeat (namespace, status, heartbeat_at, id)    orphan scan (Stale RUNNING)
//	ax_tasks_status_dispatched (namespace, status, dispatched_at, id)  stuck-claim scan (Stale DISPATCHING)
//	ax_executions_task (task_id, started_at, id)               Executions
//	ax_tasks_held_key (namespace, held_key)                    the holders of task keys (Claim, Trigger)
//	ax_task_keys PRIMARY (namespace, task_key)                 the task keys' lock rows
//	ax_schedules PRIMARY (namespace, name), ax_nodes PRIMARY (namespace, name)
//	ax_stats PRIMARY (namespace, minute, node)                 the per-minute statistics (Stats: LIMIT store.MaxStatsRead)
//	ax_audit_at (namespace, at)                                AuditLog by time (backward: (at, id), the id ending each entry), PruneAudit
//
// ax_tasks_held_key stands in for the partial index on task_key of the DISPATCHING
// and RUNNING rows with a key, which MySQL and MariaDB lack. InnoDB keeps an entry for
// NULL too, but a row without a key has NULL for life: its transitions evaluate the
// expression and leave the entry as it is, so the execution path of tasks without a
// key never writes to this index (its cost is the entry written at insert). A lookup
// by key reads holder entries only, however many finished occurrences the key has.
//
// EXPLAIN on MariaDB 10.11.19 with 100,000 tasks (70% SUCCEEDED, 10% RUNNING, 5%
// DISPATCHING, 15% SCHEDULED; due times spread over two days; 20% are occurrences of
// 100 schedules, with the schedule's name as task key, among them every DISPATCHING
// task; a fifth of the tasks in a second namespace) and 10,000 key lock rows, from
// TestExplain (AX_MYSQL_EXPLAIN=1), which also checks that each plan uses its index
// with at least namespace and the columns after it (key_len: namespace takes 202
// bytes). Every statement below is the store's own, with namespace = ? AND … in front
// of the condition shown. "rows" is the optimizer's estimate for the whole range; the
// LIMIT ends the scan early and no plan of the execution path sorts:
//
//	window scan (from a cursor): due_at >= ? AND due_at < ? AND (due_at > ? OR id > ?) ORDER BY due_at, id LIMIT 1000
//	  type=range key=ax_tasks_status_due key_len=228 rows=66 Extra=Using where; Using index
//	window scan (overdue first): due_at < ? ORDER BY due_at, id LIMIT 1000
//	  type=range key=ax_tasks_status_due key_len=228 rows=42382 Extra=Using where; Using index
//	claim, lock (200 ids): FORCE INDEX (PRIMARY) WHERE id IN (…) AND status = 'SCHEDULED' AND namespace = ? ORDER BY id FOR UPDATE
//	  type=range key=PRIMARY key_len=8 rows=200 Extra=Using where
//	claim, update (200 ids): UPDATE … FORCE INDEX (PRIMARY) … WHERE id IN (…) AND status = 'SCHEDULED' AND due_at <= ?
//	  type=range key=PRIMARY key_len=8 rows=200 Extra=Using where
//	key holders (10 keys): SELECT held_key, MIN(id) … WHERE held_key IN (…) GROUP BY namespace, held_key ORDER BY NULL
//	  type=range key=ax_tasks_held_key key_len=2205 rows=1 Extra=Using where; Using index for group-by; Using temporary
//	keyed claim, update (200 ids, 10 keys): … AND task_key NOT IN (SELECT held_key FROM (<key holders>) AS held)
//	  type=range key=PRIMARY key_len=8 rows=200 Extra=Using where
//	  <derived3> type=ALL rows=2 Extra=Using where
//	  type=range key=ax_tasks_held_key key_len=2205 rows=1 Extra=Using where; Using index for group-by; Using temporary
//	key locks (10 keys): SELECT task_key FROM ax_task_keys WHERE … task_key IN (…) ORDER BY task_key FOR UPDATE
//	  type=range key=PRIMARY key_len=2204 rows=10 Extra=Using where; Using index
//	refill, changed: status = 'SCHEDULED' AND seq > ? AND seq <= ? ORDER BY seq LIMIT 1000
//	  type=range key=ax_tasks_status_seq key_len=228 rows=1000 Extra=Using index condition
//	orphan scan: status = 'RUNNING' AND heartbeat_at < ? ORDER BY heartbeat_at, id LIMIT 100
//	  type=range key=ax_tasks_status_heartbeat key_len=229 rows=4814 Extra=Using where; Using index
//	stuck-claim scan: status = 'DISPATCHING' AND dispatched_at < ? ORDER BY dispatched_at, id LIMIT 100
//	  type=range key=ax_tasks_status_dispatched key_len=229 rows=1199 Extra=Using where; Using index
//	business key lookup: name = ? AND key = ?
//	  type=const key=ax_tasks_name_key key_len=3006 ref=const,const,const rows=1 Extra=Using index
//	Insert's read back (20 keys): … AND ((name = ? AND key = ?) OR …)
//	  type=range key=ax_tasks_name_key key_len=3006 rows=20 Extra=Using index condition
//	a schedule's pending occurrences (PauseSchedule, DeleteSchedule): name = ? AND task_key = ? AND status = 'SCHEDULED' ORDER BY id
//	  type=ref key=ax_tasks_name_key key_len=1004 ref=const,const rows=160 Extra=Using index condition; Using where; Using filesort
//	task stats: SELECT status, COUNT(*), (SELECT MIN(due_at) … WHERE … status = 'SCHEDULED' AND due_at <= ?) … WHERE namespace = ? GROUP BY status
//	  type=ref key=ax_tasks_status_seq key_len=202 ref=const rows=48592 Extra=Using where; Using index
//	  (subquery) Extra=Select tables optimized away
//
// The holder lookup is a loose index scan: one index dive per key, whatever the
// number of holders (50 per key here, all DISPATCHING; the rule itself leaves at most
// one task of a skip or queue key holding it). It groups by (namespace, held_key), a
// prefix of the index, for that: grouped by held_key alone it reads every holder entry
// of the keys (about twice as slow here); the temporary table holds one row per key.
// PauseSchedule and DeleteSchedule, an operator's actions, read every task of the
// schedule's name, finished ones included. TaskStats is one statement, one round trip
// and one read view: the counts read the namespace's range of the narrowest index led
// by namespace and status (every row of the namespace, but not the rows themselves),
// and the optimizer answers the MIN from ax_tasks_status_due alone, one index dive,
// before the statement runs. It is for metrics at scrape intervals.
//
// The batched statements name FORCE INDEX (PRIMARY): given "id IN (…) AND status = ?"
// an optimizer that prefers a status index would scan, and lock, every row in that
// status.
//
// # Finding tasks
//
// Tasks is one SELECT with a LIMIT (store/internal/taskquery writes its conditions, as
// for PostgreSQL and SQLite). A key prefix is the range prefix ≤ key < its successor
// (the least valid string above every key with the prefix): under the key's binary
// collation a byte-wise, case-sensitive match and a range of ax_tasks_name_key after
// the namespace and the name. It is not LIKE 'prefix%': MariaDB's range for that
// misses keys whose next character lies beyond U+FFFF (see query.go). A status
// filter and CountTasks's per-status counts (each stopping at the cap) are ranges of
// an index led by (namespace, status), ax_tasks_status_due or a sibling; the newest
// first reads the primary key backwards. On MariaDB 10.11 with 100,000 rows
// (TestExplain, AX_MYSQL_EXPLAIN=1):
//
//	-- a name and a key prefix
//	type=range key=ax_tasks_name_key key_len=3006 rows=55 Extra=Using index condition; Using filesort
//	-- SCHEDULED, soonest first
//	type=range key=ax_tasks_status_due key_len=220 Extra=Using where
//	-- FAILED in a finished range
//	type=ref key=ax_tasks_status_due key_len=220 ref=const,const rows=1
//	-- a page after a cursor, newest first
//	type=range key=PRIMARY key_len=8 Extra=Using where
//	-- counts: per status, a derived table of at most atMost + 1 rows from
//	type=ref key=ax_tasks_status_heartbeat key_len=220 ref=const,const Extra=Using where; Using index
//
// (A common status in a finished range, SUCCEEDED there, reads the primary key
// backwards, filtered, until the page is full.)
//
// # Task keys
//
// A due task with a TaskKey and Overlap skip or queue is claimed only while no other
// task of its namespace with that key is DISPATCHING or RUNNING. InnoDB at READ
// COMMITTED takes no gap locks, so "no row holds k" cannot be locked as such; a lock
// row per key stands in for it. ax_task_keys((namespace, task_key) PRIMARY KEY) keeps
// one small row per distinct task key ever used in a namespace (rows are never
// deleted: a key costs its own bytes once). Every statement below names the claim's
// namespace, so two namespaces that use one task key neither see each other's holders
// nor wait for each other's lock rows. Claim runs, in its one transaction:
//
//  1. its usual locking SELECT of the namespace's SCHEDULED rows, chunk by chunk,
//     ascending ids; tasks without a key rule (no key, or allow) go on the usual path — same
//     statements, same count; a batch without keyed tasks costs nothing more
//     (TestClaimStatements pins it);
//  2. after the last chunk, for the due keyed tasks: SELECT … FROM ax_task_keys
//     WHERE namespace = ? AND task_key IN (…) ORDER BY task_key FOR UPDATE, plus, for a key seen for
//     the first time, a single-row INSERT … ON DUPLICATE KEY UPDATE task_key =
//     task_key, which locks the row exclusively whether it inserts it or finds it
//     (INSERT IGNORE would take a shared lock on a duplicate, and two claimers
//     upgrading theirs deadlock);
//  3. the holders, read after the lock is granted: SELECT held_key, MIN(id) … WHERE
//     namespace = ? AND held_key IN (…) GROUP BY namespace, held_key. A plain read under READ COMMITTED sees the
//     latest committed rows, so the previous holder of the lock's claim is visible;
//  4. store.ResolveKeys picks, per free key, the first task in (DueAt, ID) order;
//  5. the winners' UPDATE (the usual CAS, CASE id for the execution ids) with
//     "AND task_key NOT IN (SELECT held_key FROM (SELECT held_key … WHERE namespace =
//     ? AND held_key IN (…) GROUP BY namespace, held_key) AS held)": the check is part of the claiming write.
//     MySQL refuses a subquery on the updated table (1093) unless it reads a
//     materialised derived table, which the GROUP BY guarantees;
//  6. the skip losers' UPDATE to SKIPPED (finished_at and updated_at the claim's
//     database time, last_error store.SkipReason, execution id untouched); queue
//     losers are left alone and reported Blocked; then one SELECT reads the changed
//     rows back.
//
// Locks are taken rows first (ascending ids), then keys (ascending), in Claim and in
// Trigger alike, so concurrent claimers queue instead of deadlocking; a deadlock that
// still happens (a key created by two claimers at once) retries the transaction. The
// lock row is held until commit, so the next claimer of the key reads this claim's
// holder. Trigger on a task with a key rule takes the same path for its one task — its
// row FOR UPDATE, the key's lock, the holder, the UPDATE with the same condition — and
// refuses with store.KeyHeld while the key is held; other tasks trigger with today's
// single UPDATE (now guarded by "overlap NOT IN ('skip', 'queue')").
//
// A task with Overlap allow takes no lock. It ignores the key, but it holds it while
// it runs: a skip or queue task claimed while an allow task of its key is being
// claimed by a concurrent transaction may run beside it.
//
// # Namespaces
//
// A Store is the view of one namespace (store.Namespaced): Open and New return the
// view of store.DefaultNamespace, and InNamespace(ns) another view, a small struct
// holding a pointer to the state every view shares — the pool, the settings, the
// closed flag (so closing one view closes all) — and its namespace. Every statement of
// Insert, InsertTx, FireSchedule and RegisterSchedules writes the view's namespace on
// its rows. Every statement of Get, Lookup, Executions, Cancel, Refill, Claim, Trigger,
// Stale, TaskStats, the schedules' methods and the node registry says namespace = ?,
// the leading column of the index it reads. So each namespace's scans are index range
// scans of its own rows, at the cost of one more equality and no more round trips
// (TestClaimStatementsInView). Claim, Start, Heartbeat, Finish and Requeue lock their
// rows by primary key with namespace = ? among the conditions. They leave out the ids
// of other namespaces, as if they were not in the state asked for. Start reads every
// recorded execution of the ids it is given: one recorded for another namespace's
// task is Lost, and not inserted again. The leases and the fence name their namespace
// explicitly (ax_leader is keyed by it) and ignore the view's.
//
// The sequence numbers of the refill cursor, their counter and ax_seq_holds are global.
// A view's Refill computes the cursor as before, over every namespace's holds, and
// then reads its own rows up to it: every number up to the cursor is visible or
// abandoned whatever its row's namespace, so the rule holds for each namespace's rows.
// The price is that a transaction of one namespace still open (an InsertTx, say) holds
// back the other namespaces' cursors too, as it would hold back any other writer's;
// their rows come with the next refills once it ends (TestRefillNamespacesOpenTransaction).
//
// The node registry (store.NodeRegistry) is ax_nodes, one row per (namespace, name),
// each call one statement in the database's clock: RegisterNode a single-row INSERT …
// ON DUPLICATE KEY UPDATE stamping heartbeat_at (and started_at, unless given) with
// UTC_TIMESTAMP(6) and writing clock_offset (version 9: the store's clock minus the
// node's, microseconds, as the node measured it); Nodes a SELECT and ExpireNodes a DELETE comparing
// TIMESTAMPDIFF(MICROSECOND, heartbeat_at, UTC_TIMESTAMP(6)) with the duration (so
// that no duration, however long, takes a DATETIME out of its range); RemoveNode a
// DELETE by primary key. See nodes.go.
//
// # Schedules
//
// RegisterSchedules locks the schedules' rows by name, inserts the new ones in one
// multi-row INSERT (a concurrent registration of the same new name makes it retry) and
// updates each existing one; all in one transaction. FireSchedule is one transaction:
// UPDATE ax_schedules … WHERE name = ? AND next_fire_at = <Expect> AND NOT paused —
// concurrent fires queue on the row and only the first finds Expect — then the
// occurrences through Insert's own path (sequence numbers, duplicates answered
// store.ErrDuplicate). PauseSchedule sets paused and cancels the SCHEDULED tasks whose
// name and task key are the schedule's, by id in ascending chunks, in one transaction
// that locks the schedule's row first, so a concurrent fire either commits before it
// or finds the schedule paused. DeleteSchedule is the same transaction with a DELETE
// of the row in place of the UPDATE: a concurrent fire commits before it or finds no
// row.
//
// The gaps of a schedule (store.SlotHistory) live in ax_slot_gaps
// (migrations/0007_slot_gaps.sql): FireSchedule inserts FireParams.Gaps in its
// transaction once the compare-and-set applied; ResumeSchedule locks the paused row
// (SELECT … FOR UPDATE), records the gap from its next_fire_at to the new one and
// resumes it. SlotGaps is a backward range of ax_slot_gaps_schedule; TasksByKeys and
// TasksByKeyRange are ranges of ax_tasks_name_key; PruneSlotGaps locks its ids on
// ax_slot_gaps_until, then deletes them by primary key.
//
// # Isolation
//
// Every transaction of the store runs at READ COMMITTED: InnoDB then takes no gap
// locks, so a claim or a batch locks exactly its rows and never blocks inserts
// (REPEATABLE READ's next-key locks would). Open sets it for the session in the DSN —
// transaction_isolation on MySQL 8 (tx_isolation is gone there), tx_isolation on
// MariaDB before 11.1 (transaction_isolation is new in 11.1); Open asks the server
// which one it knows. On a *sql.DB given to New, whose sessions may run at any level,
// each transaction starts with SET TRANSACTION ISOLATION LEVEL READ COMMITTED
// (sql.TxOptions), one more round trip. Open also sets parseTime, loc=UTC,
// time_zone='+00:00' and interpolateParams (one round trip per statement instead of
// prepare/execute/close; safe with utf8mb4). Whatever the DSN, times are sent as UTC
// strings and read back as UTC.
//
// Deadlocks (1213) and lock wait timeouts (1205) retry the whole transaction, up to 6
// times with jittered exponential backoff from 2 ms.
//
// # Fencing
//
// A fenced write (Claim, FireSchedule, and Start, Finish or Requeue with a non-zero
// store.Fence) begins its transaction with SELECT epoch FROM ax_leader WHERE
// namespace = ? LOCK IN SHARE MODE and rolls back with store.ErrFenced, never retried,
// when its token is below the epoch; the shared lock, held to commit, makes RaiseFence
// and AcquireLease (which lock the row exclusively) wait for the fenced writes in
// flight. The zero Fence adds no statement. See fence.go.
//
// migrations/0008_leadership.sql: ax_leadership is the leadership history
// (store.LeadershipLog), keyed by (namespace, epoch, kind). RaiseFence appends the
// term's "acquired" row in its transaction, the ax_leader row still locked, so
// concurrent raises append in turn; EndLeadership appends "ended". The history is a
// backward range of the primary key with a LIMIT; PruneLeadership three statements
// on the key, the DELETE with ORDER BY and LIMIT (MySQL takes no LIMIT in an IN
// subquery). See leadership.go.
//
// # Time
//
// Now is SELECT UTC_TIMESTAMP(6). Like NOW(), UTC_TIMESTAMP is fixed at the start of
// its statement (SYSDATE(6) is the moment of evaluation, but in the session's time
// zone and unsafe for replication), which is what a statement of its own wants. Claim
// decides "due" inside its locking SELECT — due_at <= UTC_TIMESTAMP(6) — so the
// database clock is the final word, and stamps every row of the batch with that same
// value, so DispatchedAt is never before DueAt. Every stamp comes from the database
// clock, never the process's.
//
// # The execution path
//
// MySQL has no UPDATE … RETURNING (MariaDB has RETURNING for INSERT and DELETE only)
// and no UPDATE … FROM (VALUES …). Claim, Start, Heartbeat, Finish and Requeue take
// chunks of at most store.MaxBatch ids in ascending order and run, per chunk, a fixed
// handful of statements in one transaction: a locking SELECT of the rows still in the
// old status (FOR UPDATE), one UPDATE with CASE id WHEN … THEN … END per column that
// keeps the per-row CAS (status = old AND execution_id = CASE id …), and a SELECT of
// the rows the caller gets back. Start also reads the name of each locked row: a Start
// is Lost unless it names the task's. It reads which execution ids are recorded
// already (Duplicate for the view's tasks, Lost for another namespace's), and inserts
// the new records in one multi-row INSERT before the transition. ClaimStart does in
// the claiming transaction what Start would. The claimed rows whose claim asks to
// start, whose name has a handler in the claiming process and whose key does not
// restrict them (no task key, or Overlap allow) go straight to RUNNING. Their
// execution records are inserted before the commit, so such a task costs one
// transaction at claim and one at finish (and heartbeats); keyed tasks go through
// DISPATCHING and Start. Finish drops repeated results of one execution id first:
// only the first can apply, and a CASE would pick among them arbitrarily.
//
// Claim does not use SKIP LOCKED: a row held by a transaction that leaves it
// SCHEDULED (a refused Cancel, a claim that rolls back on a deadlock) would be neither
// claimed nor reported not due, and the scheduler would drop it. At READ COMMITTED the
// wait is for the batch's own rows only; schedulers that claim the same rows at once
// wait for each other, and the loser finds them no longer SCHEDULED.
//
// Insert is a plain multi-row INSERT per chunk, rows ordered by (name, key) so that
// concurrent inserts take the unique index in one order. Not INSERT IGNORE (it turns
// every error into a warning) nor ON DUPLICATE KEY UPDATE id = id: on MariaDB 10.11 a
// multi-row INSERT … ON DUPLICATE KEY UPDATE racing with an insert of the same key
// intermittently drops its other rows with neither an error nor a warning (a 12-way
// race reproduces it within a few hundred rounds, at READ COMMITTED and REPEATABLE
// READ alike). A duplicate key (1062) rolls back only the statement; the store then
// reads the existing keys with a locking read (which sees the latest committed rows
// even in a caller's REPEATABLE READ snapshot) and inserts the rest. Each row carries
// its own sequence number, so reading the rows back tells a row this call wrote from a
// duplicate, in the same call or not. On MariaDB the INSERT returns what the database
// set on the rows it wrote (INSERT … RETURNING id, seq, created_at, updated_at), and
// only the duplicates are read; MySQL, which has no RETURNING, reads each chunk's keys
// back with a plain read after its INSERT.
//
// Reusing a business key (migrations/0005_operations.sql): the task holding its key
// has key_slot 0, one per key by the unique index. On a duplicate key the insert first
// runs one UPDATE over the chunk's keys that moves each holder that no longer holds
// its key (store.KeyHold.Frees: finished, by key_hold, past key_until) to key_slot =
// id — Superseded — and, if it moved any, inserts again; only then are the remaining
// holders read and left out as duplicates. So an Insert of new keys costs what it
// did, and a reuse a failed INSERT, the UPDATE and the INSERT again. The failed INSERT
// leaves a shared lock on the old row's index entry, so two inserts of one freed key
// racing can deadlock on the UPDATE: Insert runs again (it then finds the winner's
// task live: ErrDuplicate), and InsertTx's caller sees the deadlock error and its
// transaction rolled back. Lookup reads the key's newest row; Retry and Trigger
// require key_slot = 0, refusing a superseded task.
//
// # The refill cursor
//
// The contract: a Refill never returns a cursor past a sequence number whose row is
// not yet visible. A number taken from a counter or AUTO_INCREMENT inside a
// transaction that commits after a later one was read would otherwise be skipped for
// good. Three ways were weighed:
//
//   - a counter row updated inside every transaction that leaves rows SCHEDULED
//     (UPDATE ax_counters SET value = LAST_INSERT_ID(value + n)): its lock serialises
//     those transactions, so numbers become visible in order. Exact and simple, but a
//     caller's transaction that submits with InsertTx holds the lock until it commits
//     and stops every other submit, retry and requeue in the cluster meanwhile;
//   - a cursor that waits a fixed time (say a minute) at each gap before moving past
//     it: no blocking, but exact only for transactions shorter than the bound;
//   - information_schema.innodb_trx: needs the PROCESS privilege and still cannot tie
//     a transaction to the numbers it holds.
//
// The store does neither: it makes "still in flight" visible through row locks.
//
//  1. A writer reserves its n numbers in a short transaction of its own: it moves the
//     counter (UPDATE … LAST_INSERT_ID(value + n)) and inserts a hold row
//     ax_seq_holds(lo, hi, created_at) in the same commit, so no reader sees the
//     counter move without the hold. The counter's lock is held for that short
//     transaction only.
//  2. The writing transaction — the store's own, or the caller's in InsertTx — first
//     deletes its hold (in a caller's transaction, a Reschedule, Retry or Trigger
//     reserves its number only once its transition applied, the row locked, so that a
//     refusal reserves none). The delete keeps the hold row locked until that transaction
//     ends: at commit the hold disappears together with the rows becoming visible; at
//     rollback (or when the server drops a dead client's connection) the hold is back,
//     unlocked.
//  3. Refill reads, in one statement (one read view), the counter c and the holds.
//     The cursor may go up to min(c, lo-1 for each hold still in flight). A hold
//     younger than HoldGrace (5 s) is in flight; an older one is checked with
//     SELECT … FOR UPDATE SKIP LOCKED: locked means its transaction is alive, however
//     long it runs, and the cursor stays below it; unlocked means its transaction
//     rolled back or died, and Refill deletes it and moves on. A writer that was
//     paused between steps 1 and 2 for longer than HoldGrace finds its hold deleted
//     (its delete touches no row) and reserves fresh numbers, so a reaped range is
//     never used.
//  4. Only then Refill reads the rows with AfterSeq < seq <= cursor.
//
// So the cursor is exact — it never passes a number whose transaction may still
// commit, however long that transaction runs — and nothing blocks: concurrent submits
// serialise only on the counter's short reservation. A rolled-back or crashed submit
// holds the cursor back for HoldGrace at most. The price is a few more round trips per
// write that leaves rows SCHEDULED (Insert, Finish with retries, Requeue): the
// reservation (begin, update, insert, commit) and the delete of the hold.
// TestRefillOpenTransaction checks the scenario: a task inserted with InsertTx in an
// open transaction, another inserted and committed meanwhile, a Refill that does not
// move past the open one, then the commit, and a Refill that returns both in sequence
// order.
//
// # Transactional submit
//
// InsertTx takes a *sql.Tx on the store's database (same server and schema, checked
// with one query; anything else is store.ErrInvalid), at any isolation level. The
// tasks are visible if and only if the caller commits. The caller's transaction holds
// its sequence range until it ends, which only keeps the change cursor behind it (see
// above) and never blocks other writers. An error inside InsertTx (a deadlock, say)
// leaves the caller's transaction for the caller to roll back.
//
// # MySQL 8 and MariaDB
//
// The SQL is the common dialect of both: no VALUES ROW(…) table constructors (MariaDB
// spells them VALUES (…)), no FOR SHARE (MariaDB has only LOCK IN SHARE MODE, which
// MySQL 8 still accepts), no RETURNING, index hints that both accept on UPDATE. The
// differences the store handles: the isolation variable's name (detected at Open), the
// NO PAD binary collation's name (detected at migration; utf8mb4_0900_bin needs MySQL
// 8.0.17), SKIP LOCKED (MySQL 8.0.1+, MariaDB 10.6+; used only to reap holds) — New
// checks the version and refuses older servers — and MariaDB's ON DUPLICATE
// KEY UPDATE race (avoided on both). The suite runs here against MariaDB 10.11; the
// MySQL 8 paths (transaction_isolation, utf8mb4_0900_bin) follow the MySQL manual but
// have not been run in this repository's CI.
package mysql
