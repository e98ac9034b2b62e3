package ax

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/axsched/ax/internal/observe"
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
	t, err := inTxOr(ctx, s, o, func(tx store.Tx) (*store.Task, error) { return tx.Reschedule(ctx, name, key, at) },
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
// executions and LastError stay as the record of what failed. This scheduler runs it at
// once when started, another within a refill interval. A task in another state, or one
// Superseded by a newer task of its key (UniqueActive), is ErrNotRetryable (errors.As
// gives a *TaskStateError holding it); a missing one ErrNotFound.
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
	t, err := inTxOr(ctx, s, o, func(tx store.Tx) (*store.Task, error) { return tx.Retry(ctx, id) },
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

// Cancel cancels the task (name, key), recording who asked (WithActor; by default
// Config.Node) and when as its CancelledBy and CancelRequestedAt:
//
//   - SCHEDULED or DISPATCHING: it becomes CANCELLED at once and never runs (and, by
//     default, frees its key: see Unique).
//   - RUNNING: its cancel is requested, and Cancel returns once that is stored. The
//     scheduler running it — this one or another replica — cancels the handler's
//     context, with ErrCancelled as its cause (context.Cause), at its next heartbeat
//     (within HeartbeatInterval; at once when it is this scheduler). When the handler
//     returns an error, whatever it is, the task ends CANCELLED and is not retried;
//     its execution record ends CANCELLED with the error "cancelled by <actor>: <the
//     handler's error>". A handler that ignores its context and succeeds has its
//     success recorded: the task ends SUCCEEDED. A task whose executor is lost ends
//     CANCELLED when recovery finds it orphaned. Cancelling it again changes nothing.
//
// A finished task is ErrNotCancellable; a missing one ErrNotFound. With WithTx the
// cancellation is part of the caller's transaction: it holds if, and only if, the
// transaction commits.
func (s *Scheduler) Cancel(ctx context.Context, name, key string, opts ...CancelOption) error {
	if err := ctx.Err(); err != nil {
		return errorf("ax: cancel %q/%q: %w", name, key, err)
	}
	o := collect(opts)
	by := s.cfg.Node
	if o.actor != nil {
		by = *o.actor
	}
	if err := errors.Join(append(o.errs, validName(name), validKey(key))...); err != nil {
		return errorf("ax: cancel %q/%q: %w", name, key, err)
	}
	op := fmt.Sprintf("cancel %q/%q", name, key)
	t, err := inTxOr(ctx, s, o, func(tx store.Tx) (*store.Task, error) { return tx.Cancel(ctx, name, key, by) },
		func() (*store.Task, error) { return s.st.Cancel(ctx, name, key, by) })
	if err != nil {
		return s.refused(op, t, err, ErrNotCancellable)
	}
	o.onCommit(ctx, func() { // rolled back, the task would still be due: leave it in the wheel
		r := s.current()
		switch {
		case r == nil:
		case t.Status == store.Running:
			r.exec.Cancel(t.ExecutionID) // running here: stop it now, not at the next heartbeat
		default:
			r.remove(t.ID)
		}
	})
	return nil
}

// Trigger runs a SCHEDULED or FAILED task now, bypassing its due time (manual
// compensation): it is claimed with a new execution id, TriggeredAt is recorded, and
// this process executes it. From FAILED it gets one more attempt. A task that is
// dispatching or running, or Superseded, is ErrNotTriggerable.
//
// A scheduler that would not run the task itself — not started, or without its
// handler (an operations node, ax serve) — hands it over instead: the task becomes
// SCHEDULED and due now, TriggeredAt recorded (from FAILED with one more attempt), and
// the scheduler that runs its handler claims it at once if it is this one's leader,
// else within its refill interval. A task whose name has a concurrency or a rate
// limit, or a key concurrency above one (SetConcurrency, SetRate,
// SetKeyConcurrency), is made due so too, wherever it is triggered: its claim waits
// for the limit, as every claim of the name does.
//
// With WithTx the trigger is part of the caller's transaction: the task becomes
// SCHEDULED and due now (TriggeredAt recorded, from FAILED with one more attempt) if,
// and only if, the transaction commits, and runs right after the commit on this
// scheduler if it is started, else on whichever claims it; its key's overlap rule
// applies at that claim, as for any due task. The scheduler need not be started.
//
// In a transaction of InTx's, on a started scheduler that has the task's handler,
// Trigger claims as without a transaction — the task is DISPATCHING under a new
// execution id inside the transaction, a held key refuses it at once — and this
// scheduler runs it right after the commit (if it is stopping by then, the claim is
// handed back, and the task runs under another execution when it is claimed again).
// Elsewhere in InTx it hands the task over as with a caller's transaction.
func (s *Scheduler) Trigger(ctx context.Context, id int64, opts ...ActionOption) error {
	if err := ctx.Err(); err != nil {
		return errorf("ax: trigger task %d: %w", id, err)
	}
	o := collect(opts)
	if id <= 0 {
		o.errs = append(o.errs, fmt.Errorf("id is not positive: %w", ErrInvalid))
	}
	if err := errors.Join(o.errs...); err != nil {
		return errorf("ax: trigger task %d: %w", id, err)
	}
	r := s.current()
	if o.hasTx && (joined(ctx, o.tx) == nil || !s.runsHandlerOf(ctx, r, id, o)) {
		_, err := s.makeDue(ctx, id, o)
		return err
	}
	if !o.hasTx && !s.runsHandlerOf(ctx, r, id, o) {
		_, err := s.makeDue(ctx, id, o) // for the scheduler that runs its handler
		return err
	}
	_, err := s.claimTrigger(ctx, r, id, o)
	return err
}

// claimTrigger claims task id for this scheduler, r its running parts, and
// dispatches it: at once, or after the commit of an InTx transaction (o's).
func (s *Scheduler) claimTrigger(ctx context.Context, r *running, id int64, o *options) (*store.Task, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return nil, errorf("ax: trigger task %d: %w", id, err)
	}
	execID := u.String()
	t, err := inTxOr(ctx, s, o, func(tx store.Tx) (*store.Task, error) { return tx.Trigger(ctx, id, execID) },
		func() (*store.Task, error) { return s.st.Trigger(ctx, id, execID) })
	if err != nil {
		if t != nil && errors.Is(err, ErrNotTriggerable) {
			return nil, &TaskStateError{Op: "trigger", Task: taskOf(t), Err: err} // it names the task
		}
		return nil, errorf("ax: trigger task %d: %w", id, err)
	}
	if t.Status == store.Scheduled { // its name has a concurrency limit: made due, for a claim to apply it
		o.unlessRolledBack(ctx, func() {
			s.log.LogAttrs(ctx, slog.LevelInfo, "ax: task triggered: due now, its name's concurrency limit applies", observe.TaskAttrs(t)...)
			r.watch(t.ID, t.DueAt)
			r.add(store.Due{ID: t.ID, DueAt: t.DueAt})
		})
		return t, nil
	}
	var dispatched bool
	o.onCommit(ctx, func() {
		r.remove(id)
		s.obs.Claimed(s.clock.Now(), []store.Task{*t})
		s.log.LogAttrs(ctx, slog.LevelInfo, "ax: task triggered", observe.TaskAttrs(t)...)
		dispatched = r.exec.Dispatch(nil, []store.Task{*t})
		if !dispatched && o.hasTx {
			s.log.LogAttrs(ctx, slog.LevelWarn, "ax: a task triggered in a transaction was not dispatched: the scheduler is stopping; it was handed back and runs when a scheduler claims it",
				observe.TaskAttrs(t)...)
		}
	})
	if !o.hasTx && !dispatched {
		return nil, errorf("ax: trigger task %d: %w", id, lifecycleError("the scheduler is stopping; the task was handed back and runs when a scheduler claims it"))
	}
	return t, nil
}

// runsHandlerOf reports whether this scheduler, r its running parts (nil: not
// started), would run task id itself: it is started and has the task's handler. The
// task is read in o's transaction, if any. When it cannot be read, it answers true,
// and the claim says what is wrong.
func (s *Scheduler) runsHandlerOf(ctx context.Context, r *running, id int64, o *options) bool {
	if r == nil {
		return false
	}
	t, err := inTxOr(ctx, s, o, func(tx store.Tx) (*store.Task, error) { return tx.Get(ctx, id) },
		func() (*store.Task, error) { return s.st.Get(ctx, id) })
	return err != nil || s.handler(t.Name) != nil
}

// makeDue makes task id due now, in o's transaction if it has one, handing it to
// whichever scheduler claims it.
func (s *Scheduler) makeDue(ctx context.Context, id int64, o *options) (*store.Task, error) {
	t, err := inTxOr(ctx, s, o, func(tx store.Tx) (*store.Task, error) { return tx.MakeDue(ctx, id) },
		func() (*store.Task, error) { return s.st.MakeDue(ctx, id) })
	if err != nil {
		if t != nil && errors.Is(err, ErrNotTriggerable) {
			return nil, &TaskStateError{Op: "trigger", Task: taskOf(t), Err: err}
		}
		return nil, errorf("ax: trigger task %d: %w", id, err)
	}
	o.unlessRolledBack(ctx, func() {
		msg := "ax: task triggered: handed over, due now"
		if o.hasTx {
			msg = "ax: task triggered in a transaction"
		}
		s.log.LogAttrs(ctx, slog.LevelInfo, msg, observe.TaskAttrs(t)...)
		if r := s.current(); r != nil { // claimed once the commit makes it visible
			r.watch(t.ID, t.DueAt)
			r.add(store.Due{ID: t.ID, DueAt: t.DueAt})
		}
	})
	return t, nil
}
