package ax

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/axsched/ax/internal/execute"
	"github.com/axsched/ax/store"
)

// Errors returned by the scheduler. Test them with errors.Is; every error the
// Scheduler returns reads "ax: <operation>: <what failed and why>", with one "ax:"
// prefix.
var (
	// ErrDuplicate: a task with this name and key exists; the existing task is
	// returned with it, and errors.As gives a *TaskStateError holding it.
	ErrDuplicate = store.ErrDuplicate
	// ErrNotFound: no such task or schedule.
	ErrNotFound = store.ErrNotFound
	// ErrInvalid: bad input (the message names the field); nothing was changed.
	ErrInvalid = store.ErrInvalid
	// ErrNotCancellable: a finished task cannot be cancelled; errors.As gives a
	// *TaskStateError holding the task as it is.
	ErrNotCancellable = store.ErrNotCancellable
	// ErrNotTriggerable: only a SCHEDULED or FAILED task whose task key is free can
	// be triggered; errors.As gives a *TaskStateError holding the task as it is.
	ErrNotTriggerable = store.ErrNotTriggerable
	// ErrNotReschedulable: only a SCHEDULED task can be rescheduled; errors.As gives
	// a *TaskStateError holding the task as it is.
	ErrNotReschedulable = store.ErrNotReschedulable
	// ErrNotRetryable: only a FAILED task can be retried; errors.As gives a
	// *TaskStateError holding the task as it is.
	ErrNotRetryable = store.ErrNotRetryable
	// ErrNotRunning: Start was called on a started or stopped scheduler, or the
	// scheduler stopped while the call needed it (a Trigger it was dispatching).
	ErrNotRunning = errors.New("scheduler not running")
	// ErrUnsupported: the store does not offer what the call needs (transactions:
	// InTx on a store without store.Transactor).
	ErrUnsupported = errors.New("not supported by the store")
	// ErrSelfFenced is the cause (context.Cause) of a handler's context that
	// self-fencing cancelled: no heartbeat of its execution reached the store within
	// OrphanAfter − 2 × HeartbeatInterval, so it may be orphaned and run elsewhere.
	ErrSelfFenced = execute.ErrSelfFenced
	// ErrNotCurrent: CompleteTx found the handler's execution no longer its task's
	// current one (run again elsewhere, or finished): roll the transaction back.
	ErrNotCurrent = errors.New("the execution is no longer its task's current one")
	// ErrCancelled is the cause (context.Cause) of a handler's context cancelled
	// because its task was cancelled while it ran (Cancel of a RUNNING task).
	ErrCancelled = execute.ErrCancelled
)

// lifecycleError is an ErrNotRunning that reads as its own message only ("already
// started"), not as the sentinel's text too.
func lifecycleError(msg string) error {
	return sentinelOnly{sentinel: errors.New(msg), err: ErrNotRunning}
}

// TaskStateError is the error of a call that the state of an existing task refused:
// ErrDuplicate (Delay, At: a task with this name and key exists), ErrNotCancellable
// (Cancel), ErrNotTriggerable (Trigger), ErrNotReschedulable (Reschedule) or
// ErrNotRetryable (Retry). errors.Is matches the sentinel; errors.As
// gives the task, for its ID and Status.
type TaskStateError struct {
	Op   string // the operation, e.g. `cancel "order.close"/"42"`
	Task *Task  // the task as stored when the call was refused
	Err  error  // wraps the sentinel, with the store's reason
}

// Error says what was refused and why, once, e.g. `ax: cancel "job"/"42": task 7 is
// RUNNING: not cancellable`, or `ax: trigger: task 7 is SCHEDULED: task key
// "account-42" held by task 6: not triggerable`.
func (e *TaskStateError) Error() string {
	msg := fmt.Sprintf("ax: %s: task %d is %s", e.Op, e.Task.ID, e.Task.Status)
	for _, sentinel := range []error{ErrDuplicate, ErrNotCancellable, ErrNotTriggerable, ErrNotReschedulable, ErrNotRetryable} {
		if !errors.Is(e.Err, sentinel) {
			continue
		}
		if sentinel == ErrDuplicate {
			return fmt.Sprintf("ax: %s: task %d exists (%s)", e.Op, e.Task.ID, e.Task.Status)
		}
		// The store's message names its operation again; keep only why, when it is
		// more than the status (a held task key).
		var held *store.KeyHeldError
		if errors.As(e.Err, &held) {
			return msg + ": " + held.Error()
		}
		return msg + ": " + sentinel.Error()
	}
	return msg + ": " + unprefixed{e.Err}.Error()
}

// Unwrap returns Err.
func (e *TaskStateError) Unwrap() error { return e.Err }

// errorf is fmt.Errorf for the Scheduler's messages: the errors among args lose a
// leading "ax: " of their own (a driver's, a cronspec's), so that the message has one
// prefix, and a store's not-found or closed error reads as just that, since the
// driver's message would name the operation again. Wrapping with %w is unchanged:
// errors.Is and errors.As see the originals.
func errorf(format string, args ...any) error {
	for i, a := range args {
		if err, ok := a.(error); ok && err != nil {
			args[i] = unprefixed{terse(err)}
		}
	}
	return fmt.Errorf(format, args...)
}

// terse returns err, or, when it is a store's ErrNotFound or ErrClosed, an error
// that reads as the sentinel alone and wraps err.
func terse(err error) error {
	for _, sentinel := range []error{ErrNotFound, store.ErrClosed} {
		if err != sentinel && errors.Is(err, sentinel) {
			return sentinelOnly{sentinel: sentinel, err: err}
		}
	}
	return err
}

type sentinelOnly struct{ sentinel, err error }

func (s sentinelOnly) Error() string { return s.sentinel.Error() }
func (s sentinelOnly) Unwrap() error { return s.err }

// unprefixed is an error whose message drops the leading "ax: " of the one it wraps.
type unprefixed struct{ err error }

func (u unprefixed) Error() string { return strings.TrimPrefix(u.err.Error(), "ax: ") }
func (u unprefixed) Unwrap() error { return u.err }

// Snooze is what a handler returns to run its task again after d without spending a
// business retry — "not yet", as when a remote API answers with Retry-After. The task
// goes back to SCHEDULED, due d from now (a negative d counts as zero), with its
// Attempt unchanged and Snoozes one higher; the execution record ends SNOOZED and the
// observer sees OutcomeSnoozed. WithMaxSnoozes caps how often one task may snooze.
// Returned wrapped (fmt.Errorf with %w) it works the same.
func Snooze(d time.Duration) error { return &execute.SnoozeError{Delay: d} }

// SnoozeUntil is Snooze to a time: the task is due again at t (now, if t has passed).
func SnoozeUntil(t time.Time) error { return &execute.SnoozeError{Until: t} }

// Permanent wraps err so that the task ends FAILED at once, with no retries left to
// spend: for a failure no retry can mend (a malformed payload, a deleted account).
// The task's LastError reads "permanent, not retried: " and err's message; errors.Is
// and errors.As see err through it. Permanent(nil) is a permanent error too.
func Permanent(err error) error { return &execute.PermanentError{Err: err} }
