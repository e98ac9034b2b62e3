// Package sqlite is ax's embedded store: one SQLite file, pure Go (modernc.org/sqlite),
// no service to run. It is the default for `ax demo`, examples and single-process
// services.
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
// Times are stored as INTEGER microseconds since the Unix epoch, UTC. The database
// clock is this process's clock: Now is time.Now.
//
// The schema is versioned and embedded (migrations/*.sql); Open applies what is missing
// inside one IMMEDIATE transaction, so several processes opening the same file at once
// migrate it exactly once. A file migrated by a newer ax is refused with
// store.ErrSchemaVersion.
//
// Indexes (see migrations/0001_init.sql, rebuilt with the namespace first by
// 0004_namespaces.sql): the business key (namespace, name, key, key_slot) is unique,
// key_slot 0 for the task holding the key (since 0006_operations.sql: an insert that
// finds the key taken by a task that no longer holds it, store.KeyHold.Frees, moves
// that task to key_slot = id, Superseded, and inserts again in the same transaction;
// Lookup reads the key's newest row; Retry and Trigger refuse a superseded task); partial
// indexes on SCHEDULED rows make the window scan a range scan on (namespace, due_at,
// id) and the incremental refill a range scan on (namespace, seq); partial indexes on
// RUNNING and DISPATCHING rows serve recovery. Version 2 added the index of the
// in-flight tasks with a key, now:
//
//	CREATE INDEX ax_tasks_ns_key_holder ON ax_tasks (namespace, task_key)
//	    WHERE status IN ('DISPATCHING', 'RUNNING') AND task_key <> '';
//
// The tables: ax_tasks, ax_executions, ax_counters (the refill sequence), ax_schedules,
// ax_leader (the leases and fences), ax_nodes (the node registry), ax_audit, ax_stats
// (the per-minute execution statistics, 0007_stats.sql: a WITHOUT ROWID table whose
// primary key (namespace, minute, node) serves every statistics statement) and
// ax_schema_migrations.
//
// # Task keys and the overlap rule
//
// A task's TaskKey and Overlap are the columns task_key and overlap, both the empty
// string for a task without a key and for every row written before version 2. The
// rule — at most one task of a key DISPATCHING or RUNNING when its Overlap is skip or
// queue — needs no lock of its own: every write runs on the one writer connection in a
// BEGIN IMMEDIATE transaction, and SQLite lets one such transaction run at a time
// across every process that opens the file. A Claim reads the holders of its keys and
// writes its claims inside that one transaction, so no other claim, trigger or
// transition can come between the two, and there is no lock order to get wrong:
// nothing can deadlock.
//
// A task key is its namespace's: the holders are looked up, and re-checked, with the
// namespace, so two namespaces' tasks of one key never block each other.
//
// Claim first runs its usual statement, which now claims only the due tasks without a
// key or with Overlap allow (one more term in its WHERE clause, on the row it reads
// anyway): a batch of such tasks costs what it did in version 1, one statement per 200
// tasks. The tasks it left SCHEDULED are read back, as before, to report those not
// due; the due ones among them are the keyed ones. For those, one more query reads the
// holders,
//
//	SELECT task_key, MIN(id) FROM ax_tasks
//	WHERE namespace = ? AND task_key IN (VALUES …)
//	    AND status IN ('DISPATCHING', 'RUNNING') AND task_key <> ''
//	GROUP BY task_key
//
// store.ResolveKeys picks the winners (one per free key, the first by due_at, id), and
// they are claimed by an UPDATE that re-checks the rule itself:
//
//	... WHERE ax_tasks.id = c.column1 AND ax_tasks.status = 'SCHEDULED' AND ax_tasks.due_at <= ?
//	    AND +ax_tasks.namespace = ?
//	    AND NOT EXISTS (SELECT 1 FROM ax_tasks o WHERE o.namespace = ax_tasks.namespace
//	        AND o.task_key = ax_tasks.task_key
//	        AND o.status IN ('DISPATCHING', 'RUNNING') AND o.task_key <> '')
//
// The losers with Overlap skip become SKIPPED in one more UPDATE (last_error from
// store.SkipReason); those with Overlap queue are left alone and reported Blocked.
// Trigger puts the same NOT EXISTS in its one UPDATE (for keyed skip and queue tasks
// only) and reads the holder's id only when it refuses. SQLite uses a partial index
// only for a query whose WHERE clause contains the index's own, hence the seemingly
// redundant last term; without it the subquery scans the table. TestExplain pins
// the plans (SQLite 3.54.1, modernc.org/sqlite v1.62.0):
//
//	-- the holders of a claim's keys
//	SEARCH ax_tasks USING INDEX ax_tasks_ns_key_holder (namespace=? AND task_key=?)
//	LIST SUBQUERY 2
//	SCAN 4-ROW VALUES CLAUSE
//	-- the winners' UPDATE (and Trigger's, without the VALUES list)
//	SCAN 4-ROW VALUES CLAUSE
//	SEARCH ax_tasks USING INTEGER PRIMARY KEY (rowid=?)
//	CORRELATED SCALAR SUBQUERY 3
//	SEARCH o USING INDEX ax_tasks_ns_key_holder (namespace=? AND task_key=?)
//
// # Schedules
//
// ax_schedules holds one row per schedule ((namespace, name) primary key; spec,
// time_zone, overlap, misfire, payload, paused 0 or 1, next_fire_at, last_fire_at NULL
// before the first occurrence, created_at, updated_at). FireSchedule is a
// compare-and-set, UPDATE ... WHERE namespace = ? AND name = ? AND next_fire_at = ? AND
// paused = 0, followed in the same transaction by Insert's own statement for the
// occurrences, so they get refill sequence numbers like any inserted task; of several
// schedulers firing from one reading, exactly one changes the row. PauseSchedule
// cancels the schedule's SCHEDULED occurrences (name and task_key = the schedule's
// name, a range (namespace, name) of the business-key index) in the transaction that
// sets paused; DeleteSchedule cancels them with the same statement in the transaction
// that deletes the row, so a fire either commits before it (and its occurrences are
// cancelled) or finds no row.
//
// The gaps of a schedule (store.SlotHistory) live in ax_slot_gaps
// (migrations/0008_slot_gaps.sql): FireSchedule inserts FireParams.Gaps in its
// transaction once the compare-and-set applied, and ResumeSchedule inserts the gap from
// the paused row's next_fire_at to the new one before the UPDATE that resumes it, in
// the same writer transaction. The reads use ax_slot_gaps_schedule and the business-key
// index; PruneSlotGaps uses ax_slot_gaps_until.
//
// # Leader lease
//
// ax_leader (migrations/0003_leader.sql) holds one row per election namespace: holder,
// epoch (the fencing token), expires_at, updated_at, in microseconds of this process's
// clock. AcquireLease is one UPSERT ... WHERE expires_at <= now RETURNING epoch in the
// writer's transaction, raising the epoch with the holder; renew and release are UPDATEs
// conditioned on holder and epoch (store.Leaser, elect/sqllease).
//
// # Fencing
//
// A fenced write (Claim, FireSchedule, and Start, Finish or Requeue with a non-zero
// store.Fence) first reads SELECT epoch FROM ax_leader WHERE namespace = ? in its own
// IMMEDIATE transaction and rolls back with store.ErrFenced when its token is below
// it. The database's one write lock, held from BEGIN to COMMIT, is the shared lock the
// contract asks for: RaiseFence (a read and an UPSERT of the row, store.RaisedEpoch's
// rule, in one IMMEDIATE transaction) and AcquireLease cannot raise the epoch while a
// fenced write is in flight, in this process or another. The zero Fence runs no extra
// statement (see fence.go).
//
// # Task stats
//
// TaskStats is one statement on the read pool, so it never waits for the writer and
// its counts and oldest due time come from one snapshot:
//
//	SELECT status, count(*),
//	    (SELECT min(due_at) FROM ax_tasks WHERE namespace = ? AND status = 'SCHEDULED' AND due_at <= ?)
//	FROM ax_tasks WHERE namespace = ? GROUP BY status
//
// The counts read every row of the namespace, through the business key's index; the
// scalar subquery runs once, on the partial due index. TestExplain pins it:
//
//	SEARCH ax_tasks USING INDEX ax_tasks_ns_name_key (namespace=?)
//	USE TEMP B-TREE FOR GROUP BY
//	SCALAR SUBQUERY 1
//	SEARCH ax_tasks USING COVERING INDEX ax_tasks_ns_scheduled_due (namespace=? AND due_at<?)
//
// # Finding tasks
//
// Tasks is one SELECT with a LIMIT (store/internal/taskquery writes its conditions,
// as for PostgreSQL and MySQL); CountTasks counts each status in its own subquery
// that stops at the cap. SQLite has no statistics to choose an index by (nothing runs
// ANALYZE), so Tasks names the index itself (tasksFrom): the business key's for a
// name, the prefix as the byte-wise range it is under BINARY ("SEARCH ax_tasks USING
// INDEX ax_tasks_ns_name_key (namespace=? AND name=? AND key>? AND key<?)"); the due
// index for SCHEDULED soonest first; a terminal status's own partial index (schema
// v5) for a finished range ("… ax_tasks_ns_failed (namespace=? AND finished_at>? AND
// finished_at<?)"); and otherwise the rows in id order, backwards for the newest
// first ("SEARCH ax_tasks USING INTEGER PRIMARY KEY (rowid<?)" after a cursor), which
// stops at the page's end. TestExplain pins these plans.
//
// # Namespaces
//
// A Store is the view of one namespace (store.Store.InNamespace): Open returns
// store.DefaultNamespace's, and InNamespace returns another *Store that shares the
// writer connection, the read pool, the prepared statements and the closed flag (one
// pointer to them) and differs only in its namespace, so a view costs nothing and
// closing any view closes them all. ax_tasks and ax_schedules have a namespace column
// (NOT NULL DEFAULT 'default', added by migrations/0004_namespaces.sql: ALTER TABLE ...
// ADD COLUMN with a constant default does not rewrite ax_tasks; ax_schedules, whose
// primary key becomes (namespace, name), is copied into a new table), and every index
// of ax_tasks leads with it, so a namespace's scans are ranges of its own rows.
//
// Insert (the store's and a store.Tx's), FireSchedule and RegisterSchedules stamp the view's namespace;
// every read and write of rows by name, key or time filters by it. The statements that
// name their rows by id (Claim, Start, Heartbeat, Finish, Requeue, Get, Trigger)
// compare +namespace = ?: checked on the row found by the primary key, never used to
// choose an index (SQLite would otherwise prefer a range of the namespace's due index
// to the id lookups). An id of another namespace's task is thus not found, or left
// out of a batch's result. The refill sequence takes no namespace: it is one counter
// for the file. Leases and fences name their namespace explicitly.
//
// ax_nodes holds the node registry (store.NodeRegistry): (namespace, name) primary key,
// advertise, handlers (the sorted names as a JSON array of strings), capacity,
// in_flight, started_at and heartbeat_at in microseconds of this process's clock, and
// clock_offset (version 10: the store's clock minus the node's, microseconds, as the
// node measured it).
// RegisterNode is one UPSERT, RemoveNode and ExpireNodes one DELETE each, on the
// writer; Nodes is one range of the primary key, in name order, on the read pool.
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
	if err := s.migrate(context.Background(), SchemaVersion()); err != nil {
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
	task_key, overlap, payload IS NOT NULL, key_hold, key_until, key_slot <> 0`

type scanner interface{ Scan(dest ...any) error }

func scanTask(row scanner) (*store.Task, error) {
	var (
		t                                       store.Task
		payload                                 []byte
		status, backoff, overlap                string
		execID                                  sql.NullString
		due, created, updated, timeout          int64
		dispatched, started, hb, fin, triggered sql.NullInt64
		hasPayload                              bool
		hold                                    string
		until                                   sql.NullInt64
	)
	err := row.Scan(&t.ID, &t.Name, &t.Key, &payload, &status, &due, &t.Attempt, &t.MaxRetry, &t.DispatchRetries,
		&execID, &t.OwnerService, &t.LastError, &timeout, &backoff,
		&created, &updated, &dispatched, &started, &hb, &fin, &triggered, &t.TaskKey, &overlap, &hasPayload,
		&hold, &until, &t.Superseded)
	if err != nil {
		return nil, err
	}
	if hasPayload { // the driver reads a zero-length BLOB as nil
		t.Payload = append([]byte{}, payload...)
	}
	t.Status = store.Status(status)
	t.Overlap = store.OverlapPolicy(overlap)
	t.DueAt = fromMicros(due)
	t.ExecutionID = execID.String
	t.Timeout = time.Duration(timeout) * time.Microsecond
	t.Backoff, err = store.ParseBackoff(backoff)
	if err != nil {
		return nil, err
	}
	t.CreatedAt, t.UpdatedAt = fromMicros(created), fromMicros(updated)
	t.DispatchedAt, t.StartedAt = fromNull(dispatched), fromNull(started)
	t.HeartbeatAt, t.FinishedAt, t.TriggeredAt = fromNull(hb), fromNull(fin), fromNull(triggered)
	t.KeyHold, t.KeyUntil = store.KeyHold(hold), fromNull(until)
	return &t, nil
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
