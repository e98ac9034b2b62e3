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
// DESIGN.md, beside this file, has the design notes: tables, indexes, and how each
// operation uses them.
package mysql
