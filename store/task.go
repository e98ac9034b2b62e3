package store

import (
	"fmt"
	"time"
)

// Status is the state of a task (see the package doc for the state machine). Its
// value is the upper-case name stored in the database.
type Status string

// The states of a task.
const (
	Scheduled   Status = "SCHEDULED"   // persisted, waiting for DueAt
	Dispatching Status = "DISPATCHING" // claimed by a scheduler, being handed to an executor
	Running     Status = "RUNNING"     // an executor recorded the execution and runs the handler
	Succeeded   Status = "SUCCEEDED"   // done
	Failed      Status = "FAILED"      // retries exhausted; only an operator moves it on
	Cancelled   Status = "CANCELLED"   // cancelled: before it ran, or while it ran (see Store.Cancel)
	Skipped     Status = "SKIPPED"     // a periodic occurrence skipped because of overlap
)

// Snoozed is the status of an execution record only, never of a task: the handler
// asked to run the task again later without spending a business retry (see
// [Finish].Snooze).
const Snoozed Status = "SNOOZED"

// String returns the status name, e.g. "SCHEDULED".
func (s Status) String() string { return string(s) }

// Valid reports whether s is one of the defined states.
func (s Status) Valid() bool {
	switch s {
	case Scheduled, Dispatching, Running, Succeeded, Failed, Cancelled, Skipped:
		return true
	}
	return false
}

// Statuses returns every state, in the order of the state machine: SCHEDULED first,
// then the states a task moves through, then the terminal ones.
func Statuses() []Status {
	return []Status{Scheduled, Dispatching, Running, Succeeded, Failed, Cancelled, Skipped}
}

// Terminal reports whether no automatic transition leaves s.
func (s Status) Terminal() bool {
	return s == Succeeded || s == Failed || s == Cancelled || s == Skipped
}

// Limits, in bytes: of a task's name and business key, which ax checks on submit, and
// of an execution id (a UUID has 36 bytes), which Start checks.
const (
	MaxNameLen        = 200
	MaxKeyLen         = 500
	MaxExecutionIDLen = 100
)

// MaxTraceLen is the longest trace context a task or a schedule keeps (Task.Trace,
// ScheduleDef.Trace), in bytes: a W3C traceparent is 55, which leaves room for a
// tracestate.
const MaxTraceLen = 512

// MaxBatch is the largest number of rows a single batched statement touches (claims,
// starts, heartbeats, results): batches are split into chunks of at most MaxBatch
// ids, sorted ascending, so concurrent batches cannot deadlock.
const MaxBatch = 200

// Task is one persisted task: a row of ax_tasks. Times are UTC; a zero time means
// "not set".
type Task struct {
	ID              int64
	Name            string // handler name
	Key             string // business key; (Name, Key) is unique among the tasks that hold it (KeyHold)
	Payload         []byte
	Status          Status
	DueAt           time.Time // when it should run
	Attempt         int       // 0 on the first run; grows by one per business retry
	MaxRetry        int       // business retries allowed after the first attempt
	DispatchRetries int       // failed hand-offs to an executor; never consumes Attempt
	ExecutionID     string    // the current (or last) execution, a UUIDv7; empty before the first claim
	OwnerService    string    // the service that submitted the task
	LastError       string    // the last business or dispatch error, or why it was skipped
	Snoozes         int       // times its handler snoozed it (see Finish.Snooze); never consumes Attempt

	// TaskKey, when set, is a mutual-exclusion key: Overlap decides what happens
	// when the task comes due while another task with the same key is DISPATCHING
	// or RUNNING. A periodic occurrence's TaskKey is its schedule's name. Both are
	// empty for a task without a key.
	TaskKey string
	Overlap OverlapPolicy

	// Timeout is the handler deadline for this task; 0 means the handler's default.
	Timeout time.Duration
	// Backoff, when non-empty, is the delay before business retry n+1 at index n,
	// fixed when the task was submitted; empty means the handler's backoff.
	Backoff []time.Duration

	// KeyHold and KeyUntil say how long the task keeps its business key once it has
	// finished (see KeyHold). Superseded reports that it gave the key up to a newer
	// task of the same (Name, Key): it can no longer be retried or triggered.
	KeyHold    KeyHold
	KeyUntil   time.Time
	Superseded bool

	// CancelledBy and CancelRequestedAt say who asked to cancel the task, and when
	// (see Store.Cancel); empty and zero when nobody did.
	CancelledBy       string
	CancelRequestedAt time.Time
	// Trace is the trace context the task was submitted under, as its submitter
	// wrote it (ax's Config.Tracer), for the span of each execution to refer to; an
	// occurrence carries its schedule's. Empty when there is none. The store keeps it
	// as it is: clean text (CleanText) of at most MaxTraceLen bytes.
	Trace string

	CreatedAt    time.Time // when the task was submitted
	UpdatedAt    time.Time // the last change of the row
	DispatchedAt time.Time // the last claim (SCHEDULED/FAILED → DISPATCHING)
	StartedAt    time.Time // the last execution's start (DISPATCHING → RUNNING)
	HeartbeatAt  time.Time // the last heartbeat of the running execution
	FinishedAt   time.Time // when it reached a terminal state
	TriggeredAt  time.Time // the last manual trigger
}

// Execution is one attempt to run a task: a row of ax_executions. Its ID is the
// execution id, unique across the store; a second delivery of the same id never runs
// the handler again.
//
// DueAt and ClaimedAt are the task's DueAt and DispatchedAt as the attempt started,
// written by Start (and ClaimStart) with the record. They are zero on records written
// before the stores kept them (PostgreSQL schema 14, SQLite 10, MySQL 9).
type Execution struct {
	ID          string // execution id (UUIDv7)
	TaskID      int64
	Attempt     int
	Node        string    // the executor that ran it
	Status      Status    // Running, Succeeded, Failed, Snoozed or Cancelled
	DueAt       time.Time // when the task was due, as this attempt started
	ClaimedAt   time.Time // the claim (or trigger) this attempt ran under: the task's DispatchedAt
	StartedAt   time.Time
	HeartbeatAt time.Time
	FinishedAt  time.Time
	Error       string
}

// Lateness returns StartedAt − DueAt: how late the attempt started after its task
// was due, by the store's clock; negative only for an attempt triggered before its
// task was due. It is zero when DueAt is zero (a record written before the store kept
// it).
func (e Execution) Lateness() time.Duration {
	if e.DueAt.IsZero() {
		return 0
	}
	return e.StartedAt.Sub(e.DueAt)
}

// NewTask is a task to insert. DueAt must be set; the store fills ID, Status
// (Scheduled), CreatedAt and UpdatedAt.
type NewTask struct {
	Name         string
	Key          string
	Payload      []byte
	DueAt        time.Time
	MaxRetry     int
	OwnerService string
	Timeout      time.Duration
	Backoff      []time.Duration
	TaskKey      string        // optional mutual-exclusion key (see Task.TaskKey)
	Overlap      OverlapPolicy // required with a TaskKey, empty without
	KeyHold      KeyHold       // how long the finished task keeps its business key
	KeyUntil     time.Time     // when set, the key is kept until then at least
	Trace        string        // see Task.Trace; not clean text or over MaxTraceLen bytes is ErrInvalid
}

// KeyHold says how long a task keeps its business key (Name, Key) once it has
// finished. A task holds its key while it is SCHEDULED, DISPATCHING or RUNNING, and
// until its KeyUntil when that is set, whatever its KeyHold; while it holds it,
// inserting the key again answers ErrDuplicate with this task. Once it no longer
// does, an Insert of the key writes a new task, with a new id, and the old one is
// marked Superseded in the same transaction (it keeps its row and its history).
// Its value is the lower-case name stored in the database.
type KeyHold string

// How long a finished task keeps its business key.
const (
	// HoldLive: SUCCEEDED, CANCELLED and SKIPPED give the key up; FAILED keeps it,
	// since an operator may still retry the task. The default.
	HoldLive KeyHold = ""
	// HoldActive: every finished state gives the key up, FAILED too.
	HoldActive KeyHold = "active"
	// HoldForever: the task keeps its key as long as its row exists. Periodic
	// occurrences are inserted so.
	HoldForever KeyHold = "forever"
)

// Valid reports whether h is one of the defined holds.
func (h KeyHold) Valid() bool { return h == HoldLive || h == HoldActive || h == HoldForever }

// Frees reports whether a task in status st, with hold h and KeyUntil until, no
// longer holds its business key at now. Drivers evaluate the same rule in SQL
// (see each driver's package doc).
func (h KeyHold) Frees(st Status, until, now time.Time) bool {
	if !until.IsZero() && now.Before(until) {
		return false
	}
	switch st {
	case Succeeded, Cancelled, Skipped:
		return h != HoldForever
	case Failed:
		return h == HoldActive
	}
	return false
}

// Due is a scheduled task's id and due time: what the timing wheel holds.
type Due struct {
	ID    int64
	DueAt time.Time
}

// String formats the pair for logs and test failures.
func (d Due) String() string { return fmt.Sprintf("%d@%s", d.ID, d.DueAt.Format(time.RFC3339Nano)) }

// OverlapPolicy says what happens when a task with a task key comes due while another
// task with the same key is DISPATCHING or RUNNING. Its value is the lower-case name
// stored in the database.
type OverlapPolicy string

// The overlap policies.
const (
	OverlapSkip  OverlapPolicy = "skip"  // the task becomes SKIPPED, with the reason in LastError
	OverlapQueue OverlapPolicy = "queue" // the task waits, SCHEDULED, until the key is free
	OverlapAllow OverlapPolicy = "allow" // the key is ignored: tasks run concurrently
)

// Valid reports whether p is one of the defined policies.
func (p OverlapPolicy) Valid() bool {
	return p == OverlapSkip || p == OverlapQueue || p == OverlapAllow
}

// String returns the policy name, e.g. "skip".
func (p OverlapPolicy) String() string { return string(p) }

// MisfirePolicy says what a schedule does with the occurrences it missed while no
// scheduler was running (or it was paused past them). Its value is the lower-case
// name stored in the database.
type MisfirePolicy string

// The misfire policies.
const (
	MisfireFireOnce MisfirePolicy = "fire_once" // the missed occurrences collapse into one, fired at once
	MisfireSkip     MisfirePolicy = "skip"      // the missed occurrences are dropped: wait for the next slot
	MisfireCatchUp  MisfirePolicy = "catch_up"  // each missed occurrence fires, up to a bound
)

// Valid reports whether p is one of the defined policies.
func (p MisfirePolicy) Valid() bool {
	return p == MisfireFireOnce || p == MisfireSkip || p == MisfireCatchUp
}

// String returns the policy name, e.g. "fire_once".
func (p MisfirePolicy) String() string { return string(p) }

// Schedule is a periodic task's definition and progress: a row of ax_schedules. The
// schedule's name is also its handler's name and the TaskKey of its occurrences.
type Schedule struct {
	Name     string
	Spec     string // cron spec or "@every <duration>"
	TimeZone string // IANA name the cron spec is evaluated in, e.g. "UTC"
	Overlap  OverlapPolicy
	Misfire  MisfirePolicy
	Payload  []byte // each occurrence's payload
	Paused   bool
	// Trace is the trace context the schedule was registered under (see
	// Task.Trace). The store does not copy it into occurrences: the caller of
	// FireSchedule gives each occurrence its Trace.
	Trace string

	NextFireAt time.Time // the next slot not yet materialised as a task
	LastFireAt time.Time // the slot of the last materialised occurrence; zero before the first
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// ScheduleDef registers a schedule (Store.RegisterSchedules). NextFireAt is the
// first slot to materialise if the schedule is new or its timing (Spec, TimeZone)
// changed.
type ScheduleDef struct {
	Name       string
	Spec       string
	TimeZone   string
	Overlap    OverlapPolicy
	Misfire    MisfirePolicy
	Payload    []byte
	NextFireAt time.Time
	Trace      string // see Schedule.Trace; not clean text or over MaxTraceLen bytes is ErrInvalid
}

// FireParams advances a schedule and writes its occurrences (Store.FireSchedule).
type FireParams struct {
	Name   string
	Expect time.Time // the schedule's NextFireAt as the caller read it
	Next   time.Time // its new NextFireAt: the first slot not materialised by this call
	Last   time.Time // its new LastFireAt; zero leaves it unchanged
	Tasks  []NewTask // the occurrences
	// Gaps are the slots the call advances the schedule past without an
	// occurrence (the misfire policy dropped them): recorded with the
	// compare-and-set, when it applies (see SlotHistory). Their Schedule is Name.
	Gaps []SlotGap
	// Spec and TimeZone, when Spec is set, are the definition the caller planned
	// with: the call applies only if the stored schedule still has them, so that a
	// scheduler that has not yet seen a re-registration with another spec cannot
	// advance the schedule by the old one (their slots may coincide with Expect).
	Spec, TimeZone string
	// Fence is the leader's fencing token; the zero Fence checks nothing.
	Fence Fence
}

// FireResult is the answer to FireSchedule.
type FireResult struct {
	Applied  bool       // false: NextFireAt was not Expect, the spec was not Spec, or the schedule is paused or gone; nothing was written
	Inserted []Inserted // one per FireParams.Tasks when Applied, as Insert answers
}
