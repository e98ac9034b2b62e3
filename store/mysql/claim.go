package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
)

// Claim moves due SCHEDULED tasks of the view's namespace to DISPATCHING; ids of other
// namespaces are left out, as ids no longer SCHEDULED are. Tasks whose key does not
// restrict them (no key, or Overlap allow) and whose name has no limit (a concurrency
// or a rate limit, a key concurrency above one or a rate per key) are claimed chunk by chunk as they
// are locked; due tasks whose key rules (skip, queue) or whose name is limited are set
// aside and decided after every chunk is locked, under their names' and keys' locks
// (claimKeyed), so that a claim takes rows, then names, then keys, always in that
// order.
func (s *Store) Claim(ctx context.Context, fence store.Fence, claims []store.Claim) (*store.ClaimResult, error) {
	return s.ClaimStart(ctx, fence, store.StartOn{}, claims)
}

// ClaimStart is Claim that, in the claiming transaction, also starts the tasks on can
// start: their transition goes to RUNNING in the same UPDATE, and their execution
// records in one INSERT after it. Keyed tasks (skip, queue) and the tasks of a limited
// name are claimed DISPATCHING.
func (s *Store) ClaimStart(ctx context.Context, fence store.Fence, on store.StartOn, claims []store.Claim) (*store.ClaimResult, error) {
	if err := s.check("claim"); err != nil {
		return nil, err
	}
	if err := driverkit.CheckFence(fence); err != nil {
		return nil, fmt.Errorf("ax: mysql: claim: %w", err)
	}
	if err := driverkit.CheckClaims(claims); err != nil {
		return nil, fmt.Errorf("ax: mysql: claim: %w", err)
	}
	if err := driverkit.CheckStartOn(on); err != nil {
		return nil, fmt.Errorf("ax: mysql: claim: %w", err)
	}
	if !validText(on.Node, maxNode) {
		return nil, fmt.Errorf("ax: mysql: claim: node over %d bytes or not UTF-8: %w", maxNode, store.ErrInvalid)
	}
	for i, c := range claims {
		if !validText(c.ExecutionID, maxExecID) {
			return nil, fmt.Errorf("ax: mysql: claim: claim %d: execution id over %d bytes or not UTF-8: %w", i, maxExecID, store.ErrInvalid)
		}
	}
	uniq := driverkit.UniqueClaims(claims) // a task named twice is claimed once, with its first execution id
	startable := driverkit.Startable(on, uniq)
	res := &store.ClaimResult{}
	if len(uniq) == 0 {
		return res, nil
	}
	err := s.run(ctx, "claim", 0, func(tx *sql.Tx, _ int64) error {
		*res = store.ClaimResult{}
		if err := s.checkFence(ctx, tx, fence); err != nil {
			return err
		}
		var keyed []driverkit.Keyed
		var keyedExec map[int64]string
		var limited map[string]bool // the names of keyed whose limits the lock read
		var last time.Time          // the database time of the last chunk's lock
		err := chunks(len(uniq), func(lo, hi int) error {
			part := uniq[lo:hi]
			ids := make([]int64, len(part))
			for i, c := range part {
				ids[i] = c.ID
			}
			// 1. Lock the SCHEDULED rows; "due" is decided by the database clock in
			//    the statement. Not SKIP LOCKED: a row held by a transaction that
			//    leaves it SCHEDULED (a refused Cancel, a claim that rolls back) would
			//    be neither claimed nor reported not due, and the scheduler would
			//    forget it. READ COMMITTED takes no gap locks, so the wait is for
			//    those rows only, and ascending ids keep claims from deadlocking.
			rows, now, err := lockRows(ctx, tx, s.ns, store.Scheduled, ids, readKeys)
			if err != nil {
				return err
			}
			if !now.IsZero() {
				last = now
			}
			var dueIDs, startIDs []int64
			var execs, records []any
			for _, c := range part {
				l := rows[c.ID]
				switch {
				case l == nil:
				case !l.due: // not due comes before the key rule
					res.NotDue = append(res.NotDue, store.Due{ID: c.ID, DueAt: l.dueAt})
				case l.paused:
					res.Paused = append(res.Paused, store.Due{ID: c.ID, DueAt: l.dueAt})
				case l.overlap != "" || l.limited:
					if keyedExec == nil {
						keyedExec, limited = map[int64]string{}, map[string]bool{}
					}
					keyed = append(keyed, driverkit.Keyed{ID: c.ID, DueAt: l.dueAt, Name: l.name, TaskKey: l.taskKey, Overlap: l.overlap})
					keyedExec[c.ID] = c.ExecutionID
					if l.limited {
						limited[l.name] = true
					}
				default:
					dueIDs = append(dueIDs, c.ID)
					execs = append(execs, c.ExecutionID)
					if startable[c.ID] && slices.Contains(on.Handlers, l.name) {
						startIDs = append(startIDs, c.ID)
						records = append(records, c.ExecutionID, c.ID, l.attempt, on.Node, dt(l.dueAt))
					}
				}
			}
			if len(dueIDs) == 0 {
				return nil
			}
			// 2. The transition, with the per-row CAS: to RUNNING for the tasks to
			//    start, which the lock's rows say are due and SCHEDULED.
			ts := dt(now)
			execCase, args := caseID(dueIDs, execs, "")
			set := `status = 'DISPATCHING'`
			if len(startIDs) > 0 { // MySQL assigns left to right; none of these reads another
				in := `id IN (` + marks(len(startIDs)) + `)`
				set = `status = IF(` + in + `, 'RUNNING', 'DISPATCHING'), started_at = IF(` + in + `, ?, started_at), heartbeat_at = IF(` + in + `, ?, heartbeat_at)`
				ids := int64s(startIDs)
				args = append(append(args, ids...), ids...)
				args = append(append(args, ts), ids...)
				args = append(args, ts)
			}
			args = append(args, ts, ts)
			args = append(args, int64s(dueIDs)...)
			args = append(args, ts)
			if _, err := tx.ExecContext(ctx, `UPDATE ax_tasks FORCE INDEX (PRIMARY) SET execution_id = `+execCase+`, `+set+`,
				dispatched_at = ?, updated_at = ?
				WHERE id IN (`+marks(len(dueIDs))+`) AND status = 'SCHEDULED' AND due_at <= ?`, args...); err != nil {
				return err
			}
			if len(startIDs) > 0 {
				values := strings.TrimSuffix(strings.Repeat("(?,?,?,?,'RUNNING',?,?,?,?,''),", len(startIDs)), ",")
				ins := make([]any, 0, 8*len(startIDs))
				for k := 0; k < len(records); k += 5 {
					ins = append(ins, records[k:k+5]...)
					ins = append(ins, ts, ts, ts) // claimed, started and beating now
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO ax_executions (id, task_id, attempt, node, status, due_at, claimed_at,
					started_at, heartbeat_at, error)
					VALUES `+values, ins...); err != nil {
					return err
				}
			}
			// 3. Read them back.
			claimed, err := selectTasks(ctx, tx, dueIDs)
			if err != nil {
				return err
			}
			driverkit.AddClaimed(res, claimed)
			return nil
		})
		if err != nil || len(keyed) == 0 {
			return err
		}
		return claimKeyed(ctx, tx, s.ns, keyed, slices.Sorted(maps.Keys(limited)), keyedExec, last, res)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
