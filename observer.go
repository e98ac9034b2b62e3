package ax

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/store"
)

// Observer receives the scheduler's events, for metrics and tracing (package
// github.com/axsched/ax/metrics implements it on Prometheus). Set it as
// Config.Observer.
//
// Observe is called from one goroutine of the scheduler's own, in the order the events
// happened, never from the scheduling loop: the kernel queues events and moves on, so
// a slow Observer delays other events, not tasks. When the queue (4,096 events) is
// full, events are dropped and counted in the next event's Dropped field. Observe
// must not retain e.Counts after it returns.
type Observer interface {
	Observe(e Event)
}

// EventKind says what an Event reports.
type EventKind int

// The events. Each lists the Event fields it sets besides Kind and At.
const (
	// EventSubmitted: Count tasks named Name were written (Delay, At, SubmitMany, a
	// schedule's occurrences).
	EventSubmitted EventKind = iota + 1
	// EventClaimed: a task was claimed for dispatch. Name, Due, Lateness (claim −
	// due, by the store's stamps), Manual (a Trigger: Lateness is zero and means
	// nothing).
	EventClaimed
	// EventStarted: a handler started. Name, Due, Lateness (start − due, by the
	// store's stamps), Manual (as for EventClaimed), Early (it started before Due
	// without a Trigger: a broken guarantee, which must never happen).
	EventStarted
	// EventFinished: an execution ended and its result was written. Name, Outcome,
	// Duration (the handler's run time; zero for OutcomeOrphaned, whose run time is
	// not known).
	EventFinished
	// EventDispatchFailed: a claimed task could not be started and was handed back.
	// Name, Reason (one of the DispatchReason values).
	EventDispatchFailed
	// EventRetryScheduled: a failed execution will be retried (business retry).
	// Name, Due (the retry's due time).
	EventRetryScheduled
	// EventOrphanRecovered: a RUNNING task without heartbeats was recovered. Name.
	EventOrphanRecovered
	// EventStuckClaimHandedBack: a task claimed but never started was handed back.
	// Name.
	EventStuckClaimHandedBack
	// EventSkipped: a task was SKIPPED because its task key was held. Name, and
	// Schedule when it is a schedule's occurrence.
	EventSkipped
	// EventScheduleFired: a schedule's slots were materialised. Schedule, Result
	// (ScheduleDispatched, ScheduleMisfired, ScheduleCaughtUp), Count (slots with
	// that result), Due (the schedule's next slot after these).
	EventScheduleFired
	// EventClockOffset: the store's clock was measured. Offset (store − local).
	EventClockOffset
	// EventWheelSize: tasks held in the timing wheel. Count.
	EventWheelSize
	// EventTaskCounts: the task table, summarised (every Config.StatsInterval).
	// Counts (tasks per status; complete: every Status is present, zero included),
	// Lag (age of the oldest due task not yet claimed; zero when none is waiting).
	EventTaskCounts
	// EventUnhandled: a task came due under a name that no handler is registered for
	// in this scheduler. Name.
	EventUnhandled
)

var eventKindNames = [...]string{
	EventSubmitted: "submitted", EventClaimed: "claimed", EventStarted: "started",
	EventFinished: "finished", EventDispatchFailed: "dispatch_failed", EventRetryScheduled: "retry_scheduled",
	EventOrphanRecovered: "orphan_recovered", EventStuckClaimHandedBack: "stuck_claim_handed_back",
	EventSkipped: "skipped", EventScheduleFired: "schedule_fired", EventClockOffset: "clock_offset",
	EventWheelSize: "wheel_size", EventTaskCounts: "task_counts", EventUnhandled: "unhandled",
}

// String returns the kind in snake case, e.g. "dispatch_failed".
func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventKindNames) {
		return eventKindNames[k]
	}
	return "unknown"
}

// Outcome is how an execution ended (EventFinished).
type Outcome string

// The outcomes of an execution.
const (
	OutcomeSucceeded Outcome = "succeeded" // the handler returned nil
	OutcomeFailed    Outcome = "failed"    // the handler returned an error
	OutcomePanicked  Outcome = "panicked"  // the handler panicked
	OutcomeTimedOut  Outcome = "timed_out" // the handler ran past its timeout
	OutcomeReleased  Outcome = "released"  // Stop interrupted it; it runs again without using a retry
	OutcomeOrphaned  Outcome = "orphaned"  // its executor stopped heartbeating; counted as a failure
)

// The reasons of EventDispatchFailed.
const (
	DispatchNoHandler = "no_handler" // no handler registered for the name
	DispatchStopping  = "stopping"   // the scheduler was stopping
	DispatchStuck     = "stuck"      // not started within DispatchTimeout of the claim
)

// The results of EventScheduleFired.
const (
	ScheduleDispatched = "dispatched" // an occurrence written for its slot, on time
	ScheduleMisfired   = "misfired"   // missed slots dropped by the misfire policy
	ScheduleCaughtUp   = "caught_up"  // missed slots fired late by the misfire policy
	// ScheduleSkippedOverlap is the result of an occurrence SKIPPED by its overlap
	// policy; it is reported as EventSkipped with Schedule set.
	ScheduleSkippedOverlap = "skipped_overlap"
)

// Event is one thing the scheduler did. Fields that do not apply to its Kind are
// zero.
type Event struct {
	Kind     EventKind
	At       time.Time // when it happened, by the scheduler's (store-corrected) clock
	Name     string    // the task's name (its handler)
	Schedule string    // the schedule, for schedule events and occurrences
	Outcome  Outcome
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
	Counts   map[Status]int64
	// Dropped is how many events were dropped, because the queue was full, since the
	// previous event delivered.
	Dropped int
}

// observerQueue is the bounded queue between the kernel and the Observer: send never
// blocks; one goroutine, from Start to Stop, delivers. Events sent before Start wait
// for it; events sent after Stop are dropped.
type observerQueue struct {
	o       Observer
	mu      sync.Mutex
	buf     []Event
	closed  bool
	wake    chan struct{}
	dropped atomic.Int64
	done    chan struct{}
	stop    chan struct{}
	started atomic.Bool
}

const observerQueueSize = 4096

func newObserverQueue(o Observer) *observerQueue {
	if o == nil {
		return nil
	}
	return &observerQueue{o: o, wake: make(chan struct{}, 1), done: make(chan struct{}), stop: make(chan struct{})}
}

// start starts delivering.
func (q *observerQueue) start() {
	if q != nil && q.started.CompareAndSwap(false, true) {
		go q.deliver()
	}
}

// send queues e. A nil queue (no Observer) does nothing.
func (q *observerQueue) send(e Event) {
	if q == nil {
		return
	}
	q.mu.Lock()
	if q.closed || len(q.buf) >= observerQueueSize {
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

func (q *observerQueue) deliver() {
	defer close(q.done)
	var batch []Event
	for {
		q.mu.Lock()
		batch, q.buf = q.buf, batch[:0]
		q.mu.Unlock()
		for i := range batch {
			batch[i].Dropped = int(q.dropped.Swap(0))
			q.o.Observe(batch[i])
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

// close delivers what is queued, until ctx ends, and ends the delivering goroutine.
// Events sent after close are dropped.
func (q *observerQueue) close(ctx context.Context) {
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

// manual reports whether the task's current execution was a manual Trigger: Trigger
// stamps TriggeredAt and DispatchedAt with the same time.
func manual(t *store.Task) bool {
	return !t.TriggeredAt.IsZero() && t.TriggeredAt.Equal(t.DispatchedAt)
}

// observeClaim reports claimed tasks.
func (s *Scheduler) observeClaim(ts []store.Task) {
	if s.obs == nil {
		return
	}
	now := s.clock.now()
	for i := range ts {
		t := &ts[i]
		e := Event{Kind: EventClaimed, At: now, Name: t.Name, Due: t.DueAt, Manual: manual(t)}
		if !e.Manual {
			e.Lateness = t.DispatchedAt.Sub(t.DueAt)
		}
		s.obs.send(e)
	}
}

// observeStart reports a started execution.
func (s *Scheduler) observeStart(t *store.Task) {
	if s.obs == nil {
		return
	}
	e := Event{Kind: EventStarted, At: s.clock.now(), Name: t.Name, Due: t.DueAt, Manual: manual(t)}
	if !e.Manual {
		e.Lateness = t.StartedAt.Sub(t.DueAt)
		e.Early = e.Lateness < 0
	}
	s.obs.send(e)
}

// observeSubmitted reports written tasks, one event per name.
func (s *Scheduler) observeSubmitted(res []store.Inserted) {
	if s.obs == nil {
		return
	}
	now := s.clock.now()
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
		s.obs.send(Event{Kind: EventSubmitted, At: now, Name: name, Count: n})
	}
}
