package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// Insert writes new SCHEDULED tasks into the view's namespace, in one transaction (see
// store.Store). The business key is unique per namespace.
func (s *Store) Insert(ctx context.Context, tasks []store.NewTask) ([]store.Inserted, error) {
	if err := validNew("insert", tasks); err != nil {
		return nil, err
	}
	out := make([]store.Inserted, len(tasks))
	err := s.write(ctx, "insert", func(tx *sql.Tx) error { return s.insert(ctx, tx, s.batch, tasks, out) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// validNew checks tasks as the contract asks of Insert; op names the caller in the
// error.
func validNew(op string, tasks []store.NewTask) error {
	for i, nt := range tasks {
		if err := driverkit.CheckNewTask(nt); err != nil {
			return fmt.Errorf("ax: sqlite: %s: task %d: %w", op, i, err)
		}
	}
	return nil
}

// insert writes tasks in tx and fills out, one result per task. run is s.batch on
// the store's writer, s.batchText in a transaction of the caller's.
//
// A task whose key is taken by a task that no longer holds it (store.KeyHold) is
// written by a second statement, after releaseSQL has moved the old task off the key;
// a task whose key is held is a duplicate of the holder.
func (s *Store) insert(ctx context.Context, tx *sql.Tx, run batchFunc, tasks []store.NewTask, out []store.Inserted) error {
	seq, err := nextSeq(ctx, tx, len(tasks))
	if err != nil {
		return err
	}
	ts := micros(now())
	write := func(rows []int) (missing []int, err error) {
		args := make([]any, 0, insertStmt.cols*len(rows))
		for _, i := range rows {
			nt := tasks[i]
			var until any
			if !nt.KeyUntil.IsZero() {
				until = micros(nt.KeyUntil)
			}
			args = append(args, nt.Name, nt.Key, nt.Payload != nil && len(nt.Payload) == 0, nt.Payload, micros(nt.DueAt),
				nt.MaxRetry, nt.OwnerService, nt.Timeout.Microseconds(), driverkit.FormatBackoff(nt.Backoff), seq+int64(i),
				nt.TaskKey, string(nt.Overlap), string(nt.KeyHold), until)
		}
		// Each row written answers with its id and sequence number, seq+i for input i:
		// the task is the input as stored, read back from no row.
		res, err := run(ctx, tx, insertStmt, []any{ts, ts, s.ns}, args, nil)
		if err != nil {
			return nil, err
		}
		ids := make(map[int]int64, len(rows))
		for res.Next() {
			var id, n int64
			if err := res.Scan(&id, &n); err != nil {
				res.Close()
				return nil, err
			}
			ids[int(n-seq)] = id
		}
		res.Close()
		if err := res.Err(); err != nil {
			return nil, err
		}
		for _, i := range rows {
			if id, ok := ids[i]; ok {
				out[i].Task = driverkit.Stored(&tasks[i], id, fromMicros(ts), fromMicros(ts))
			} else {
				missing = append(missing, i)
			}
		}
		return missing, nil
	}
	return chunks(len(tasks), func(lo, hi int) error {
		rows := make([]int, 0, hi-lo)
		for i := lo; i < hi; i++ {
			rows = append(rows, i)
		}
		missing, err := write(rows)
		if err != nil || len(missing) == 0 {
			return err
		}
		var freed, held []int
		for _, i := range missing {
			res, err := tx.ExecContext(ctx, releaseSQL, ts, s.ns, tasks[i].Name, tasks[i].Key)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n > 0 {
				freed = append(freed, i)
			} else {
				held = append(held, i)
			}
		}
		if len(freed) > 0 {
			again, err := write(freed) // what is still missing: a second copy of a freed key
			if err != nil {
				return err
			}
			held = append(held, again...)
		}
		for _, i := range held {
			t, err := scanTask(tx.QueryRowContext(ctx, holderOfKeySQL, s.ns, tasks[i].Name, tasks[i].Key))
			if err != nil {
				return err
			}
			out[i] = store.Inserted{Task: t, Err: store.ErrDuplicate}
		}
		return nil
	})
}

// keyFreeSQL is store.KeyHold.Frees over a task's columns, with ? the time now.
const keyFreeSQL = `key_hold <> 'forever' AND (key_until IS NULL OR key_until <= ?)
	AND (status IN ('SUCCEEDED', 'CANCELLED', 'SKIPPED') OR status = 'FAILED' AND key_hold = 'active')`

// releaseSQL moves the task holding a business key off it, if it no longer holds it
// at the given time: its key_slot becomes its id, which makes it Superseded and
// leaves slot 0 to the insert that follows.
const releaseSQL = `UPDATE ax_tasks SET key_slot = id WHERE ` + keyFreeSQL + `
	AND namespace = ? AND name = ? AND key = ? AND key_slot = 0`

const (
	// getSQL reads one task of the view's namespace by id (the primary key).
	getSQL = `SELECT ` + taskColumns + ` FROM ax_tasks WHERE id = ? AND +namespace = ?`
	// lookupSQL reads the newest task of a business key (ax_tasks_ns_name_key): the
	// one holding it, if any, for every other gave it up to a newer one.
	lookupSQL = `SELECT ` + taskColumns + ` FROM ax_tasks WHERE namespace = ? AND name = ? AND key = ? ORDER BY id DESC LIMIT 1`
	// holderOfKeySQL reads the task holding a business key.
	holderOfKeySQL = `SELECT ` + taskColumns + ` FROM ax_tasks WHERE namespace = ? AND name = ? AND key = ? AND key_slot = 0`
)

// Get returns one task of the view's namespace.
func (s *Store) Get(ctx context.Context, id int64) (*store.Task, error) {
	return s.get(ctx, s.r, id)
}

// rowQuerier is what reads one row: the read pool, or a transaction.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// get is Get through q: the read pool, or a store.Tx's transaction.
func (s *Store) get(ctx context.Context, q rowQuerier, id int64) (*store.Task, error) {
	t, err := scanTask(q.QueryRowContext(ctx, getSQL, id, s.ns))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ax: sqlite: get task %d: %w", id, store.ErrNotFound)
	}
	return t, s.wrap("get task", err)
}

// Lookup returns the task of the view's namespace with this name and key.
func (s *Store) Lookup(ctx context.Context, name, key string) (*store.Task, error) {
	t, err := scanTask(s.r.QueryRowContext(ctx, lookupSQL, s.ns, name, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ax: sqlite: lookup %q/%q: %w", name, key, store.ErrNotFound)
	}
	return t, s.wrap("lookup task", err)
}

// Executions returns a task's executions, oldest first; a task of another namespace
// is store.ErrNotFound.
func (s *Store) Executions(ctx context.Context, taskID int64) ([]store.Execution, error) {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, s.wrap("executions", err)
	}
	defer tx.Rollback()
	var one int
	if err := tx.QueryRowContext(ctx, `SELECT 1 FROM ax_tasks WHERE id = ? AND +namespace = ?`, taskID, s.ns).Scan(&one); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("ax: sqlite: executions of task %d: %w", taskID, store.ErrNotFound)
		}
		return nil, s.wrap("executions", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+executionColumns+` FROM ax_executions WHERE task_id = ? ORDER BY started_at, id`, taskID)
	if err != nil {
		return nil, s.wrap("executions", err)
	}
	out, err := collect(rows, scanExecution)
	return out, s.wrap("executions", err)
}

// Cancel moves a SCHEDULED task to CANCELLED.
func (s *Store) Cancel(ctx context.Context, name, key string) (*store.Task, error) {
	var t *store.Task
	var sentinel error
	err := s.write(ctx, "cancel", func(tx *sql.Tx) error {
		var err error
		t, sentinel, err = s.cancelIn(ctx, tx, name, key)
		return err
	})
	if err != nil {
		return nil, err
	}
	return cancelled(name, key, t, sentinel)
}

// cancelled is the answer of a cancel of (name, key) that found t, and refused it
// with sentinel unless nil.
func cancelled(name, key string, t *store.Task, sentinel error) (*store.Task, error) {
	if sentinel != nil {
		return driverkit.Refusal(fmt.Sprintf("ax: sqlite: cancel %q/%q", name, key), t, sentinel)
	}
	return t, nil
}

// cancelIn cancels the task in tx: the task cancelled, or the task as it is (nil
// when there is none) with the refusal's sentinel; err is the database's.
func (s *Store) cancelIn(ctx context.Context, tx *sql.Tx, name, key string) (t *store.Task, refusal, err error) {
	ts := micros(now())
	t, err = scanTask(tx.QueryRowContext(ctx, `UPDATE ax_tasks SET status = 'CANCELLED', updated_at = ?, finished_at = ?
		WHERE namespace = ? AND name = ? AND key = ? AND key_slot = 0 AND status = 'SCHEDULED' RETURNING `+taskColumns, ts, ts, s.ns, name, key))
	if !errors.Is(err, sql.ErrNoRows) {
		return t, nil, err
	}
	return s.refused(ctx, tx, store.ErrNotCancellable, lookupSQL, s.ns, name, key)
}

// refused reads the task a transition did not apply to, by read with args: the task
// and sentinel, or ErrNotFound when there is none.
func (s *Store) refused(ctx context.Context, tx *sql.Tx, sentinel error, read string, args ...any) (t *store.Task, refusal, err error) {
	t, err = scanTask(tx.QueryRowContext(ctx, read, args...))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, store.ErrNotFound, nil
	case err != nil:
		return nil, nil, err
	}
	return t, sentinel, nil
}

// Reschedule moves the SCHEDULED task (name, key) of the view's namespace to due at
// at, with a fresh sequence number, in one write transaction.
func (s *Store) Reschedule(ctx context.Context, name, key string, at time.Time) (*store.Task, error) {
	op := fmt.Sprintf("ax: sqlite: reschedule %q/%q", name, key)
	if at.IsZero() {
		return nil, fmt.Errorf("%s: zero due time: %w", op, store.ErrInvalid)
	}
	return s.moveBack(ctx, "reschedule", op, func(tx *sql.Tx, seq int64) (*store.Task, error, error) {
		return s.rescheduleIn(ctx, tx, seq, name, key, at)
	})
}

// rescheduleIn is Reschedule in tx, with sequence number seq: the task moved, or the
// task as it is and the refusal's sentinel.
func (s *Store) rescheduleIn(ctx context.Context, tx *sql.Tx, seq int64, name, key string, at time.Time) (*store.Task, error, error) {
	t, err := scanTask(tx.QueryRowContext(ctx, `UPDATE ax_tasks SET due_at = ?, seq = ?, updated_at = ?
		WHERE namespace = ? AND name = ? AND key = ? AND key_slot = 0 AND status = 'SCHEDULED' RETURNING `+taskColumns,
		micros(at), seq, micros(now()), s.ns, name, key))
	if !errors.Is(err, sql.ErrNoRows) {
		return t, nil, err
	}
	return s.refused(ctx, tx, store.ErrNotReschedulable, lookupSQL, s.ns, name, key)
}

// Retry moves a FAILED task of the view's namespace back to SCHEDULED, due now, with
// a fresh retry budget and sequence number, in one write transaction.
func (s *Store) Retry(ctx context.Context, id int64) (*store.Task, error) {
	return s.moveBack(ctx, "retry", fmt.Sprintf("ax: sqlite: retry task %d", id), func(tx *sql.Tx, seq int64) (*store.Task, error, error) {
		return s.retryIn(ctx, tx, seq, id)
	})
}

// retryIn is Retry in tx, with sequence number seq.
func (s *Store) retryIn(ctx context.Context, tx *sql.Tx, seq, id int64) (*store.Task, error, error) {
	ts := micros(now())
	t, err := scanTask(tx.QueryRowContext(ctx, `UPDATE ax_tasks SET status = 'SCHEDULED', due_at = ?, attempt = 0,
		dispatch_retries = 0, finished_at = NULL, seq = ?, updated_at = ?
		WHERE id = ? AND +namespace = ? AND status = 'FAILED' AND key_slot = 0 RETURNING `+taskColumns, ts, seq, ts, id, s.ns))
	if !errors.Is(err, sql.ErrNoRows) {
		return t, nil, err
	}
	return s.refused(ctx, tx, store.ErrNotRetryable, getSQL, id, s.ns)
}

// MakeDue makes a SCHEDULED or FAILED task of the view's namespace due now, without
// claiming it, with a fresh sequence number, in one write transaction (see
// store.TaskWriter).
func (s *Store) MakeDue(ctx context.Context, id int64) (*store.Task, error) {
	return s.moveBack(ctx, "make due", fmt.Sprintf("ax: sqlite: make task %d due", id), func(tx *sql.Tx, seq int64) (*store.Task, error, error) {
		return s.makeDueIn(ctx, tx, seq, id)
	})
}

// makeDueIn is MakeDue in tx, with sequence number seq: the task SCHEDULED, due now
// and stamped triggered, from FAILED with one more attempt.
func (s *Store) makeDueIn(ctx context.Context, tx *sql.Tx, seq, id int64) (*store.Task, error, error) {
	ts := micros(now())
	t, err := scanTask(tx.QueryRowContext(ctx, `UPDATE ax_tasks SET attempt = attempt + (status = 'FAILED'), status = 'SCHEDULED',
		due_at = ?, finished_at = NULL, triggered_at = ?, seq = ?, updated_at = ?
		WHERE id = ? AND +namespace = ? AND status IN ('SCHEDULED', 'FAILED') AND key_slot = 0 RETURNING `+taskColumns, ts, ts, seq, ts, id, s.ns))
	if !errors.Is(err, sql.ErrNoRows) {
		return t, nil, err
	}
	return s.refused(ctx, tx, store.ErrNotTriggerable, getSQL, id, s.ns)
}

// moveBack runs move, a transition that leaves one task SCHEDULED, in a write
// transaction with a fresh sequence number for it, and turns a refusal into its
// error under op.
func (s *Store) moveBack(ctx context.Context, name, op string, move func(tx *sql.Tx, seq int64) (t *store.Task, refusal, err error)) (*store.Task, error) {
	var t *store.Task
	var sentinel error
	err := s.write(ctx, name, func(tx *sql.Tx) error {
		seq, err := nextSeq(ctx, tx, 1)
		if err != nil {
			return err
		}
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

// taskStatsSQL counts the namespace's tasks per status and, in a scalar subquery
// evaluated once, reads its oldest due SCHEDULED task: a MIN over
// ax_tasks_ns_scheduled_due, which SQLite uses because the subquery's WHERE contains
// the index's (see TestExplain).
const taskStatsSQL = `SELECT status, count(*),
	(SELECT min(due_at) FROM ax_tasks WHERE namespace = ? AND status = 'SCHEDULED' AND due_at <= ?)
	FROM ax_tasks WHERE namespace = ? GROUP BY status`

// TaskStats counts the tasks per status and finds the oldest due SCHEDULED task, in
// one statement on the read pool (one snapshot; no write lock). See store.Store. A
// zero now is store.ErrInvalid.
func (s *Store) TaskStats(ctx context.Context, now time.Time) (*store.TaskStats, error) {
	if now.IsZero() {
		return nil, fmt.Errorf("ax: sqlite: task stats: zero time: %w", store.ErrInvalid)
	}
	rows, err := s.r.QueryContext(ctx, taskStatsSQL, s.ns, micros(now), s.ns)
	if err != nil {
		return nil, s.wrap("task stats", err)
	}
	defer rows.Close()
	st := driverkit.NewTaskStats()
	for rows.Next() {
		var status string
		var n int64
		var oldest sql.NullInt64
		if err := rows.Scan(&status, &n, &oldest); err != nil {
			return nil, s.wrap("task stats", err)
		}
		st.Counts[store.Status(status)] = n
		st.OldestDue = fromNull(oldest)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("task stats", err)
	}
	return st, nil
}

const (
	// refillChangedSQL is the incremental refill: a range of ax_tasks_ns_scheduled_seq.
	refillChangedSQL = `SELECT id, due_at, seq FROM ax_tasks
		WHERE namespace = ? AND status = 'SCHEDULED' AND seq > ? ORDER BY seq LIMIT ?`
	// refillWindowSQL is the window scan: a range of ax_tasks_ns_scheduled_due.
	refillWindowSQL = `SELECT id, due_at FROM ax_tasks
		WHERE namespace = ? AND status = 'SCHEDULED' AND (due_at > ? OR (due_at = ? AND id > ?)) AND due_at < ?
		ORDER BY due_at, id LIMIT ?`
)

// Refill reads the view's namespace's changed and newly windowed SCHEDULED tasks (see
// store.RefillParams). The sequence cursor is the store's, shared by the namespaces.
func (s *Store) Refill(ctx context.Context, p store.RefillParams) (*store.RefillResult, error) {
	if p.Limit <= 0 {
		return nil, fmt.Errorf("ax: sqlite: refill: limit %d: %w", p.Limit, store.ErrInvalid)
	}
	// One read transaction: a snapshot, so the cursor and both scans agree.
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, s.wrap("refill", err)
	}
	defer tx.Rollback()
	res := &store.RefillResult{Seq: p.AfterSeq}
	to := micros(p.To)
	if p.AfterSeq < 0 {
		if err := tx.QueryRowContext(ctx, `SELECT value FROM ax_counters WHERE name = 'seq'`).Scan(&res.Seq); err != nil {
			return nil, s.wrap("refill", err)
		}
	} else {
		rows, err := tx.QueryContext(ctx, refillChangedSQL, s.ns, p.AfterSeq, p.Limit)
		if err != nil {
			return nil, s.wrap("refill", err)
		}
		n := 0
		for rows.Next() {
			var id, due, seq int64
			if err := rows.Scan(&id, &due, &seq); err != nil {
				rows.Close()
				return nil, s.wrap("refill", err)
			}
			n++
			res.Seq = seq
			if due < to {
				res.Changed = append(res.Changed, store.Due{ID: id, DueAt: fromMicros(due)})
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, s.wrap("refill", err)
		}
		res.More = n == p.Limit
	}
	from := int64(-1 << 62)
	if !p.From.IsZero() {
		from = micros(p.From)
	}
	rows, err := tx.QueryContext(ctx, refillWindowSQL, s.ns, from, from, p.FromID, to, p.Limit)
	if err != nil {
		return nil, s.wrap("refill", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, due int64
		if err := rows.Scan(&id, &due); err != nil {
			return nil, s.wrap("refill", err)
		}
		res.Entered = append(res.Entered, store.Due{ID: id, DueAt: fromMicros(due)})
	}
	if len(res.Entered) == p.Limit {
		res.More = true
	}
	return res, s.wrap("refill", rows.Err())
}

const (
	// triggerSQL triggers one task unless its key is held.
	triggerSQL = `UPDATE ax_tasks SET status = 'DISPATCHING', execution_id = ?,
		attempt = attempt + (CASE status WHEN 'FAILED' THEN 1 ELSE 0 END),
		finished_at = NULL, dispatched_at = ?, triggered_at = ?, updated_at = ?
		WHERE id = ? AND +namespace = ? AND status IN ('SCHEDULED', 'FAILED') AND key_slot = 0
			AND (task_key = '' OR overlap = 'allow' OR ` + keyFree + `)
		RETURNING ` + taskColumns
	// holderSQL names the task holding one key of a namespace (ax_tasks_ns_key_holder).
	holderSQL = `SELECT MIN(id) FROM ax_tasks WHERE namespace = ? AND task_key = ? AND ` + holding
)

// Trigger moves a SCHEDULED or FAILED task to DISPATCHING now. A task with a key
// and Overlap skip or queue is refused, with driverkit.KeyHeld, while another task holds
// the key: the check is part of the UPDATE, under the writer lock Claim holds too.
func (s *Store) Trigger(ctx context.Context, id int64, executionID string) (*store.Task, error) {
	if executionID == "" {
		return nil, fmt.Errorf("ax: sqlite: trigger task %d: empty execution id: %w", id, store.ErrInvalid)
	}
	var t *store.Task
	var sentinel error
	var holder int64
	err := s.write(ctx, "trigger", func(tx *sql.Tx) error {
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
	if holder != 0 {
		return driverkit.KeyHeld(fmt.Sprintf("ax: sqlite: trigger task %d", id), t, holder)
	}
	if sentinel != nil {
		return driverkit.Refusal(fmt.Sprintf("ax: sqlite: trigger task %d", id), t, sentinel)
	}
	return t, nil
}

// triggerIn is Trigger in tx: the task as it is afterwards, and the refusal's
// sentinel, or the holder of its key.
func (s *Store) triggerIn(ctx context.Context, tx *sql.Tx, id int64, executionID string) (t *store.Task, sentinel error, holder int64, err error) {
	ts := micros(now())
	t, err = scanTask(tx.QueryRowContext(ctx, triggerSQL, executionID, ts, ts, ts, id, s.ns))
	if !errors.Is(err, sql.ErrNoRows) {
		return t, nil, 0, err
	}
	t, err = scanTask(tx.QueryRowContext(ctx, getSQL, id, s.ns))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, store.ErrNotFound, 0, nil
	case err != nil:
		return nil, nil, 0, err
	}
	if t.Status != store.Scheduled && t.Status != store.Failed || t.Superseded {
		return t, store.ErrNotTriggerable, 0, nil
	}
	// Triggerable but not triggered: its key is held. Name the holder.
	var h sql.NullInt64
	if err := tx.QueryRowContext(ctx, holderSQL, s.ns, t.TaskKey).Scan(&h); err != nil {
		return nil, nil, 0, err
	}
	if !h.Valid { // cannot happen: the UPDATE saw a holder under the same lock
		return nil, nil, 0, fmt.Errorf("task %d is %s with a free key %q but was not triggered", id, t.Status, t.TaskKey)
	}
	return t, store.ErrNotTriggerable, h.Int64, nil
}

// Requeue hands undispatched tasks back to SCHEDULED, or FAILED when their dispatch
// retries are exhausted, if fence admits it (see fence.go).
func (s *Store) Requeue(ctx context.Context, fence store.Fence, requeues []store.Requeue) ([]bool, error) {
	if err := driverkit.CheckFence(fence); err != nil {
		return nil, fmt.Errorf("ax: sqlite: requeue: %w", err)
	}
	out := make([]bool, len(requeues))
	order := driverkit.SortedOrder(len(requeues), func(i int) int64 { return requeues[i].TaskID })
	err := s.write(ctx, "requeue", func(tx *sql.Tx) error {
		if err := checkFence(ctx, tx, fence); err != nil {
			return err
		}
		seq, err := nextSeq(ctx, tx, len(requeues))
		if err != nil {
			return err
		}
		upd, err := tx.PrepareContext(ctx, `UPDATE ax_tasks SET
			status = CASE WHEN dispatch_retries + 1 > ? THEN 'FAILED' ELSE 'SCHEDULED' END,
			finished_at = CASE WHEN dispatch_retries + 1 > ? THEN ? ELSE NULL END,
			due_at = CASE WHEN dispatch_retries + 1 > ? THEN due_at ELSE ? END,
			dispatch_retries = dispatch_retries + 1, last_error = ?, seq = ?, updated_at = ?
			WHERE id = ? AND status = 'DISPATCHING' AND execution_id = ? AND +namespace = ?`)
		if err != nil {
			return err
		}
		defer upd.Close()
		ts := micros(now())
		for k, i := range order {
			r := requeues[i]
			out[i], err = applied(upd.ExecContext(ctx, r.MaxDispatchRetries, r.MaxDispatchRetries, ts,
				r.MaxDispatchRetries, micros(r.DueAt), r.Error, seq+int64(k), ts, r.TaskID, r.ExecutionID, s.ns))
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// The inspector's scans, ranges of ax_tasks_ns_running_heartbeat and
// ax_tasks_ns_dispatching_since.
const (
	staleRunningSQL = `SELECT ` + taskColumns + ` FROM ax_tasks
		WHERE namespace = ? AND status = 'RUNNING' AND heartbeat_at < ? ORDER BY heartbeat_at, id LIMIT ?`
	staleDispatchingSQL = `SELECT ` + taskColumns + ` FROM ax_tasks
		WHERE namespace = ? AND status = 'DISPATCHING' AND dispatched_at < ? ORDER BY dispatched_at, id LIMIT ?`
)

// Stale lists the view's namespace's RUNNING tasks without a heartbeat, or DISPATCHING
// tasks claimed, before a time.
func (s *Store) Stale(ctx context.Context, status store.Status, before time.Time, limit int) ([]store.Task, error) {
	if limit < 1 {
		return nil, fmt.Errorf("ax: sqlite: stale: limit %d: %w", limit, store.ErrInvalid)
	}
	var q string
	switch status {
	case store.Running:
		q = staleRunningSQL
	case store.Dispatching:
		q = staleDispatchingSQL
	default:
		return nil, fmt.Errorf("ax: sqlite: stale %s tasks: %w", status, store.ErrInvalid)
	}
	out, err := scanTasks(s.r.QueryContext(ctx, q, s.ns, micros(before), limit))
	return out, s.wrap("stale", err)
}

func applied(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
