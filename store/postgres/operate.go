package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
)

// transition runs a single-row conditional UPDATE … RETURNING and, in the same
// transaction, a fresh read of the row, so that a refused transition reports the
// task as it is now.
func (s *Store) transition(ctx context.Context, op, update string, updArgs []any, read string, readArgs []any) (t *store.Task, applied bool, err error) {
	return s.transitionTo(ctx, op, false, update, updArgs, read, readArgs)
}

// transitionTo is transition; scheduled: the update leaves its row SCHEDULED with a
// fresh sequence number, so publishSQL goes first in its transaction (see "The
// refill cursor" in DESIGN.md).
func (s *Store) transitionTo(ctx context.Context, op string, scheduled bool, update string, updArgs []any, read string, readArgs []any) (t *store.Task, applied bool, err error) {
	err = s.tx(ctx, op, func(b *pgx.Batch) {
		if scheduled {
			b.Queue(publishSQL, s.lockKey, s.channel)
		}
		b.Queue(update, updArgs...)
		b.Queue(read, readArgs...)
	}, func(br pgx.BatchResults) error {
		if scheduled {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		var err error
		t, applied, err = readTransition(br)
		return err
	})
	return t, applied, err
}

// Cancel cancels a task of the view's namespace: a SCHEDULED or DISPATCHING one at
// once, a RUNNING one by recording the request (see store.TaskWriter).
func (s *Store) Cancel(ctx context.Context, name, key, by string) (*store.Task, error) {
	if err := driverkit.CheckCancelledBy(by); err != nil {
		return nil, fmt.Errorf("ax: postgres: cancel %q/%q: %w", name, key, err)
	}
	t, ok, err := s.transition(ctx, "cancel", cancelSQL, []any{name, key, s.ns, by}, lookupSQL, []any{name, key, s.ns})
	ok = ok || driverkit.CancelAsked(t)
	return moved(fmt.Sprintf("ax: postgres: cancel %q/%q", name, key), t, ok, err, store.ErrNotCancellable)
}

// moved is the answer of op, a transition whose answer was t, applied and err: the
// task moved, or ErrNotFound, or the unchanged task with the refusal's sentinel.
func moved(op string, t *store.Task, applied bool, err, sentinel error) (*store.Task, error) {
	switch {
	case err != nil:
		return nil, err
	case t == nil:
		return driverkit.Refusal(op, nil, store.ErrNotFound)
	case !applied:
		return driverkit.Refusal(op, t, sentinel)
	}
	return t, nil
}

// cancelSQL cancels the task (name $1, key $2) of namespace $3 for $4: a SCHEDULED
// or DISPATCHING one ends CANCELLED, a RUNNING one not asked before records the
// request. (In SET, t.status is the row's status before the update.)
const cancelSQL = `UPDATE ax_tasks t SET status = CASE t.status WHEN 'RUNNING' THEN t.status ELSE 'CANCELLED' END,
		finished_at = CASE t.status WHEN 'RUNNING' THEN t.finished_at ELSE ts.now END,
		cancelled_by = $4, cancel_requested_at = ts.now, updated_at = ts.now
	FROM (SELECT clock_timestamp() AS now) ts
	WHERE t.namespace = $3 AND t.name = $1 AND t.key = $2 AND t.key_slot = 0
		AND (t.status IN ('SCHEDULED', 'DISPATCHING') OR t.status = 'RUNNING' AND t.cancel_requested_at IS NULL)
	RETURNING ` + taskCols

// cancelIn is Cancel's statements in q.
func (s *Store) cancelIn(ctx context.Context, q txQuerier, name, key, by string) (*store.Task, error) {
	if err := driverkit.CheckCancelledBy(by); err != nil {
		return nil, fmt.Errorf("ax: postgres: cancel %q/%q: %w", name, key, err)
	}
	t, ok, err := s.transitionIn(ctx, q, "cancel in transaction", cancelSQL, []any{name, key, s.ns, by}, lookupSQL, []any{name, key, s.ns})
	ok = ok || driverkit.CancelAsked(t)
	return moved(fmt.Sprintf("ax: postgres: cancel %q/%q", name, key), t, ok, err, store.ErrNotCancellable)
}

// transitionIn is transition in the bound transaction q: update, a conditional
// UPDATE … RETURNING taskCols, then, if it moved nothing, read: the task moved, or
// else as it is (nil when there is none).
func (s *Store) transitionIn(ctx context.Context, q txQuerier, op, update string, updArgs []any, read string, readArgs []any) (t *store.Task, applied bool, err error) {
	one := func(rows txRows) error {
		if rows.Next() {
			var err error
			t, err = scanTask(rows)
			return err
		}
		return nil
	}
	if err := q.query(ctx, update, updArgs, one); err != nil {
		return nil, false, s.wrap(op, err)
	}
	if t != nil {
		return t, true, nil
	}
	if err := q.query(ctx, read, readArgs, one); err != nil {
		return nil, false, s.wrap(op, err)
	}
	return t, false, nil
}

// MakeDue makes the SCHEDULED or FAILED task id of the view's namespace due now,
// without claiming it, in a READ COMMITTED transaction of the store's own (see
// store.TaskWriter): the task SCHEDULED, due now, with a fresh sequence number,
// published as Insert's are.
func (s *Store) MakeDue(ctx context.Context, id int64) (*store.Task, error) {
	const op = "make due"
	if err := s.check(op); err != nil {
		return nil, err
	}
	tx, end, err := s.begin(ctx)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	defer end()
	t, err := s.makeDueIn(ctx, pgxQuerier{tx}, op, id)
	if err != nil {
		return t, err // a refusal wrote nothing
	}
	if err := s.commitTx(ctx, tx); err != nil {
		return nil, s.wrap(op, err)
	}
	return t, nil
}

// makeDueIn is MakeDue's statements in q: publishSQL, then the update (see "The
// refill cursor" in DESIGN.md).
func (s *Store) makeDueIn(ctx context.Context, q txQuerier, op string, id int64) (*store.Task, error) {
	if err := q.exec(ctx, publishSQL, s.lockKey, s.channel); err != nil {
		return nil, s.wrap(op, err)
	}
	t, ok, err := s.transitionIn(ctx, q, op, makeDueSQL, []any{id, s.ns}, getSQL, []any{id, s.ns})
	return moved(triggerOp(id), t, ok, err, store.ErrNotTriggerable)
}

// makeDueSQL makes the SCHEDULED or FAILED task $1 of namespace $2 SCHEDULED, due
// now, triggered, with a fresh sequence number; from FAILED with one more attempt.
const makeDueSQL = `UPDATE ax_tasks t SET status = 'SCHEDULED', due_at = ts.now,
		attempt = t.attempt + CASE t.status WHEN 'FAILED' THEN 1 ELSE 0 END,
		finished_at = NULL, triggered_at = ts.now, seq = nextval('ax_seq'), updated_at = ts.now
	FROM (SELECT clock_timestamp() AS now) ts
	WHERE t.id = $1 AND t.namespace || '' = $2 AND t.status IN ('SCHEDULED', 'FAILED') AND t.key_slot = 0 RETURNING ` + taskCols

// Reschedule moves the SCHEDULED task (name, key) of the view's namespace to due at
// at, with a fresh sequence number, in one transaction.
func (s *Store) Reschedule(ctx context.Context, name, key string, at time.Time) (*store.Task, error) {
	op := fmt.Sprintf("ax: postgres: reschedule %q/%q", name, key)
	if at.IsZero() {
		return nil, fmt.Errorf("%s: zero due time: %w", op, store.ErrInvalid)
	}
	t, ok, err := s.transitionTo(ctx, "reschedule", true, rescheduleSQL, []any{name, key, s.ns, dueArg(at)}, lookupSQL, []any{name, key, s.ns})
	return moved(op, t, ok, err, store.ErrNotReschedulable)
}

// rescheduleSQL moves the SCHEDULED task (name $1, key $2) of namespace $3 to due at
// $4, with a fresh sequence number.
const rescheduleSQL = `UPDATE ax_tasks t SET due_at = $4, seq = nextval('ax_seq'), updated_at = clock_timestamp()
	WHERE t.namespace = $3 AND t.name = $1 AND t.key = $2 AND t.key_slot = 0 AND t.status = 'SCHEDULED' RETURNING ` + taskCols

// retrySQL moves the FAILED task $1 of namespace $2 back to SCHEDULED, due now, with
// a fresh retry budget and sequence number.
const retrySQL = `UPDATE ax_tasks t SET status = 'SCHEDULED', due_at = ts.now, attempt = 0, dispatch_retries = 0, snoozes = 0, finished_at = NULL,
		seq = nextval('ax_seq'), updated_at = ts.now
	FROM (SELECT clock_timestamp() AS now) ts
	WHERE t.id = $1 AND t.namespace || '' = $2 AND t.status = 'FAILED' AND t.key_slot = 0 RETURNING ` + taskCols

// Retry moves a FAILED task of the view's namespace back to SCHEDULED, due now, with
// a fresh retry budget and sequence number, in one transaction.
func (s *Store) Retry(ctx context.Context, id int64) (*store.Task, error) {
	op := fmt.Sprintf("ax: postgres: retry task %d", id)
	t, ok, err := s.transitionTo(ctx, "retry", true, retrySQL, []any{id, s.ns}, getSQL, []any{id, s.ns})
	return moved(op, t, ok, err, store.ErrNotRetryable)
}

// Trigger moves a SCHEDULED or FAILED task of the view's namespace to DISPATCHING
// now. A task whose key restricts it (a TaskKey with Overlap skip or queue) is left
// to triggerKeyed, which moves it under its key's lock, or refuses while another task
// of the namespace holds the key.
func (s *Store) Trigger(ctx context.Context, id int64, executionID string) (*store.Task, error) {
	if executionID == "" {
		return nil, fmt.Errorf("ax: postgres: trigger task %d: empty execution id: %w", id, store.ErrInvalid)
	}
	t, ok, err := s.transition(ctx, "trigger", triggerSQL, []any{id, executionID, s.ns}, getSQL, []any{id, s.ns})
	if err != nil || ok || t == nil || t.Status != store.Scheduled && t.Status != store.Failed || t.Superseded {
		return moved(triggerOp(id), t, ok, err, store.ErrNotTriggerable)
	}
	// Refused: its key, or a limit of its name, which a claim applies.
	var limited, keys bool
	if err := s.pool.QueryRow(ctx, nameLimitedSQL, s.ns, t.Name).Scan(&limited, &keys); err != nil {
		return nil, s.wrap("trigger", err)
	}
	if keys { // its name admits several tasks per key: the claim counts them
		return s.MakeDue(ctx, id)
	}
	if keyed(t) {
		var holder int64
		t, ok, holder, err = s.triggerKeyed(ctx, id, executionID, t.TaskKey)
		if err == nil && !ok && t != nil && holder != 0 && (t.Status == store.Scheduled || t.Status == store.Failed) {
			return driverkit.KeyHeld(triggerOp(id), t, holder)
		}
	}
	if err == nil && !ok && limited && t != nil && (t.Status == store.Scheduled || t.Status == store.Failed) && !t.Superseded {
		return s.MakeDue(ctx, id)
	}
	return moved(triggerOp(id), t, ok, err, store.ErrNotTriggerable)
}

// triggerSQL is Trigger's UPDATE of task $1 of namespace $3, to DISPATCHING under
// execution id $2, for a task whose key does not restrict it and whose name has no
// concurrency limit (Trigger makes such a task due instead).
const triggerSQL = `UPDATE ax_tasks t SET status = 'DISPATCHING', execution_id = $2,
		attempt = t.attempt + CASE t.status WHEN 'FAILED' THEN 1 ELSE 0 END,
		finished_at = NULL, dispatched_at = ts.now, triggered_at = ts.now, updated_at = ts.now
	FROM (SELECT clock_timestamp() AS now) ts
	WHERE t.id = $1 AND t.namespace || '' = $3 AND t.status IN ('SCHEDULED', 'FAILED') AND t.key_slot = 0
		AND (t.task_key = '' OR t.overlap = 'allow') AND NOT ` + limitedName + `
	RETURNING ` + taskCols

// rescheduleIn is Reschedule's statements in q, published as Insert's rows are.
func (s *Store) rescheduleIn(ctx context.Context, q txQuerier, name, key string, at time.Time) (*store.Task, error) {
	op := fmt.Sprintf("ax: postgres: reschedule %q/%q", name, key)
	if at.IsZero() {
		return nil, fmt.Errorf("%s: zero due time: %w", op, store.ErrInvalid)
	}
	args := []any{name, key, s.ns}
	t, ok, err := s.scheduledIn(ctx, q, "reschedule in transaction", rescheduleSQL, append(args, dueArg(at)), lookupSQL, args)
	return moved(op, t, ok, err, store.ErrNotReschedulable)
}

// retryIn is Retry's statements in q, published as Insert's rows are.
func (s *Store) retryIn(ctx context.Context, q txQuerier, id int64) (*store.Task, error) {
	args := []any{id, s.ns}
	t, ok, err := s.scheduledIn(ctx, q, "retry in transaction", retrySQL, args, getSQL, args)
	return moved(fmt.Sprintf("ax: postgres: retry task %d", id), t, ok, err, store.ErrNotRetryable)
}

// scheduledIn is transitionIn for an update that leaves its row SCHEDULED with a
// fresh sequence number: publishSQL goes first (see "The refill cursor" in DESIGN.md).
func (s *Store) scheduledIn(ctx context.Context, q txQuerier, op, update string, updArgs []any, read string, readArgs []any) (*store.Task, bool, error) {
	if err := q.exec(ctx, publishSQL, s.lockKey, s.channel); err != nil {
		return nil, false, s.wrap(op, err)
	}
	return s.transitionIn(ctx, q, op, update, updArgs, read, readArgs)
}

// triggerIn is Trigger's statements in q: the keyed task's under its key's lock,
// which q's transaction holds until it ends.
func (s *Store) triggerIn(ctx context.Context, q txQuerier, id int64, executionID string) (*store.Task, error) {
	if executionID == "" {
		return nil, fmt.Errorf("%s: empty execution id: %w", triggerOp(id), store.ErrInvalid)
	}
	const op = "trigger in transaction"
	args, read := []any{id, executionID, s.ns}, []any{id, s.ns}
	t, ok, err := s.transitionIn(ctx, q, op, triggerSQL, args, getSQL, read)
	if err != nil || ok || t == nil || t.Status != store.Scheduled && t.Status != store.Failed || t.Superseded {
		return moved(triggerOp(id), t, ok, err, store.ErrNotTriggerable)
	}
	limited, keys, err := s.nameLimitedIn(ctx, q, t.Name) // refused: see Trigger
	if err != nil {
		return nil, s.wrap(op, err)
	}
	if keys {
		return s.makeDueIn(ctx, q, op, id)
	}
	if keyed(t) {
		if err := q.exec(ctx, keyLockSQL, s.keyLock, []int32{keyLockID(s.ns, t.TaskKey)}); err != nil {
			return nil, s.wrap(op, err)
		}
		var held map[string]driverkit.KeyHold
		if err := q.query(ctx, holdersSQL, []any{[]string{t.TaskKey}, s.ns}, func(rows txRows) (err error) {
			held, err = scanHolders(rows)
			return err
		}); err != nil {
			return nil, s.wrap(op, err)
		}
		holder := held[t.TaskKey].First
		t, ok, err = s.transitionIn(ctx, q, op, triggerKeyedSQL, args, getSQL, read)
		if err == nil && !ok && t != nil && holder != 0 && (t.Status == store.Scheduled || t.Status == store.Failed) {
			return driverkit.KeyHeld(triggerOp(id), t, holder)
		}
	}
	if err == nil && !ok && limited && t != nil && (t.Status == store.Scheduled || t.Status == store.Failed) && !t.Superseded {
		return s.makeDueIn(ctx, q, op, id)
	}
	return moved(triggerOp(id), t, ok, err, store.ErrNotTriggerable)
}
