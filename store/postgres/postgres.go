package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
	"github.com/axsched/ax/store/internal/taskquery"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is the PostgreSQL implementation of store.Store, store.Transactor and
// store.Notifier. It is safe for concurrent use, and several processes may share the
// schema.
//
// A Store is the view of one namespace (store.DefaultNamespace as opened; see
// InNamespace) of a schema's connections and state, which all views of one Open or
// New share: a view is a pointer to that shared state and a namespace.
type Store struct {
	*shared
	ns     string      // the view's namespace: every task, schedule and node it reads or writes
	limits *limitCache // what the view knows of its namespace's concurrency limits (notify.go)
	// marked is the payload of Insert's signal: "" unless the view is Marked's
	// (notify.go).
	marked string
}

// shared is what every view of one store shares: the pool, the schema's derived
// names and lock keys, and the closed flag (closing one view closes all).
type shared struct {
	pool     *conns // the pool, as the store's statements reach it (pooler.go)
	owned    bool   // Open created the pool: Close closes it
	schema   string // the schema ax lives in (current_schema() when New ran, or WithPooler's)
	database string // current_database() when New ran
	channel  string // the NOTIFY channel: "ax_" + schema
	lockKey  int32  // classid of the refill watermark advisory locks: a hash of schema
	keyLock  int32  // classid of the task key advisory locks: another hash of schema, negative
	// copyThreshold is the smallest Insert that tries COPY (copy.go).
	copyThreshold int
	// plans are the statements that set up a transaction of tx, genericTx and execTx
	// (customPlans, genericPlans, executionPlans), each also setting search_path
	// behind a pooler (WithPooler).
	plans struct{ custom, generic, execution string }
	// listen is WithListenDSN's configuration: nil to LISTEN on a connection of the
	// pool's, or behind a pooler not at all.
	listen *pgx.ConnConfig
	// commitGrace is how long past its caller's deadline a COMMIT is waited for
	// (WithCommitGrace, commit.go).
	commitGrace time.Duration
	// query is how Tasks writes its statements: with a key prefix as a range of the
	// business key's index when its collation orders keys by code point (query.go).
	query taskquery.Dialect

	// inTx bounds the transactions of InTx open at once to half the pool, so that a
	// call in one that reads through the pool (ax reads a schedule, the clock) always
	// finds a connection: without it, as many InTx calls as connections would each
	// wait for a second one, forever.
	inTx chan struct{}

	mu        sync.Mutex // guards closed transitions against new listeners
	closed    atomic.Bool
	done      context.Context // cancelled by Close
	cancel    context.CancelFunc
	listeners sync.WaitGroup
}

var (
	_ store.Store      = (*Store)(nil)
	_ store.Transactor = (*Store)(nil)
	_ store.Notifier   = (*Store)(nil)
)

// InNamespace returns the view of namespace ns: a *Store on the same connections,
// whose Close closes them for every view. See [store.Store].
func (s *Store) InNamespace(ns string) (store.Store, error) {
	if err := store.CheckNamespace(ns); err != nil {
		return nil, fmt.Errorf("ax: postgres: in namespace: %w", err)
	}
	return &Store{shared: s.shared, ns: ns, limits: &limitCache{}}, nil
}

// Open connects to the database at dsn (a URL or keyword/value string, as pgx
// accepts), checks that it answers, migrates the schema and returns the store. The
// pool it creates is closed by Close. opts are for a connection pooler (WithPooler,
// WithListenDSN); a bad one is store.ErrInvalid.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	c, err := configure("open", nil, opts)
	if err != nil {
		return nil, err
	}
	cfg, err := poolConfig("open", dsn)
	if err != nil {
		return nil, err
	}
	if c.pooler && !poolerSafe(cfg.ConnConfig.DefaultQueryExecMode) {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("ax: postgres: open: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ax: postgres: open: cannot connect to %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	s, err := newStore(ctx, pool, c)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

// New migrates the schema reached through pool (its current schema, that is the first
// existing schema of search_path, or WithPooler's) and returns the store. Several
// processes may call it at once: the migrations run under a transaction-level
// advisory lock derived from the schema name, so they are applied exactly once. A
// schema migrated by a newer ax is refused with store.ErrSchemaVersion. With
// WithPooler, a pool whose default_query_exec_mode prepares or describes statements
// (cache_statement, cache_describe, describe_exec) is store.ErrInvalid. The caller
// owns pool: Close does not close it. Build pool's configuration with PoolConfig, so
// that a COMMIT cut past its grace is closed without pgx's cancel request (see
// WithCommitGrace).
func New(pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("ax: postgres: new: nil pool: %w", store.ErrInvalid)
	}
	c, err := configure("new", pool, opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), migrateTimeout)
	defer cancel()
	return newStore(ctx, pool, c)
}

// migrateTimeout bounds New's migration, waiting for another process's included.
const migrateTimeout = 2 * time.Minute

func newStore(ctx context.Context, pool *pgxpool.Pool, c *config) (*Store, error) {
	s := &Store{limits: &limitCache{}, shared: &shared{pool: &conns{pool: pool}, copyThreshold: copyThreshold,
		inTx: make(chan struct{}, max(1, pool.Config().MaxConns/2)), listen: c.listen,
		commitGrace: c.commitGrace}, ns: store.DefaultNamespace}
	s.plans.custom, s.plans.generic, s.plans.execution = customPlans, genericPlans, executionPlans
	if c.pooler {
		s.schema = c.schema
		s.pool.setPath = setPathSQL(c.schema)
		path := ", " + strings.TrimPrefix(s.pool.setPath, "SELECT ")
		s.plans.custom += path
		s.plans.generic += path
		s.plans.execution += path
	}
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	s.channel = channelName(s.schema)
	h := fnv.New32a()
	h.Write([]byte("ax refill " + s.schema))
	s.lockKey = int32(h.Sum32() & 0x7fffffff)
	s.keyLock = keyLockClass(s.schema)
	if err := s.pool.QueryRow(ctx, `SELECT current_database()`).Scan(&s.database); err != nil {
		return nil, s.wrap("new", err)
	}
	s.query = dialect(true) // ax_tasks.key is COLLATE "C" (schema v10)
	s.done, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// channelName is the NOTIFY channel of a schema. PostgreSQL truncates identifiers to
// 63 bytes, so a long schema name is replaced by its hash.
func channelName(schema string) string {
	c := "ax_" + schema
	if len(c) <= 63 {
		return c
	}
	h := fnv.New64a()
	h.Write([]byte(schema))
	return "ax_" + strconv.FormatUint(h.Sum64(), 16)
}

// Close closes the store, every view of it included: running Listen calls return,
// and the pool is closed when Open created it. Calls after Close, on any view, return
// store.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed.Swap(true) {
		s.mu.Unlock()
		return fmt.Errorf("ax: postgres: close: %w", store.ErrClosed)
	}
	s.mu.Unlock()
	s.cancel()
	s.listeners.Wait()
	if s.owned {
		s.pool.Close()
	}
	return nil
}

// SchemaVersion is the highest migration this package knows.
func SchemaVersion() int {
	n, _ := latestMigration()
	return n
}

func latestMigration() (int, []string) {
	names, _ := fs.Glob(migrations, "migrations/*.sql")
	sort.Strings(names)
	return len(names), names
}

// migrateLockClass is the advisory lock class (first key) that serializes
// migrations of one schema; the second key is a hash of the schema name.
const migrateLockClass = 0x61780001 // "ax" 1

func (s *Store) migrate(ctx context.Context) error {
	tx, end, err := s.begin(ctx)
	if err != nil {
		return s.wrap("migrate", err)
	}
	defer end()
	var schema *string
	if err := tx.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return s.wrap("migrate", err)
	}
	switch {
	case schema == nil && s.pool.setPath != "":
		return fmt.Errorf("ax: postgres: migrate: WithPooler: schema %q does not exist: %w", s.schema, store.ErrInvalid)
	case schema == nil:
		return fmt.Errorf("ax: postgres: migrate: no schema of search_path exists: %w", store.ErrInvalid)
	}
	s.schema = *schema
	h := fnv.New32a()
	h.Write([]byte(s.schema))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1::int4, $2::int4)`, int32(migrateLockClass), int32(h.Sum32())); err != nil {
		return s.wrap("migrate: lock", err)
	}
	// Created only if missing (under the lock): CREATE … IF NOT EXISTS would need the
	// CREATE privilege on the schema even when the table exists, and a role granted
	// only what ax's statements need may open a schema its owner migrated.
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('ax_schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return s.wrap("migrate", err)
	}
	if !exists {
		if _, err := tx.Exec(ctx, `CREATE TABLE ax_schema_migrations (
			version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
			return s.wrap("migrate", err)
		}
	}
	var have int
	if err := tx.QueryRow(ctx, `SELECT COALESCE(max(version), 0) FROM ax_schema_migrations`).Scan(&have); err != nil {
		return s.wrap("migrate", err)
	}
	want, names := latestMigration()
	if have > want {
		return fmt.Errorf("ax: postgres: migrate: schema %q is at version %d, this ax knows up to %d: %w", s.schema, have, want, store.ErrSchemaVersion)
	}
	for v := have + 1; v <= want; v++ {
		body, err := migrations.ReadFile(names[v-1])
		if err != nil {
			return fmt.Errorf("ax: postgres: migrate: %w", err)
		}
		if _, err := tx.Exec(ctx, string(body)); err != nil { // no arguments: simple protocol, several statements
			return s.wrap("migrate: "+names[v-1], err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO ax_schema_migrations (version) VALUES ($1)`, v); err != nil {
			return s.wrap("migrate", err)
		}
	}
	if err := s.commitTx(ctx, tx); err != nil {
		return s.wrap("migrate", err)
	}
	return nil
}

// Now returns the database's clock_timestamp(): the real time, not the start of a
// transaction.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	if err := s.check("now"); err != nil {
		return time.Time{}, err
	}
	var now time.Time
	if err := s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		return time.Time{}, s.wrap("now", err)
	}
	return now.UTC(), nil
}

func (s *Store) check(op string) error {
	if s.closed.Load() {
		return fmt.Errorf("ax: postgres: %s: %w", op, store.ErrClosed)
	}
	return nil
}

// maxAttempts bounds how often a transaction is retried after a failure that wrote
// nothing.
const maxAttempts = 5

// retryable reports whether an attempt that failed with err wrote nothing, for sure,
// and may simply run again: a deadlock (40P01) or a serialization failure (40001)
// rolled its transaction back; a failed connect (the server restarting, or not
// reachable yet in a failover), a server that takes no connection yet (57P03) or a
// read-only one (25006: a standby, or a primary being demoted) never began it; and pgx
// marks what it knows it did not send (pgconn.SafeToRetry). A connection lost during
// the attempt (08xxx, 57P01, an EOF) leaves its outcome unknown: that is the caller's
// to resolve, by the store's contract (every write is safe to repeat through its
// conditions, and a repeat may answer differently), not retried here.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40P01", "40001", "57P03", "25006":
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	return errors.As(err, &ce) || pgconn.SafeToRetry(err)
}

// unknownOutcome reports whether a transaction that failed with err may have committed
// all the same: its connection ended, or was cut past commitGrace, once it was sent — an
// I/O error, a timeout, the server shutting down or terminating the session (57P01,
// 57P02), a connection failure (class 08) — rather than the server refusing it.
func unknownOutcome(err error) bool {
	if retryable(err) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02"
	}
	var ne net.Error
	return pgconn.Timeout(err) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// serverGone reports whether err says the connection's server is gone or going:
// class 08 (a connection failure), 57P01 and 57P02 (the session terminated, the
// server shutting down), 57P03 (not accepting connections yet), or the connection
// closed under the transaction. The pool's other connections most likely lead to the
// same server, and are dropped (see retry).
func serverGone(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P0")
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// readOnly reports whether err is a write refused by a read-only server (25006).
func readOnly(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "25006"
}

// backoff sleeps before retry attempt n (1, 2, …): jittered, growing from a few ms.
func backoff(ctx context.Context, n int) error {
	d := time.Duration(rand.Int64N(int64(5*time.Millisecond)<<n)) + time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// tx runs one transaction as one pipelined batch: BEGIN (READ COMMITTED, whatever
// the server's default), the statements queue adds, COMMIT — one round trip when the
// statements are prepared already. read consumes the statements' results in order
// and must reset whatever it fills, because on a deadlock or a serialization failure
// the whole transaction runs again. A statement that fails rolls back all of them.
func (s *Store) tx(ctx context.Context, op string, queue func(b *pgx.Batch), read func(br pgx.BatchResults) error) error {
	return s.retry(ctx, op, func() error { return s.send(ctx, s.pool, s.plans.custom, true, queue, read) })
}

// genericTx is tx with every statement run on its generic plan, which PostgreSQL
// caches per connection: for statements whose plan cannot depend on the arrays they
// are given or on the table's size (see genericPlans).
func (s *Store) genericTx(ctx context.Context, op string, queue func(b *pgx.Batch), read func(br pgx.BatchResults) error) error {
	return s.retry(ctx, op, func() error { return s.send(ctx, s.pool, s.plans.generic, true, queue, read) })
}

// execTx is tx for the execution path's statements (claim.go, execution.go), run on
// their generic plans with only hash joins and index scans allowed (see executionPlans).
func (s *Store) execTx(ctx context.Context, op string, queue func(b *pgx.Batch), read func(br pgx.BatchResults) error) error {
	return s.retry(ctx, op, func() error { return s.send(ctx, s.pool, s.plans.execution, true, queue, read) })
}

// How a transaction's statements are planned: the statement that sets it up, after
// BEGIN. Every one turns JIT compilation off: a plan with a disabled node carries its
// huge cost, which would have each call compile its expressions (1.5 s for a claim
// of 200 tasks).
const (
	// customPlans plans every statement for its actual arguments. The generic plan
	// PostgreSQL may switch to after five executions is built once per connection
	// and kept until the table's statistics change: for statements whose plan
	// depends on the table's size, one built while the table was empty can read the
	// whole primary key for every call once it holds 30,000 tasks.
	customPlans = `SELECT set_config('plan_cache_mode', 'force_custom_plan', true), set_config('jit', 'off', true)`
	// genericPlans runs every statement on its generic plan, with sequential scans
	// disabled for the plan: only for Insert, whose plan has no choice to make but
	// the unique index's probe for duplicates, and whose small inserts took longer
	// to plan than to run.
	genericPlans = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true),
	set_config('jit', 'off', true)`
	// executionPlans runs the execution path's statements on their generic plans
	// with sequential scans, nested loops and merge joins disabled. Each statement
	// names its rows by id twice: t.id = ANY($1), which the primary key serves
	// whatever the statistics say, and t.id = c.id, the join to the unnest()ed
	// input, which can then only be a hash join, linear in the batch. So the plan
	// has no choice that depends on the table's size or the arrays' length, and is
	// built once per connection instead of at every call (0.3 ms for a claim,
	// 0.2 ms for a Finish, whatever their size). Left free, a generic plan took each
	// array for ten rows and joined by nested loops that rescanned the input for
	// every row (the drain at half the speed). TestExecutionPathPlansOnStaleStatistics
	// checks the plans cached on an empty table, run on 30,000 tasks.
	executionPlans = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true),
	set_config('enable_nestloop', 'off', true), set_config('enable_mergejoin', 'off', true), set_config('jit', 'off', true)`
)

// retry runs once, and runs it again after a failure that wrote nothing for sure
// (retryable), up to maxAttempts times; the error is wrapped under op. A read-only
// server (25006) or one gone (serverGone) resets the pool first: its connections reach
// a standby, a primary being demoted or a server no more, and new ones are routed
// anew (HAProxy, target_session_attrs).
func (s *Store) retry(ctx context.Context, op string, once func() error) error {
	if err := s.check(op); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err := once()
		if err == nil {
			return nil
		}
		if readOnly(err) || serverGone(err) {
			s.pool.Reset()
		}
		if retryable(err) && attempt < maxAttempts {
			if berr := backoff(ctx, attempt); berr != nil {
				return s.wrap(op, berr)
			}
			continue
		}
		if unknownOutcome(err) {
			return s.wrap(op+": outcome unknown, the connection ended with the transaction sent (it may have committed)", err)
		}
		return s.wrap(op, err)
	}
}

// batchSender is a pool or one of its connections.
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// send sends one pipelined batch: unless plans is "" (the transaction is open
// already), first BEGIN and the plans statement (customPlans, genericPlans or
// executionPlans); then the statements queue adds; when commit, last COMMIT, on a
// connection of its own (acquired from to when to is the pool) under s.commit. read
// consumes the results of queue's statements.
func (s *Store) send(ctx context.Context, to batchSender, plans string, commit bool, queue func(b *pgx.Batch), read func(br pgx.BatchResults) error) error {
	begin := plans != ""
	b := &pgx.Batch{}
	if begin {
		b.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED`)
		b.Queue(plans)
	}
	queue(b)
	run := func(ctx context.Context, to batchSender) error {
		br := to.SendBatch(ctx, b)
		err := func() error {
			if begin {
				for range 2 { // BEGIN, the plans
					if _, err := br.Exec(); err != nil {
						return err
					}
				}
			}
			return read(br)
		}()
		if cerr := br.Close(); err == nil { // Close runs what read left, COMMIT included
			err = cerr
		}
		return err
	}
	if !commit {
		return run(ctx, to)
	}
	b.Queue(`COMMIT`)
	conn, ok := to.(*pgxpool.Conn)
	if !ok {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer c.Release()
		conn = c
	}
	return s.commit(ctx, conn.Conn().PgConn(), func(ctx context.Context) error { return run(ctx, conn) })
}

// round sends one pipelined batch of an interactive transaction (see steps) and
// reads its results; last adds the COMMIT.
type round func(last bool, queue func(b *pgx.Batch), read func(br pgx.BatchResults) error) error

// steps runs one READ COMMITTED transaction on one connection as several pipelined
// round trips, for writes whose later statements depend on what earlier ones
// returned. fn sends each batch through r: the first also opens the transaction
// (BEGIN and the plans statement, as tx does), the one marked last also commits it, so n rounds
// cost n round trips. If fn returns nil without a last round, steps commits. Like
// tx, the whole transaction runs again after a deadlock or a serialization failure,
// so fn must reset whatever it fills.
func (s *Store) steps(ctx context.Context, op string, fn func(r round) error) error {
	return s.retry(ctx, op, func() error { return s.stepsOnce(ctx, fn) })
}

func (s *Store) stepsOnce(ctx context.Context, fn func(r round) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release() // destroys the connection if it is still in a transaction
	open, ended := false, false
	r := func(last bool, queue func(b *pgx.Batch), read func(br pgx.BatchResults) error) error {
		if ended {
			return errors.New("transaction already committed")
		}
		plans := s.plans.custom
		if open {
			plans = ""
		}
		open, ended = true, last
		return s.send(ctx, conn, plans, last, queue, read)
	}
	err = fn(r)
	if err == nil && open && !ended {
		err = s.commit(ctx, conn.Conn().PgConn(), func(ctx context.Context) error {
			_, err := conn.Exec(ctx, `COMMIT`)
			return err
		})
	}
	if err != nil && conn.Conn().PgConn().TxStatus() != 'I' {
		// Failed, or left by fn: roll back now so that the connection can be reused
		// (if this fails too, Release closes it).
		conn.Exec(ctx, `ROLLBACK`)
	}
	return err
}

// wrap maps backend errors onto the store's sentinels and prefixes the operation.
func (s *Store) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, store.ErrClosed) || errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrSchemaVersion) {
		return fmt.Errorf("ax: postgres: %s: %w", op, err)
	}
	if s.closed.Load() || strings.Contains(err.Error(), "closed pool") || errors.Is(err, sql.ErrConnDone) || errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("ax: postgres: %s: %w (%v)", op, store.ErrClosed, err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == fencedCode: // raised by ax_fence: not retried, nothing was written
			return fmt.Errorf("ax: postgres: %s: %w", op, fencedError(pe))
		case pe.Code == "23505": // unique_violation
			return fmt.Errorf("ax: postgres: %s: %w (%v)", op, store.ErrDuplicate, err)
		case strings.HasPrefix(pe.Code, "22"), strings.HasPrefix(pe.Code, "23"): // data exception, integrity constraint
			return fmt.Errorf("ax: postgres: %s: %w (%v)", op, store.ErrInvalid, err)
		}
	}
	if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("ax: postgres: %s: %w (%v)", op, store.ErrNotFound, err)
	}
	return fmt.Errorf("ax: postgres: %s: %w", op, err)
}

// taskCols lists the columns scanTask reads, for a table aliased t.
const taskCols = `t.id, t.name, t.key, t.payload, t.status, t.due_at, t.attempt, t.max_retry, t.dispatch_retries,
	t.execution_id, t.owner_service, t.last_error, t.task_key, t.overlap, t.timeout_us, array_to_string(t.backoff_us, ','),
	t.created_at, t.updated_at, t.dispatched_at, t.started_at, t.heartbeat_at, t.finished_at, t.triggered_at,
	t.payload IS NOT NULL, t.key_hold, t.key_until, t.key_slot <> 0, t.snoozes, t.cancelled_by, t.cancel_requested_at, COALESCE(t.trace, '')`

type scanner interface{ Scan(dest ...any) error }

// scanTask reads one row of taskCols, after the extra leading destinations pre.
func scanTask(row scanner, pre ...any) (*store.Task, error) {
	var r taskRow
	t := new(store.Task)
	if err := r.scan(row, t, pre...); err != nil {
		return nil, err
	}
	return t, nil
}

// taskRow is a row of taskCols being read: driverkit.TaskRow and the columns this
// driver converts itself.
type taskRow struct {
	driverkit.TaskRow
	overlap, hold                           string
	due, created, updated                   time.Time
	dispatched, started, hb, fin, triggered sql.NullTime
	until, cancelAsked                      sql.NullTime
	dest                                    []any
}

// scan reads a row of taskCols into t, after the extra leading destinations pre: the
// same for every row a taskRow scans.
func (r *taskRow) scan(row scanner, t *store.Task, pre ...any) error {
	if r.dest == nil {
		r.dest = append(append(make([]any, 0, len(pre)+31), pre...), &r.Task.ID, &r.Task.Name, &r.Task.Key, &r.Payload, &r.Status, &r.due,
			&r.Task.Attempt, &r.Task.MaxRetry, &r.Task.DispatchRetries,
			&r.ExecID, &r.Task.OwnerService, &r.Task.LastError, &r.Task.TaskKey, &r.overlap, &r.Timeout, &r.Backoff,
			&r.created, &r.updated, &r.dispatched, &r.started, &r.hb, &r.fin, &r.triggered, &r.HasPayload, &r.hold, &r.until,
			&r.Task.Superseded, &r.Task.Snoozes, &r.Task.CancelledBy, &r.cancelAsked, &r.Task.Trace)
	}
	if err := row.Scan(r.dest...); err != nil {
		return err
	}
	if err := r.Fill(t); err != nil {
		return err
	}
	t.Overlap = store.OverlapPolicy(r.overlap)
	t.DueAt = r.due.UTC()
	t.CreatedAt, t.UpdatedAt = r.created.UTC(), r.updated.UTC()
	t.DispatchedAt, t.StartedAt = fromNull(r.dispatched), fromNull(r.started)
	t.HeartbeatAt, t.FinishedAt, t.TriggeredAt = fromNull(r.hb), fromNull(r.fin), fromNull(r.triggered)
	t.KeyHold, t.KeyUntil = store.KeyHold(r.hold), fromNull(r.until)
	t.CancelRequestedAt = fromNull(r.cancelAsked)
	return nil
}

// execCols are the columns scanExecution reads, of the execution x of the task t
// (the alias given): a record still RUNNING whose task is SUCCEEDED with its id is
// that success (see finishSQL), with the task's finish time.
func execCols(t string) string {
	succeeded := `x.status = 'RUNNING' AND ` + t + `.status = 'SUCCEEDED' AND ` + t + `.execution_id = x.id`
	return `x.id, x.task_id, x.attempt, x.node, CASE WHEN ` + succeeded + ` THEN 'SUCCEEDED' ELSE x.status END,
		x.due_at, x.claimed_at, x.started_at, x.heartbeat_at, CASE WHEN ` + succeeded + ` THEN ` + t + `.finished_at ELSE x.finished_at END, x.error`
}

func scanExecution(row scanner) (*store.Execution, error) {
	var (
		e            store.Execution
		status       string
		started      time.Time
		due, claimed sql.NullTime
		hb, fin      sql.NullTime
	)
	if err := row.Scan(&e.ID, &e.TaskID, &e.Attempt, &e.Node, &status, &due, &claimed, &started, &hb, &fin, &e.Error); err != nil {
		return nil, err
	}
	e.Status = store.Status(status)
	e.DueAt, e.ClaimedAt = fromNull(due), fromNull(claimed)
	e.StartedAt, e.HeartbeatAt, e.FinishedAt = started.UTC(), fromNull(hb), fromNull(fin)
	return &e, nil
}

func fromNull(v sql.NullTime) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return v.Time.UTC()
}

// formatBackoff renders a backoff as a bigint[] literal of microseconds.
func formatBackoff(b []time.Duration) string { return "{" + driverkit.FormatBackoff(b) + "}" }

// SchemaStatus reports the schema version in the DSN's current schema (0: not
// migrated) and the latest this package knows, without changing anything.
func SchemaStatus(ctx context.Context, dsn string) (have, want int, err error) {
	want = SchemaVersion()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, want, fmt.Errorf("ax: postgres: schema status: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('ax_schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return 0, want, fmt.Errorf("ax: postgres: schema status: %w", err)
	}
	if !exists {
		return 0, want, nil
	}
	if err := conn.QueryRow(ctx, `SELECT COALESCE(max(version), 0) FROM ax_schema_migrations`).Scan(&have); err != nil {
		return 0, want, fmt.Errorf("ax: postgres: schema status: %w", err)
	}
	return have, want, nil
}
