package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
)

// MakeDue makes the SCHEDULED or FAILED task of the view's namespace due now, without
// claiming it: it becomes SCHEDULED, TriggeredAt stamped (from FAILED with one more
// attempt), with a fresh sequence number, in one transaction (see store.TaskWriter).
// The claim that follows applies its key's overlap rule.
func (s *Store) MakeDue(ctx context.Context, id int64) (*store.Task, error) {
	return s.moveBack(ctx, "make due", fmt.Sprintf("ax: mysql: make task %d due", id), s.makeDueIn(ctx, id))
}

// makeDueSet is MakeDue's transition, which Trigger also makes for a limited name's
// task; its arguments are the row's new sequence number (nil: keep it), the task id
// and the namespace. attempt is assigned first, reading the old status.
const makeDueSet = `UPDATE ax_tasks SET attempt = attempt + (status = 'FAILED'), status = 'SCHEDULED', due_at = UTC_TIMESTAMP(6),
	finished_at = NULL, triggered_at = UTC_TIMESTAMP(6), seq = COALESCE(?, seq), updated_at = UTC_TIMESTAMP(6)
	WHERE id = ? AND namespace = ? AND status IN ('SCHEDULED', 'FAILED') AND key_slot = 0`

// makeDueIn is MakeDue's transition, as rescheduleIn is Reschedule's.
func (s *Store) makeDueIn(ctx context.Context, id int64) func(tx *sql.Tx, seq any) (*store.Task, error, error) {
	return func(tx *sql.Tx, seq any) (*store.Task, error, error) {
		return s.moveIn(ctx, tx, store.ErrNotTriggerable, makeDueSet, []any{seq, id, s.ns}, getSQL, []any{id, s.ns})
	}
}

// Cancel cancels a task of the view's namespace: a SCHEDULED or DISPATCHING one at
// once, a RUNNING one by recording the request (see store.TaskWriter).
func (s *Store) Cancel(ctx context.Context, name, key, by string) (*store.Task, error) {
	if err := driverkit.CheckCancelledBy(by); err != nil {
		return nil, fmt.Errorf("ax: mysql: cancel %q/%q: %w", name, key, err)
	}
	var t *store.Task
	var sentinel error
	err := s.run(ctx, "cancel", 0, func(tx *sql.Tx, _ int64) error {
		var err error
		t, sentinel, err = s.cancelIn(ctx, tx, name, key, by)
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
// none), the refusal's sentinel when it had finished, and the database's error. A
// RUNNING task keeps its status and records the request, unless it was asked before.
// (MySQL assigns left to right, each SET seeing the columns already assigned: status
// and finished_at read the status before they change it.)
func (s *Store) cancelIn(ctx context.Context, tx *sql.Tx, name, key, by string) (t *store.Task, refusal, err error) {
	t, refusal, err = s.moveIn(ctx, tx, store.ErrNotCancellable,
		"UPDATE ax_tasks SET finished_at = IF(status = 'RUNNING', finished_at, UTC_TIMESTAMP(6)), "+
			"status = IF(status = 'RUNNING', status, 'CANCELLED'), "+
			"cancelled_by = ?, cancel_requested_at = UTC_TIMESTAMP(6), updated_at = UTC_TIMESTAMP(6) "+
			"WHERE namespace = ? AND name = ? AND `key` = ? AND key_slot = 0 "+
			"AND (status IN ('SCHEDULED', 'DISPATCHING') OR status = 'RUNNING' AND cancel_requested_at IS NULL)",
		[]any{by, s.ns, name, key}, lookupSQL, []any{s.ns, name, key})
	if refusal != nil && driverkit.CancelAsked(t) {
		refusal = nil // asked before: the first request stands
	}
	return t, refusal, err
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
			`UPDATE ax_tasks SET status = 'SCHEDULED', due_at = UTC_TIMESTAMP(6), attempt = 0, dispatch_retries = 0, snoozes = 0,
				finished_at = NULL, seq = COALESCE(?, seq), updated_at = UTC_TIMESTAMP(6)
			WHERE id = ? AND namespace = ? AND status = 'FAILED' AND key_slot = 0`, []any{seq, id, s.ns},
			getSQL, []any{id, s.ns})
	}
}

// Trigger moves a SCHEDULED or FAILED task of the view's namespace to DISPATCHING now.
// A task without a key, or with Overlap allow, whose name has no limit (a concurrency
// or a rate limit, a key concurrency above one or a rate per task key) takes one
// UPDATE and one SELECT; a task whose key rules (skip, queue) takes the key's lock
// first and is refused with driverkit.KeyHeld while another task of its namespace
// holds the key (see DESIGN.md, "Task keys"); a limited name's task is made due instead, as MakeDue does, and left
// SCHEDULED for a claim to apply its limits — so is, its key free or not, a task whose
// name has a key concurrency above one, for a claim to count its key's holders. That
// needs a fresh sequence number, which a transaction of the store's reserves before
// it begins: the first transaction that finds the name limited rolls back, and a
// second runs with one reserved.
func (s *Store) Trigger(ctx context.Context, id int64, executionID string) (*store.Task, error) {
	if executionID == "" || !validText(executionID, maxExecID) {
		return nil, fmt.Errorf("ax: mysql: trigger task %d: empty or over-long execution id: %w", id, store.ErrInvalid)
	}
	var t *store.Task
	var sentinel error
	var holder int64
	trigger := func(n int) error {
		return s.run(ctx, "trigger", n, func(tx *sql.Tx, seq int64) error {
			reserve := func() (int64, error) {
				if n == 0 {
					return 0, errNeedSeq
				}
				return seq, nil
			}
			var err error
			t, sentinel, holder, err = s.triggerIn(ctx, tx, id, executionID, reserve)
			return err
		})
	}
	err := trigger(0)
	if errors.Is(err, errNeedSeq) {
		err = trigger(1)
	}
	if err != nil {
		return nil, err
	}
	return triggered(id, t, sentinel, holder)
}

// errNeedSeq ends a transaction of Trigger's that needs a sequence number it did not
// reserve: Trigger runs it again with one.
var errNeedSeq = errors.New("a sequence number is needed")

// triggerIn is Trigger in tx: the task as it is afterwards, and the refusal's
// sentinel, or the holder of its key. reserve gives the sequence number of a limited
// name's task, made due.
func (s *Store) triggerIn(ctx context.Context, tx *sql.Tx, id int64, executionID string, reserve func() (int64, error)) (t *store.Task, sentinel error, holder int64, err error) {
	res, err := tx.ExecContext(ctx, triggerSet+` AND overlap NOT IN ('skip', 'queue') AND NOT `+limitedName, executionID, id, s.ns)
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
	case n == 0 && (t.Status == store.Scheduled || t.Status == store.Failed) && !t.Superseded:
		// Its key rules, or its name is limited (a key concurrency included).
		var applied bool
		t, holder, applied, err = s.triggerHeld(ctx, tx, id, executionID, reserve)
		if err != nil {
			return nil, nil, 0, err
		}
		if !applied {
			return t, store.ErrNotTriggerable, holder, nil
		}
	case n == 0:
		return t, store.ErrNotTriggerable, 0, nil
	}
	return t, nil, 0, nil
}
