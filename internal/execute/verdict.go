package execute

import (
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/store"
)

// SnoozeError is a handler's answer "run me again later" (ax.Snooze, ax.SnoozeUntil):
// the task goes back to SCHEDULED, due after Delay or at Until, without spending a
// business retry. Its execution record ends SNOOZED.
type SnoozeError struct {
	Delay time.Duration // when Until is zero; negative counts as zero
	Until time.Time
}

// Error says for how long the handler snoozed, e.g. "snoozed for 30s".
func (e *SnoozeError) Error() string {
	if !e.Until.IsZero() {
		return "snoozed until " + e.Until.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("snoozed for %v", max(e.Delay, 0))
}

// due returns when the snoozed task is due again, by the clock reading now: never
// before now.
func (e *SnoozeError) due(now time.Time) time.Time {
	if !e.Until.IsZero() {
		return later(e.Until, now)
	}
	return now.Add(max(e.Delay, 0))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// PermanentError is a handler's error that no retry can mend (ax.Permanent): the task
// ends FAILED at once, whatever retries it has left.
type PermanentError struct{ Err error }

// Error is the wrapped error's message.
func (e *PermanentError) Error() string {
	if e.Err == nil {
		return "permanent error"
	}
	return e.Err.Error()
}

// Unwrap returns Err, so that errors.Is and errors.As see it.
func (e *PermanentError) Unwrap() error { return e.Err }

// classify names the outcome of a handler's error that was neither a panic nor
// self-fenced: a snooze, a failure (a permanent error's too, even when Stop
// interrupted the handler: it decided), or a release when the scheduler is stopping.
func classify(err error, stopping bool) string {
	var snooze *SnoozeError
	var permanent *PermanentError
	switch {
	case errors.As(err, &snooze):
		return observe.Snoozed
	case errors.As(err, &permanent):
		return observe.Failed
	case stopping:
		return observe.Released // runs again without using a retry
	}
	return observe.Failed
}

// Snoozed turns a snooze (err holds a *SnoozeError) into the task's next state:
// SCHEDULED at the snooze's time with Attempt unchanged, or FAILED when the task has
// snoozed maxSnoozes times already, with an error that says so.
func Snoozed(t *store.Task, err error, now time.Time, maxSnoozes int) store.Finish {
	f := store.Finish{TaskID: t.ID, ExecutionID: t.ExecutionID}
	var snooze *SnoozeError
	if !errors.As(err, &snooze) {
		snooze = &SnoozeError{}
	}
	if t.Snoozes >= maxSnoozes {
		f.Status = store.Failed
		f.Error = fmt.Sprintf("snoozed %d times, the most its handler allows (WithMaxSnoozes(%d)): %v", t.Snoozes, maxSnoozes, err)
		return f
	}
	f.Status, f.Snooze, f.Attempt, f.DueAt, f.Error = store.Scheduled, true, t.Attempt, snooze.due(now), err.Error()
	return f
}
