package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/axsched/ax/store"
)

// Insert writes new SCHEDULED tasks in one transaction (see store.Store).
func (s *Store) Insert(ctx context.Context, tasks []store.NewTask) ([]store.Inserted, error) {
	out := make([]store.Inserted, len(tasks))
	for i := range tasks {
		if tasks[i].Name == "" || tasks[i].Key == "" || tasks[i].DueAt.IsZero() {
			return nil, fmt.Errorf("ax: sqlite: insert: task %d: empty name, key or due time: %w", i, store.ErrInvalid)
		}
	}
	err := s.write(ctx, "insert", func(tx *sql.Tx) error {
		seq, err := nextSeq(ctx, tx, len(tasks))
		if err != nil {
			return err
		}
		ins, err := tx.PrepareContext(ctx, `INSERT INTO ax_tasks
			(name, key, payload, status, due_at, max_retry, owner_service, timeout_us, backoff, seq, created_at, updated_at)
			VALUES (?, ?, CASE WHEN ? THEN X'' ELSE ? END, 'SCHEDULED', ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (name, key) DO NOTHING
			RETURNING `+taskColumns)
		if err != nil {
			return err
		}
		defer ins.Close()
		ts := micros(now())
		for i, nt := range tasks {
			t, err := scanTask(ins.QueryRowContext(ctx, nt.Name, nt.Key, nt.Payload != nil && len(nt.Payload) == 0, nt.Payload, micros(nt.DueAt), nt.MaxRetry,
				nt.OwnerService, nt.Timeout.Microseconds(), formatBackoff(nt.Backoff), seq+int64(i), ts, ts))
			if err == nil {
				out[i] = store.Inserted{Task: t}
				continue
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			t, err = scanTask(tx.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM ax_tasks WHERE name = ? AND key = ?`, nt.Name, nt.Key))
			if err != nil {
				return err
			}
			out[i] = store.Inserted{Task: t, Err: store.ErrDuplicate}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Get returns one task.
func (s *Store) Get(ctx context.Context, id int64) (*store.Task, error) {
	t, err := scanTask(s.r.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM ax_tasks WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ax: sqlite: get task %d: %w", id, store.ErrNotFound)
	}
	return t, s.wrap("get task", err)
}

// Lookup returns the task with this name and key.
func (s *Store) Lookup(ctx context.Context, name, key string) (*store.Task, error) {
	t, err := scanTask(s.r.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM ax_tasks WHERE name = ? AND key = ?`, name, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ax: sqlite: lookup %q/%q: %w", name, key, store.ErrNotFound)
	}
	return t, s.wrap("lookup task", err)
}

// Executions returns a task's executions, oldest first.
func (s *Store) Executions(ctx context.Context, taskID int64) ([]store.Execution, error) {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, s.wrap("executions", err)
	}
	defer tx.Rollback()
	var one int
	if err := tx.QueryRowContext(ctx, `SELECT 1 FROM ax_tasks WHERE id = ?`, taskID).Scan(&one); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("ax: sqlite: executions of task %d: %w", taskID, store.ErrNotFound)
		}
		return nil, s.wrap("executions", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+executionColumns+` FROM ax_executions WHERE task_id = ? ORDER BY started_at, id`, taskID)
	if err != nil {
		return nil, s.wrap("executions", err)
	}
	defer rows.Close()
	out := []store.Execution{}
	for rows.Next() {
		e, err := scanExecution(rows)
		if err != nil {
			return nil, s.wrap("executions", err)
		}
		out = append(out, *e)
	}
	return out, s.wrap("executions", rows.Err())
}

// Cancel moves a SCHEDULED task to CANCELLED.
func (s *Store) Cancel(ctx context.Context, name, key string) (*store.Task, error) {
	var t *store.Task
	var sentinel error
	err := s.write(ctx, "cancel", func(tx *sql.Tx) error {
		ts := micros(now())
		var err error
		t, err = scanTask(tx.QueryRowContext(ctx, `UPDATE ax_tasks SET status = 'CANCELLED', updated_at = ?, finished_at = ?
			WHERE name = ? AND key = ? AND status = 'SCHEDULED' RETURNING `+taskColumns, ts, ts, name, key))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		t, err = scanTask(tx.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM ax_tasks WHERE name = ? AND key = ?`, name, key))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			sentinel = store.ErrNotFound
			return nil
		case err != nil:
			return err
		}
		sentinel = store.ErrNotCancellable
		return nil
	})
	if err != nil {
		return nil, err
	}
	if sentinel != nil {
		if t != nil {
			return t, fmt.Errorf("ax: sqlite: cancel %q/%q: task is %s: %w", name, key, t.Status, sentinel)
		}
		return nil, fmt.Errorf("ax: sqlite: cancel %q/%q: %w", name, key, sentinel)
	}
	return t, nil
}

// Refill reads changed and newly windowed SCHEDULED tasks (see store.RefillParams).
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
		rows, err := tx.QueryContext(ctx, `SELECT id, due_at, seq FROM ax_tasks
			WHERE status = 'SCHEDULED' AND seq > ? ORDER BY seq LIMIT ?`, p.AfterSeq, p.Limit)
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
	rows, err := tx.QueryContext(ctx, `SELECT id, due_at FROM ax_tasks
		WHERE status = 'SCHEDULED' AND (due_at > ? OR (due_at = ? AND id > ?)) AND due_at < ?
		ORDER BY due_at, id LIMIT ?`, from, from, p.FromID, to, p.Limit)
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

// Claim moves due SCHEDULED tasks to DISPATCHING.
func (s *Store) Claim(ctx context.Context, claims []store.Claim) (*store.ClaimResult, error) {
	for i, c := range claims {
		if c.ExecutionID == "" {
			return nil, fmt.Errorf("ax: sqlite: claim: claim %d: empty execution id: %w", i, store.ErrInvalid)
		}
	}
	claims = slices.Clone(claims)
	slices.SortFunc(claims, func(a, b store.Claim) int { return cmp.Compare(a.ID, b.ID) })
	res := &store.ClaimResult{}
	err := s.write(ctx, "claim", func(tx *sql.Tx) error {
		res.Claimed, res.NotDue = res.Claimed[:0], res.NotDue[:0]
		upd, err := tx.PrepareContext(ctx, `UPDATE ax_tasks SET status = 'DISPATCHING', execution_id = ?,
			dispatched_at = ?, updated_at = ?
			WHERE id = ? AND status = 'SCHEDULED' AND due_at <= ? RETURNING `+taskColumns)
		if err != nil {
			return err
		}
		defer upd.Close()
		ts := micros(now())
		var missed []int64
		for _, c := range claims {
			t, err := scanTask(upd.QueryRowContext(ctx, c.ExecutionID, ts, ts, c.ID, ts))
			switch {
			case err == nil:
				res.Claimed = append(res.Claimed, *t)
			case errors.Is(err, sql.ErrNoRows):
				missed = append(missed, c.ID)
			default:
				return err
			}
		}
		for _, id := range missed {
			var due int64
			err := tx.QueryRowContext(ctx, `SELECT due_at FROM ax_tasks WHERE id = ? AND status = 'SCHEDULED'`, id).Scan(&due)
			switch {
			case err == nil:
				res.NotDue = append(res.NotDue, store.Due{ID: id, DueAt: fromMicros(due)})
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Trigger moves a SCHEDULED or FAILED task to DISPATCHING now.
func (s *Store) Trigger(ctx context.Context, id int64, executionID string) (*store.Task, error) {
	if executionID == "" {
		return nil, fmt.Errorf("ax: sqlite: trigger task %d: empty execution id: %w", id, store.ErrInvalid)
	}
	var t *store.Task
	var sentinel error
	err := s.write(ctx, "trigger", func(tx *sql.Tx) error {
		ts := micros(now())
		var err error
		t, err = scanTask(tx.QueryRowContext(ctx, `UPDATE ax_tasks SET status = 'DISPATCHING', execution_id = ?,
			attempt = attempt + (CASE status WHEN 'FAILED' THEN 1 ELSE 0 END),
			finished_at = NULL, dispatched_at = ?, triggered_at = ?, updated_at = ?
			WHERE id = ? AND status IN ('SCHEDULED', 'FAILED') RETURNING `+taskColumns, executionID, ts, ts, ts, id))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		t, err = scanTask(tx.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM ax_tasks WHERE id = ?`, id))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			sentinel = store.ErrNotFound
			return nil
		case err != nil:
			return err
		}
		sentinel = store.ErrNotTriggerable
		return nil
	})
	if err != nil {
		return nil, err
	}
	if sentinel != nil {
		if t != nil {
			return t, fmt.Errorf("ax: sqlite: trigger task %d: task is %s: %w", id, t.Status, sentinel)
		}
		return nil, fmt.Errorf("ax: sqlite: trigger task %d: %w", id, sentinel)
	}
	return t, nil
}

// Start records executions and moves their tasks to RUNNING.
func (s *Store) Start(ctx context.Context, starts []store.StartParams) ([]store.StartResult, error) {
	for i, sp := range starts {
		if sp.ExecutionID == "" {
			return nil, fmt.Errorf("ax: sqlite: start: execution %d: empty execution id: %w", i, store.ErrInvalid)
		}
	}
	out := make([]store.StartResult, len(starts))
	order := sortedOrder(len(starts), func(i int) int64 { return starts[i].TaskID })
	err := s.write(ctx, "start", func(tx *sql.Tx) error {
		ins, err := tx.PrepareContext(ctx, `INSERT INTO ax_executions (id, task_id, attempt, node, status, started_at, heartbeat_at)
			SELECT ?, id, attempt, ?, 'RUNNING', ?, ? FROM ax_tasks WHERE id = ? AND status = 'DISPATCHING' AND execution_id = ?
			ON CONFLICT (id) DO NOTHING
			RETURNING `+executionColumns)
		if err != nil {
			return err
		}
		defer ins.Close()
		upd, err := tx.PrepareContext(ctx, `UPDATE ax_tasks SET status = 'RUNNING', started_at = ?, heartbeat_at = ?, updated_at = ?
			WHERE id = ? AND status = 'DISPATCHING' AND execution_id = ? RETURNING `+taskColumns)
		if err != nil {
			return err
		}
		defer upd.Close()
		ts := micros(now())
		for _, i := range order {
			sp := starts[i]
			e, err := scanExecution(ins.QueryRowContext(ctx, sp.ExecutionID, sp.Node, ts, ts, sp.TaskID, sp.ExecutionID))
			if errors.Is(err, sql.ErrNoRows) {
				// Either the id is recorded already (a duplicate delivery), or the task
				// moved on: tell the two apart by the record.
				e, err = scanExecution(tx.QueryRowContext(ctx, `SELECT `+executionColumns+` FROM ax_executions WHERE id = ?`, sp.ExecutionID))
				switch {
				case err == nil:
					out[i] = store.StartResult{Outcome: store.Duplicate, Execution: e}
				case errors.Is(err, sql.ErrNoRows):
					out[i] = store.StartResult{Outcome: store.Lost}
				default:
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			t, err := scanTask(upd.QueryRowContext(ctx, ts, ts, ts, sp.TaskID, sp.ExecutionID))
			if err != nil {
				return err // the INSERT … SELECT just saw the same condition hold
			}
			out[i] = store.StartResult{Outcome: store.Started, Task: t, Execution: e}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Heartbeat stamps heartbeat_at on running executions.
func (s *Store) Heartbeat(ctx context.Context, refs []store.ExecRef) ([]bool, error) {
	out := make([]bool, len(refs))
	order := sortedOrder(len(refs), func(i int) int64 { return refs[i].TaskID })
	err := s.write(ctx, "heartbeat", func(tx *sql.Tx) error {
		upd, err := tx.PrepareContext(ctx, `UPDATE ax_tasks SET heartbeat_at = ?
			WHERE id = ? AND status = 'RUNNING' AND execution_id = ?`)
		if err != nil {
			return err
		}
		defer upd.Close()
		updExec, err := tx.PrepareContext(ctx, `UPDATE ax_executions SET heartbeat_at = ? WHERE id = ?`)
		if err != nil {
			return err
		}
		defer updExec.Close()
		ts := micros(now())
		for _, i := range order {
			ok, err := applied(upd.ExecContext(ctx, ts, refs[i].TaskID, refs[i].ExecutionID))
			if err != nil {
				return err
			}
			if out[i] = ok; ok {
				if _, err := updExec.ExecContext(ctx, ts, refs[i].ExecutionID); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Finish records execution results.
func (s *Store) Finish(ctx context.Context, results []store.Finish) ([]bool, error) {
	for i, f := range results {
		switch {
		case f.Status != store.Succeeded && f.Status != store.Scheduled && f.Status != store.Failed:
			return nil, fmt.Errorf("ax: sqlite: finish: result %d: status %s: %w", i, f.Status, store.ErrInvalid)
		case f.ExecutionID == "":
			return nil, fmt.Errorf("ax: sqlite: finish: result %d: empty execution id: %w", i, store.ErrInvalid)
		case f.Status == store.Scheduled && f.DueAt.IsZero():
			return nil, fmt.Errorf("ax: sqlite: finish: result %d: retry without a due time: %w", i, store.ErrInvalid)
		}
	}
	out := make([]bool, len(results))
	order := sortedOrder(len(results), func(i int) int64 { return results[i].TaskID })
	err := s.write(ctx, "finish", func(tx *sql.Tx) error {
		var retries int
		for _, f := range results {
			if f.Status == store.Scheduled {
				retries++
			}
		}
		seq, err := nextSeq(ctx, tx, retries)
		if err != nil {
			return err
		}
		done, err := tx.PrepareContext(ctx, `UPDATE ax_tasks SET status = ?, last_error = COALESCE(?, last_error), finished_at = ?, updated_at = ?
			WHERE id = ? AND status = 'RUNNING' AND execution_id = ?`)
		if err != nil {
			return err
		}
		defer done.Close()
		retry, err := tx.PrepareContext(ctx, `UPDATE ax_tasks SET status = 'SCHEDULED', last_error = ?, attempt = ?, due_at = ?,
			seq = ?, updated_at = ?
			WHERE id = ? AND status = 'RUNNING' AND execution_id = ?`)
		if err != nil {
			return err
		}
		defer retry.Close()
		closeExec, err := tx.PrepareContext(ctx, `UPDATE ax_executions SET status = ?, error = ?, finished_at = ? WHERE id = ?`)
		if err != nil {
			return err
		}
		defer closeExec.Close()
		ts := micros(now())
		for _, i := range order {
			f := results[i]
			var ok bool
			execStatus := store.Failed
			switch f.Status {
			case store.Succeeded:
				execStatus = store.Succeeded
				ok, err = applied(done.ExecContext(ctx, string(f.Status), nil, ts, ts, f.TaskID, f.ExecutionID))
			case store.Failed:
				ok, err = applied(done.ExecContext(ctx, string(f.Status), f.Error, ts, ts, f.TaskID, f.ExecutionID))
			case store.Scheduled:
				ok, err = applied(retry.ExecContext(ctx, f.Error, f.Attempt, micros(f.DueAt), seq, ts, f.TaskID, f.ExecutionID))
				seq++
			}
			if err != nil {
				return err
			}
			if out[i] = ok; ok {
				if _, err := closeExec.ExecContext(ctx, string(execStatus), f.Error, ts, f.ExecutionID); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Requeue hands undispatched tasks back to SCHEDULED, or FAILED when their dispatch
// retries are exhausted.
func (s *Store) Requeue(ctx context.Context, requeues []store.Requeue) ([]bool, error) {
	out := make([]bool, len(requeues))
	order := sortedOrder(len(requeues), func(i int) int64 { return requeues[i].TaskID })
	err := s.write(ctx, "requeue", func(tx *sql.Tx) error {
		seq, err := nextSeq(ctx, tx, len(requeues))
		if err != nil {
			return err
		}
		upd, err := tx.PrepareContext(ctx, `UPDATE ax_tasks SET
			status = CASE WHEN dispatch_retries + 1 > ? THEN 'FAILED' ELSE 'SCHEDULED' END,
			finished_at = CASE WHEN dispatch_retries + 1 > ? THEN ? ELSE NULL END,
			due_at = CASE WHEN dispatch_retries + 1 > ? THEN due_at ELSE ? END,
			dispatch_retries = dispatch_retries + 1, last_error = ?, seq = ?, updated_at = ?
			WHERE id = ? AND status = 'DISPATCHING' AND execution_id = ?`)
		if err != nil {
			return err
		}
		defer upd.Close()
		ts := micros(now())
		for k, i := range order {
			r := requeues[i]
			out[i], err = applied(upd.ExecContext(ctx, r.MaxDispatchRetries, r.MaxDispatchRetries, ts,
				r.MaxDispatchRetries, micros(r.DueAt), r.Error, seq+int64(k), ts, r.TaskID, r.ExecutionID))
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

// Stale lists RUNNING tasks without a heartbeat, or DISPATCHING tasks claimed, before
// a time.
func (s *Store) Stale(ctx context.Context, status store.Status, before time.Time, limit int) ([]store.Task, error) {
	if limit < 1 {
		return nil, fmt.Errorf("ax: sqlite: stale: limit %d: %w", limit, store.ErrInvalid)
	}
	var q string
	switch status {
	case store.Running:
		q = `SELECT ` + taskColumns + ` FROM ax_tasks WHERE status = 'RUNNING' AND heartbeat_at < ? ORDER BY heartbeat_at, id LIMIT ?`
	case store.Dispatching:
		q = `SELECT ` + taskColumns + ` FROM ax_tasks WHERE status = 'DISPATCHING' AND dispatched_at < ? ORDER BY dispatched_at, id LIMIT ?`
	default:
		return nil, fmt.Errorf("ax: sqlite: stale %s tasks: %w", status, store.ErrInvalid)
	}
	rows, err := s.r.QueryContext(ctx, q, micros(before), limit)
	if err != nil {
		return nil, s.wrap("stale", err)
	}
	defer rows.Close()
	var out []store.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, s.wrap("stale", err)
		}
		out = append(out, *t)
	}
	return out, s.wrap("stale", rows.Err())
}

func applied(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// sortedOrder returns the indexes 0..n-1 ordered by ascending id, so that every batch
// touches rows in the same order.
func sortedOrder(n int, id func(i int) int64) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(id(a), id(b)) })
	return order
}
