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

// Cancel cancels a task: a SCHEDULED or DISPATCHING one at once, a RUNNING one by
// recording the request (see store.TaskWriter).
func (s *Store) Cancel(ctx context.Context, name, key, by string) (*store.Task, error) {
	if err := driverkit.CheckCancelledBy(by); err != nil {
		return nil, fmt.Errorf("ax: sqlite: cancel %q/%q: %w", name, key, err)
	}
	var t *store.Task
	var sentinel error
	err := s.write(ctx, "cancel", func(tx *sql.Tx) error {
		var err error
		t, sentinel, err = s.cancelIn(ctx, tx, name, key, by)
		return err
	})
	if err != nil {
		return nil, err
	}
	return cancelled(name, key, t, sentinel)
}

// cancelIn cancels the task in tx: the task cancelled (or its cancel requested), or
// the task as it is (nil when there is none) with the refusal's sentinel; err is the
// database's. (In SET, status is the row's status before the update.)
func (s *Store) cancelIn(ctx context.Context, tx *sql.Tx, name, key, by string) (t *store.Task, refusal, err error) {
	ts := micros(now())
	t, err = scanTask(tx.QueryRowContext(ctx, `UPDATE ax_tasks SET status = CASE status WHEN 'RUNNING' THEN status ELSE 'CANCELLED' END,
			finished_at = CASE status WHEN 'RUNNING' THEN finished_at ELSE ? END,
			cancelled_by = ?, cancel_requested_at = ?, updated_at = ?
		WHERE namespace = ? AND name = ? AND key = ? AND key_slot = 0
			AND (status IN ('SCHEDULED', 'DISPATCHING') OR status = 'RUNNING' AND cancel_requested_at IS NULL)
		RETURNING `+taskColumns, ts, by, ts, ts, s.ns, name, key))
	if !errors.Is(err, sql.ErrNoRows) {
		return t, nil, err
	}
	t, refusal, err = s.refused(ctx, tx, store.ErrNotCancellable, lookupSQL, s.ns, name, key)
	if driverkit.CancelAsked(t) {
		refusal = nil // asked before: the first request stands
	}
	return t, refusal, err
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
		dispatch_retries = 0, snoozes = 0, finished_at = NULL, seq = ?, updated_at = ?
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

const (
	// triggerSQL triggers one task unless its key is held or its name is limited: a
	// concurrency or a rate limit, a key concurrency above one or a rate per key (one
	// probe of ax_names' primary key).
	triggerSQL = `UPDATE ax_tasks SET status = 'DISPATCHING', execution_id = ?,
		attempt = attempt + (CASE status WHEN 'FAILED' THEN 1 ELSE 0 END),
		finished_at = NULL, dispatched_at = ?, triggered_at = ?, updated_at = ?
		WHERE id = ? AND +namespace = ? AND status IN ('SCHEDULED', 'FAILED') AND key_slot = 0
			AND (task_key = '' OR overlap = 'allow' OR ` + keyFree + `)
			AND NOT EXISTS (SELECT 1 FROM ax_names p WHERE p.namespace = ax_tasks.namespace AND p.name = ax_tasks.name
				AND (p.concurrency > 0 OR p.rate > 0 OR p.key_concurrency > 1 OR p.key_rate > 0))
		RETURNING ` + taskColumns
	// holderSQL names the task holding one key of a namespace (ax_tasks_ns_key_holder).
	holderSQL = `SELECT MIN(id) FROM ax_tasks WHERE namespace = ? AND task_key = ? AND ` + holding
	// limitSQL reads whether a name has a concurrency or a rate limit or a rate per
	// key, and whether it has a key concurrency above one (ax_names' primary key).
	limitSQL = `SELECT concurrency > 0 OR rate > 0 OR key_rate > 0, key_concurrency > 1 FROM ax_names WHERE namespace = ? AND name = ?`
)

// Trigger moves a SCHEDULED or FAILED task to DISPATCHING now. A task with a key
// and Overlap skip or queue is refused, with driverkit.KeyHeld, while another task holds
// the key: the check is part of the UPDATE, under the writer lock Claim holds too.
// A task whose name has a concurrency or a rate limit, or a rate per key, is made due
// instead, as MakeDue does, and returned SCHEDULED: a claim applies the limits. So is one whose name has
// a key concurrency above one, its key held or not: a claim counts the key's holders.
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

// triggerIn is Trigger in tx: the task as it is afterwards, and the refusal's
// sentinel, or the holder of its key. A key concurrency above one makes the task due
// (makeDueIn, with a fresh sequence number), in tx; else a held key refuses, then a
// limited name makes the task due.
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
	// Triggerable but not triggered: its key is held, or its name is limited. A key
	// concurrency above one leaves the key to a claim, which counts its holders;
	// otherwise a held key decides first, as in a claim: name the holder.
	var limited, keys bool
	switch err := tx.QueryRowContext(ctx, limitSQL, s.ns, t.Name).Scan(&limited, &keys); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, nil, 0, err
	}
	if !keys && t.TaskKey != "" && t.Overlap != store.OverlapAllow {
		var h sql.NullInt64
		if err := tx.QueryRowContext(ctx, holderSQL, s.ns, t.TaskKey).Scan(&h); err != nil {
			return nil, nil, 0, err
		}
		if h.Valid {
			return t, store.ErrNotTriggerable, h.Int64, nil
		}
	}
	if !limited && !keys { // cannot happen: the UPDATE saw a holder or a limit under the same lock
		return nil, nil, 0, fmt.Errorf("task %d is %s with a free key %q and no limit but was not triggered", id, t.Status, t.TaskKey)
	}
	seq, err := nextSeq(ctx, tx, 1)
	if err != nil {
		return nil, nil, 0, err
	}
	t, sentinel, err = s.makeDueIn(ctx, tx, seq, id)
	return t, sentinel, 0, err
}
