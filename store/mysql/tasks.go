package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// Column limits in bytes, checked before writing (a non-strict sql_mode would
// truncate). Each fits its column: a VARCHAR(n) holds n characters, at least n bytes.
const (
	maxName    = store.MaxNameLen // name VARCHAR(200)
	maxKey     = store.MaxKeyLen  // `key` VARCHAR(500)
	maxOwner   = 200              // owner_service VARCHAR(200)
	maxExecID  = 100              // execution_id VARCHAR(100)
	maxNode    = 200              // node VARCHAR(200)
	maxTaskKey = 500              // task_key VARCHAR(500)
)

// These fail to compile if store's limits outgrow the columns.
const (
	_ = uint(200 - maxName)
	_ = uint(500 - maxKey)
)

// maxChunkBytes bounds the payload bytes of one multi-row INSERT, well under the
// servers' default max_allowed_packet (16 MiB on MariaDB, 64 MiB on MySQL 8).
const maxChunkBytes = 4 << 20

// getSQL reads a task of the view's namespace by id; lookupSQL by name and key.
const (
	getSQL = "SELECT " + taskColumns + " FROM ax_tasks WHERE id = ? AND namespace = ?"
	// lookupSQL reads the newest task of a business key: the one holding it, if
	// any, for every other gave it up to a newer one.
	// (MAX(id + 0) over ax_tasks_name_key: with ORDER BY id DESC LIMIT 1 the
	// optimizer may read the primary key backwards instead.)
	lookupSQL = "SELECT " + taskColumns + " FROM ax_tasks WHERE id = (SELECT MAX(id + 0) FROM ax_tasks " +
		"WHERE namespace = ? AND name = ? AND `key` = ?)"
)

func validText(s string, limit int) bool { return len(s) <= limit && utf8.ValidString(s) }

// validateNew checks tasks as Insert does; op names the operation in the error
// ("insert", "fire schedule \"report\"").
func validateNew(op string, tasks []store.NewTask) error {
	for i, nt := range tasks {
		if err := driverkit.CheckNewTask(nt); err != nil {
			return fmt.Errorf("ax: mysql: %s: task %d: %w", op, i, err)
		}
		switch {
		case !validText(nt.Name, maxName) || !validText(nt.Key, maxKey) || !validText(nt.OwnerService, maxOwner) ||
			!validText(nt.TaskKey, maxTaskKey):
			return fmt.Errorf("ax: mysql: %s: task %d: name (≤ %d bytes), key (≤ %d), owner (≤ %d) or task key (≤ %d) too long or not UTF-8: %w",
				op, i, maxName, maxKey, maxOwner, maxTaskKey, store.ErrInvalid)
		case !inRange(nt.DueAt):
			return fmt.Errorf("ax: mysql: %s: task %d: due time %v outside years 1000-9999: %w", op, i, nt.DueAt, store.ErrInvalid)
		case nt.MaxRetry < math.MinInt32 || nt.MaxRetry > math.MaxInt32 || nt.Timeout < 0:
			return fmt.Errorf("ax: mysql: %s: task %d: max retry or timeout out of range: %w", op, i, store.ErrInvalid)
		}
	}
	return nil
}

// Insert writes new SCHEDULED tasks in one transaction (see store.Store).
func (s *Store) Insert(ctx context.Context, tasks []store.NewTask) ([]store.Inserted, error) {
	if err := s.check("insert"); err != nil {
		return nil, err
	}
	if err := validateNew("insert", tasks); err != nil {
		return nil, err
	}
	if len(tasks) == 0 {
		return []store.Inserted{}, nil
	}
	var out []store.Inserted
	err := s.run(ctx, "insert", len(tasks), func(tx *sql.Tx, seq int64) error {
		var err error
		out, err = insert(ctx, tx, s.ns, tasks, seq, s.returning)
		return err
	})
	return out, err
}

// callerSeq reserves n sequence numbers for rows the caller's transaction stx writes,
// their hold taken inside stx (see run), and returns the first.
func (s *Store) callerSeq(ctx context.Context, op string, stx *sql.Tx, n int) (int64, error) {
	for attempt := 1; ; attempt++ {
		lo, err := s.allocSeq(ctx, n)
		if err != nil {
			return 0, s.wrap(op, err)
		}
		ok, err := takeHold(ctx, stx, lo)
		if err != nil {
			s.dropHold(ctx, lo)
			return 0, s.wrap(op, err)
		}
		if ok {
			s.noteHold(stx, lo)
			return lo, nil
		}
		if attempt == maxAttempts {
			return 0, fmt.Errorf("ax: mysql: %s: sequence hold lost %d times", op, attempt)
		}
	}
}

// MakeDue makes the SCHEDULED or FAILED task of the view's namespace due now, without
// claiming it: it becomes SCHEDULED, TriggeredAt stamped (from FAILED with one more
// attempt), with a fresh sequence number, in one transaction (see store.TaskWriter).
// The claim that follows applies its key's overlap rule.
func (s *Store) MakeDue(ctx context.Context, id int64) (*store.Task, error) {
	return s.moveBack(ctx, "make due", fmt.Sprintf("ax: mysql: make task %d due", id), s.makeDueIn(ctx, id))
}

// makeDueIn is MakeDue's transition, as rescheduleIn is Reschedule's.
func (s *Store) makeDueIn(ctx context.Context, id int64) func(tx *sql.Tx, seq any) (*store.Task, error, error) {
	return func(tx *sql.Tx, seq any) (*store.Task, error, error) {
		return s.moveIn(ctx, tx, store.ErrNotTriggerable,
			`UPDATE ax_tasks SET attempt = attempt + (status = 'FAILED'), status = 'SCHEDULED', due_at = UTC_TIMESTAMP(6),
				finished_at = NULL, triggered_at = UTC_TIMESTAMP(6), seq = COALESCE(?, seq), updated_at = UTC_TIMESTAMP(6)
			WHERE id = ? AND namespace = ? AND status IN ('SCHEDULED', 'FAILED') AND key_slot = 0`, []any{seq, id, s.ns},
			getSQL, []any{id, s.ns})
	}
}

// insert writes tasks into namespace ns in chunks (at most store.MaxBatch rows and
// maxChunkBytes of payload), ordered by (name, key) so that concurrent inserts lock the
// unique index (namespace, name, key) in one order. Task i gets sequence number seq+i; reading the rows back, a row that
// carries input i's number was written by input i, any other is a duplicate. With
// returning (MariaDB), the INSERT itself returns what the database set on the rows it
// wrote (INSERT … RETURNING), and only duplicates are read back; MySQL has no
// RETURNING, and reads every chunk's keys back after its INSERT.
//
// It does not use INSERT … ON DUPLICATE KEY UPDATE: on MariaDB 10.11 a multi-row one
// racing with an insert of the same key can skip its other rows without an error or a
// warning (reproduced at about one in a thousand races). Nor INSERT IGNORE, which turns
// other errors into warnings. A plain multi-row INSERT is tried first; on a duplicate
// key (error 1062, which rolls back only the statement) the existing keys are read
// with a locking read, which sees the latest committed rows whatever the isolation
// level, and the rest is inserted again.
func insert(ctx context.Context, tx *sql.Tx, ns string, tasks []store.NewTask, seq int64, returning bool) ([]store.Inserted, error) {
	order := make([]int, len(tasks))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := cmp.Compare(tasks[a].Name, tasks[b].Name); c != 0 {
			return c
		}
		return cmp.Compare(tasks[a].Key, tasks[b].Key)
	})
	firstOf := make(map[[2]string]bool, len(tasks))
	out := make([]store.Inserted, len(tasks))
	for lo := 0; lo < len(order); {
		hi, size := lo, 0
		for hi < len(order) && hi-lo < store.MaxBatch && (hi == lo || size+len(tasks[order[hi]].Payload) <= maxChunkBytes) {
			size += len(tasks[order[hi]].Payload)
			hi++
		}
		part := order[lo:hi]
		lo = hi
		var fresh []int // first occurrences of their key in this call
		for _, i := range part {
			k := [2]string{tasks[i].Name, tasks[i].Key}
			if !firstOf[k] {
				firstOf[k] = true
				fresh = append(fresh, i)
			}
		}
		var written map[[2]string]writtenRow
		for try := 1; len(fresh) > 0; try++ {
			w, err := insertRows(ctx, tx, ns, tasks, fresh, seq, returning)
			var me *mysql.MySQLError
			if err == nil {
				written = w
				break
			}
			if !errors.As(err, &me) || me.Number != 1062 || try == maxAttempts {
				return nil, err
			}
			// A key taken by a task that no longer holds it is freed, and the rows
			// inserted again; else the holders are read and left out.
			released, err := release(ctx, tx, ns, tasks, fresh)
			if err != nil {
				return nil, err
			}
			if released {
				continue
			}
			existing, err := readByKey(ctx, tx, ns, tasks, fresh, true)
			if err != nil {
				return nil, err
			}
			fresh = slices.DeleteFunc(fresh, func(i int) bool {
				_, ok := existing[[2]string{tasks[i].Name, tasks[i].Key}]
				return ok
			})
		}
		// The rows written carry their input's sequence number: their tasks are built
		// from the input and the few columns the database set. Only the others —
		// duplicates — are read whole.
		if !returning {
			var err error
			if written, err = readWritten(ctx, tx, ns, tasks, part); err != nil {
				return nil, err
			}
		}
		var others []int
		for _, i := range part {
			if w, ok := written[[2]string{tasks[i].Name, tasks[i].Key}]; ok && w.seq == seq+int64(i) {
				out[i].Task = driverkit.Stored(&tasks[i], w.id, w.created, w.updated)
				continue
			}
			others = append(others, i)
		}
		if len(others) == 0 {
			continue
		}
		byKey, err := readByKey(ctx, tx, ns, tasks, others, false)
		if err != nil {
			return nil, err
		}
		var missing []int // duplicates committed after a REPEATABLE READ snapshot
		for _, i := range others {
			if _, ok := byKey[[2]string{tasks[i].Name, tasks[i].Key}]; !ok {
				missing = append(missing, i)
			}
		}
		if len(missing) > 0 {
			more, err := readByKey(ctx, tx, ns, tasks, missing, true)
			if err != nil {
				return nil, err
			}
			maps.Copy(byKey, more)
		}
		for _, i := range others {
			r, ok := byKey[[2]string{tasks[i].Name, tasks[i].Key}]
			if !ok {
				return nil, fmt.Errorf("task %q/%q not found after insert", tasks[i].Name, tasks[i].Key)
			}
			t := clone(r.t)
			if r.seq == seq+int64(i) {
				out[i] = store.Inserted{Task: t}
			} else {
				out[i] = store.Inserted{Task: t, Err: store.ErrDuplicate}
			}
		}
	}
	return out, nil
}

// keyFreeSQL is store.KeyHold.Frees over a task's columns, now.
const keyFreeSQL = `key_hold <> 'forever' AND (key_until IS NULL OR key_until <= UTC_TIMESTAMP(6))
	AND (status IN ('SUCCEEDED', 'CANCELLED', 'SKIPPED') OR status = 'FAILED' AND key_hold = 'active')`

// release moves the tasks holding the business keys of tasks[i], i in rows, off them
// where they no longer hold them (keyFreeSQL): key_slot becomes the task's id, which
// marks it Superseded and leaves slot 0 to a new task. It reports whether it released
// any. Only after a duplicate-key error: the failed insert holds a shared lock on the
// old row's index entry, so two inserts of one freed key racing can deadlock here,
// which retries the transaction (Insert) or ends the caller's (a Tx's Insert).
func release(ctx context.Context, tx *sql.Tx, ns string, tasks []store.NewTask, rows []int) (bool, error) {
	q, args := byKeys("UPDATE ax_tasks SET key_slot = id", ns, tasks, rows)
	res, err := tx.ExecContext(ctx, strings.Replace(q, " FROM ax_tasks WHERE ", " WHERE "+keyFreeSQL+" AND ", 1), args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// insertRows inserts tasks[i] for i in rows into namespace ns with one multi-row
// INSERT. With returning (MariaDB) it returns what the database set on each row, by
// business key, as readWritten reads it: a statement and 200 index lookups fewer a
// chunk.
func insertRows(ctx context.Context, tx *sql.Tx, ns string, tasks []store.NewTask, rows []int, seq int64, returning bool) (map[[2]string]writtenRow, error) {
	var q strings.Builder
	q.WriteString("INSERT INTO ax_tasks (namespace, name, `key`, payload, status, due_at, max_retry, owner_service, last_error, " +
		"timeout_us, backoff, seq, task_key, overlap, key_hold, key_until, created_at, updated_at) VALUES ")
	args := make([]any, 0, 14*len(rows))
	nsArg := any(ns) // boxed once, not once per row
	for k, i := range rows {
		if k > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?,?,?,?,'SCHEDULED',?,?,?,'',?,?,?,?,?,?,?,UTC_TIMESTAMP(6),UTC_TIMESTAMP(6))")
		nt := tasks[i]
		var until any
		if !nt.KeyUntil.IsZero() {
			until = dt(nt.KeyUntil)
		}
		args = append(args, nsArg, nt.Name, nt.Key, nullPayload(nt.Payload), dt(nt.DueAt), nt.MaxRetry, nt.OwnerService,
			nt.Timeout.Microseconds(), driverkit.FormatBackoff(nt.Backoff), seq+int64(i), nt.TaskKey, string(nt.Overlap),
			string(nt.KeyHold), until)
	}
	if !returning {
		_, err := tx.ExecContext(ctx, q.String(), args...)
		return nil, err
	}
	q.WriteString(" RETURNING " + writtenCols)
	r, err := tx.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return nil, err
	}
	return scanWritten(r, len(rows))
}

type keyedRow struct {
	t   *store.Task
	seq int64
}

// byKeys returns the query selecting cols from the tasks of namespace ns with the
// business keys of tasks[i], i in rows, and its arguments. A row-constructor IN list,
// a range on ax_tasks_name_key (TestExplain): 1.12 times the bulk-insert rate of the
// equivalent OR list; chunks of 500 or 1,000 rows measured no faster (BENCHMARKS.md,
// "Bulk submits").
func byKeys(cols, ns string, tasks []store.NewTask, rows []int) (string, []any) {
	var q strings.Builder
	q.WriteString(cols + " FROM ax_tasks WHERE namespace = ? AND key_slot = 0 AND (name, `key`) IN (")
	args := make([]any, 0, 1+2*len(rows))
	args = append(args, ns)
	for k, i := range rows {
		if k > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?)")
		args = append(args, tasks[i].Name, tasks[i].Key)
	}
	q.WriteByte(')')
	return q.String(), args
}

// writtenRow is what readWritten reads of a row: what the database set on insert.
type writtenRow struct {
	id, seq          int64
	created, updated time.Time
}

// readWritten reads the id, sequence number and stamps of the tasks of namespace ns
// with the business keys of tasks[i], i in rows, with a plain read.
func readWritten(ctx context.Context, tx *sql.Tx, ns string, tasks []store.NewTask, rows []int) (map[[2]string]writtenRow, error) {
	q, args := byKeys("SELECT "+writtenCols, ns, tasks, rows)
	r, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return scanWritten(r, len(rows))
}

// writtenCols are the columns scanWritten reads.
const writtenCols = "id, name, `key`, seq, created_at, updated_at"

// scanWritten reads rows of writtenCols by business key, and closes r.
func scanWritten(r *sql.Rows, n int) (map[[2]string]writtenRow, error) {
	defer r.Close()
	out := make(map[[2]string]writtenRow, n)
	for r.Next() {
		var w writtenRow
		var k [2]string
		if err := r.Scan(&w.id, &k[0], &k[1], &w.seq, dbTime{&w.created}, dbTime{&w.updated}); err != nil {
			return nil, err
		}
		out[k] = w
	}
	return out, r.Err()
}

// readByKey reads the tasks of namespace ns with the business keys of tasks[i], i in rows. A locking
// read (LOCK IN SHARE MODE: MariaDB has no FOR SHARE) sees the latest committed rows
// even inside a caller's REPEATABLE READ transaction, but there it also locks gaps, so
// it is used only where a plain read may miss a row.
func readByKey(ctx context.Context, tx *sql.Tx, ns string, tasks []store.NewTask, rows []int, locking bool) (map[[2]string]keyedRow, error) {
	q, args := byKeys("SELECT "+taskColumns+", seq", ns, tasks, rows)
	if locking {
		q += " LOCK IN SHARE MODE"
	}
	r, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	byKey := make(map[[2]string]keyedRow, len(rows))
	for r.Next() {
		var kr keyedRow
		if kr.t, err = scanTask(r, &kr.seq); err != nil {
			return nil, err
		}
		byKey[[2]string{kr.t.Name, kr.t.Key}] = kr
	}
	return byKey, r.Err()
}

func clone(t *store.Task) *store.Task {
	c := *t
	if t.Payload != nil {
		c.Payload = append([]byte{}, t.Payload...)
	}
	c.Backoff = slices.Clone(t.Backoff)
	return &c
}

// Get returns one task of the view's namespace; another namespace's is store.ErrNotFound.
func (s *Store) Get(ctx context.Context, id int64) (*store.Task, error) {
	if err := s.check("get task"); err != nil {
		return nil, err
	}
	return s.get(ctx, s.db, id)
}

// get reads the task id of the view's namespace through q: the pool, or a transaction
// as it sees the task.
func (s *Store) get(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, id int64) (*store.Task, error) {
	t, err := scanTask(q.QueryRowContext(ctx, getSQL, id, s.ns))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ax: mysql: get task %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, s.wrap("get task", err)
	}
	return t, nil
}

// Lookup returns the task of the view's namespace with this name and key.
func (s *Store) Lookup(ctx context.Context, name, key string) (*store.Task, error) {
	if err := s.check("lookup task"); err != nil {
		return nil, err
	}
	t, err := scanTask(s.db.QueryRowContext(ctx, lookupSQL, s.ns, name, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ax: mysql: lookup %q/%q: %w", name, key, store.ErrNotFound)
	}
	return t, s.wrap("lookup task", err)
}

// Executions returns the executions of a task of the view's namespace, oldest first,
// in one statement.
func (s *Store) Executions(ctx context.Context, taskID int64) ([]store.Execution, error) {
	if err := s.check("executions"); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT e.id IS NOT NULL, COALESCE(e.id, ''), t.id, COALESCE(e.attempt, 0),
		COALESCE(e.node, ''), COALESCE(e.status, ''), e.due_at, e.claimed_at, e.started_at, e.heartbeat_at, e.finished_at, COALESCE(e.error, '')
		FROM ax_tasks t LEFT JOIN ax_executions e ON e.task_id = t.id
		WHERE t.id = ? AND t.namespace = ? ORDER BY e.started_at, e.id`, taskID, s.ns)
	if err != nil {
		return nil, s.wrap("executions", err)
	}
	defer rows.Close()
	found := false
	out := []store.Execution{}
	for rows.Next() {
		found = true
		var has bool
		var e store.Execution
		var status string
		if err := rows.Scan(&has, &e.ID, &e.TaskID, &e.Attempt, &e.Node, &status, dbTime{&e.DueAt}, dbTime{&e.ClaimedAt},
			dbTime{&e.StartedAt}, dbTime{&e.HeartbeatAt}, dbTime{&e.FinishedAt}, &e.Error); err != nil {
			return nil, s.wrap("executions", err)
		}
		if has {
			e.Status = store.Status(status)
			out = append(out, e)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("executions", err)
	}
	if !found {
		return nil, fmt.Errorf("ax: mysql: executions of task %d: %w", taskID, store.ErrNotFound)
	}
	return out, nil
}

// Cancel moves a SCHEDULED task of the view's namespace to CANCELLED.
func (s *Store) Cancel(ctx context.Context, name, key string) (*store.Task, error) {
	var t *store.Task
	var sentinel error
	err := s.run(ctx, "cancel", 0, func(tx *sql.Tx, _ int64) error {
		var err error
		t, sentinel, err = s.cancelIn(ctx, tx, name, key)
		return err
	})
	if err != nil {
		return nil, err
	}
	if sentinel != nil {
		return driverkit.Refusal(fmt.Sprintf("ax: mysql: cancel %q/%q", name, key), t, sentinel)
	}
	return t, nil
}

// cancelIn cancels the task in tx: the task as it is afterwards (nil when there is
// none), the refusal's sentinel when it was not SCHEDULED, and the database's error.
func (s *Store) cancelIn(ctx context.Context, tx *sql.Tx, name, key string) (t *store.Task, refusal, err error) {
	return s.moveIn(ctx, tx, store.ErrNotCancellable,
		"UPDATE ax_tasks SET status = 'CANCELLED', updated_at = UTC_TIMESTAMP(6), finished_at = UTC_TIMESTAMP(6) "+
			"WHERE namespace = ? AND name = ? AND `key` = ? AND key_slot = 0 AND status = 'SCHEDULED'", []any{s.ns, name, key},
		lookupSQL, []any{s.ns, name, key})
}

// moveIn runs update, a conditional transition of one row, in tx, and reads the row
// by read: the task as it is afterwards (nil when there is none), refusal when the
// update changed nothing, and the database's error.
func (s *Store) moveIn(ctx context.Context, tx *sql.Tx, refusal error, update string, updArgs []any, read string, readArgs []any) (*store.Task, error, error) {
	res, err := tx.ExecContext(ctx, update, updArgs...)
	if err != nil {
		return nil, nil, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, nil, err
	}
	t, err := scanTask(tx.QueryRowContext(ctx, read, readArgs...))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, store.ErrNotFound, nil
	case err != nil:
		return nil, nil, err
	case n == 0:
		return t, refusal, nil
	}
	return t, nil, nil
}

// Reschedule moves the SCHEDULED task (name, key) of the view's namespace to due at
// at, with a fresh sequence number, in one transaction.
func (s *Store) Reschedule(ctx context.Context, name, key string, at time.Time) (*store.Task, error) {
	op := fmt.Sprintf("ax: mysql: reschedule %q/%q", name, key)
	if at.IsZero() {
		return nil, fmt.Errorf("%s: zero due time: %w", op, store.ErrInvalid)
	}
	return s.moveBack(ctx, "reschedule", op, s.rescheduleIn(ctx, name, key, at))
}

// rescheduleIn is Reschedule's transition, for moveBack and txView.moveBack: seq is the
// row's new sequence number, or nil to keep it for now.
func (s *Store) rescheduleIn(ctx context.Context, name, key string, at time.Time) func(tx *sql.Tx, seq any) (*store.Task, error, error) {
	return func(tx *sql.Tx, seq any) (*store.Task, error, error) {
		return s.moveIn(ctx, tx, store.ErrNotReschedulable,
			"UPDATE ax_tasks SET due_at = ?, seq = COALESCE(?, seq), updated_at = UTC_TIMESTAMP(6) "+
				"WHERE namespace = ? AND name = ? AND `key` = ? AND key_slot = 0 AND status = 'SCHEDULED'", []any{dt(at), seq, s.ns, name, key},
			lookupSQL, []any{s.ns, name, key})
	}
}

// Retry moves a FAILED task of the view's namespace back to SCHEDULED, due now, with
// a fresh retry budget and sequence number, in one transaction.
func (s *Store) Retry(ctx context.Context, id int64) (*store.Task, error) {
	return s.moveBack(ctx, "retry", fmt.Sprintf("ax: mysql: retry task %d", id), s.retryIn(ctx, id))
}

// retryIn is Retry's transition, as rescheduleIn is Reschedule's.
func (s *Store) retryIn(ctx context.Context, id int64) func(tx *sql.Tx, seq any) (*store.Task, error, error) {
	return func(tx *sql.Tx, seq any) (*store.Task, error, error) {
		return s.moveIn(ctx, tx, store.ErrNotRetryable,
			`UPDATE ax_tasks SET status = 'SCHEDULED', due_at = UTC_TIMESTAMP(6), attempt = 0, dispatch_retries = 0,
				finished_at = NULL, seq = COALESCE(?, seq), updated_at = UTC_TIMESTAMP(6)
			WHERE id = ? AND namespace = ? AND status = 'FAILED' AND key_slot = 0`, []any{seq, id, s.ns},
			getSQL, []any{id, s.ns})
	}
}

// moveBack runs move, a transition that leaves one task SCHEDULED, in a transaction
// with a fresh sequence number for it, and turns a refusal into its error under op.
func (s *Store) moveBack(ctx context.Context, name, op string, move func(tx *sql.Tx, seq any) (t *store.Task, refusal, err error)) (*store.Task, error) {
	var t *store.Task
	var sentinel error
	err := s.run(ctx, name, 1, func(tx *sql.Tx, seq int64) error {
		var err error
		t, sentinel, err = move(tx, seq)
		return err
	})
	if err != nil {
		return nil, err
	}
	if sentinel != nil {
		return driverkit.Refusal(op, t, sentinel)
	}
	return t, nil
}

// triggerSet is Trigger's transition; its arguments are the execution id, the task id
// and the namespace. attempt is assigned first: MySQL evaluates single-table SET
// clauses left to right, so it must read the old status.
const triggerSet = `UPDATE ax_tasks SET attempt = attempt + (status = 'FAILED'),
	status = 'DISPATCHING', execution_id = ?, finished_at = NULL,
	dispatched_at = UTC_TIMESTAMP(6), triggered_at = UTC_TIMESTAMP(6), updated_at = UTC_TIMESTAMP(6)
	WHERE id = ? AND namespace = ? AND status IN ('SCHEDULED', 'FAILED') AND key_slot = 0`

// Trigger moves a SCHEDULED or FAILED task of the view's namespace to DISPATCHING now.
// A task without a key, or with Overlap allow, takes one UPDATE and one SELECT; a task
// whose key rules (skip, queue) takes the key's lock first and is refused with
// driverkit.KeyHeld while another task of its namespace holds the key (see
// DESIGN.md, "Task keys").
func (s *Store) Trigger(ctx context.Context, id int64, executionID string) (*store.Task, error) {
	if executionID == "" || !validText(executionID, maxExecID) {
		return nil, fmt.Errorf("ax: mysql: trigger task %d: empty or over-long execution id: %w", id, store.ErrInvalid)
	}
	var t *store.Task
	var sentinel error
	var holder int64
	err := s.run(ctx, "trigger", 0, func(tx *sql.Tx, _ int64) error {
		var err error
		t, sentinel, holder, err = s.triggerIn(ctx, tx, id, executionID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return triggered(id, t, sentinel, holder)
}

// triggered is the answer of a trigger of task id that found t, and refused it with
// sentinel or, its key held, with holder.
func triggered(id int64, t *store.Task, sentinel error, holder int64) (*store.Task, error) {
	op := fmt.Sprintf("ax: mysql: trigger task %d", id)
	switch {
	case holder != 0:
		return driverkit.KeyHeld(op, t, holder)
	case sentinel != nil:
		return driverkit.Refusal(op, t, sentinel)
	}
	return t, nil
}

// triggerIn is Trigger in tx: the task as it is afterwards, and the refusal's
// sentinel, or the holder of its key.
func (s *Store) triggerIn(ctx context.Context, tx *sql.Tx, id int64, executionID string) (t *store.Task, sentinel error, holder int64, err error) {
	res, err := tx.ExecContext(ctx, triggerSet+` AND overlap NOT IN ('skip', 'queue')`, executionID, id, s.ns)
	if err != nil {
		return nil, nil, 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, nil, 0, err
	}
	t, err = scanTask(tx.QueryRowContext(ctx, getSQL, id, s.ns))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, store.ErrNotFound, 0, nil
	case err != nil:
		return nil, nil, 0, err
	case n == 0 && (t.Status == store.Scheduled || t.Status == store.Failed) && !t.Superseded && keyRules(t.Overlap):
		t, holder, err = triggerKeyed(ctx, tx, s.ns, id, t.TaskKey, executionID)
		if err != nil {
			return nil, nil, 0, err
		}
		if t.Status != store.Dispatching || t.ExecutionID != executionID {
			return t, store.ErrNotTriggerable, holder, nil
		}
	case n == 0:
		return t, store.ErrNotTriggerable, 0, nil
	}
	return t, nil, 0, nil
}

// cursor returns the highest sequence number below which every number handed out is
// either visible or abandoned (see DESIGN.md, "The refill cursor").
func (s *Store) cursor(ctx context.Context) (int64, error) {
	// One statement: the counter and the holds from one read view.
	rows, err := s.db.QueryContext(ctx, `SELECT c.value, h.lo, h.created_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
		FROM ax_counters c LEFT JOIN ax_seq_holds h ON TRUE WHERE c.name = 'seq'`, s.grace.Microseconds())
	if err != nil {
		return 0, err
	}
	var safe int64 = math.MaxInt64
	var counter int64
	var old []int64
	for rows.Next() {
		var lo sql.NullInt64
		var stale sql.NullBool
		if err := rows.Scan(&counter, &lo, &stale); err != nil {
			rows.Close()
			return 0, err
		}
		switch {
		case !lo.Valid:
		case stale.Bool:
			old = append(old, lo.Int64)
		default:
			safe = min(safe, lo.Int64-1)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	safe = min(safe, counter)
	if len(old) == 0 {
		return safe, nil
	}
	reaped, err := s.reap(ctx, old)
	if err != nil {
		return 0, err
	}
	for _, lo := range old {
		if !reaped[lo] { // locked by a live transaction (or just released by its commit)
			safe = min(safe, lo-1)
		}
	}
	return safe, nil
}

// reap deletes the holds among los that no transaction has locked: their transactions
// rolled back or died. A transaction that has not yet locked its hold finds it gone
// and takes a fresh range.
func (s *Store) reap(ctx context.Context, los []int64) (map[int64]bool, error) {
	reaped := map[int64]bool{}
	err := s.run(ctx, "reap holds", 0, func(tx *sql.Tx, _ int64) error {
		clear(reaped)
		rows, err := tx.QueryContext(ctx, `SELECT lo FROM ax_seq_holds WHERE lo IN (`+marks(len(los))+`)
			ORDER BY lo FOR UPDATE SKIP LOCKED`, int64s(los)...)
		if err != nil {
			return err
		}
		var free []int64
		for rows.Next() {
			var lo int64
			if err := rows.Scan(&lo); err != nil {
				rows.Close()
				return err
			}
			free = append(free, lo)
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(free) == 0 {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM ax_seq_holds WHERE lo IN (`+marks(len(free))+`)`, int64s(free)...); err != nil {
			return err
		}
		for _, lo := range free {
			reaped[lo] = true
		}
		return nil
	})
	return reaped, err
}

// Refill reads changed and newly windowed SCHEDULED tasks of the view's namespace (see
// store.RefillParams). The cursor is global: sequence numbers, the counter and the
// holds are shared by every namespace, and every number up to the cursor is visible or
// abandoned whatever its row's namespace, so filtering the rows read by namespace keeps
// the rule. An open transaction of another namespace may hold a view's cursor back, as
// it would hold back any other writer's rows: later calls return them.
func (s *Store) Refill(ctx context.Context, p store.RefillParams) (*store.RefillResult, error) {
	if err := s.check("refill"); err != nil {
		return nil, err
	}
	if p.Limit <= 0 {
		return nil, fmt.Errorf("ax: mysql: refill: limit %d: %w", p.Limit, store.ErrInvalid)
	}
	// The cursor first: every number up to it is visible to the statements below.
	safe, err := s.cursor(ctx)
	if err != nil {
		return nil, s.wrap("refill", err)
	}
	res := &store.RefillResult{Seq: safe}
	to := dt(clamp(p.To))
	if p.AfterSeq >= 0 {
		res.Seq = max(p.AfterSeq, safe)
		rows, err := s.db.QueryContext(ctx, `SELECT id, due_at, seq, due_at < ? FROM ax_tasks
			WHERE namespace = ? AND status = 'SCHEDULED' AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?`, to, s.ns, p.AfterSeq, safe, p.Limit)
		if err != nil {
			return nil, s.wrap("refill", err)
		}
		n := 0
		for rows.Next() {
			var d store.Due
			var seq int64
			var inWindow bool
			if err := rows.Scan(&d.ID, dbTime{&d.DueAt}, &seq, &inWindow); err != nil {
				rows.Close()
				return nil, s.wrap("refill", err)
			}
			n++
			if inWindow {
				res.Changed = append(res.Changed, d)
			}
			if n == p.Limit {
				res.Seq = seq
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, s.wrap("refill", err)
		}
		res.More = n == p.Limit
	}
	if !p.From.IsZero() && !p.From.Before(p.To) {
		return res, nil
	}
	var rows *sql.Rows
	if p.From.IsZero() {
		rows, err = s.db.QueryContext(ctx, `SELECT id, due_at FROM ax_tasks
			WHERE namespace = ? AND status = 'SCHEDULED' AND due_at < ? ORDER BY due_at, id LIMIT ?`, s.ns, to, p.Limit)
	} else {
		from := dt(clamp(p.From))
		rows, err = s.db.QueryContext(ctx, `SELECT id, due_at FROM ax_tasks
			WHERE namespace = ? AND status = 'SCHEDULED' AND due_at >= ? AND due_at < ? AND (due_at > ? OR id > ?)
			ORDER BY due_at, id LIMIT ?`, s.ns, from, to, from, p.FromID, p.Limit)
	}
	if err != nil {
		return nil, s.wrap("refill", err)
	}
	defer rows.Close()
	for rows.Next() {
		var d store.Due
		if err := rows.Scan(&d.ID, dbTime{&d.DueAt}); err != nil {
			return nil, s.wrap("refill", err)
		}
		res.Entered = append(res.Entered, d)
	}
	if len(res.Entered) == p.Limit {
		res.More = true
	}
	return res, s.wrap("refill", rows.Err())
}

// Stale lists the view's namespace's RUNNING tasks without a heartbeat, or DISPATCHING
// tasks claimed, before a time.
func (s *Store) Stale(ctx context.Context, status store.Status, before time.Time, limit int) ([]store.Task, error) {
	if err := s.check("stale"); err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, fmt.Errorf("ax: mysql: stale: limit %d: %w", limit, store.ErrInvalid)
	}
	var q string
	switch status {
	case store.Running:
		q = `SELECT ` + taskColumns + ` FROM ax_tasks WHERE namespace = ? AND status = 'RUNNING' AND heartbeat_at < ? ORDER BY heartbeat_at, id LIMIT ?`
	case store.Dispatching:
		q = `SELECT ` + taskColumns + ` FROM ax_tasks WHERE namespace = ? AND status = 'DISPATCHING' AND dispatched_at < ? ORDER BY dispatched_at, id LIMIT ?`
	default:
		return nil, fmt.Errorf("ax: mysql: stale %s tasks: %w", status, store.ErrInvalid)
	}
	rows, err := s.db.QueryContext(ctx, q, s.ns, dt(clamp(before)), limit)
	if err != nil {
		return nil, s.wrap("stale", err)
	}
	tasks, err := scanTasks(rows)
	return tasks, s.wrap("stale", err)
}

// taskStatsSQL counts one namespace's tasks per status and, in an uncorrelated
// subquery run once, reads its oldest due SCHEDULED task: a MIN over the (namespace,
// status, due_at) range of ax_tasks_status_due, which the optimizer answers from the
// index alone (see DESIGN.md). Its arguments are the namespace, now, the namespace.
const taskStatsSQL = `SELECT status, COUNT(*),
	(SELECT MIN(due_at) FROM ax_tasks WHERE namespace = ? AND status = 'SCHEDULED' AND due_at <= ?)
	FROM ax_tasks WHERE namespace = ? GROUP BY status`

// TaskStats counts the view's namespace's tasks per status and finds its oldest due
// SCHEDULED task, in one statement: one round trip and one read view (see
// store.Store). The counts read the namespace's whole range of an index. A zero now is store.ErrInvalid; one outside years 1000-9999 is
// clamped.
func (s *Store) TaskStats(ctx context.Context, now time.Time) (*store.TaskStats, error) {
	if err := s.check("task stats"); err != nil {
		return nil, err
	}
	if now.IsZero() {
		return nil, fmt.Errorf("ax: mysql: task stats: zero time: %w", store.ErrInvalid)
	}
	rows, err := s.db.QueryContext(ctx, taskStatsSQL, s.ns, dt(clamp(now)), s.ns)
	if err != nil {
		return nil, s.wrap("task stats", err)
	}
	defer rows.Close()
	st := driverkit.NewTaskStats()
	for rows.Next() {
		var status string
		var n int64
		if err := rows.Scan(&status, &n, dbTime{&st.OldestDue}); err != nil {
			return nil, s.wrap("task stats", err)
		}
		st.Counts[store.Status(status)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("task stats", err)
	}
	return st, nil
}
