package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
)

// Start records executions and moves their tasks to RUNNING, if fence admits them
// (see fence.go).
func (s *Store) Start(ctx context.Context, fence store.Fence, starts []store.StartParams) ([]store.StartResult, error) {
	if err := driverkit.CheckFence(fence); err != nil {
		return nil, fmt.Errorf("ax: sqlite: start: %w", err)
	}
	if err := driverkit.CheckStarts(starts); err != nil {
		return nil, fmt.Errorf("ax: sqlite: start: %w", err)
	}
	out := make([]store.StartResult, len(starts))
	order := driverkit.SortedOrder(len(starts), func(i int) int64 { return starts[i].TaskID })
	err := s.write(ctx, "start", func(tx *sql.Tx) error {
		if err := checkFence(ctx, tx, fence); err != nil {
			return err
		}
		ts := micros(now())
		return chunks(len(order), func(lo, hi int) error {
			part := order[lo:hi]
			// 1. The execution records, for tasks of the namespace DISPATCHING with
			//    that execution id and name. An id recorded already conflicts: a
			//    duplicate delivery.
			args := make([]any, 0, 4*len(part))
			for _, i := range part {
				args = append(args, starts[i].TaskID, starts[i].ExecutionID, starts[i].Node, starts[i].Name)
			}
			inserted, err := scanStrings(s.batch(ctx, tx, recordStmt, []any{ts, ts}, args, []any{s.ns}))
			if err != nil {
				return err
			}
			// 2. The transition, for exactly those.
			tasks := map[int64]*store.Task{}
			if len(inserted) > 0 {
				args = args[:0]
				for _, i := range part {
					if inserted[starts[i].ExecutionID] {
						args = append(args, starts[i].TaskID, starts[i].ExecutionID)
					}
				}
				rows, err := s.batch(ctx, tx, runStmt, []any{ts, ts, ts}, args, nil)
				started, err := scanTasksN(rows, err, len(inserted))
				if err != nil {
					return err
				}
				for k := range started {
					tasks[started[k].ID] = &started[k]
				}
			}
			// 3. What is recorded for the others: duplicates, or nothing (lost) — as is
			//    an execution of another namespace's task.
			var others []any
			for _, i := range part {
				if !inserted[starts[i].ExecutionID] || tasks[starts[i].TaskID] == nil {
					others = append(others, starts[i].ExecutionID)
				}
			}
			recorded := map[string]*store.Execution{}
			if len(others) > 0 {
				rows, err := s.batch(ctx, tx, recordedStmt, nil, others, []any{s.ns})
				if err != nil {
					return err
				}
				execs, err := collect(rows, scanExecution)
				if err != nil {
					return err
				}
				for k := range execs {
					recorded[execs[k].ID] = &execs[k]
				}
			}
			for _, i := range part {
				sp := starts[i]
				if t := tasks[sp.TaskID]; t != nil && inserted[sp.ExecutionID] && t.ExecutionID == sp.ExecutionID {
					delete(inserted, sp.ExecutionID) // a second copy in this batch is a duplicate
					out[i] = store.StartResult{Outcome: store.Started, Task: t, Execution: &store.Execution{
						ID: sp.ExecutionID, TaskID: t.ID, Attempt: t.Attempt, Node: sp.Node, Status: store.Running,
						DueAt: t.DueAt, ClaimedAt: t.DispatchedAt, StartedAt: t.StartedAt, HeartbeatAt: t.HeartbeatAt,
					}}
					recorded[sp.ExecutionID] = out[i].Execution
					continue
				}
				if e := recorded[sp.ExecutionID]; e != nil {
					out[i] = store.StartResult{Outcome: store.Duplicate, Execution: e}
					continue
				}
				out[i] = store.StartResult{Outcome: store.Lost}
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	for i := range out { // callers own their copies
		if out[i].Execution != nil {
			e := *out[i].Execution
			out[i].Execution = &e
		}
	}
	return out, nil
}

// Heartbeat stamps heartbeat_at on running executions.
func (s *Store) Heartbeat(ctx context.Context, refs []store.ExecRef) ([]store.Beat, error) {
	out := make([]store.Beat, len(refs))
	order := driverkit.SortedOrder(len(refs), func(i int) int64 { return refs[i].TaskID })
	err := s.write(ctx, "heartbeat", func(tx *sql.Tx) error {
		ts := micros(now())
		return chunks(len(order), func(lo, hi int) error {
			part := order[lo:hi]
			args := make([]any, 0, 2*len(part))
			for _, i := range part {
				args = append(args, refs[i].TaskID, refs[i].ExecutionID)
			}
			alive, err := scanBeats(s.batch(ctx, tx, heartbeatStmt, []any{ts}, args, []any{s.ns}))
			if err != nil || len(alive) == 0 {
				return err
			}
			args = args[:0]
			for _, i := range part {
				if beat := alive[refs[i].ExecutionID]; beat != store.BeatGone {
					out[i] = beat
					args = append(args, refs[i].ExecutionID)
				}
			}
			return s.batchExec(ctx, tx, heartbeatExecStmt, []any{ts}, args, nil)
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// keptSQL holds, in finishStmt, for a result that does not put its task back to
// SCHEDULED: it ends the task (a success, a failure, a cancel), or the task's cancel
// was requested, which ends a retry or a snooze CANCELLED. It is written so that a
// success, the common result, decides it with its first comparison.
const keptSQL = `(c.column3 <> 'SCHEDULED' OR cancel_requested_at IS NOT NULL)`

// Finish records the results of executions, if fence admits them (see fence.go).
func (s *Store) Finish(ctx context.Context, fence store.Fence, results []store.Finish) ([]bool, error) {
	if err := driverkit.CheckFinishes(results); err != nil {
		return nil, fmt.Errorf("ax: sqlite: finish: %w", err)
	}
	if err := driverkit.CheckFence(fence); err != nil {
		return nil, fmt.Errorf("ax: sqlite: finish: %w", err)
	}
	out := make([]bool, len(results))
	// Only the first result of an execution can apply: drop repeats, which a
	// multi-row UPDATE would otherwise pick from arbitrarily.
	order := driverkit.SortedOrder(len(results), func(i int) int64 { return results[i].TaskID })
	seen := make(map[string]bool, len(order))
	order = slices.DeleteFunc(order, func(i int) bool {
		dup := seen[results[i].ExecutionID]
		seen[results[i].ExecutionID] = true
		return dup
	})
	retries := 0
	for _, i := range order {
		if results[i].Status == store.Scheduled {
			retries++
		}
	}
	err := s.write(ctx, "finish", func(tx *sql.Tx) error {
		if err := checkFence(ctx, tx, fence); err != nil {
			return err
		}
		seq, err := nextSeq(ctx, tx, retries)
		if err != nil {
			return err
		}
		ts := micros(now())
		return chunks(len(order), func(lo, hi int) error {
			part := order[lo:hi]
			args := make([]any, 0, 8*len(part))
			for _, i := range part {
				f := results[i]
				var due, sq int64
				if f.Status == store.Scheduled {
					due, sq = micros(f.DueAt), seq
					seq++
				}
				snooze := 0
				if f.Snooze {
					snooze = 1
				}
				args = append(args, f.TaskID, f.ExecutionID, string(f.Status), f.Error, f.Attempt, due, sq, snooze)
			}
			done, err := scanFinished(s.batch(ctx, tx, finishStmt, []any{ts, ts}, args, []any{s.ns}))
			if err != nil || len(done) == 0 {
				return err
			}
			args = args[:0]
			for _, i := range part {
				f := results[i]
				to, ok := done[f.ExecutionID]
				if !ok {
					continue
				}
				delete(done, f.ExecutionID) // a second copy in this batch did not apply
				out[i] = true
				status, errText := store.Failed, f.Error
				switch {
				case to.status == store.Cancelled:
					status, errText = store.Cancelled, to.lastError
				case f.Status == store.Succeeded:
					status, errText = store.Succeeded, "" // a success records no error
				case f.Snooze:
					status = store.Snoozed
				}
				args = append(args, f.ExecutionID, string(status), errText)
			}
			return s.batchExec(ctx, tx, finishExecStmt, []any{ts}, args, nil)
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanBeats reads heartbeatStmt's rows: what the heartbeat found, by execution id.
func scanBeats(rows *sql.Rows, err error) (map[string]store.Beat, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]store.Beat{}
	for rows.Next() {
		var eid string
		var cancel bool
		if err := rows.Scan(&eid, &cancel); err != nil {
			return nil, err
		}
		out[eid] = store.BeatAlive
		if cancel {
			out[eid] = store.BeatCancel
		}
	}
	return out, rows.Err()
}

// finished is what finishStmt made of one task: its status and, when CANCELLED, its
// last error (which Finish records on the execution).
type finished struct {
	status    store.Status
	lastError string
}

// scanFinished reads finishStmt's rows, by execution id.
func scanFinished(rows *sql.Rows, err error) (map[string]finished, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]finished{}
	for rows.Next() {
		var eid string
		var f finished
		if err := rows.Scan(&eid, &f.status, &f.lastError); err != nil {
			return nil, err
		}
		out[eid] = f
	}
	return out, rows.Err()
}

// scanStrings reads the set of strings in a query's one column:
// scanStrings(tx.QueryContext(…)).
func scanStrings(rows *sql.Rows, err error) (map[string]bool, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out[s] = true
	}
	return out, rows.Err()
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
