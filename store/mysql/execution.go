package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
)

const (
	readState  lockRead = iota // the state only: Requeue
	readName                   // and the name and the claim's time: Start
	readKeys                   // and the name, the overlap policy and the task key: Claim
	readCancel                 // and who asked to cancel it, if anyone did: Heartbeat, Finish
)

// Start records executions and moves their tasks to RUNNING; a fence with a token is
// checked first in its transaction (see fence.go).
func (s *Store) Start(ctx context.Context, fence store.Fence, starts []store.StartParams) ([]store.StartResult, error) {
	if err := s.check("start"); err != nil {
		return nil, err
	}
	if err := driverkit.CheckFence(fence); err != nil {
		return nil, fmt.Errorf("ax: mysql: start: %w", err)
	}
	if err := driverkit.CheckStarts(starts); err != nil {
		return nil, fmt.Errorf("ax: mysql: start: %w", err)
	}
	for i, sp := range starts {
		if !validText(sp.ExecutionID, maxExecID) || !validText(sp.Node, maxNode) {
			return nil, fmt.Errorf("ax: mysql: start: execution %d: execution id (≤ %d bytes) or node (≤ %d) too long or not UTF-8: %w",
				i, maxExecID, maxNode, store.ErrInvalid)
		}
	}
	out := make([]store.StartResult, len(starts))
	if len(starts) == 0 {
		return out, nil
	}
	// Each execution id is decided once, at its first occurrence; repeats are
	// duplicate deliveries of it.
	first := make(map[string]int, len(starts))
	var uniq []int
	for i, sp := range starts {
		if _, ok := first[sp.ExecutionID]; !ok {
			first[sp.ExecutionID] = i
			uniq = append(uniq, i)
		}
	}
	slices.SortStableFunc(uniq, func(a, b int) int { return cmp.Compare(starts[a].TaskID, starts[b].TaskID) })
	err := s.run(ctx, "start", 0, func(tx *sql.Tx, _ int64) error {
		clear(out)
		if err := s.checkFence(ctx, tx, fence); err != nil {
			return err
		}
		return chunks(len(uniq), func(lo, hi int) error {
			part := uniq[lo:hi]
			ids := uniqueIDs(part, func(i int) int64 { return starts[i].TaskID })
			execIDs := make([]any, len(part))
			for k, i := range part {
				execIDs[k] = starts[i].ExecutionID
			}
			// 1. Lock the namespace's DISPATCHING rows.
			rows, now, err := lockRows(ctx, tx, s.ns, store.Dispatching, ids, readName)
			if err != nil {
				return err
			}
			// 2. What is recorded already: for the namespace's tasks, duplicates; for
			//    another namespace's, lost (theirs), and not to be inserted again.
			recorded := map[string]*store.Execution{}
			theirs := map[string]bool{}
			q, err := tx.QueryContext(ctx, `SELECT `+executionColumns+`,
				EXISTS (SELECT 1 FROM ax_tasks t WHERE t.id = ax_executions.task_id AND t.namespace = ?)
				FROM ax_executions WHERE id IN (`+marks(len(execIDs))+`)`, append([]any{s.ns}, execIDs...)...)
			if err != nil {
				return err
			}
			for q.Next() {
				var mine bool
				e, err := scanExecution(withColumn{q, &mine})
				if err != nil {
					q.Close()
					return err
				}
				if mine {
					recorded[e.ID] = e
				} else {
					theirs[e.ID] = true
				}
			}
			q.Close()
			if err := q.Err(); err != nil {
				return err
			}
			// 3. The records and the transition, for tasks DISPATCHING with that id
			//    and name.
			var runIDs []int64
			var runExecs []any
			var ins []any
			ts := dt(now)
			for _, i := range part {
				sp := starts[i]
				if l := rows[sp.TaskID]; l != nil && l.execID == sp.ExecutionID && l.name == sp.Name &&
					recorded[sp.ExecutionID] == nil && !theirs[sp.ExecutionID] {
					runIDs = append(runIDs, sp.TaskID)
					runExecs = append(runExecs, sp.ExecutionID)
					ins = append(ins, sp.ExecutionID, sp.TaskID, l.attempt, sp.Node, dt(l.dueAt), nullTime(l.claimed), ts, ts)
				}
			}
			started := map[int64]*store.Task{}
			if len(runIDs) > 0 {
				values := strings.TrimSuffix(strings.Repeat("(?,?,?,?,'RUNNING',?,?,?,?,''),", len(runIDs)), ",")
				if _, err := tx.ExecContext(ctx, `INSERT INTO ax_executions (id, task_id, attempt, node, status, due_at, claimed_at,
					started_at, heartbeat_at, error)
					VALUES `+values, ins...); err != nil {
					var me *mysql.MySQLError
					if errors.As(err, &me) && me.Number == 1062 {
						return errRetry // recorded by a concurrent Start meanwhile: look again
					}
					return err
				}
				execCase, args := caseID(runIDs, runExecs, "")
				args = append([]any{ts, ts, ts}, args...)
				args = append(args, int64s(runIDs)...)
				if _, err := tx.ExecContext(ctx, `UPDATE ax_tasks FORCE INDEX (PRIMARY) SET status = 'RUNNING', started_at = ?, heartbeat_at = ?, updated_at = ?
					WHERE execution_id = `+execCase+` AND id IN (`+marks(len(runIDs))+`) AND status = 'DISPATCHING'`, args...); err != nil {
					return err
				}
				tasks, err := selectTasks(ctx, tx, runIDs)
				if err != nil {
					return err
				}
				for k := range tasks {
					started[tasks[k].ID] = &tasks[k]
				}
			}
			for _, i := range part {
				sp := starts[i]
				if t := started[sp.TaskID]; t != nil && t.ExecutionID == sp.ExecutionID && t.Status == store.Running {
					out[i] = store.StartResult{Outcome: store.Started, Task: t, Execution: &store.Execution{
						ID: sp.ExecutionID, TaskID: t.ID, Attempt: t.Attempt, Node: sp.Node, Status: store.Running,
						DueAt: t.DueAt, ClaimedAt: t.DispatchedAt, StartedAt: t.StartedAt, HeartbeatAt: t.HeartbeatAt,
					}}
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
	for i, sp := range starts {
		if f := first[sp.ExecutionID]; f != i {
			out[i] = store.StartResult{Outcome: out[f].Outcome, Execution: out[f].Execution}
			if out[i].Outcome == store.Started {
				out[i].Outcome = store.Duplicate
			}
		}
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
	if err := s.check("heartbeat"); err != nil {
		return nil, err
	}
	out := make([]store.Beat, len(refs))
	order := driverkit.SortedOrder(len(refs), func(i int) int64 { return refs[i].TaskID })
	err := s.run(ctx, "heartbeat", 0, func(tx *sql.Tx, _ int64) error {
		clear(out)
		return chunks(len(order), func(lo, hi int) error {
			part := order[lo:hi]
			ids := uniqueIDs(part, func(i int) int64 { return refs[i].TaskID })
			rows, now, err := lockRows(ctx, tx, s.ns, store.Running, ids, readCancel)
			if err != nil {
				return err
			}
			var aliveIDs []int64
			var aliveExecs []any
			for _, i := range part {
				if l := rows[refs[i].TaskID]; l != nil && l.execID == refs[i].ExecutionID {
					out[i] = store.BeatAlive
					if l.cancelBy != "" {
						out[i] = store.BeatCancel
					}
					if len(aliveIDs) == 0 || aliveIDs[len(aliveIDs)-1] != refs[i].TaskID {
						aliveIDs = append(aliveIDs, refs[i].TaskID)
						aliveExecs = append(aliveExecs, refs[i].ExecutionID)
					}
				}
			}
			if len(aliveIDs) == 0 {
				return nil
			}
			ts := dt(now)
			execCase, args := caseID(aliveIDs, aliveExecs, "")
			args = append([]any{ts}, args...)
			args = append(args, int64s(aliveIDs)...)
			if _, err := tx.ExecContext(ctx, `UPDATE ax_tasks FORCE INDEX (PRIMARY) SET heartbeat_at = ?
				WHERE execution_id = `+execCase+` AND id IN (`+marks(len(aliveIDs))+`) AND status = 'RUNNING'`, args...); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `UPDATE ax_executions SET heartbeat_at = ? WHERE id IN (`+marks(len(aliveExecs))+`)`,
				append([]any{ts}, aliveExecs...)...)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// uniqueIDs returns the distinct ids of the sorted indexes part.
func uniqueIDs(part []int, id func(i int) int64) []int64 {
	ids := make([]int64, 0, len(part))
	for _, i := range part {
		if len(ids) == 0 || ids[len(ids)-1] != id(i) {
			ids = append(ids, id(i))
		}
	}
	return ids
}

// Finish records the results of executions.
func (s *Store) Finish(ctx context.Context, fence store.Fence, results []store.Finish) ([]bool, error) {
	if err := s.check("finish"); err != nil {
		return nil, err
	}
	if err := driverkit.CheckFence(fence); err != nil {
		return nil, fmt.Errorf("ax: mysql: finish: %w", err)
	}
	if err := driverkit.CheckFinishes(results); err != nil {
		return nil, fmt.Errorf("ax: mysql: finish: %w", err)
	}
	retries := 0
	for i, f := range results {
		if f.Status != store.Scheduled {
			continue
		}
		if !inRange(f.DueAt) {
			return nil, fmt.Errorf("ax: mysql: finish: result %d: due time %v outside years 1000-9999: %w", i, f.DueAt, store.ErrInvalid)
		}
		retries++
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
	err := s.run(ctx, "finish", retries, func(tx *sql.Tx, seq int64) error {
		clear(out)
		if err := s.checkFence(ctx, tx, fence); err != nil {
			return err
		}
		next := seq
		return chunks(len(order), func(lo, hi int) error {
			part := order[lo:hi]
			ids := uniqueIDs(part, func(i int) int64 { return results[i].TaskID })
			rows, now, err := lockRows(ctx, tx, s.ns, store.Running, ids, readCancel)
			if err != nil {
				return err
			}
			var (
				all, retry, final, failed, snoozed []int64
				allExec, status, retryAttempt      []any
				retryDue, retrySeq, failedErr      []any
				execIDs, execStatus, execErr, fin  []any
			)
			ts := dt(now)
			for _, i := range part {
				f := results[i]
				l := rows[f.TaskID]
				if l == nil || l.execID != f.ExecutionID {
					continue
				}
				l.execID = "" // applied: a second result for this task cannot match
				out[i] = true
				st, errText, snooze := f.Status, f.Error, f.Snooze
				if l.cancelBy != "" && st != store.Succeeded {
					// Cancelled while it ran: whatever else the result says, it ends here.
					st, errText, snooze = store.Cancelled, driverkit.CancelledError(l.cancelBy, f.Error), false
				}
				all = append(all, f.TaskID)
				allExec = append(allExec, f.ExecutionID)
				status = append(status, string(st))
				switch {
				case st == store.Succeeded:
					execStatus = append(execStatus, string(store.Succeeded))
					execErr = append(execErr, "") // a success records no error
				case st == store.Cancelled:
					execStatus = append(execStatus, string(store.Cancelled))
					execErr = append(execErr, errText)
				case snooze:
					execStatus = append(execStatus, string(store.Snoozed))
					execErr = append(execErr, errText)
					snoozed = append(snoozed, f.TaskID)
				default:
					execStatus = append(execStatus, string(store.Failed))
					execErr = append(execErr, errText)
				}
				execIDs = append(execIDs, f.ExecutionID)
				switch st {
				case store.Scheduled:
					retry = append(retry, f.TaskID)
					retryAttempt = append(retryAttempt, f.Attempt)
					retryDue = append(retryDue, dt(f.DueAt))
					retrySeq = append(retrySeq, next)
					next++
				default:
					final = append(final, f.TaskID)
					fin = append(fin, ts)
				}
				if st != store.Succeeded {
					failed = append(failed, f.TaskID)
					failedErr = append(failedErr, errText)
				}
			}
			if len(all) == 0 {
				return nil
			}
			u := assignments{sql: "updated_at = ?", args: []any{ts}}
			u.add("last_error", failed, failedErr)
			u.add("attempt", retry, retryAttempt)
			u.add("due_at", retry, retryDue)
			u.add("seq", retry, retrySeq)
			u.add("finished_at", final, fin)
			u.add("status", all, status) // last: the CAS below reads the old status
			execCase, a := caseID(all, allExec, "")
			args := append(append(u.args, a...), int64s(all)...)
			if _, err := tx.ExecContext(ctx, `UPDATE ax_tasks FORCE INDEX (PRIMARY) SET `+u.sql+`
				WHERE execution_id = `+execCase+` AND id IN (`+marks(len(all))+`) AND status = 'RUNNING'`, args...); err != nil {
				return err
			}
			if len(snoozed) > 0 { // rows locked above and matched: no condition to check again
				if _, err := tx.ExecContext(ctx, `UPDATE ax_tasks FORCE INDEX (PRIMARY) SET snoozes = snoozes + 1
					WHERE id IN (`+marks(len(snoozed))+`)`, int64s(snoozed)...); err != nil {
					return err
				}
			}
			// Close the execution records.
			statusCase, sargs := caseID(execIDs, execStatus, "")
			errCase, eargs := caseID(execIDs, execErr, "")
			args = append(append(append(sargs, eargs...), ts), execIDs...)
			_, err = tx.ExecContext(ctx, `UPDATE ax_executions SET status = `+statusCase+`, error = `+errCase+`, finished_at = ?
				WHERE id IN (`+marks(len(execIDs))+`)`, args...)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Requeue hands undispatched tasks back to SCHEDULED, or FAILED when their dispatch
// retries are exhausted.
func (s *Store) Requeue(ctx context.Context, fence store.Fence, requeues []store.Requeue) ([]bool, error) {
	if err := s.check("requeue"); err != nil {
		return nil, err
	}
	if err := driverkit.CheckFence(fence); err != nil {
		return nil, fmt.Errorf("ax: mysql: requeue: %w", err)
	}
	out := make([]bool, len(requeues))
	order := driverkit.SortedOrder(len(requeues), func(i int) int64 { return requeues[i].TaskID })
	err := s.run(ctx, "requeue", len(requeues), func(tx *sql.Tx, seq int64) error {
		clear(out)
		if err := s.checkFence(ctx, tx, fence); err != nil {
			return err
		}
		next := seq
		return chunks(len(order), func(lo, hi int) error {
			part := order[lo:hi]
			ids := uniqueIDs(part, func(i int) int64 { return requeues[i].TaskID })
			rows, now, err := lockRows(ctx, tx, s.ns, store.Dispatching, ids, readState)
			if err != nil {
				return err
			}
			var all, back, dead []int64
			var allExec, status, lastErr, backDue, backSeq, deadFin []any
			ts := dt(now)
			for _, i := range part {
				r := requeues[i]
				l := rows[r.TaskID]
				if l == nil || l.execID != r.ExecutionID {
					continue
				}
				l.execID = "" // applied: a repeat finds it SCHEDULED
				out[i] = true
				all = append(all, r.TaskID)
				allExec = append(allExec, r.ExecutionID)
				lastErr = append(lastErr, r.Error)
				if l.retries+1 > r.MaxDispatchRetries {
					status = append(status, string(store.Failed))
					dead = append(dead, r.TaskID)
					deadFin = append(deadFin, ts)
				} else {
					status = append(status, string(store.Scheduled))
					back = append(back, r.TaskID)
					backDue = append(backDue, dt(clamp(r.DueAt)))
					backSeq = append(backSeq, next)
					next++
				}
			}
			if len(all) == 0 {
				return nil
			}
			u := assignments{sql: "updated_at = ?, dispatch_retries = dispatch_retries + 1", args: []any{ts}}
			u.add("last_error", all, lastErr)
			u.add("due_at", back, backDue)
			u.add("seq", back, backSeq)
			u.add("finished_at", dead, deadFin)
			u.add("status", all, status)
			execCase, a := caseID(all, allExec, "")
			args := append(append(u.args, a...), int64s(all)...)
			_, err = tx.ExecContext(ctx, `UPDATE ax_tasks FORCE INDEX (PRIMARY) SET `+u.sql+`
				WHERE execution_id = `+execCase+` AND id IN (`+marks(len(all))+`) AND status = 'DISPATCHING'`, args...)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
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
	tasks, err := scanTasks(rows, 0)
	return tasks, s.wrap("stale", err)
}
