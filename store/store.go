package store

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Drivers map backend errors onto these (wrapped with %w), so callers
// test them with errors.Is whatever the database. Their texts carry no "ax:" prefix:
// the message that wraps one says which operation failed, once.
var (
	// ErrDuplicate: a task with this name and key already exists.
	ErrDuplicate = errors.New("duplicate task")
	// ErrNotFound: no such task.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the input is malformed; nothing was changed.
	ErrInvalid = errors.New("invalid input")
	// ErrNotCancellable: the task has finished, so it cannot be cancelled.
	ErrNotCancellable = errors.New("not cancellable")
	// ErrNotTriggerable: the task is neither SCHEDULED nor FAILED, so it cannot be triggered.
	ErrNotTriggerable = errors.New("not triggerable")
	// ErrNotReschedulable: the task is not SCHEDULED, so its due time cannot be moved.
	ErrNotReschedulable = errors.New("not reschedulable")
	// ErrNotRetryable: the task is not FAILED, so it cannot be retried.
	ErrNotRetryable = errors.New("not retryable")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store closed")
	// ErrSchemaVersion: the database was migrated by a newer ax than this one.
	ErrSchemaVersion = errors.New("database schema is newer than this ax")
	// ErrFenced: a leader-only write carried a fencing token below the epoch a newer
	// leader recorded (see [Fence]); nothing was written, and the writer is no longer
	// the leader.
	ErrFenced = errors.New("fenced by a newer leader")
)

// KeyHeldError says which task holds the key of a task that Trigger refused; it
// wraps ErrNotTriggerable.
type KeyHeldError struct {
	TaskKey string
	Holder  int64 // the task holding the key
}

func (e *KeyHeldError) Error() string {
	return fmt.Sprintf("task key %q held by task %d: %v", e.TaskKey, e.Holder, ErrNotTriggerable)
}

// Unwrap returns ErrNotTriggerable.
func (e *KeyHeldError) Unwrap() error { return ErrNotTriggerable }

// TaskQuery selects tasks for [Store.Tasks]. Its filters combine with AND; a zero
// field does not filter.
type TaskQuery struct {
	Statuses []Status // any of these
	Name     string   // the handler name, exactly
	// KeyPrefix keeps the tasks whose business key starts with it (byte-wise,
	// case-sensitive). A prefix that is not valid UTF-8 or holds a NUL is ErrInvalid:
	// the keys ax submits are neither.
	KeyPrefix    string
	OwnerService string
	TaskKey      string // the overlap key (WithTaskKey; a schedule's name)
	// DueFrom ≤ DueAt < DueBefore, and FinishedFrom ≤ FinishedAt < FinishedBefore;
	// a zero bound is open. A task not finished has no FinishedAt: a finished range
	// selects finished tasks only.
	DueFrom, DueBefore           time.Time
	FinishedFrom, FinishedBefore time.Time
	// Soonest orders by (DueAt, ID) ascending; otherwise the newest come first, by ID
	// descending.
	Soonest bool
	// After, when set, is the last task of the previous page: the result starts
	// strictly after it in the query's order (ID alone for the newest first; DueAt,
	// then ID, for the soonest).
	After *TaskCursor
	// Limit is the most tasks returned, 1 to MaxQueryLimit.
	Limit int
}

// TaskCursor is a position in a TaskQuery's order: the last task of a page.
type TaskCursor struct {
	ID    int64
	DueAt time.Time // used by Soonest
}

// MaxQueryLimit is the largest TaskQuery.Limit: a page of 1,000 tasks and one more,
// which tells the caller whether another page follows.
const MaxQueryLimit = 1001

// Fence is the fencing token a leader-only write carries: Claim, FireSchedule,
// recovery's Finish and Requeue, and the Start of the tasks a leader claimed (on
// whichever replica runs them). The store applies such a write only if Token is at
// least the epoch recorded for Namespace in ax_leader (none recorded counts as 0),
// checked in the write's own statement or transaction and holding off a concurrent
// RaiseFence until it commits; otherwise the write fails with ErrFenced and changes
// nothing. So once a new leader's RaiseFence has returned, no write of an older leader
// commits.
//
// The zero Fence (Token 0) checks nothing: a scheduler without an elector, or an
// executor's heartbeats and results. A negative Token, or a positive one with an empty
// Namespace, is ErrInvalid.
type Fence struct {
	Namespace string
	Token     int64
}

// TaskStats is a summary of the task table, for metrics.
type TaskStats struct {
	Counts map[Status]int64 // tasks per status; every Status is present, zero included
	// OldestDue is the DueAt of the oldest SCHEDULED task due at or before now
	// (due, not yet claimed); zero when there is none.
	OldestDue time.Time
}

// Inserted is the result of inserting one task.
type Inserted struct {
	Task *Task // the stored task, or the existing one when Err is ErrDuplicate
	Err  error // nil or ErrDuplicate
}

// RefillParams asks for two sets of SCHEDULED tasks.
//
// Changed: tasks that (re)entered SCHEDULED with a sequence number greater than
// AfterSeq and are due before To. Every write that leaves a row SCHEDULED (insert,
// retry, requeue, operator retry) gives it a sequence number greater than any the
// store has handed out, and a Refill never returns a cursor past a sequence number
// whose row is not yet visible. A negative AfterSeq skips this set and returns the
// current cursor, taken before the window scan, so that nothing falls between.
//
// Entered: tasks with (DueAt, ID) after (From, FromID) and DueAt before To, in
// (DueAt, ID) order: the window scan. A zero From starts at the beginning of time,
// so overdue tasks come first.
//
// Each set holds at most Limit rows; More reports that a set was cut short, and the
// caller continues from the returned cursors.
//
// While other writers are in flight, a store may hold the returned cursor back and
// return some rows again on the next call; callers treat Changed as "at least once".
type RefillParams struct {
	AfterSeq int64
	From     time.Time
	FromID   int64
	To       time.Time
	Limit    int
}

// RefillResult is the answer to a Refill.
type RefillResult struct {
	Changed []Due // changed tasks due before To, in sequence order
	Seq     int64 // the new change cursor: pass it as the next AfterSeq
	Entered []Due // tasks that entered the window, in (DueAt, ID) order
	More    bool  // a set reached Limit: call again with the new cursors
}

// Claim asks to move one task to DISPATCHING with a new execution id.
type Claim struct {
	ID          int64
	ExecutionID string
	// Start asks ClaimStart to start the task in the claiming write, if it can: the
	// claimer has a handler slot free for it now. Claim ignores it.
	Start bool
}

// StartOn says which claimed tasks ClaimStart may start, and for whom.
type StartOn struct {
	Node     string   // the executor, recorded on the executions
	Handlers []string // the task names it has handlers for
}

// ClaimResult is the answer to a Claim.
type ClaimResult struct {
	Claimed []Task    // now DISPATCHING, in id order
	Started []Task    // now RUNNING, their executions recorded (ClaimStart only), in id order
	NotDue  []Due     // still SCHEDULED but due after the store's Now: try again at DueAt
	Skipped []Task    // now SKIPPED: their key was held and their Overlap is skip
	Blocked []Blocked // still SCHEDULED and due, their key held and their Overlap queue: try again when it frees
	Paused  []Due     // still SCHEDULED and due, their name paused (NameKeeper): left out until it is resumed
	Limited []Limited // still SCHEDULED and due, their name at its limit: try again when a slot frees or at RetryAt
}

// Limited is a due task waiting for a slot of its name's concurrency limit, or for
// its name's rate limit to admit another start (see NameKeeper).
type Limited struct {
	Due
	Name  string
	Limit int // the limit that held it back, as the claim read it: the concurrency or the rate's n
	// RetryAt, for a task held back by the name's rate limit, is when, by the
	// store's clock, the rate admits the next start; zero for a concurrency limit
	// (a slot frees when a task of the name finishes).
	RetryAt time.Time
	// TaskKey is set, to the task's key, when the name's rate per task key held it
	// back (NameState.KeyRate): other keys of the name are not held by it. Empty for
	// the name's own limits.
	TaskKey string
}

// NameState is what operators set for one task name (see NameKeeper).
type NameState struct {
	Name   string
	Paused bool
	// Concurrency is the most tasks of the name that may be DISPATCHING or RUNNING at
	// once in the namespace (see Claim); 0: no limit.
	Concurrency int
	// InFlight is, for a name with a concurrency limit, its tasks DISPATCHING or
	// RUNNING when Names read it: the slots in use. 0 otherwise, and in the answers
	// of the writes.
	InFlight int
	// Rate and Per are the name's rate limit: at most Rate of its tasks claimed in
	// any window of Per, by the store's clock (see Claim); 0: no limit.
	Rate int
	Per  time.Duration
	// KeyConcurrency is how many of the name's tasks that share a task key (with
	// Overlap skip or queue) may be DISPATCHING or RUNNING at once; 0 or 1: one, the
	// rule of task keys (see Claim).
	KeyConcurrency int
	// KeyRate and KeyPer are the name's rate limit per task key: at most KeyRate of
	// its tasks sharing a task key (with Overlap skip or queue) claimed in any window
	// of KeyPer, for each key (see Claim); 0: no limit.
	KeyRate   int
	KeyPer    time.Duration
	ChangedBy string    // who changed it last
	ChangedAt time.Time // when, by the store's clock; zero for a name never changed
}

// MaxConcurrency is the highest concurrency limit a name may have.
const MaxConcurrency = 1 << 20

// The bounds of a rate limit (NameKeeper.SetRate, SetKeyRate): the store keeps the
// times of the name's (or the key's) last Rate claims, so Rate bounds what each claim
// of the name reads and writes.
const (
	MaxRate    = 10_000
	MinRatePer = time.Millisecond
	MaxRatePer = 24 * time.Hour
)

// Blocked is a due task waiting for its task key.
type Blocked struct {
	Due
	TaskKey string
}

// ExecRef names one execution of one task.
type ExecRef struct {
	TaskID      int64
	ExecutionID string
}

// StartParams asks to start one execution.
type StartParams struct {
	TaskID      int64
	ExecutionID string
	// Name is the task's name as the dispatcher claimed it: the executor runs the
	// handler of this name. The task starts only if its stored name is Name.
	Name string
	Node string // the executor, recorded on the execution
}

// Beat is what Heartbeat found of one running execution.
type Beat int

// The answers of Heartbeat.
const (
	BeatGone   Beat = iota // the task is no longer RUNNING with this execution: its result would not apply
	BeatAlive              // stamped: the execution is its task's and runs on
	BeatCancel             // stamped, and the task's cancel was requested (Cancel): stop the handler
)

// MaxCancelledBy is the longest Cancel's by may be, in bytes.
const MaxCancelledBy = 200

// StartOutcome is what Start did with one execution.
type StartOutcome int

// The outcomes of Start.
const (
	Started   StartOutcome = iota + 1 // recorded; the task is RUNNING: run the handler
	Duplicate                         // already recorded: a duplicate delivery, run nothing
	Lost                              // neither started nor a duplicate (see Store.Start): run nothing
)

// StartResult is the outcome of starting one execution.
type StartResult struct {
	Outcome   StartOutcome
	Task      *Task      // the task after the transition (Started only)
	Execution *Execution // the execution record (Started and Duplicate)
}

// Finish is the result of one execution. Status is the task's new status:
//   - Succeeded: done; FinishedAt is set and the execution record becomes Succeeded.
//   - Scheduled: run again at DueAt with the given Attempt (Attempt+1 for a business
//     retry; unchanged when the execution was released, e.g. at shutdown); the
//     execution record becomes Failed with Error.
//   - Failed: retries exhausted; FinishedAt is set, the execution record becomes
//     Failed.
//
// LastError is set to Error unless Status is Succeeded. Error is the failure's: a
// success records none, whatever Error holds.
//
// Snooze, with Status Scheduled only (else ErrInvalid), says the handler asked to run
// again at DueAt without spending a business retry: the task's Snoozes grows by one
// and the execution record becomes Snoozed, with Error (which says for how long).
//
// A task whose cancel was requested (Task.CancelRequestedAt set: see Cancel) ends
// SUCCEEDED on a success, and CANCELLED on every other result, FinishedAt set, with
// Attempt, DueAt and Snoozes unchanged: its record becomes Cancelled, and its error
// and the task's LastError read "cancelled by " and CancelledBy, then ": " and Error
// when Error is not empty.
type Finish struct {
	TaskID      int64
	ExecutionID string
	Status      Status
	Error       string
	Attempt     int       // Scheduled only
	DueAt       time.Time // Scheduled only
	Snooze      bool      // Scheduled only
}

// Requeue hands one undispatched task back (see Store.Requeue).
type Requeue struct {
	TaskID             int64
	ExecutionID        string
	DueAt              time.Time
	Error              string
	MaxDispatchRetries int
}

// PruneParams says which finished tasks Prune deletes.
type PruneParams struct {
	Status     Status    // SUCCEEDED, FAILED, CANCELLED or SKIPPED
	Before     time.Time // delete what finished before this time; zero: no age limit
	KeepNewest int       // when positive, also delete what is beyond this many, newest kept
	Limit      int       // at most this many tasks, in [1, MaxPrune]
}

// MaxPrune is the most tasks one Prune deletes: its statements stay small, so that
// they hold few locks and little of the write-ahead log at a time.
const MaxPrune = 1000

// AuditRecord is one row of the audit log.
type AuditRecord struct {
	ID           int64
	At           time.Time
	Actor        string // who: the token's actor
	Role         string // the token's role
	Action       string // e.g. "task.cancel"
	Target       string // e.g. "task 42", "schedule nightly"
	Reason       string // the operator's reason, if given
	Result       string // "ok", or the refusal's code and message
	StatusBefore Status // the task's status before the call, when there is one
	StatusAfter  Status // and after it
	ExecutionID  string // the execution it led to (a trigger), if any
}

// AuditQuery selects audit records: each non-empty text field must match exactly.
//
// Without Since and Until the records come newest first by ID, and BeforeID, when
// positive, keeps those older than that record: ID < BeforeID (the next page).
//
// With Since or Until the records are those with Since <= At < Until (a zero bound is
// open), read through the index on (namespace, At) newest first by (At, ID): At
// descending, then ID descending. BeforeID then keeps the records after that one in
// this order, (At, ID) < (its At, BeforeID); a BeforeID that names no record of the
// namespace (pruned meanwhile) selects none. Times compare at microsecond precision:
// the bounds are truncated to whole microseconds. Since must be before Until when
// both are set, else ErrInvalid.
type AuditQuery struct {
	Actor    string
	Action   string
	Target   string
	Since    time.Time // At >= Since; zero: no lower bound
	Until    time.Time // At < Until; zero: no upper bound
	BeforeID int64
	Limit    int
}

// ByTime reports whether q selects by time (Since or Until set), and so reads in
// (At, ID) order.
func (q AuditQuery) ByTime() bool { return !q.Since.IsZero() || !q.Until.IsZero() }

// The limits of an AuditRecord's fields, in bytes.
const (
	MaxAuditText   = 1000
	MaxAuditReason = 2000
)

// LeaseInfo is one namespace's lease as a Leaser records it.
type LeaseInfo struct {
	Holder string
	Epoch  int64
	// Remaining is the time until expires_at by the store's clock; <= 0 when the lease
	// has expired or was released.
	Remaining time.Duration
}

// DefaultNamespace is the namespace of a store as opened, and of every row written before
// namespaces existed (the migrations give the column this default).
const DefaultNamespace = "default"

// MaxNamespace is the longest namespace, in bytes (the stores' key columns hold it).
const MaxNamespace = 200

// NodeInfo is one executor's row in the registry.
type NodeInfo struct {
	Name        string   // the replica's Config.Node
	Advertise   string   // the base URL of its executor endpoint; empty: it takes no remote dispatch
	Handlers    []string // the task names it has handlers for, sorted
	Capacity    int      // handlers it runs at once
	InFlight    int      // handlers running, as of HeartbeatAt
	StartedAt   time.Time
	HeartbeatAt time.Time
	// ClockOffset is the store's clock minus the replica's, as the replica last
	// measured it: positive when the replica's clock is behind the store's. Stored
	// in whole microseconds (truncated); zero on rows written before the stores kept
	// it, and until the replica first measures.
	ClockOffset time.Duration
}

// LeadershipChange is one change of a namespace's leader, as a Fencer records it.
type LeadershipChange struct {
	Namespace string
	Epoch     int64 // the term's fencing epoch (Fence.Token)
	// Holder is the leader, as RaiseFence recorded it: an elector's holder value
	// (elect.Lease.Holder), "<id> <name>" or "<token> <id> <name>";
	// elect.Candidate reads the name in it (a value without a space is the name).
	Holder string
	Kind   string    // LeadershipAcquired or LeadershipEnded
	At     time.Time // when it was recorded, by the store's clock
	// Reason says why: for "ended", the cause the leader gave. For "acquired", how
	// the namespace's previous change ended its term, as far as the history knows:
	// it names that leader by elect.Candidate of its Holder and its epoch as
	// "epoch N", and gives its "ended" Reason, or says "no end" was recorded. The
	// first "acquired" of a namespace says no earlier leader is recorded.
	Reason string
}

// The kinds of a LeadershipChange.
const (
	LeadershipAcquired = "acquired" // a term began: its leader raised the fence
	LeadershipEnded    = "ended"    // a term ended, as its leader recorded
)

// The limits of the leadership history: the most changes one LeadershipHistory returns, and
// the longest Holder and Reason, in bytes.
const (
	MaxLeadershipHistory = 100
	MaxLeadershipHolder  = 500
	MaxLeadershipReason  = 1000
)
