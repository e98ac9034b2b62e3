// Package postgres is ax's PostgreSQL store (pgx v5): the store for several replicas
// of a service sharing one database. It implements store.Store (several services on
// one schema, and the node registry, included), store.Transactor (transactional
// submit: Bind, InTx) and store.Notifier (LISTEN/NOTIFY wake-ups). It needs PostgreSQL
// 13 or later and is tested on 15.
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
// (migrations/0001_init.sql, 0002_task_keys_schedules.sql, … 0022_key_rates.sql);
// New applies what is missing in one transaction that first takes
// pg_advisory_xact_lock on a key derived from the schema name, so several processes
// starting at once migrate it exactly once, and running it again is a no-op. A
// schema whose ax_schema_migrations records a version newer than this package knows
// is refused with store.ErrSchemaVersion. A schema that is up to date is opened
// without any DDL, so a role granted only SELECT, INSERT, UPDATE and DELETE on its
// tables and USAGE on ax_seq may run ax on a schema its owner migrated (ax migrate),
// bulk inserts by COPY included (copy.go).
//
// DESIGN.md, beside this file, has the design notes: tables, indexes and plans, and how
// each operation uses them.
package postgres
