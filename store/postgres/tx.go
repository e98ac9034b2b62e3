package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/store"
)

// This file holds the operations that join a transaction: the store's own (InTx) or
// a caller's (see store.TxStore). InsertTx, CancelTx and TriggerTx are in tasks.go,
// AuditTx in audit.go.

// InTx runs fn in a READ COMMITTED transaction of the store's own, a pgx.Tx, and
// commits it if fn returns nil (see store.TxStore). It is not retried: fn runs once.
// At most half the pool's connections are in such transactions at once (a call
// waits for its turn), so that what fn reads outside its transaction always finds a
// connection; a pool of one connection is ErrInvalid. The commit is not cancelled
// with ctx, so that once sent its outcome is known, but bounded by commitTimeout.
func (s *Store) InTx(ctx context.Context, fn func(tx any) error) error {
	if err := s.check("transaction"); err != nil {
		return err
	}
	if n := s.pool.Config().MaxConns; n < 2 {
		return fmt.Errorf("ax: postgres: transaction: the pool has %d connection; what runs in a transaction may read through another: %w", n, store.ErrInvalid)
	}
	select {
	case s.inTx <- struct{}{}:
		defer func() { <-s.inTx }()
	case <-ctx.Done():
		return s.wrap("begin", ctx.Err())
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}) // as every write of the store's
	if err != nil {
		return s.wrap("begin", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // a no-op after the commit; on a panic in fn, the rollback
	if err := fn(tx); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	if err := tx.Commit(cctx); err != nil {
		return s.wrap("commit", err)
	}
	return nil
}

// commitTimeout bounds InTx's commit, which the caller's context does not cancel.
const commitTimeout = 30 * time.Second

// GetTx is Get inside the caller's transaction tx.
func (s *Store) GetTx(ctx context.Context, tx any, id int64) (*store.Task, error) {
	q, err := s.callerTx(ctx, "get task tx", tx)
	if err != nil {
		return nil, err
	}
	var t *store.Task
	if err := q.query(ctx, getSQL, []any{id, s.ns}, func(rows txRows) error {
		if !rows.Next() {
			return nil
		}
		var err error
		t, err = scanTask(rows)
		return err
	}); err != nil {
		return nil, s.wrap("get task tx", err)
	}
	if t == nil {
		return nil, fmt.Errorf("ax: postgres: get task %d: %w", id, store.ErrNotFound)
	}
	return t, nil
}

// RescheduleTx is Reschedule inside the caller's transaction tx, published as
// Insert's rows are.
func (s *Store) RescheduleTx(ctx context.Context, tx any, name, key string, at time.Time) (*store.Task, error) {
	op := fmt.Sprintf("ax: postgres: reschedule %q/%q", name, key)
	if at.IsZero() {
		return nil, fmt.Errorf("%s: zero due time: %w", op, store.ErrInvalid)
	}
	args := []any{name, key, s.ns}
	t, ok, err := s.scheduledIn(ctx, tx, "reschedule tx", rescheduleSQL, append(args, dueArg(at)), lookupSQL, args)
	return moved(op, t, ok, err, store.ErrNotReschedulable)
}

// RetryTx is Retry inside the caller's transaction tx, published as Insert's rows
// are.
func (s *Store) RetryTx(ctx context.Context, tx any, id int64) (*store.Task, error) {
	args := []any{id, s.ns}
	t, ok, err := s.scheduledIn(ctx, tx, "retry tx", retrySQL, args, getSQL, args)
	return moved(fmt.Sprintf("ax: postgres: retry task %d", id), t, ok, err, store.ErrNotRetryable)
}

// scheduledIn is transitionIn in the caller's transaction tx for an update that
// leaves its row SCHEDULED with a fresh sequence number: publishSQL goes first (see
// "The refill cursor" in doc.go).
func (s *Store) scheduledIn(ctx context.Context, tx any, op, update string, updArgs []any, read string, readArgs []any) (*store.Task, bool, error) {
	q, err := s.callerTx(ctx, op, tx)
	if err != nil {
		return nil, false, err
	}
	if err := q.exec(ctx, publishSQL, s.lockKey, s.channel); err != nil {
		return nil, false, s.wrap(op, err)
	}
	return s.transitionIn(ctx, q, op, update, updArgs, read, readArgs)
}

// ClaimTriggerTx is Trigger inside the caller's transaction tx: the same
// statements, the keyed task's under its key's lock, which tx holds until it ends.
func (s *Store) ClaimTriggerTx(ctx context.Context, tx any, id int64, executionID string) (*store.Task, error) {
	if executionID == "" {
		return nil, fmt.Errorf("%s: empty execution id: %w", triggerOp(id), store.ErrInvalid)
	}
	const op = "trigger claim tx"
	q, err := s.callerTx(ctx, op, tx)
	if err != nil {
		return nil, err
	}
	args, read := []any{id, executionID, s.ns}, []any{id, s.ns}
	t, ok, err := s.transitionIn(ctx, q, op, triggerSQL, args, getSQL, read)
	if err == nil && !ok && t != nil && keyed(t) && (t.Status == store.Scheduled || t.Status == store.Failed) && !t.Superseded {
		if err := q.exec(ctx, keyLockSQL, s.keyLock, []int32{keyLockID(s.ns, t.TaskKey)}); err != nil {
			return nil, s.wrap(op, err)
		}
		var holder int64
		if err := q.query(ctx, holdersSQL, []any{[]string{t.TaskKey}, s.ns}, func(rows txRows) error {
			for rows.Next() {
				var key string
				if err := rows.Scan(&key, &holder); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return nil, s.wrap(op, err)
		}
		t, ok, err = s.transitionIn(ctx, q, op, triggerKeyedSQL, args, getSQL, read)
		if err == nil && !ok && t != nil && holder != 0 && (t.Status == store.Scheduled || t.Status == store.Failed) {
			return store.KeyHeld(triggerOp(id), t, holder)
		}
	}
	return moved(triggerOp(id), t, ok, err, store.ErrNotTriggerable)
}

// PauseScheduleTx is PauseSchedule inside the caller's transaction tx: the same
// statements, the cancellation after the pause so that, at READ COMMITTED, its
// snapshot sees every occurrence committed before the schedule's row was locked.
func (s *Store) PauseScheduleTx(ctx context.Context, tx any, name string) (*store.Schedule, error) {
	const op = "pause schedule tx"
	q, err := s.callerTx(ctx, op, tx)
	if err != nil {
		return nil, err
	}
	paused, err := q.count(ctx, pauseSQL, name, s.ns)
	if err == nil && paused == 1 {
		_, err = q.count(ctx, cancelOccurrencesSQL, name, s.ns)
	}
	if err != nil {
		return nil, s.wrap(op, err)
	}
	return s.scheduleIn(ctx, q, op, name)
}

// ResumeScheduleTx is ResumeSchedule inside the caller's transaction tx.
func (s *Store) ResumeScheduleTx(ctx context.Context, tx any, name string, next time.Time) (*store.Schedule, error) {
	if next.IsZero() {
		return nil, fmt.Errorf("ax: postgres: resume schedule %q: zero next fire time: %w", name, store.ErrInvalid)
	}
	const op = "resume schedule tx"
	q, err := s.callerTx(ctx, op, tx)
	if err != nil {
		return nil, err
	}
	if _, err := q.count(ctx, resumeSQL, name, next, s.ns); err != nil {
		return nil, s.wrap(op, err)
	}
	return s.scheduleIn(ctx, q, op, name)
}

// scheduleIn reads schedule name in q, or ErrNotFound.
func (s *Store) scheduleIn(ctx context.Context, q txQuerier, op, name string) (*store.Schedule, error) {
	var sc *store.Schedule
	if err := q.query(ctx, readScheduleSQL, []any{name, s.ns}, func(rows txRows) error {
		if !rows.Next() {
			return nil
		}
		var err error
		sc, err = scanSchedule(rows)
		return err
	}); err != nil {
		return nil, s.wrap(op, err)
	}
	if sc == nil {
		return nil, fmt.Errorf("ax: postgres: %s %q: %w", op, name, store.ErrNotFound)
	}
	return sc, nil
}
