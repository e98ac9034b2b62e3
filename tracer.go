package ax

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/axsched/ax/internal/lograte"
	"github.com/axsched/ax/store"
)

// Tracer connects a task's executions to the trace of the call that submitted it, on
// whichever replica runs them. Set it as Config.Tracer; package
// github.com/axsched/ax/tracing implements it on OpenTelemetry. Package ax itself
// imports no tracing library, and a Scheduler without a Tracer stores no trace and
// calls nothing per task.
//
// Inject is called with the context of each call that writes tasks — Delay, At,
// SubmitMany (once for the batch), TriggerSchedule — and with Start's context for the
// schedules the scheduler stores. It returns the text to store with the task (Task.Trace),
// at most MaxTraceLen bytes of valid UTF-8 without a NUL, or "" when ctx carries
// nothing to continue; a text that breaks these rules is dropped, with a warning, and
// the task is submitted without one. A schedule's occurrences carry the trace its
// stored definition has.
//
// Start is called on the executing replica right before the handler runs, with the
// handler's context and what the span of the execution describes (RunInfo, never the
// payload). It returns the context the handler gets and a function that ends the
// span; that function is called exactly once, with the attempt's error (nil when it
// succeeded), when its outcome is decided: the handler returned, panicked (the error
// carries the stack) or passed its deadline (the handler may still be running then).
//
// Both are called from many goroutines at once; they must be safe for concurrent use
// and fast, since they run on the submit and execution paths.
type Tracer interface {
	Inject(ctx context.Context) string
	Start(ctx context.Context, run RunInfo) (context.Context, func(err error))
}

// MaxTraceLen is the longest text a Tracer's Inject may return, in bytes: what every
// store keeps with a task.
const MaxTraceLen = store.MaxTraceLen

// RunInfo is what a Tracer is told of an execution as its handler starts: the task's
// identity and attempt, never its payload or business key.
type RunInfo struct {
	// Trace is the task's Trace: what Inject returned when the task was submitted (for
	// a schedule's occurrence, when the schedule was stored). Empty when there was
	// nothing to continue.
	Trace string
	// TaskID, Name and ExecutionID identify the task and this execution.
	TaskID      int64
	Name        string
	ExecutionID string
	// Attempt is the task's Attempt: 0 on the first execution, one more per business
	// retry (and per Trigger of a FAILED task); an operator's Retry of a FAILED task
	// starts it again at 0.
	Attempt int
	// Occurrence reports that a schedule materialised the task from one of its slots:
	// it was not submitted by the call its Trace names, which only registered the
	// schedule. A TriggerSchedule's occurrence is not one: it was submitted by that
	// call.
	Occurrence bool
	// Lateness is how late the execution started after the task was due, by the
	// store's clock (Execution.Lateness: StartedAt − DueAt); negative only for a
	// Trigger before the task was due.
	Lateness time.Duration
}

// FirstRun reports whether the execution is the first of a task submitted by the call
// its Trace names: Attempt 0 and not a schedule's occurrence. Package tracing makes
// the span of such an execution a child of that call's span, and of any other one a
// new trace linked to it.
func (r RunInfo) FirstRun() bool { return r.Attempt == 0 && !r.Occurrence }

// traceOf returns what Config.Tracer says to store with tasks written under ctx: ""
// without a Tracer, or when what it returns breaks the rules (see Tracer).
func (s *Scheduler) traceOf(ctx context.Context) string {
	if s.cfg.Tracer == nil {
		return ""
	}
	tr := s.cfg.Tracer.Inject(ctx)
	if len(tr) > MaxTraceLen || !store.CleanText(tr) {
		if ok, held := s.badTraces.Allow(""); ok {
			s.log.LogAttrs(ctx, slog.LevelWarn, "ax: trace dropped: the Tracer's text is too long or not clean UTF-8",
				slog.Int("bytes", len(tr)), slog.Int("max", MaxTraceLen), slog.Int("held_back", held))
		}
		return ""
	}
	return tr
}

// newBadTraceLimiter bounds the warnings about texts a Tracer should not have
// returned: one a minute.
func newBadTraceLimiter() *lograte.Limiter { return lograte.New(time.Minute, 1, nil) }

// spanStarter returns the executor's hook that starts the span of each execution, nil
// without a Tracer: the executor then calls nothing.
func (s *Scheduler) spanStarter() func(ctx context.Context, t *store.Task) (context.Context, func(error)) {
	tr := s.cfg.Tracer
	if tr == nil {
		return nil
	}
	return func(ctx context.Context, t *store.Task) (context.Context, func(error)) {
		return tr.Start(ctx, RunInfo{
			Trace: t.Trace, TaskID: t.ID, Name: t.Name, ExecutionID: t.ExecutionID, Attempt: t.Attempt,
			Occurrence: isOccurrence(t), Lateness: t.StartedAt.Sub(t.DueAt),
		})
	}
}

// isOccurrence reports whether t was materialised by its schedule from a slot: named
// after the schedule, its task key the schedule's name, holding its key for good, and
// not a TriggerSchedule's (whose key is manualPrefix and a time).
func isOccurrence(t *store.Task) bool {
	return t.TaskKey == t.Name && t.KeyHold == store.HoldForever && !strings.HasPrefix(t.Key, manualPrefix)
}
