package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/store"
)

// This file holds the operations that join a transaction: the store's own (InTx) or
// a caller's, a *sql.Tx on the store's file (see store.TxStore). InsertTx, CancelTx
// and TriggerTx are in tasks.go, AuditTx in audit.go. SQLite has one writer: while
// such a transaction is open, every other write waits for it.

// InTx runs fn in an IMMEDIATE transaction on the store's writer connection and
// commits it if fn returns nil (see store.TxStore). It is not retried.
func (s *Store) InTx(ctx context.Context, fn func(tx any) error) error {
	var ferr error
	err := s.write(ctx, "transaction", func(tx *sql.Tx) error {
		ferr = fn(tx)
		return ferr
	})
	if ferr != nil {
		return ferr // fn's own, not wrapped again
	}
	return err
}

// GetTx is Get inside the caller's transaction tx.
func (s *Store) GetTx(ctx context.Context, tx any, id int64) (*store.Task, error) {
	stx, err := s.callerTx(ctx, "get task", tx)
	if err != nil {
		return nil, err
	}
	t, err := scanTask(stx.QueryRowContext(ctx, getSQL, id, s.ns))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ax: sqlite: get task %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, s.wrap("get task", err)
	}
	return t, nil
}

// RescheduleTx is Reschedule inside the caller's transaction tx.
func (s *Store) RescheduleTx(ctx context.Context, tx any, name, key string, at time.Time) (*store.Task, error) {
	op := fmt.Sprintf("ax: sqlite: reschedule %q/%q", name, key)
	if at.IsZero() {
		return nil, fmt.Errorf("%s: zero due time: %w", op, store.ErrInvalid)
	}
	return s.moveBackIn(ctx, tx, "reschedule in transaction", op, func(stx *sql.Tx, seq int64) (*store.Task, error, error) {
		return s.rescheduleIn(ctx, stx, seq, name, key, at)
	})
}

// RetryTx is Retry inside the caller's transaction tx.
func (s *Store) RetryTx(ctx context.Context, tx any, id int64) (*store.Task, error) {
	return s.moveBackIn(ctx, tx, "retry in transaction", fmt.Sprintf("ax: sqlite: retry task %d", id),
		func(stx *sql.Tx, seq int64) (*store.Task, error, error) { return s.retryIn(ctx, stx, seq, id) })
}

// moveBackIn is moveBack in the caller's transaction tx.
func (s *Store) moveBackIn(ctx context.Context, tx any, name, op string, move func(tx *sql.Tx, seq int64) (t *store.Task, refusal, err error)) (*store.Task, error) {
	stx, err := s.callerTx(ctx, name, tx)
	if err != nil {
		return nil, err
	}
	seq, err := nextSeq(ctx, stx, 1)
	if err != nil {
		return nil, s.wrap(name, err)
	}
	t, sentinel, err := move(stx, seq)
	if err != nil {
		return nil, s.wrap(name, err)
	}
	if sentinel != nil {
		return store.Refusal(op, t, sentinel)
	}
	return t, nil
}

// ClaimTriggerTx is Trigger inside the caller's transaction tx.
func (s *Store) ClaimTriggerTx(ctx context.Context, tx any, id int64, executionID string) (*store.Task, error) {
	if executionID == "" {
		return nil, fmt.Errorf("ax: sqlite: trigger task %d: empty execution id: %w", id, store.ErrInvalid)
	}
	stx, err := s.callerTx(ctx, "trigger in transaction", tx)
	if err != nil {
		return nil, err
	}
	t, sentinel, holder, err := s.triggerIn(ctx, stx, id, executionID)
	if err != nil {
		return nil, s.wrap("trigger in transaction", err)
	}
	return triggered(id, t, sentinel, holder)
}

// PauseScheduleTx is PauseSchedule inside the caller's transaction tx.
func (s *Store) PauseScheduleTx(ctx context.Context, tx any, name string) (*store.Schedule, error) {
	return s.scheduleTx(ctx, tx, "pause schedule", name, func(stx *sql.Tx) (*store.Schedule, error) {
		return s.pauseIn(ctx, stx, name)
	})
}

// ResumeScheduleTx is ResumeSchedule inside the caller's transaction tx.
func (s *Store) ResumeScheduleTx(ctx context.Context, tx any, name string, next time.Time) (*store.Schedule, error) {
	if next.IsZero() {
		return nil, fmt.Errorf("ax: sqlite: resume schedule %q: zero next fire time: %w", name, store.ErrInvalid)
	}
	return s.scheduleTx(ctx, tx, "resume schedule", name, func(stx *sql.Tx) (*store.Schedule, error) {
		return s.resumeIn(ctx, stx, name, next)
	})
}

// scheduleTx runs change, a change of schedule name, in the caller's transaction tx.
func (s *Store) scheduleTx(ctx context.Context, tx any, op, name string, change func(tx *sql.Tx) (*store.Schedule, error)) (*store.Schedule, error) {
	stx, err := s.callerTx(ctx, op+" in transaction", tx)
	if err != nil {
		return nil, err
	}
	sc, err := change(stx)
	switch {
	case err != nil:
		return nil, s.wrap(op+" in transaction", err)
	case sc == nil:
		return nil, fmt.Errorf("ax: sqlite: %s %q: %w", op, name, store.ErrNotFound)
	}
	return sc, nil
}
