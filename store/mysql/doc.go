// Package mysql is ax's store on MySQL 8.0.17+ or MariaDB 10.6+ (go-sql-driver/mysql), for
// replicas that share one database. It implements store.Store and store.TxStore; it
// has no store.Notifier (MySQL has no LISTEN/NOTIFY): other replicas' submits reach the
// leader through its periodic refill.
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
// sql_mode cannot silently truncate a key.
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
// its step record. A database with a version this package does not know is refused
// with store.ErrSchemaVersion.
//
// # Indexes
//
// MySQL has no partial indexes, so the SQLite driver's "WHERE status = …" indexes
// become composites led by status: an equality on status then a range on the second
// column is one index range scan in the order the queries want, with LIMIT stopping it
// early. (A generated column non-NULL only while SCHEDULED would keep finished rows out
// of the index; with status first they are simply never in the scanned range.)
//
//	UNIQUE ax_tasks_name_key (name, key)            Lookup, Cancel, Insert's duplicate check
//	ax_tasks_status_due (status, due_at, id)        window scan; Claim's rows come by primary key
//	ax_tasks_status_seq (status, seq)               Refill's changed set
//	ax_tasks_status_heartbeat (status, heartbeat_at, id)    orphan scan (Stale RUNNING)
//	ax_tasks_status_dispatched (status, dispatched_at, id)  stuck-claim scan (Stale DISPATCHING)
//	ax_executions_task (task_id, started_at, id)    Executions
//
// EXPLAIN on MariaDB 10.11.19 with 100,000 tasks (70% SUCCEEDED, 10% RUNNING, 5%
// DISPATCHING, 15% SCHEDULED; due times spread over two days), from TestExplain
// (AX_MYSQL_EXPLAIN=1). "rows" is the optimizer's estimate for the whole range; the
// LIMIT ends the scan early and no plan sorts:
//
//	window scan (from a cursor): due_at >= ? AND due_at < ? AND (due_at > ? OR id > ?) ORDER BY due_at, id LIMIT 1000
//	  type=range key=ax_tasks_status_due key_len=26 rows=74 Extra=Using where; Using index
//	window scan (overdue first): due_at < ? ORDER BY due_at, id LIMIT 1000
//	  type=range key=ax_tasks_status_due key_len=26 rows=38912 Extra=Using where; Using index
//	claim, lock (200 ids): FORCE INDEX (PRIMARY) WHERE id IN (…) AND status = 'SCHEDULED' ORDER BY id FOR UPDATE
//	  type=range key=PRIMARY key_len=8 rows=200 Extra=Using where
//	claim, update (200 ids): UPDATE … FORCE INDEX (PRIMARY) … WHERE id IN (…) AND status = 'SCHEDULED' AND due_at <= ?
//	  type=range key=PRIMARY key_len=8 rows=200 Extra=Using where
//	refill, changed: status = 'SCHEDULED' AND seq > ? AND seq <= ? ORDER BY seq LIMIT 1000
//	  type=range key=ax_tasks_status_seq key_len=26 rows=1000 Extra=Using index condition
//	orphan scan: status = 'RUNNING' AND heartbeat_at < ? ORDER BY heartbeat_at, id LIMIT 100
//	  type=range key=ax_tasks_status_heartbeat key_len=27 rows=5884 Extra=Using where; Using index
//	stuck-claim scan: status = 'DISPATCHING' AND dispatched_at < ? ORDER BY dispatched_at, id LIMIT 100
//	  type=range key=ax_tasks_status_dispatched key_len=27 rows=1471 Extra=Using where; Using index
//	business key lookup: name = ? AND key = ?
//	  type=const key=ax_tasks_name_key key_len=2804 ref=const,const rows=1 Extra=Using index
//
// The batched statements name FORCE INDEX (PRIMARY): given "id IN (…) AND status = ?"
// an optimizer that prefers a status index would scan, and lock, every row in that
// status.
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
// the rows the caller gets back. Start also reads which execution ids are recorded
// (Duplicate) and inserts the new records in one multi-row INSERT before the
// transition. Finish drops repeated results of one execution id first: only the first
// can apply, and a CASE would pick among them arbitrarily.
//
// Claim does not use SKIP LOCKED: a row held by a transaction that leaves it
// SCHEDULED (a refused Cancel, a claim that rolls back on a deadlock) would be neither
// claimed nor reported not due, and the scheduler would drop it. At READ COMMITTED the
// wait is for the batch's own rows only; there is one leader claiming.
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
// duplicate, in the same call or not.
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
//     deletes its hold. The delete keeps the hold row locked until that transaction
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
