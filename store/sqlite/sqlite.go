// Package sqlite is ax's embedded store: one SQLite file, pure Go (modernc.org/sqlite),
// no service to run. It is the default for `ax demo`, examples and single-process
// services.
//
//	st, err := sqlite.Open("/var/lib/orders/ax.db") // a plain file path; created if missing
//	defer st.Close()
//
// # How it uses SQLite
//
// SQLite has one writer at a time, even in WAL mode, and a deferred transaction that
// read and then tries to write fails with SQLITE_BUSY at once whatever busy_timeout
// says. So the store keeps two pools: a single writer connection whose transactions
// start IMMEDIATE (they take the write lock up front and queue on busy_timeout), and a
// pool of read-only connections for queries. The file runs in WAL mode with
// synchronous=NORMAL: a committed transaction survives a crash of the process; a power
// loss may lose the last transactions before the WAL is checkpointed. The checkpoints
// run in the background, every 250 ms on a read connection, never inside a commit.
// Never put the file on a network filesystem.
//
// The schema is versioned and embedded (migrations/*.sql); Open applies what is missing
// inside one IMMEDIATE transaction, so several processes opening the same file at once
// migrate it exactly once. A file migrated by a newer ax is refused with
// store.ErrSchemaVersion.
//
// DESIGN.md, beside this file, has the design notes: tables, indexes and plans, and how
// each operation uses them.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/axsched/ax/internal/clock"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is the SQLite implementation of store.Store. It is safe for concurrent use,
// and several processes may open the same file.
//
// A Store is the view of one namespace (see InNamespace): the store Open returns is
// store.DefaultNamespace's, and every view of it shares its connections, its prepared
// statements and its closed state.
type Store struct {
	*conns        // shared by every view
	ns     string // the view's namespace
}

// conns is what the views of one opened store share.
type conns struct {
	w      *sql.DB // one connection; every transaction is IMMEDIATE
	r      *sql.DB // read-only pool
	closed atomic.Bool
	stmts  map[*batchStmt][]*sql.Stmt // prepared on w, by size bucket
	file   string                     // the main database's file, as SQLite names it: a caller's transaction must be on it

	stopCheckpoints context.CancelFunc // called by Close
	checkpointsDone chan struct{}      // closed when the checkpointer has ended
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database file at path, migrates its schema and
// returns the store. The caller must Close it.
func Open(path string) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("ax: sqlite: open: empty path: %w", store.ErrInvalid)
	}
	if strings.HasPrefix(path, "file:") || strings.Contains(path, "?") {
		return nil, fmt.Errorf("ax: sqlite: open %q: give a plain file path: %w", path, store.ErrInvalid)
	}
	w, err := openWriter(path)
	if err != nil {
		return nil, err
	}
	s := &Store{conns: &conns{w: w}, ns: store.DefaultNamespace}
	if err := s.migrateWhileBusy(context.Background()); err != nil {
		w.Close()
		return nil, err
	}
	if err := s.prepareBatches(context.Background()); err != nil {
		w.Close()
		return nil, err
	}
	if err := w.QueryRow(mainFileSQL).Scan(&s.file); err != nil {
		w.Close()
		return nil, fmt.Errorf("ax: sqlite: open %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", "file:"+url.PathEscape(path)+"?"+pragmas+"&_pragma=query_only(1)")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("ax: sqlite: open %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	s.r = r
	var ctx context.Context
	ctx, s.stopCheckpoints = context.WithCancel(context.Background())
	s.checkpointsDone = make(chan struct{})
	go func() {
		defer close(s.checkpointsDone)
		clock.Every(ctx, checkpointInterval, s.checkpoint)
	}()
	return s, nil
}

// checkpointInterval is how often the write-ahead log is copied into the database
// file, in the background.
const checkpointInterval = 250 * time.Millisecond

// checkpoint copies the write-ahead log into the database file, on a read connection,
// without waiting for readers or the writer (PASSIVE); Open runs it every
// checkpointInterval until Close. SQLite would otherwise checkpoint inside the commit
// that takes the log past 1,000 pages, on the one writer connection: every claim and
// result behind that commit waited for the copy and its fsync (a p99 start lateness of
// 20-25 ms against 12 ms without, ax bench precision). The writer's automatic
// checkpoints are off (wal_autocheckpoint(0)); the log is reused from its start once a
// checkpoint has copied all of it. An error (the file busy, a reader in the way) is
// left to the next one.
func (s *Store) checkpoint() {
	s.r.Exec("PRAGMA wal_checkpoint(PASSIVE)")
}

// pragmas are the connection settings of both pools (see the package doc).
const pragmas = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(OFF)"

// openWriter opens the single writer connection, whose transactions start IMMEDIATE.
func openWriter(path string) (*sql.DB, error) {
	w, err := sql.Open("sqlite", "file:"+url.PathEscape(path)+"?"+pragmas+"&_pragma=wal_autocheckpoint(0)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("ax: sqlite: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	return w, nil
}

// InNamespace returns the view of namespace ns: a *Store that reads and writes only
// ns's tasks, schedules and nodes, on the same connections (see store.Store). It
// costs no round trip. Closing any view closes them all.
func (s *Store) InNamespace(ns string) (store.Store, error) {
	if err := store.CheckNamespace(ns); err != nil {
		return nil, fmt.Errorf("ax: sqlite: in namespace: %w", err)
	}
	return &Store{conns: s.conns, ns: ns}, nil
}

// Close closes the database, for every view of it. Calls after Close, through any
// view, return store.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return fmt.Errorf("ax: sqlite: close: %w", store.ErrClosed)
	}
	s.stopCheckpoints()
	<-s.checkpointsDone
	return errors.Join(s.w.Close(), s.r.Close())
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

// migrateWhileBusy migrates the file to SchemaVersion, again while SQLite answers
// SQLITE_BUSY, for at most openBusyFor. Processes opening a new file at once race to
// set it up (its switch to WAL mode among them), and SQLite may refuse the losers at
// once instead of waiting busy_timeout; a migration that did not commit is simply
// tried again, and one that did is a no-op the next time.
func (s *Store) migrateWhileBusy(ctx context.Context) error {
	deadline := time.Now().Add(openBusyFor)
	for pause := time.Millisecond; ; pause = min(2*pause, 100*time.Millisecond) {
		err := s.migrate(ctx, SchemaVersion())
		var se *sqlite.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		time.Sleep(pause)
	}
}

// openBusyFor bounds how long Open tries again a file SQLite answers SQLITE_BUSY for:
// busy_timeout's 10 s.
const openBusyFor = 10 * time.Second

// migrate applies the migrations the file lacks, up to version to, in one IMMEDIATE
// transaction.
func (s *Store) migrate(ctx context.Context, to int) error {
	return s.write(ctx, "migrate", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS ax_schema_migrations (
			version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
			return err
		}
		var have int
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM ax_schema_migrations`).Scan(&have); err != nil {
			return err
		}
		want, names := latestMigration()
		if have > want {
			return fmt.Errorf("file is at schema version %d, this ax knows up to %d: %w", have, want, store.ErrSchemaVersion)
		}
		for v := have + 1; v <= min(to, want); v++ {
			body, err := migrations.ReadFile(names[v-1])
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, string(body)); err != nil {
				return fmt.Errorf("migration %s: %w", names[v-1], err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO ax_schema_migrations (version, applied_at) VALUES (?, ?)`, v, micros(time.Now())); err != nil {
				return err
			}
		}
		return nil
	})
}

// Now returns the current time: for an embedded database, this process's clock.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	if s.closed.Load() {
		return time.Time{}, fmt.Errorf("ax: sqlite: now: %w", store.ErrClosed)
	}
	return now(), nil
}

func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// write runs f in one IMMEDIATE transaction on the writer connection.
func (s *Store) write(ctx context.Context, op string, f func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap(op, err)
	}
	defer tx.Rollback() // a no-op after the commit; on a panic in f, the writer is freed
	if err := f(tx); err != nil {
		return s.wrap(op, err)
	}
	if err := tx.Commit(); err != nil {
		return s.wrap(op, err)
	}
	return nil
}

func (s *Store) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrConnDone) || strings.Contains(err.Error(), "sql: database is closed") {
		err = fmt.Errorf("%w (%v)", store.ErrClosed, err)
	}
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT {
		err = fmt.Errorf("%w: %v", store.ErrInvalid, err)
	}
	return fmt.Errorf("ax: sqlite: %s: %w", op, err)
}

// nextSeq reserves n sequence numbers and returns the first. Reserving none, as a
// Finish without retries does, touches nothing.
func nextSeq(ctx context.Context, tx *sql.Tx, n int) (int64, error) {
	if n == 0 {
		return 0, nil
	}
	var last int64
	err := tx.QueryRowContext(ctx, `UPDATE ax_counters SET value = value + ? WHERE name = 'seq' RETURNING value`, n).Scan(&last)
	return last - int64(n) + 1, err
}

const taskColumns = `id, name, key, payload, status, due_at, attempt, max_retry, dispatch_retries,
	execution_id, owner_service, last_error, timeout_us, backoff,
	created_at, updated_at, dispatched_at, started_at, heartbeat_at, finished_at, triggered_at,
	task_key, overlap, payload IS NOT NULL, key_hold, key_until, key_slot <> 0, snoozes, cancelled_by, cancel_requested_at, ifnull(trace, '')`

type scanner interface{ Scan(dest ...any) error }

func scanTask(row scanner) (*store.Task, error) {
	var r taskRow
	t := new(store.Task)
	if err := r.scan(row, t); err != nil {
		return nil, err
	}
	return t, nil
}

// taskRow is a row of taskColumns being read: driverkit.TaskRow and the columns
// this driver converts itself.
type taskRow struct {
	driverkit.TaskRow
	overlap, hold                           string
	due, created, updated                   int64
	dispatched, started, hb, fin, triggered sql.NullInt64
	until, cancelAsked                      sql.NullInt64
	dest                                    []any
}

// scan reads a row of taskColumns into t.
func (r *taskRow) scan(row scanner, t *store.Task) error {
	if r.dest == nil {
		r.dest = []any{&r.Task.ID, &r.Task.Name, &r.Task.Key, &r.Payload, &r.Status, &r.due, &r.Task.Attempt, &r.Task.MaxRetry,
			&r.Task.DispatchRetries, &r.ExecID, &r.Task.OwnerService, &r.Task.LastError, &r.Timeout, &r.Backoff,
			&r.created, &r.updated, &r.dispatched, &r.started, &r.hb, &r.fin, &r.triggered, &r.Task.TaskKey, &r.overlap, &r.HasPayload,
			&r.hold, &r.until, &r.Task.Superseded, &r.Task.Snoozes, &r.Task.CancelledBy, &r.cancelAsked, &r.Task.Trace}
	}
	if err := row.Scan(r.dest...); err != nil {
		return err
	}
	if err := r.Fill(t); err != nil {
		return err
	}
	t.Overlap = store.OverlapPolicy(r.overlap)
	t.DueAt = fromMicros(r.due)
	t.CreatedAt, t.UpdatedAt = fromMicros(r.created), fromMicros(r.updated)
	t.DispatchedAt, t.StartedAt = fromNull(r.dispatched), fromNull(r.started)
	t.HeartbeatAt, t.FinishedAt, t.TriggeredAt = fromNull(r.hb), fromNull(r.fin), fromNull(r.triggered)
	t.KeyHold, t.KeyUntil = store.KeyHold(r.hold), fromNull(r.until)
	t.CancelRequestedAt = fromNull(r.cancelAsked)
	return nil
}

const executionColumns = `id, task_id, attempt, node, status, due_at, claimed_at, started_at, heartbeat_at, finished_at, error`

func scanExecution(row scanner) (*store.Execution, error) {
	var (
		e            store.Execution
		status       string
		started      int64
		due, claimed sql.NullInt64
		hb, fin      sql.NullInt64
	)
	if err := row.Scan(&e.ID, &e.TaskID, &e.Attempt, &e.Node, &status, &due, &claimed, &started, &hb, &fin, &e.Error); err != nil {
		return nil, err
	}
	e.Status = store.Status(status)
	e.DueAt, e.ClaimedAt = fromNull(due), fromNull(claimed)
	e.StartedAt, e.HeartbeatAt, e.FinishedAt = fromMicros(started), fromNull(hb), fromNull(fin)
	return &e, nil
}

func micros(t time.Time) int64 { return t.UnixMicro() }

// traceArg is a trace context as it is bound: NULL when there is none (see
// migrations/0012_trace.sql).
func traceArg(trace string) any {
	if trace == "" {
		return nil
	}
	return trace
}

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

func fromNull(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicros(v.Int64)
}

// SchemaStatus reports the schema version of the file at path (0: not migrated) and
// the latest this package knows, without changing anything.
func SchemaStatus(path string) (have, want int, err error) {
	want = SchemaVersion()
	if _, err := os.Stat(path); err != nil {
		return 0, want, fmt.Errorf("ax: sqlite: schema status: %w", err)
	}
	db, err := sql.Open("sqlite", "file:"+url.PathEscape(path)+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return 0, want, fmt.Errorf("ax: sqlite: schema status: %w", err)
	}
	defer db.Close()
	var exists int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'ax_schema_migrations'`).Scan(&exists); err != nil {
		return 0, want, fmt.Errorf("ax: sqlite: schema status: %w", err)
	}
	if exists == 0 {
		return 0, want, nil
	}
	if err := db.QueryRow(`SELECT COALESCE(MAX(version), 0) FROM ax_schema_migrations`).Scan(&have); err != nil {
		return 0, want, fmt.Errorf("ax: sqlite: schema status: %w", err)
	}
	return have, want, nil
}
