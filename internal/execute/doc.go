// Package execute runs handlers for the tasks the scheduling loop claims: it records
// each execution before the handler runs (DISPATCHING → RUNNING), keeps running
// executions alive with heartbeats, and writes the results, all in batched store
// calls; and it holds the rules that turn a result into the task's next state
// (Result, RetryDelay) and a failed hand-off into a dispatch retry (HandBack), which
// recovery applies too.
//
// Its dependencies come in Config: the store (each call bounded by the caller), the
// clock, the handler lookup, and the hooks by which it tells the scheduling loop which
// task keys and names' slots are free (OnFree) and what was rescheduled (OnRetry). Each dispatch
// names its Source: the loop that claimed the tasks, told how many of them are done,
// and, under an elector, the lease they were claimed under — a task whose lease ended
// before it started is handed back, never started; and its fence, which Start carries,
// so that the store refuses to start it once a newer leader recorded itself, whatever
// this process believes (a refused batch is handed back too). Stop is graceful within its
// context: heartbeats go on until the results they protect are written.
//
// Its lifecycle is Start, Quiesce, Stop(ctx), not a Run(ctx), because stopping has
// two phases: Quiesce stops new starts as soon as the scheduler begins to stop, while
// the scheduling loop winds down and may still dispatch (it is handed back); Stop then
// waits, within its own context, for the running handlers and their results.
package execute

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/axsched/ax/internal/clock"
	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/internal/stats"
	"github.com/axsched/ax/store"
)

// Handler is what the executor runs for a task name.
type Handler struct {
	Run     func(ctx context.Context, t *store.Task) error // its own copy of the task
	Timeout time.Duration                                  // the default deadline of an execution
	Backoff func(attempt int) time.Duration                // the delay before business retry n
	// MaxSnoozes is how many times a task may snooze (SnoozeError); the snooze after
	// them fails it.
	MaxSnoozes int
}

// Store is what the executor asks of the store: an execution's start, heartbeat and
// finish, the hand-back of what it did not start, and the reads that settle an
// unknown outcome.
type Store interface {
	Start(ctx context.Context, fence store.Fence, starts []store.StartParams) ([]store.StartResult, error)
	Heartbeat(ctx context.Context, refs []store.ExecRef) ([]store.Beat, error)
	Finish(ctx context.Context, fence store.Fence, results []store.Finish) ([]bool, error)
	Requeue(ctx context.Context, fence store.Fence, requeues []store.Requeue) ([]bool, error)
	Get(ctx context.Context, id int64) (*store.Task, error)
	Executions(ctx context.Context, taskID int64) ([]store.Execution, error)
}

// Config is what an Executor needs.
type Config struct {
	Store              Store // each call bounded by a timeout of its own
	Clock              *clock.Clock
	Log                *slog.Logger
	Observe            *observe.Queue    // nil: no events
	Stats              *stats.Aggregator // counts the finished executions; nil: not counted
	Node               string            // recorded in each execution
	Concurrency        int               // handlers running at once
	HeartbeatInterval  time.Duration
	MaxDispatchRetries int
	// SelfFenceAfter, when positive, bounds how old an execution's last stamp in the
	// store (its Start, then each Heartbeat, timed from the start of the request on the
	// monotonic clock) may get while its handler runs: past it the handler's context is
	// cancelled and the attempt fails (a business retry, as an orphan's would), before
	// recovery elsewhere can declare it orphaned. The handler's context checks the age
	// at each Err and Done and cancels itself before answering, so a handler resumed
	// from a pause sees the cancel at its first check; a stamp that comes more than the
	// bound after the one before does not revive an execution. The scheduler sets
	// OrphanAfter − 2 × HeartbeatInterval.
	SelfFenceAfter time.Duration
	// Handler returns the handler registered for name, or nil.
	Handler func(name string) *Handler
	// Handlers returns the names with a handler registered, for a claim that starts
	// tasks itself (Reserve); nil: such claims start nothing.
	Handlers func() []string
	// OnRoom is told that the executor has room for a claim that starts tasks itself
	// (see Reserve): a handler returned, or a reservation was given back.
	OnRoom func()
	// OnFree is told the task keys that tasks of this process stopped holding, and the
	// names whose tasks left DISPATCHING or RUNNING here (see Freed)
	// (finished, retried later or handed back), so that tasks waiting for them start.
	OnFree func(keys, names []string)
	// OnRetry is told of a task rescheduled here: by its result (a retry, a
	// release) or handed back (a dispatch retry).
	OnRetry func(store.Due)
	// Trace, when set, starts the span of an execution right before its handler
	// runs: it returns the handler's context, and the function told the attempt's
	// error once, when its outcome is decided (the handler returned or panicked, or
	// its deadline passed). Nil: nothing is called.
	Trace func(ctx context.Context, t *store.Task) (context.Context, func(error))
}

// Source is a scheduling loop that dispatches claimed tasks to the executor.
type Source struct {
	// Done is told how many of the loop's tasks are finished or gone, so that they stop
	// counting against its capacity; nil: not counted.
	Done func(n int)
	// Valid, when set, reports whether the tasks may still start: under an elector, nil
	// while the lease they were claimed under is held. It is asked right before a batch
	// is recorded as started; a task whose source is no longer valid is handed back.
	Valid func() error
	// Fence is the token the tasks were claimed under: Start carries it, so that the
	// store refuses to start them once a newer leader recorded itself, even if Valid
	// was asked before a pause. The zero Fence checks nothing.
	Fence store.Fence
}

// fence returns the fence of src's tasks.
func (src *Source) fence() store.Fence {
	if src == nil {
		return store.Fence{}
	}
	return src.Fence
}

// valid reports whether tasks of src may start.
func (src *Source) valid() error {
	if src == nil || src.Valid == nil {
		return nil
	}
	return src.Valid()
}

// sourceCounts counts tasks per Source and tells each its count.
type sourceCounts map[*Source]int

func (c sourceCounts) add(src *Source) {
	if src != nil && src.Done != nil {
		c[src]++
	}
}

func (c sourceCounts) report() {
	for src, n := range c {
		src.Done(n)
	}
}

// DefaultBackoff is the delay before business retry n (n = 1 for the first retry):
// 5s × 5^(n−1), that is 5s, 25s, 125s, 625s, 3125s, … capped at 24h.
func DefaultBackoff(n int) time.Duration {
	d := 5 * time.Second
	for i := 1; i < n && d < 24*time.Hour; i++ {
		d *= 5
	}
	return min(d, 24*time.Hour)
}

// dispatchBackoff is the short delay before dispatch retry n: 100ms × 2^(n−1), capped
// at 30s.
func dispatchBackoff(n int) time.Duration {
	d := 100 * time.Millisecond
	for i := 1; i < n && d < 30*time.Second; i++ {
		d *= 2
	}
	return min(d, 30*time.Second)
}

// HandBack is the Requeue that returns a claimed, unstarted task to SCHEDULED as a
// dispatch failure (or FAILED once dispatch retries are exhausted), retried after the
// dispatch backoff.
func HandBack(t *store.Task, reason string, now time.Time, maxDispatchRetries int) store.Requeue {
	return store.Requeue{
		TaskID: t.ID, ExecutionID: t.ExecutionID, DueAt: now.Add(dispatchBackoff(t.DispatchRetries + 1)),
		Error: "dispatch: " + reason, MaxDispatchRetries: maxDispatchRetries,
	}
}

// Freed returns the task keys and the names of the tasks whose write applied: a task
// that left DISPATCHING or RUNNING no longer holds its key, nor a slot of its name's
// concurrency limit. Each name is returned once.
func Freed(n int, task func(i int) *store.Task, applied []bool) (keys, names []string) {
	for i := range n {
		if i >= len(applied) || !applied[i] {
			continue
		}
		t := task(i)
		if t.TaskKey != "" {
			keys = append(keys, t.TaskKey)
		}
		if !slices.Contains(names, t.Name) {
			names = append(names, t.Name)
		}
	}
	return keys, names
}
