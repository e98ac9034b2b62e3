package ax

import (
	"time"

	"github.com/axsched/ax/store"
)

// Task is one persisted task, as the store holds it: what Delay, At, Get and Lookup
// return and what a Handler receives (its own copy). Times are UTC, stamped by the
// store's clock or the scheduler's store-corrected clock; a zero time means "not set".
type Task struct {
	// ID is the task's id, unique in the store and never reused.
	ID int64
	// Name is the handler name the task runs under (Handle).
	Name string
	// Key is the business key. (Name, Key) is unique among the tasks that hold it:
	// submitting it again returns this task with ErrDuplicate while it holds it (see
	// Unique). A schedule's occurrence has its slot as Key, in RFC 3339 UTC.
	Key string
	// Payload is the bytes given with WithPayload; nil when none.
	Payload []byte
	// Status is the task's state (see the package documentation).
	Status Status
	// DueAt is when the task should run; a business retry moves it to the retry's
	// time. A handler never starts before it.
	DueAt time.Time
	// Attempt is 0 on the first run and grows by one per business retry.
	Attempt int
	// MaxRetry is how many business retries follow a failed first attempt.
	MaxRetry int
	// DispatchRetries counts failed hand-offs to an executor (no handler, a claim
	// handed back); they never consume a business retry.
	DispatchRetries int
	// ExecutionID identifies the current (or last) execution, a UUIDv7; empty before
	// the first claim. A handler that is idempotent on it runs each attempt's effect
	// once.
	ExecutionID string
	// OwnerService is the service that submitted the task (Config.OwnerService,
	// WithOwner).
	OwnerService string
	// LastError is the last business or dispatch error (a panic's includes its
	// stack), or why the task was skipped.
	LastError string
	// Snoozes counts the times its handler returned Snooze; they never consume a
	// business retry, and WithMaxSnoozes caps them.
	Snoozes int
	// TaskKey, when set (WithTaskKey; a schedule's name for its occurrences), is a
	// mutual-exclusion key: while another task with it is DISPATCHING or RUNNING
	// this one does not start, and Overlap says what it does instead.
	TaskKey string
	// Overlap is the overlap policy that goes with TaskKey; empty without one.
	Overlap OverlapPolicy
	// Timeout is the handler's deadline for this task (WithTimeout); 0 means the
	// handler's default.
	Timeout time.Duration
	// Backoff, when not empty, holds the delay before business retry n+1 at index
	// n, fixed at submission (WithBackoff on the task); empty means the handler's.
	Backoff []time.Duration
	// KeyHold and KeyUntil say how long the task keeps its business key once it
	// has finished (WithUnique; KeyUntil is the end of a UniqueFor window).
	KeyHold  KeyHold
	KeyUntil time.Time
	// Superseded reports that the task gave its key up to a newer task of the same
	// (Name, Key), which Lookup returns now; it can no longer be retried or
	// triggered.
	Superseded bool
	// CancelledBy and CancelRequestedAt say who asked to cancel the task (the
	// operator, or WithActor's name) and when; empty and zero when nobody did. A
	// RUNNING task with them set is being stopped (see Cancel).
	CancelledBy       string
	CancelRequestedAt time.Time
	// Trace is the trace context the task was submitted under, as Config.Tracer
	// wrote it (an occurrence carries its schedule's): what the span of each of its
	// executions refers to. Empty without a Tracer, or when the submitting context
	// carried no trace. See Tracer.
	Trace string

	// CreatedAt is when the task was submitted (for an occurrence, materialised).
	CreatedAt time.Time
	// UpdatedAt is the last change of the row.
	UpdatedAt time.Time
	// DispatchedAt is the last claim (SCHEDULED or FAILED → DISPATCHING).
	DispatchedAt time.Time
	// StartedAt is when the last execution was recorded, before its handler ran (by
	// the claim itself when one write claimed and started it; a prefetched task's
	// handler may begin a little later, when a slot frees); StartedAt − DueAt is its
	// lateness in the store.
	StartedAt time.Time
	// HeartbeatAt is the running execution's last sign of life.
	HeartbeatAt time.Time
	// FinishedAt is when the task reached SUCCEEDED, FAILED, CANCELLED or SKIPPED.
	FinishedAt time.Time
	// TriggeredAt is the last manual Trigger.
	TriggeredAt time.Time
}

// Execution is one attempt to run a task, a row of the store's execution records
// (Executions). A second delivery of the same execution id never runs the handler
// again.
type Execution struct {
	// ID is the execution id (a UUIDv7), unique in the store; the task's
	// ExecutionID while this attempt is current.
	ID string
	// TaskID is the task this attempt ran.
	TaskID int64
	// Attempt is the task's Attempt when this execution ran.
	Attempt int
	// Node is the Config.Node of the scheduler that ran it.
	Node string
	// Status is RUNNING, SUCCEEDED, FAILED, SNOOZED (the handler returned Snooze) or
	// CANCELLED (the task was cancelled while it ran).
	Status Status
	// DueAt is the task's DueAt when this attempt started: StartedAt − DueAt is its
	// lateness (Lateness). A triggered attempt keeps the DueAt the task had.
	DueAt time.Time
	// ClaimedAt is the claim this attempt ran under (the task's DispatchedAt then):
	// when the scheduler claimed the task, or an operator triggered it.
	//
	// DueAt and ClaimedAt are zero on attempts recorded before the store kept them
	// (a database migrated from an older ax: PostgreSQL schema 13, SQLite 9, MySQL 8).
	ClaimedAt time.Time
	// StartedAt, HeartbeatAt and FinishedAt are the attempt's own stamps.
	StartedAt   time.Time
	HeartbeatAt time.Time
	FinishedAt  time.Time
	// Error is the attempt's error, empty when it succeeded.
	Error string
}

// Lateness returns StartedAt − DueAt: how long after its task was due the attempt
// started, by the store's clock. A scheduler never starts a task early; only an
// attempt triggered before the task was due has a negative lateness. It is zero when
// DueAt is zero, an attempt recorded before the store kept it.
func (e Execution) Lateness() time.Duration {
	if e.DueAt.IsZero() {
		return 0
	}
	return e.StartedAt.Sub(e.DueAt)
}

// The store's row types and these have the same fields, so that converting between
// them costs nothing; the compiler checks it here.
var (
	_ = (*Task)((*store.Task)(nil))
	_ = (*Execution)((*store.Execution)(nil))
)

func taskOf(t *store.Task) *Task { return (*Task)(t) }

func executionsOf(es []store.Execution) []Execution {
	out := make([]Execution, len(es))
	for i := range es {
		out[i] = Execution(es[i])
	}
	return out
}
