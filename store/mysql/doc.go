// Package mysql is ax's store on MySQL 8.0.17+ or MariaDB 10.6+ (go-sql-driver/mysql), for
// replicas that share one database. It implements store.Store and store.Transactor; it
// has no store.Notifier (MySQL has no LISTEN/NOTIFY): other replicas' submits reach the
// other schedulers through their periodic refill.
//
//	s, err := mysql.Open("ax:secret@tcp(db:3306)/ax") // owns its pool; Close closes it
//	s, err := mysql.New(db)                            // on the caller's *sql.DB
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
// # Galera
//
// The store runs on MariaDB Galera Cluster. New and Open detect it by SELECT
// @@wsrep_on (MySQL has no such variable; a MariaDB outside a cluster answers OFF) and
// then refuse, with store.ErrInvalid naming the setting, what the store cannot be
// correct on: a binlog_format other than ROW (Galera replicates row events only) and a
// wsrep_OSU_method other than TOI (the migrations' DDL would change one node's schema
// only). Both are read from one of the pool's sessions, before anything is migrated.
// Nothing else is required: the store's READ COMMITTED suits Galera, whose
// certification does not depend on the isolation level, and wsrep_sync_wait may stay 0
// (the store waits for its node where it must; see below).
//
// Fencing (store.Fence) changes there. On a single server a fenced write begins with a
// shared lock on its namespace's ax_leader row, which a raise of the fence waits for;
// on Galera row locks are a node's own, neither replicated nor certified, and
// certification compares only the rows write-sets write. A claim through one node that
// read the old epoch commits even after a raise through another node has committed:
// nothing in the claim's write-set conflicts with the raise's
// (TestGalera/FenceRaceUnfenced shows it: the claim is replayed after the raise and
// goes through). On Galera a fenced write therefore ends, its work done and just before
// COMMIT, by writing the namespace's ax_leader row itself — fence_writes + 1, a column
// for just this (migration 18), so that the row really changes and its key is in the
// write-set; the row is created at epoch 0 when the namespace has none — reading the
// epoch in the same statement, and rolls back with store.ErrFenced when it is refused.
// RaiseFence, and AcquireLease when it changes the epoch, write the same row, so of a
// fenced write and a raise that overlap on two nodes certification commits the first
// ordered and refuses the other; the refused fenced write gets the deadlock error 1213
// (or is aborted by the raise's applier, with the same error), run tries it again as it
// does any deadlock, and the fence read of the new attempt sees the raise and answers
// store.ErrFenced (TestGalera/FenceRace). A transaction run tries again on Galera first
// waits, on its connection and outside the transaction (SET STATEMENT wsrep_sync_wait =
// 1 FOR SELECT 1), until its node has applied every write-set committed in the cluster
// before: the node may not have applied the one that won, and the retry must read it
// rather than lose certification to it again (TestGalera/CausalRetry). First attempts
// do not wait.
//
// What that costs: one more statement per fenced write, and the write holds the row
// exclusively to its commit, so on one node the fenced writes of a namespace — a
// leader's claims, recoveries and schedule fires, and the executors' starts, which
// carry their claim's fence — commit one at a time, and RenewLease waits for the one
// committing; through two nodes at once they conflict in certification and retry. The
// row is written last so that it is held for the commit alone, not the whole
// transaction. Draining tasks through node0 of a three-node cluster on one 2-core
// machine, each claimed, started and finished by fenced batches of 10
// (BenchmarkGaleraFence, the two ways in turn), the Galera fencing drained 0.83–0.87 of
// the shared lock's rate with one worker (1,830–2,010 tasks/s against 2,200–2,400) and
// 0.78–0.86 with eight (1,890–2,080 against 2,330–2,460); with the row written first,
// and so held for the whole transaction, eight workers got 0.55–0.58. On a single
// server nothing of this happens: the fence stays the shared lock at the start and adds
// no statement (TestFenceStatements), and retries do not wait.
//
// Run ax with one writer node: point every process's DSN at the same node (or at a
// proxy that sends all connections to one node and fails over to the next), and use the
// others as synchronous standbys. Through several nodes at once the fencing holds and
// no two writes of one row both commit — every write-set is certified — but every submit
// increments the one 'seq' counter row and every fenced write the ax_leader row, so
// writes of two nodes abort each other in certification and are retried (six attempts,
// as deadlocks are), an unfenced claim decides a name's concurrency limit by rows it
// locks and does not write (fenced claims conflict on ax_leader), and reads through one
// node may miss a commit just made through another unless the server sets
// wsrep_sync_wait; the store requires none of that. GET_LOCK, which serialises
// migrations, is a node's own: processes started through different nodes at once may
// migrate side by side, and one of them may fail with "duplicate column" (start it
// again). Delivery stays at least once, as everywhere: a node that dies after
// certifying a commit and before answering leaves the client not knowing whether the
// write took effect, and a claim then unknown is recovered as any lost claim.
//
// A node that loses quorum (partitioned from the majority, or the last of its
// component) refuses every statement but SET and SHOW with ERROR 1047 until it joins a
// primary component again; so does a node still joining. The refusal comes before the
// statement runs, BEGIN and COMMIT included, so the store tries the transaction again,
// as a deadlock, on a new connection: the one refused is closed, and so are the idle
// connections of a pool Open made, which reach the same node. Through a proxy that has
// passed to another node (deploy/galera's HAProxy, which checks that a node is Synced
// in a primary component) the next connections reach a node that serves them
// (TestGalera/NotReady); the proxy's check takes a second or two to pass, so the calls
// made meanwhile fail with the error, and the scheduler tries them again.
//
// DESIGN.md, beside this file, has the design notes: tables, indexes, and how each
// operation uses them.
package mysql
