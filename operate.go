package ax

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/store"
)

// Reschedule moves the SCHEDULED task (name, key) to be due at at — "give this
// customer ten more minutes" — in one conditional write that keeps its id and
// everything else about it, and returns it. This scheduler's wheel learns of the new
// time at once, the others' within a refill interval; the task never runs before it.
// A task that is dispatching, running or finished is ErrNotReschedulable (errors.As
// gives a *TaskStateError holding it); a missing one ErrNotFound.
//
// With WithTx the move is part of the caller's transaction, as for Cancel: it holds
// if, and only if, the transaction commits, and schedulers learn of it within a
// refill interval of the commit (this one at once after an InTx commit).
func (s *Scheduler) Reschedule(ctx context.Context, name, key string, at time.Time, opts ...ActionOption) (*Task, error) {
	op := fmt.Sprintf("reschedule %q/%q", name, key)
	if err := ctx.Err(); err != nil {
		return nil, errorf("ax: %s: %w", op, err)
	}
	o := collect(opts)
	if err := errors.Join(append(o.errs, validName(name), validKey(key), validDue(at))...); err != nil {
		return nil, errorf("ax: %s: %w", op, err)
	}
	t, err := inTxOr(s, o, func(txs store.TxStore, tx any) (*store.Task, error) { return txs.RescheduleTx(ctx, tx, name, key, at) },
		func() (*store.Task, error) { return s.st.Reschedule(ctx, name, key, at) })
	if err != nil {
		return nil, s.refused(op, t, err, ErrNotReschedulable)
	}
	o.onCommit(ctx, func() {
		if r := s.current(); r != nil {
			r.remove(t.ID) // then added back at its new time, or left to the refill beyond the window
			r.add(store.Due{ID: t.ID, DueAt: t.DueAt})
		}
	})
	return taskOf(t), nil
}

// Retry puts a FAILED task back to SCHEDULED, due now, with a fresh business retry
// budget (Attempt 0: MaxRetry more retries after this run), and returns it; its
// executions and LastError stay as the record of what failed. This scheduler runs it
// at once when started, another within a refill interval. A task in another state,
// or one Superseded by a newer task of its key (UniqueActive), is ErrNotRetryable (errors.As gives a *TaskStateError holding it); a missing one
// ErrNotFound.
//
// With WithTx the retry is part of the caller's transaction, as for Reschedule.
func (s *Scheduler) Retry(ctx context.Context, id int64, opts ...ActionOption) (*Task, error) {
	op := fmt.Sprintf("retry task %d", id)
	if err := ctx.Err(); err != nil {
		return nil, errorf("ax: %s: %w", op, err)
	}
	o := collect(opts)
	if id <= 0 {
		o.errs = append(o.errs, fmt.Errorf("id is not positive: %w", ErrInvalid))
	}
	if err := errors.Join(o.errs...); err != nil {
		return nil, errorf("ax: %s: %w", op, err)
	}
	t, err := inTxOr(s, o, func(txs store.TxStore, tx any) (*store.Task, error) { return txs.RetryTx(ctx, tx, id) },
		func() (*store.Task, error) { return s.st.Retry(ctx, id) })
	if err != nil {
		return nil, s.refused(op, t, err, ErrNotRetryable)
	}
	o.onCommit(ctx, func() {
		if r := s.current(); r != nil {
			r.add(store.Due{ID: t.ID, DueAt: t.DueAt})
		}
	})
	return taskOf(t), nil
}

// refused is the error of op that the store answered err: a *TaskStateError holding t
// when the task's state refused it (sentinel), else err under op.
func (s *Scheduler) refused(op string, t *store.Task, err, sentinel error) error {
	if t != nil && errors.Is(err, sentinel) {
		return &TaskStateError{Op: op, Task: taskOf(t), Err: err}
	}
	return errorf("ax: %s: %w", op, err)
}
