// Package observe carries the kernel's events to an observer: the event, as the
// machinery fills it in, and the bounded queue between the machinery and the one
// goroutine that delivers. Package ax turns each event into its public ax.Event.
//
// Send never blocks and never does I/O, so any part of the kernel may report, the
// scheduling loop included; when the queue is full the event is dropped and counted
// in the next one delivered. A nil *Queue (no observer) takes every call and does
// nothing.
//
// The queue's lifecycle is two-phase, Start then Close(ctx), not a Run(ctx): it
// delivers the events of every other part, so it is closed only once they have all
// stopped, and drains what they sent. ReportCounts blocks until its context ends.
package observe

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/store"
)

// Kind says what an Event reports; package ax documents each.
type Kind int

// The kinds, in the order of ax's EventKind constants.
const (
	Submitted Kind = iota + 1
	Claimed
	Started
	Finished
	DispatchFailed
	RetryScheduled
	OrphanRecovered
	StuckClaimHandedBack
	Skipped
	ScheduleFired
	ClockOffset
	WheelSize
	TaskCounts
	Unhandled
	Leadership
	FenceRejected
	LeaseState
	ExecutorRequest
	Pruned
	Limited
	NameSlots
)

// Limits of Limited.
const (
	LimitConcurrency = "concurrency"
	LimitRate        = "rate"
	LimitKeyRate     = "key_rate"
)

// Outcomes of Finished.
const (
	Succeeded = "succeeded"
	Failed    = "failed"
	Panicked  = "panicked"
	TimedOut  = "timed_out"
	Released  = "released"
	Orphaned  = "orphaned"
	Snoozed   = "snoozed"
	Cancelled = "cancelled"
)

// Reasons of DispatchFailed.
const (
	NoHandler   = "no_handler"
	Stopping    = "stopping"
	Stuck       = "stuck"
	LeaseEnded  = "lease_ended"
	Busy        = "busy"        // every executor with the handler was full
	Unreachable = "unreachable" // no executor with the handler answered
	Fenced      = "fenced"      // an executor, or the store at Start, has seen a newer leader
	Refused     = "refused"     // the executors it was sent to refused it, none was full, and none other was left
)

// Parts of FenceRejected: the write the store refused.
const (
	FencedClaim    = "claim"
	FencedSchedule = "schedule"
	FencedRecovery = "recovery"
)

// Results of ExecutorRequest.
const (
	RequestOK          = "ok"
	RequestBusy        = "busy" // some tasks refused for want of a slot
	RequestUnreachable = "unreachable"
	RequestFenced      = "fenced"
	RequestTooLarge    = "too_large" // split in halves and sent again
	RequestError       = "error"
)

// Targets of Pruned besides the finished tasks, whose target is their status in
// lower case.
const (
	PrunedAudit      = "audit"
	PrunedSlotGaps   = "slot_gaps"
	PrunedStats      = "stats"
	PrunedLeadership = "leadership"
	PrunedKeyStarts  = "key_starts"
)

// Results of ScheduleFired, and of a skipped occurrence.
const (
	Dispatched     = "dispatched"
	Misfired       = "misfired"
	CaughtUp       = "caught_up"
	SkippedOverlap = "skipped_overlap"
)

// Event is one thing the kernel did; ax.Event documents the fields.
type Event struct {
	Kind     Kind
	At       time.Time
	Name     string
	Schedule string
	Outcome  string
	Reason   string
	Result   string
	Due      time.Time
	Lateness time.Duration
	Manual   bool
	Early    bool
	Duration time.Duration
	Offset   time.Duration
	Lag      time.Duration
	Count    int
	Counts   map[store.Status]int64
	Leader   bool
	Epoch    int64
	Lease    time.Duration
	Dropped  int
	Limit    int
	InUse    int
}

// Queue is the bounded queue between the kernel and the observer: Send never blocks;
// one goroutine, from Start to Close, delivers. Events sent before Start wait for
// it; events sent after Close are dropped.
type Queue struct {
	deliver func(Event)
	mu      sync.Mutex
	buf     []Event
	closed  bool
	wake    chan struct{}
	dropped atomic.Int64
	done    chan struct{}
	stop    chan struct{}
	started atomic.Bool
}

// Size is how many events the queue holds.
const Size = 4096

// NewQueue returns a queue that hands each event to deliver, in order, on one
// goroutine.
func NewQueue(deliver func(Event)) *Queue {
	return &Queue{deliver: deliver, wake: make(chan struct{}, 1), done: make(chan struct{}), stop: make(chan struct{})}
}

// Start starts delivering.
func (q *Queue) Start() {
	if q != nil && q.started.CompareAndSwap(false, true) {
		go q.run()
	}
}

// Send queues e.
func (q *Queue) Send(e Event) {
	if q == nil {
		return
	}
	q.mu.Lock()
	if q.closed || len(q.buf) >= Size {
		q.mu.Unlock()
		q.dropped.Add(1)
		return
	}
	q.buf = append(q.buf, e)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *Queue) run() {
	defer close(q.done)
	var batch []Event
	for {
		q.mu.Lock()
		batch, q.buf = q.buf, batch[:0]
		q.mu.Unlock()
		for i := range batch {
			batch[i].Dropped = int(q.dropped.Swap(0))
			q.deliver(batch[i])
			batch[i] = Event{}
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-q.wake:
		case <-q.stop:
			q.mu.Lock()
			empty := len(q.buf) == 0
			q.mu.Unlock()
			if empty {
				return
			}
		}
	}
}

// Close delivers what is queued, until ctx ends, and ends the delivering goroutine.
func (q *Queue) Close(ctx context.Context) {
	if q == nil || !q.started.Load() {
		return
	}
	q.mu.Lock()
	already := q.closed
	q.closed = true
	q.mu.Unlock()
	if !already {
		close(q.stop)
	}
	select {
	case <-q.done:
	case <-ctx.Done():
	}
}

// Manual reports whether the task's current execution was a manual Trigger: Trigger
// stamps TriggeredAt and DispatchedAt with the same time.
func Manual(t *store.Task) bool {
	return !t.TriggeredAt.IsZero() && t.TriggeredAt.Equal(t.DispatchedAt)
}

// Claimed reports claimed tasks.
func (q *Queue) Claimed(now time.Time, ts []store.Task) {
	if q == nil {
		return
	}
	for i := range ts {
		t := &ts[i]
		e := Event{Kind: Claimed, At: now, Name: t.Name, Due: t.DueAt, Manual: Manual(t)}
		if !e.Manual {
			e.Lateness = t.DispatchedAt.Sub(t.DueAt)
		}
		q.Send(e)
	}
}

// Started reports a started execution.
func (q *Queue) Started(now time.Time, t *store.Task) {
	if q == nil {
		return
	}
	e := Event{Kind: Started, At: now, Name: t.Name, Due: t.DueAt, Manual: Manual(t)}
	if !e.Manual {
		e.Lateness = t.StartedAt.Sub(t.DueAt)
		e.Early = e.Lateness < 0
	}
	q.Send(e)
}

// Submitted reports written tasks, one event per run of one name.
func (q *Queue) Submitted(now time.Time, res []store.Inserted) {
	if q == nil {
		return
	}
	for i := 0; i < len(res); {
		if res[i].Err != nil {
			i++
			continue
		}
		name, n := res[i].Task.Name, 0
		for ; i < len(res) && (res[i].Err != nil || res[i].Task.Name == name); i++ {
			if res[i].Err == nil {
				n++
			}
		}
		q.Send(Event{Kind: Submitted, At: now, Name: name, Count: n})
	}
}

// TaskAttrs are the log attributes of a task.
func TaskAttrs(t *store.Task) []slog.Attr {
	return []slog.Attr{
		slog.Int64("task_id", t.ID), slog.String("execution_id", t.ExecutionID),
		slog.String("name", t.Name), slog.String("key", t.Key), slog.Int("attempt", t.Attempt),
		slog.String("owner_service", t.OwnerService),
	}
}

// Counter is where the task counts come from: the store.
type Counter interface {
	TaskStats(ctx context.Context, now time.Time) (*store.TaskStats, error)
	Names(ctx context.Context) ([]store.NameState, error)
}

// ReportCounts sends TaskCounts every interval until ctx ends, at once first: one
// store query each time, however often the observer's readers look; and then
// NameSlots for each limited name (another query), with waiting's count of its tasks
// waiting for a slot.
func (q *Queue) ReportCounts(ctx context.Context, src Counter, now func() time.Time, every time.Duration, waiting func(name string) int, log *slog.Logger) {
	if q == nil {
		return
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		t := now()
		st, err := src.TaskStats(ctx, t)
		switch {
		case err != nil && ctx.Err() == nil:
			log.LogAttrs(ctx, slog.LevelWarn, "ax: count tasks for the observer", slog.Any("err", err))
		case err == nil:
			e := Event{Kind: TaskCounts, At: t, Counts: st.Counts}
			if !st.OldestDue.IsZero() {
				e.Lag = max(t.Sub(st.OldestDue), 0)
			}
			q.Send(e)
		}
		q.reportNames(ctx, src, t, waiting, log)
		timer.Reset(every)
	}
}

// reportNames sends NameSlots for each name with a concurrency limit: its limit and
// slots in use by the store, and its tasks waiting for one by waiting (the
// dispatcher's count).
func (q *Queue) reportNames(ctx context.Context, src Counter, at time.Time, waiting func(name string) int, log *slog.Logger) {
	names, err := src.Names(ctx)
	if err != nil {
		if ctx.Err() == nil {
			log.LogAttrs(ctx, slog.LevelWarn, "ax: read the task names for the observer", slog.Any("err", err))
		}
		return
	}
	for _, n := range names {
		if n.Concurrency > 0 {
			q.Send(Event{Kind: NameSlots, At: at, Name: n.Name, Limit: n.Concurrency, InUse: n.InFlight, Count: waiting(n.Name)})
		}
	}
}
