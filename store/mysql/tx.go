package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/store"
)

// This file holds the operations that join a transaction: the store's own (InTx) or
// a caller's, a *sql.Tx on the store's database (see store.TxStore). InsertTx,
// CancelTx and TriggerTx are in tasks.go, AuditTx in audit.go.

// InTx runs fn in a READ COMMITTED transaction of the store's own and commits it if
// fn returns nil (see store.TxStore). A deadlock or a lock wait timeout rolls it back
// and runs fn again in a new one, as every write of the store's is retried. At most
// half the pool's connections (as sized when New ran) are in such transactions at
// once — a call waits for its turn — so that what fn does on a connection of its own
// (a sequence number's reservation) always finds one; a pool of one connection is
// ErrInvalid. The sequence numbers its transactions reserved and did not commit are
// released at once, not after HoldGrace.
func (s *Store) InTx(ctx context.Context, fn func(tx any) error) error {
	if s.db.Stats().MaxOpenConnections == 1 {
		return fmt.Errorf("ax: mysql: transaction: the pool has one connection, and a transaction's sequence numbers need another: %w", store.ErrInvalid)
	}
	select {
	case s.inTx <- struct{}{}:
		defer func() { <-s.inTx }()
	case <-ctx.Done():
		return s.wrap("transaction", ctx.Err())
	}
	var ferr error
	var holds []int64
	attempts := 0
	err := s.run(ctx, "transaction", 0, func(tx *sql.Tx, _ int64) error {
		attempts++
		s.holdsMu.Lock()
		s.txHolds[tx] = &holds
		s.holdsMu.Unlock()
		defer func() {
			s.holdsMu.Lock()
			delete(s.txHolds, tx)
			s.holdsMu.Unlock()
		}()
		ferr = fn(tx)
		return ferr
	})
	if err != nil || attempts > 1 {
		for _, lo := range holds { // a committed one's delete already removed it: a no-op
			s.dropHold(ctx, lo)
		}
	}
	if ferr != nil && errors.Is(err, ferr) {
		return ferr // fn's own, not wrapped again (the last attempt's, if it was retried)
	}
	return err
}

// noteHold records lo, a hold that tx took, when tx is one of InTx's.
func (s *Store) noteHold(tx *sql.Tx, lo int64) {
	s.holdsMu.Lock()
	defer s.holdsMu.Unlock()
	if h := s.txHolds[tx]; h != nil {
		*h = append(*h, lo)
	}
}

// GetTx is Get inside the caller's transaction tx.
func (s *Store) GetTx(ctx context.Context, tx any, id int64) (*store.Task, error) {
	stx, err := s.callerTx(ctx, "get task", tx)
	if err != nil {
		return nil, err
	}
	t, err := scanTask(stx.QueryRowContext(ctx, getSQL, id, s.ns))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ax: mysql: get task %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, s.wrap("get task", err)
	}
	return t, nil
}

// RescheduleTx is Reschedule inside the caller's transaction tx.
func (s *Store) RescheduleTx(ctx context.Context, tx any, name, key string, at time.Time) (*store.Task, error) {
	op := fmt.Sprintf("ax: mysql: reschedule %q/%q", name, key)
	if at.IsZero() {
		return nil, fmt.Errorf("%s: zero due time: %w", op, store.ErrInvalid)
	}
	return s.moveBackIn(ctx, tx, "reschedule", op, s.rescheduleIn(ctx, name, key, at))
}

// RetryTx is Retry inside the caller's transaction tx.
func (s *Store) RetryTx(ctx context.Context, tx any, id int64) (*store.Task, error) {
	return s.moveBackIn(ctx, tx, "retry", fmt.Sprintf("ax: mysql: retry task %d", id), s.retryIn(ctx, id))
}

// moveBackIn is moveBack in the caller's transaction tx. The transition goes first,
// keeping the row's sequence number, and only once it applied — the row now locked by
// tx — is a fresh number reserved and set: a refused one reserves none, for a number
// whose hold is rolled back would keep every refill cursor behind it for HoldGrace.
// Should the reservation or the number's write fail, the transition is undone (to a
// savepoint), so that a caller who commits anyway publishes no row under a stale
// number.
func (s *Store) moveBackIn(ctx context.Context, tx any, name, op string, move func(tx *sql.Tx, seq any) (t *store.Task, refusal, err error)) (*store.Task, error) {
	stx, err := s.callerTx(ctx, name, tx)
	if err != nil {
		return nil, err
	}
	if _, err := stx.ExecContext(ctx, `SAVEPOINT ax_move`); err != nil {
		return nil, s.wrap(name, err)
	}
	t, sentinel, err := move(stx, nil)
	switch {
	case err != nil:
		return nil, s.wrap(name, err)
	case sentinel != nil:
		return store.Refusal(op, t, sentinel)
	}
	seq, err := s.callerSeq(ctx, name, stx, 1)
	if err == nil {
		if _, err = stx.ExecContext(ctx, `UPDATE ax_tasks SET seq = ? WHERE id = ?`, seq, t.ID); err != nil {
			err = s.wrap(name, err)
		}
	}
	if err != nil {
		if _, uerr := stx.ExecContext(context.WithoutCancel(ctx), `ROLLBACK TO SAVEPOINT ax_move`); uerr != nil {
			return nil, fmt.Errorf("%w; and the move could not be undone (%v): roll the transaction back", err, uerr)
		}
		return nil, err
	}
	return t, nil
}

// ClaimTriggerTx is Trigger inside the caller's transaction tx.
func (s *Store) ClaimTriggerTx(ctx context.Context, tx any, id int64, executionID string) (*store.Task, error) {
	if executionID == "" || !validText(executionID, maxExecID) {
		return nil, fmt.Errorf("ax: mysql: trigger task %d: empty or over-long execution id: %w", id, store.ErrInvalid)
	}
	stx, err := s.callerTx(ctx, "trigger", tx)
	if err != nil {
		return nil, err
	}
	t, sentinel, holder, err := s.triggerIn(ctx, stx, id, executionID)
	if err != nil {
		return nil, s.wrap("trigger", err)
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
	if next.IsZero() || !inRange(next) {
		return nil, fmt.Errorf("ax: mysql: resume schedule %q: next fire time %v zero or outside years 1000-9999: %w", name, next, store.ErrInvalid)
	}
	return s.scheduleTx(ctx, tx, "resume schedule", name, func(stx *sql.Tx) (*store.Schedule, error) {
		return s.resumeIn(ctx, stx, name, next)
	})
}

// scheduleTx runs change, a change of schedule name, in the caller's transaction tx.
func (s *Store) scheduleTx(ctx context.Context, tx any, op, name string, change func(tx *sql.Tx) (*store.Schedule, error)) (*store.Schedule, error) {
	stx, err := s.callerTx(ctx, op, tx)
	if err != nil {
		return nil, err
	}
	sc, err := change(stx)
	switch {
	case err != nil:
		return nil, s.wrap(op, err)
	case sc == nil:
		return nil, fmt.Errorf("ax: mysql: %s %q: %w", op, name, store.ErrNotFound)
	}
	return sc, nil
}
