package ax

import (
	"time"

	"github.com/axsched/ax/internal/observe"
)

// Observer receives the scheduler's events, for metrics (package
// github.com/axsched/ax/metrics implements it on Prometheus). Set it as
// Config.Observer. Traces have a seam of their own, Tracer.
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
	// schedule's occurrences). A task written in a caller's transaction (WithTx) is
	// counted when written, whether or not the transaction commits; in one of
	// InTx's, once it commits.
	EventSubmitted EventKind = 1
	// EventClaimed: a task was claimed for dispatch. Name, Due, Lateness (claim −
	// due, by the store's stamps), Manual (a Trigger: Lateness is zero and means
	// nothing).
	EventClaimed EventKind = 2
	// EventStarted: a handler started. Name, Due, Lateness (start − due, by the
	// store's stamps), Manual (as for EventClaimed), Early (it started before Due
	// without a Trigger: a broken guarantee, which must never happen).
	EventStarted EventKind = 3
	// EventFinished: an execution ended and its result was written. Name, Outcome,
	// Duration (the handler's run time; zero for OutcomeOrphaned, whose run time is
	// not known).
	EventFinished EventKind = 4
	// EventDispatchFailed: a claimed task could not be started and was handed back.
	// Name, Reason (a DispatchReason).
	EventDispatchFailed EventKind = 5
	// EventRetryScheduled: a failed execution will be retried (business retry).
	// Name, Due (the retry's due time).
	EventRetryScheduled EventKind = 6
	// EventOrphanRecovered: a RUNNING task without heartbeats was recovered. Name.
	EventOrphanRecovered EventKind = 7
	// EventStuckClaimHandedBack: a task claimed but never started was handed back.
	// Name.
	EventStuckClaimHandedBack EventKind = 8
	// EventSkipped: a task was SKIPPED because its task key was held. Name, and
	// Schedule when it is a schedule's occurrence.
	EventSkipped EventKind = 9
	// EventScheduleFired: a schedule's slots were materialised. Schedule, Result
	// (ScheduleDispatched, ScheduleMisfired, ScheduleCaughtUp), Count (slots with
	// that result), Due (the schedule's next slot after these).
	EventScheduleFired EventKind = 10
	// EventClockOffset: the store's clock was measured. Offset (store − local).
	EventClockOffset EventKind = 11
	// EventWheelSize: tasks held in the timing wheel. Count.
	EventWheelSize EventKind = 12
	// EventTaskCounts: the task table, summarised (every Config.StatsInterval).
	// Counts (tasks per status; complete: every Status is present, zero included),
	// Lag (age of the oldest due task not yet claimed; zero when none is waiting).
	EventTaskCounts EventKind = 13
	// EventUnhandled: a task came due under a name that no handler is registered for
	// in this scheduler, and was handed back (each time: a task that keeps coming due
	// counts once per hand-back). Name.
	EventUnhandled EventKind = 14
	// EventLeadership: this scheduler's role changed (Config.Elector). Leader is true
	// when it began leading, false when its term ended. Epoch is the term's fencing
	// token. Reason (a TermEndReason), when a term ended, says why.
	EventLeadership EventKind = 15
	// EventFenceRejected: the store refused a write of this scheduler's as fenced by
	// a newer leader, and its term ended. Reason (a FencedPart) names the part.
	EventFenceRejected EventKind = 16
	// EventLease: the leader's lease, reported every second of a term and once at
	// its end. Epoch, LeaseRemaining (the time until the leader stops acting on it
	// unless a renewal succeeds; zero at the end).
	EventLease EventKind = 17
	// EventExecutorRequest: the leader sent a batch of Count tasks to another
	// replica's executor. Reason (an ExecutorResult) is the result; Duration is the
	// request's time.
	EventExecutorRequest EventKind = 18
	// EventPruned: retention deleted Count rows. Reason (a PruneTarget) says which:
	// finished tasks of one status, with their executions, or another kind of record.
	EventPruned EventKind = 19
	// EventLimited: a claim left Count due tasks named Name waiting, SCHEDULED, because
	// the name's limit was reached. Reason (a LimitKind) says which limit; Limit is it.
	EventLimited EventKind = 20
	// EventNameSlots: a name's concurrency limit as the leader sees it, every
	// Config.StatsInterval while it leads: Name, Limit, InUse (its tasks DISPATCHING
	// or RUNNING, by the store), Count (its due tasks the leader holds waiting for a
	// slot).
	EventNameSlots EventKind = 21
)

var eventKindNames = [...]string{
	EventSubmitted: "submitted", EventClaimed: "claimed", EventStarted: "started",
	EventFinished: "finished", EventDispatchFailed: "dispatch_failed", EventRetryScheduled: "retry_scheduled",
	EventOrphanRecovered: "orphan_recovered", EventStuckClaimHandedBack: "stuck_claim_handed_back",
	EventSkipped: "skipped", EventScheduleFired: "schedule_fired", EventClockOffset: "clock_offset",
	EventWheelSize: "wheel_size", EventTaskCounts: "task_counts", EventUnhandled: "unhandled",
	EventLeadership: "leadership", EventFenceRejected: "fence_rejected", EventLease: "lease",
	EventExecutorRequest: "executor_request", EventPruned: "pruned", EventLimited: "limited",
	EventNameSlots: "name_slots",
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
	OutcomeSnoozed   Outcome = "snoozed"   // the handler returned Snooze; it runs again without using a retry
	OutcomeCancelled Outcome = "cancelled" // its task was cancelled while it ran, and the handler stopped
)

// DispatchReason is why a claimed task was handed back (Event.Reason of
// EventDispatchFailed).
type DispatchReason string

// The reasons of EventDispatchFailed.
const (
	DispatchNoHandler DispatchReason = "no_handler" // no handler registered for the name
	DispatchStopping  DispatchReason = "stopping"   // the scheduler was stopping
	DispatchStuck     DispatchReason = "stuck"      // not started within DispatchTimeout of the claim
	// DispatchLeaseEnded: claimed under a leader's lease that ended before the task
	// started; the next leader runs it.
	DispatchLeaseEnded DispatchReason = "lease_ended"
	// DispatchBusy: no replica with the task's handler took it within half of
	// DispatchTimeout, and one of them at least was full (the others unreachable or
	// refusing).
	DispatchBusy DispatchReason = "busy"
	// DispatchFenced: a replica's executor had seen a newer leader.
	DispatchFenced DispatchReason = "fenced"
	// DispatchUnreachable: the replica it was sent to did not answer; it is skipped
	// until its health endpoint answers.
	DispatchUnreachable DispatchReason = "unreachable"
	// DispatchRefused: the replicas it was sent to answered the dispatch with an
	// error (or lacked its handler), none was merely full, and no other replica with
	// its handler was left to try.
	DispatchRefused DispatchReason = "refused"
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

// TermEndReason is why a term of leadership ended (Event.Reason of EventLeadership
// with Leader false).
type TermEndReason string

// The reasons of EventLeadership.
const (
	TermLost      TermEndReason = "lost"       // the lease was lost, or the term ended for any other cause
	TermResigned  TermEndReason = "resigned"   // the lease was resigned
	TermFenced    TermEndReason = "fenced"     // the store or an executor had seen a newer leader
	TermStopping  TermEndReason = "stopping"   // the scheduler was stopping
	TermStoreDown TermEndReason = "store_down" // the store stopped answering
)

// FencedPart is the part of the scheduler whose write the store refused as fenced
// (Event.Reason of EventFenceRejected).
type FencedPart string

// The parts of EventFenceRejected.
const (
	FencedClaim    FencedPart = "claim"    // claiming due tasks
	FencedSchedule FencedPart = "schedule" // firing a schedule
	FencedRecovery FencedPart = "recovery" // recovering orphans and stuck claims
)

// ExecutorResult is how a request to another replica's executor ended (Event.Reason
// of EventExecutorRequest).
type ExecutorResult string

// The results of EventExecutorRequest.
const (
	ExecutorOK          ExecutorResult = "ok"          // the replica answered and refused no task for want of a slot
	ExecutorBusy        ExecutorResult = "busy"        // some tasks refused for want of a slot
	ExecutorUnreachable ExecutorResult = "unreachable" // the replica did not answer
	ExecutorFenced      ExecutorResult = "fenced"      // the replica had seen a newer leader
	ExecutorTooLarge    ExecutorResult = "too_large"   // the batch was too large: split in halves and sent again
	ExecutorError       ExecutorResult = "error"       // any other error
)

// LimitKind is the limit that held tasks back (Event.Reason of EventLimited).
type LimitKind string

// The limits of EventLimited.
const (
	LimitConcurrency LimitKind = "concurrency" // the name's tasks in flight (SetConcurrency)
	LimitRate        LimitKind = "rate"        // the name's claims in the rate's window (SetRate)
	LimitKeyRate     LimitKind = "key_rate"    // the claims of a task key in the rate's window (SetKeyRate)
)

// PruneTarget is what retention deleted (Event.Reason of EventPruned).
type PruneTarget string

// The targets of EventPruned: finished tasks of one status, lower case, with their
// executions, or records of another kind.
const (
	PruneSucceeded  PruneTarget = "succeeded"  // SUCCEEDED tasks
	PruneFailed     PruneTarget = "failed"     // FAILED tasks
	PruneCancelled  PruneTarget = "cancelled"  // CANCELLED tasks
	PruneSkipped    PruneTarget = "skipped"    // SKIPPED tasks
	PruneAudit      PruneTarget = "audit"      // audit records
	PruneSlotGaps   PruneTarget = "slot_gaps"  // the gaps of schedules (ScheduleSlots)
	PruneStats      PruneTarget = "stats"      // rows of per-minute statistics
	PruneLeadership PruneTarget = "leadership" // changes of the leadership history
	PruneKeyStarts  PruneTarget = "key_starts" // claim times per task key no rate window reaches (SetKeyRate)
)

// Event is one thing the scheduler did. Fields that do not apply to its Kind are
// zero.
//
// Reason is set by six kinds, each from its own typed vocabulary:
//
//   - EventDispatchFailed: a DispatchReason
//   - EventLeadership, when a term ended: a TermEndReason
//   - EventFenceRejected: a FencedPart
//   - EventExecutorRequest: an ExecutorResult
//   - EventPruned: a PruneTarget
//   - EventLimited: a LimitKind
//
// Reason is a plain string, so a metric label or a log line takes it as is. To
// compare or switch, convert it to the kind's type, as in
// DispatchReason(e.Reason) == DispatchBusy: the compiler then refuses a constant of
// another kind's vocabulary.
type Event struct {
	Kind     EventKind
	At       time.Time // when it happened, by the scheduler's (store-corrected) clock
	Name     string    // the task's name (its handler)
	Schedule string    // the schedule, for schedule events and occurrences
	Outcome  Outcome
	Reason   string // typed per kind: see below
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
	Leader   bool  // EventLeadership
	Epoch    int64 // EventLeadership, EventLease
	// LeaseRemaining is the time left on the leader's lease (EventLease).
	LeaseRemaining time.Duration
	// Dropped is how many events were dropped, because the queue was full, since the
	// previous event delivered.
	Dropped int
	Limit   int // EventLimited, EventNameSlots: the name's limit
	InUse   int // EventNameSlots: the name's tasks DISPATCHING or RUNNING
}

// newObserverQueue returns the queue that delivers the kernel's events to o, or nil
// without an observer.
func newObserverQueue(o Observer) *observe.Queue {
	if o == nil {
		return nil
	}
	return observe.NewQueue(func(e observe.Event) { o.Observe(eventOf(e)) })
}

func eventOf(e observe.Event) Event {
	return Event{
		Kind: EventKind(e.Kind), At: e.At, Name: e.Name, Schedule: e.Schedule, Outcome: Outcome(e.Outcome),
		Reason: e.Reason, Result: e.Result, Due: e.Due, Lateness: e.Lateness, Manual: e.Manual, Early: e.Early,
		Duration: e.Duration, Offset: e.Offset, Lag: e.Lag, Count: e.Count, Counts: e.Counts, Leader: e.Leader, Epoch: e.Epoch, LeaseRemaining: e.Lease, Dropped: e.Dropped,
		Limit: e.Limit, InUse: e.InUse,
	}
}
