// Package postgres is ax's PostgreSQL store (pgx v5): the store for several replicas
// of a service sharing one database. It implements store.Store (several services on
// one schema, and the node registry, included), store.Transactor (transactional
// submit: Bind, InTx), store.Notifier (LISTEN/NOTIFY wake-ups) and store.Marker (a
// scheduler's own inserts wake no refill of its own: Marked). It needs PostgreSQL
// 13 or later and is tested on 15, directly and through PgBouncer 1.18 in transaction
// mode (see Behind a connection pooler).
//
//	st, err := postgres.Open(ctx, "postgres://ax@db/orders?search_path=ax")
//	// or, on a pool the application owns (Close leaves it open):
//	st, err := postgres.New(pool)
//
// # Schema
//
// Everything lives in the connection's current schema (the first existing schema of
// search_path), or WithPooler's; no statement names a schema, so one database can
// hold several isolated ax installations. The schema is versioned and embedded
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
// # Behind a connection pooler
//
// Behind PgBouncer in transaction mode (pool_mode = transaction), consecutive
// transactions of one connection may run on different server sessions, and no
// session state outlives a transaction: not a search_path given at connection
// start, not a named prepared statement, not a LISTEN. Open the store with
// WithPooler, naming its schema, and give Listen a direct connection with
// WithListenDSN:
//
//	st, err := postgres.Open(ctx, "postgres://ax@pgbouncer:6432/orders",
//		postgres.WithPooler("ax"), postgres.WithListenDSN("postgres://ax@db:5432/orders"))
//
// WithPooler sets search_path to the schema in each transaction: in the statement
// that sets up the store's own, in BEGIN for the others, and, for a statement run
// outside a transaction, in a statement sent with it in one pipelined batch, which
// the server runs as one implicit transaction. None costs a round trip. Open runs
// statements in pgx's exec mode, which prepares no named statement (PgBouncer 1.18
// keeps none); New refuses a pool whose default_query_exec_mode is cache_statement,
// cache_describe or describe_exec. Migrations, COPY, the advisory locks (all
// transaction-level) and NOTIFY work as on a direct connection: NOTIFY is sent by
// the transaction, and PostgreSQL delivers it on commit to every session that
// LISTENs. Bind puts the schema first on the caller's transaction's search_path,
// for the rest of that transaction.
//
// WithListenDSN must reach PostgreSQL directly, not through the pooler. Without it,
// Listen behind a pooler listens to nothing: the scheduler's periodic refill, which
// it runs with or without signals, then finds other replicas' submits, up to one
// refill interval later instead of at once.
//
// The pgbouncer.ini settings that matter:
//
//	pool_mode = transaction
//	ignore_startup_parameters = extra_float_digits,search_path
//	default_pool_size = …
//
// The second is needed only if DSNs carry those parameters: PgBouncer refuses a
// connection that sends one it does not know. The pool must be larger than the
// transactions of InTx open at once across every process (a store allows half its
// pool's connections): fn may read through a second connection while its
// transaction holds one. The store needs no server_reset_query. SchemaStatus and the
// ax command take no options: give them a DSN straight to the server.
//
// What is lost is the server's plan cache: without named statements, every
// statement is parsed and planned at every call, and results come back as text.
// Measured on 2 busy cores (BenchmarkGet, BenchmarkLifecycle; medians of 5), straight
// to the server, with WithPooler on the same direct connection, and through
// PgBouncer 1.18: a Get took 0.06, 0.23 and 0.31 ms; one task through Insert, Claim,
// Start and Finish 1.6, 4.0 and 4.4 ms; batches of 200 ran at 11,900, 9,700 and
// 9,100 tasks/s. Exec mode alone, without WithPooler, costs about the same: the
// statement that sets search_path adds next to nothing.
//
// # When the server fails over
//
// Behind HAProxy or a multi-host DSN with target_session_attrs=read-write (the
// repository's deploy/patroni has a tested Patroni cluster), a failover reaches the
// store as errors of the connection, and the store answers each by what it tells of
// the write that met it:
//   - Nothing began: a failed connect, a server starting up (57P03), a read-only one
//     (25006: a standby, or a primary being demoted, whose connections the pool then
//     drops), a deadlock or a serialization failure. The write runs again, up to 5
//     attempts with a growing, jittered backoff, on connections routed anew.
//   - The outcome is unknown: the connection ended once the transaction was sent (an
//     I/O error, class 08, 57P01 or 57P02 — the server shut down or terminated the
//     session; the pool then drops its connections, which most likely lead to the
//     same server). The error says "outcome unknown" and is returned, not retried: the
//     scheduler resolves it through the store's contract (every write can be repeated
//     through its conditions), and a task read back after one runs only once a write
//     confirms it — a read may come from a demoted primary that still holds a commit
//     the cluster never had.
//
// A COMMIT is never cancelled half-way. Every transaction is sent as one pipelined
// batch, COMMIT included, so the server may be running the COMMIT — waiting for its
// synchronous standby's acknowledgement — when the deadline fires; pgx would then
// close the connection and send a cancel request, which ends that wait with the
// commit kept locally and perhaps never replicated, and the caller could not tell.
// Instead a batch that commits runs with the grace (WithCommitGrace, 5 s by default)
// more than its caller's deadline (without one, none), and a server silent past that
// has its connection closed without a cancel request: the call's error says the
// outcome is unknown, and the server decides it — the commit becomes visible once a
// standby has it, or never, if the primary is demoted first. A store call that
// commits can therefore take the grace longer than its context allows
// (Config.StoreTimeout included). Open's pool is built so; a pool for New gets it
// from PoolConfig (with another pool, pgx's cancel request goes out). Leave the
// server's client_connection_check_interval at 0, its default: a backend that checks
// for a closed client ends the wait and keeps the commit too.
//
// Every table is logged (none is UNLOGGED), so the fence's ax_leader row and the
// tasks it guards are replicated with the commits that wrote them.
//
// DESIGN.md, beside this file, has the design notes: tables, indexes and plans, and how
// each operation uses them.
package postgres
