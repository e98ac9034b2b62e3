package store

import (
	"context"
	"errors"
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
	// ErrNotCancellable: the task is not SCHEDULED, so it cannot be cancelled.
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

// Store holds ax's durable state. Implementations must be safe for concurrent use by
// several goroutines and, when the database is shared, by several processes.
//
// Times passed in are absolute and already in the scheduler's clock; times the store
// stamps on its own (CreatedAt, UpdatedAt, StartedAt, …) come from [Store.Now]'s clock.
// Every state change is a conditional write; a row whose condition fails is left out of
// the result and nothing about it changes.
//
// On a network database an error can leave the outcome unknown (the connection failed
// during COMMIT): the caller must not assume nothing was written. Every write is safe
// to repeat — Insert through the business key (a repeat answers ErrDuplicate with the
// row, unless the task has finished and given its key up meanwhile: see KeyHold), the transitions through their conditions (a repeat does not apply, or, for
// Start, answers Duplicate with the recorded execution).
type Store interface {
	// Now returns the database's current time: the clock that has the final word on
	// "due". Claim compares DueAt with this clock.
	Now(ctx context.Context) (time.Time, error)

	// Insert writes new SCHEDULED tasks, all in one transaction, and returns one
	// result per input in input order. A task whose (Name, Key) is held by a task
	// that exists (see KeyHold) is not written: its result holds the existing task
	// and ErrDuplicate. A task whose key is held by none is written, and the task that
	// held it last, if any, is marked Superseded in the same transaction; of two
	// Inserts of one key racing, in any number of processes, one writes it and the
	// other answers ErrDuplicate. A returned error means nothing was written.
	Insert(ctx context.Context, tasks []NewTask) ([]Inserted, error)

	// Get returns the task with this id, or ErrNotFound.
	Get(ctx context.Context, id int64) (*Task, error)
	// Lookup returns the newest task with this name and key — the one holding the
	// key, if any — or ErrNotFound.
	Lookup(ctx context.Context, name, key string) (*Task, error)
	// Executions returns the task's executions, oldest first, or ErrNotFound when
	// the task does not exist.
	Executions(ctx context.Context, taskID int64) ([]Execution, error)

	// Cancel moves the task (name, key) from SCHEDULED to CANCELLED and returns it.
	// It returns ErrNotFound, or the unchanged task with ErrNotCancellable.
	Cancel(ctx context.Context, name, key string) (*Task, error)

	// Reschedule moves the SCHEDULED task (name, key) to be due at at, keeping its id,
	// in one conditional write that stamps it with a fresh sequence number, as every
	// write that leaves a row SCHEDULED does (see RefillParams), and returns it. It
	// returns ErrNotFound, or the unchanged task with ErrNotReschedulable. A zero at
	// is ErrInvalid.
	Reschedule(ctx context.Context, name, key string, at time.Time) (*Task, error)

	// Retry moves a FAILED task back to SCHEDULED, due now by the store's clock,
	// with a fresh business retry budget — Attempt and DispatchRetries 0, FinishedAt
	// cleared, LastError kept — in one conditional write that stamps it with a fresh
	// sequence number, and returns it. It returns ErrNotFound, or the unchanged task
	// with ErrNotRetryable (also for a Superseded task: a newer one has its key).
	Retry(ctx context.Context, id int64) (*Task, error)

	// Refill reads what the timing wheel needs: scheduled tasks whose row changed
	// since a sequence cursor, and scheduled tasks that entered the window. See
	// [RefillParams]. Its cost grows with the rows it returns, not with the table.
	Refill(ctx context.Context, p RefillParams) (*RefillResult, error)

	// Claim moves the given tasks from SCHEDULED to DISPATCHING, each with its new
	// execution id, if and only if DueAt <= Now. It sets DispatchedAt. A row locked by
	// another transaction is waited for, not skipped, so every task asked for is
	// either claimed, NotDue, Skipped, Blocked, or no longer SCHEDULED (or not
	// visible yet).
	//
	// A due task with a TaskKey and Overlap skip or queue is claimed only if no other
	// task with that key is DISPATCHING or RUNNING, and of several such tasks in one
	// call only the first in (DueAt, ID) order is. The check is part of the claiming
	// write: concurrent Claims, in any number of processes, never leave two tasks of
	// one key DISPATCHING or RUNNING. A task that loses is, by its policy, SKIPPED
	// (FinishedAt set, LastError naming the key and the task holding it) or left
	// SCHEDULED and reported Blocked. A task with Overlap allow ignores the key and
	// takes no lock for it: it counts as a holder once claimed, but a claim racing
	// with it is not serialised, so one key should not mix allow with the others.
	//
	// Claim is a leader-only write: it applies only if fence admits it (see [Fence]),
	// checked in the claiming transaction, else it fails with ErrFenced.
	Claim(ctx context.Context, fence Fence, claims []Claim) (*ClaimResult, error)

	// ClaimStart is Claim for a scheduler that runs tasks itself: claim and start in one
	// write. Each task of a claim with Start set that Claim would move to DISPATCHING,
	// whose Name is one of on.Handlers and whose key does not restrict it (no TaskKey,
	// or Overlap allow), goes instead from SCHEDULED straight to RUNNING, in the
	// claiming statement or transaction: DispatchedAt, StartedAt and HeartbeatAt are
	// set to one time, and its execution is recorded (status RUNNING, Node on.Node) as
	// Start records it. Those tasks are returned in Started; every other outcome is
	// Claim's. So no handler can start before its execution record is durable, and the
	// fence is checked in the same write. Claim is ClaimStart with the zero StartOn.
	// Handlers with an empty on.Node are ErrInvalid.
	ClaimStart(ctx context.Context, fence Fence, on StartOn, claims []Claim) (*ClaimResult, error)

	// Trigger moves one task from SCHEDULED or FAILED to DISPATCHING now, bypassing
	// DueAt, with a new execution id; it sets DispatchedAt and TriggeredAt to one
	// and the same time, so that a triggered execution can be told from a claimed
	// one. From FAILED, Attempt grows by one. It returns ErrNotFound, or the unchanged task
	// with ErrNotTriggerable — also when the task's key is held (Overlap skip or
	// queue, as in Claim), with an error naming the task holding it, and when the
	// task is Superseded.
	Trigger(ctx context.Context, id int64, executionID string) (*Task, error)

	// Start records executions and moves their tasks from DISPATCHING to RUNNING,
	// in one transaction. For each input, in input order:
	//   - If the execution id is already recorded, the result is Duplicate with the
	//     recorded execution. Nothing changes.
	//   - If the task is DISPATCHING with this execution id and is named Name, the
	//     record is written (status RUNNING). The task becomes RUNNING with StartedAt
	//     and HeartbeatAt set. The result is Started.
	//   - Otherwise the result is Lost and nothing is written. So a task whose name is
	//     not the one the dispatcher claimed never starts.
	//
	// An empty Name, or one that is not valid UTF-8 or holds a NUL, is ErrInvalid.
	// Executors pass the fence the tasks were claimed under (the zero Fence without
	// an elector). The call applies only if fence admits it, else it fails with
	// ErrFenced and writes nothing: a stale leader's claims never start.
	Start(ctx context.Context, fence Fence, starts []StartParams) ([]StartResult, error)

	// Heartbeat stamps HeartbeatAt on running executions and their tasks. It
	// returns, in input order, whether each task is still RUNNING with that execution
	// id.
	Heartbeat(ctx context.Context, refs []ExecRef) ([]bool, error)

	// Finish records the results of running executions: for each task that is
	// RUNNING with the given execution id, it applies the outcome (see [Finish]) and
	// closes the execution record. It returns, in input order, whether each applied.
	// Executors pass the zero Fence; recovery, declaring executions orphaned, passes
	// the leader's, and then the call applies only if fence admits it (else
	// ErrFenced).
	Finish(ctx context.Context, fence Fence, results []Finish) ([]bool, error)

	// Requeue hands back tasks that could not be dispatched: each task that is
	// DISPATCHING with the given execution id goes back to SCHEDULED at DueAt with
	// DispatchRetries+1 and LastError set, or to FAILED when DispatchRetries+1 exceeds
	// MaxDispatchRetries. Attempt is unchanged. It returns, in input order, whether
	// each applied. The call applies only if fence admits it (else ErrFenced).
	Requeue(ctx context.Context, fence Fence, requeues []Requeue) ([]bool, error)

	// Stale lists up to limit tasks stuck in a state since before a time: RUNNING
	// tasks whose HeartbeatAt is before it, or DISPATCHING tasks whose DispatchedAt
	// is before it, oldest first. Other statuses are ErrInvalid.
	Stale(ctx context.Context, status Status, before time.Time, limit int) ([]Task, error)

	// RegisterSchedules upserts schedule definitions, in one transaction, and
	// returns the stored schedules in input order. A new schedule starts at its
	// NextFireAt, not paused. An existing one takes the new Overlap, Misfire and
	// Payload and keeps Paused and LastFireAt; if its Spec or TimeZone changed, it
	// takes those and the given NextFireAt, otherwise it keeps its NextFireAt.
	RegisterSchedules(ctx context.Context, defs []ScheduleDef) ([]Schedule, error)

	// Schedules returns every stored schedule, by name.
	Schedules(ctx context.Context) ([]Schedule, error)

	// PauseSchedule marks the schedule paused and cancels its occurrences still
	// SCHEDULED (tasks whose Name and TaskKey are the schedule's name), in one
	// transaction, and returns the schedule. It returns ErrNotFound for an unknown
	// name. Pausing a paused schedule changes nothing.
	PauseSchedule(ctx context.Context, name string) (*Schedule, error)

	// DeleteSchedule removes the schedule and cancels its occurrences still SCHEDULED
	// (tasks whose Name and TaskKey are the schedule's name: CANCELLED, FinishedAt
	// set, as PauseSchedule leaves them), in one transaction, and returns how many it
	// cancelled. Occurrences DISPATCHING or RUNNING are left to finish. It returns
	// ErrNotFound for an unknown name and ErrInvalid for an empty one. Once it
	// returns, FireSchedule of the name does not apply, and RegisterSchedules of the
	// name creates a new schedule, at its NextFireAt and not paused.
	DeleteSchedule(ctx context.Context, name string) (cancelled int, err error)

	// ResumeSchedule clears a paused schedule's flag and sets its NextFireAt to next,
	// so that slots missed while paused are not fired; a schedule that is not paused
	// is left alone. It returns the schedule, or ErrNotFound. When the stored
	// NextFireAt is before next, it records in the same transaction the gap of the
	// slots passed over, [NextFireAt, next), with Why GapPaused and Result
	// PausedResult (see SlotHistory).
	ResumeSchedule(ctx context.Context, name string, next time.Time) (*Schedule, error)

	// FireSchedule materialises occurrences: if the schedule exists, is not paused
	// and its NextFireAt equals p.Expect, then in one transaction NextFireAt becomes
	// p.Next, LastFireAt p.Last (unless zero), p.Tasks are inserted as Insert
	// does (an occurrence already stored is ErrDuplicate in its result, not an
	// error) and p.Gaps are recorded (see SlotHistory). Otherwise nothing is written and Applied is false: another scheduler
	// got there first, or an operator paused it. It fails with ErrFenced, writing
	// nothing, unless p.Fence admits it.
	FireSchedule(ctx context.Context, p FireParams) (*FireResult, error)

	// RaiseFence records a new leader of namespace in its ax_leader row, so that every
	// write fenced with an older leader's token fails from now on. Unless the row
	// already records holder with epoch token (elect/sqllease acquired the lease so,
	// or this call repeats one whose answer was lost), it sets the holder to holder and
	// the epoch to max(token, epoch+1) — strictly above every epoch recorded before,
	// whatever token is (a Redis that lost its data hands out small tokens again) — in
	// one write that waits for the fenced writes in flight. It returns the Fence the
	// new leader's writes carry. It leaves the lease's expiry alone (a row it creates
	// holds no live lease). namespace and holder must be non-empty and token positive,
	// else ErrInvalid. A store that keeps a [LeadershipLog] appends, in the same
	// write, the "acquired" change of the epoch it returns, unless that epoch's is
	// recorded already.
	RaiseFence(ctx context.Context, namespace, holder string, token int64) (Fence, error)

	// TaskStats counts the tasks in each status and finds the oldest SCHEDULED task
	// due at or before now (see [TaskStats]), as of one moment where the database
	// allows. It only reads: it takes no write lock and blocks no writer. Its cost
	// grows with the table (the counts read every row), so it is for metrics
	// scraped every few seconds, not for the execution path. A zero now is ErrInvalid.
	TaskStats(ctx context.Context, now time.Time) (*TaskStats, error)

	// Tasks returns the tasks of the view's namespace that q selects, at most q.Limit,
	// in q's order, starting after q.After. It only reads. An invalid q (see
	// [CheckTaskQuery]) is ErrInvalid.
	Tasks(ctx context.Context, q TaskQuery) ([]Task, error)

	// CountTasks counts the tasks of the view's namespace in each status, each count
	// stopping at atMost + 1: a count above atMost is reported as atMost + 1, so that
	// counting stays bounded on a table of tens of millions of rows. Every Status is
	// present, zero included. atMost below 1 is ErrInvalid.
	CountTasks(ctx context.Context, atMost int64) (map[Status]int64, error)

	// StatsKeeper keeps the per-minute execution statistics of the view's namespace.
	StatsKeeper

	// Close releases the store's resources. Calls after Close return ErrClosed.
	Close() error
}

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
// executor's heartbeats and results. A negative Token, or a positive one with an empty Namespace, is ErrInvalid.
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
}

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
type Finish struct {
	TaskID      int64
	ExecutionID string
	Status      Status
	Error       string
	Attempt     int       // Scheduled only
	DueAt       time.Time // Scheduled only
}

// Requeue hands one undispatched task back (see Store.Requeue).
type Requeue struct {
	TaskID             int64
	ExecutionID        string
	DueAt              time.Time
	Error              string
	MaxDispatchRetries int
}

// TxStore is implemented by stores that can write tasks inside a transaction of the
// caller's, so that "create the order" and "schedule its timeout" commit or roll back
// together (ax.WithTx).
type TxStore interface {
	// InsertTx is Insert inside tx, a transaction the caller owns and will commit or
	// roll back: a *sql.Tx on the store's database for every SQL store, and the
	// store's native kinds where it has them (pgx.Tx on PostgreSQL). The tasks become
	// visible if, and only if, tx commits; InsertTx neither commits nor rolls back.
	// A tx of a kind the store cannot use is ErrInvalid. If InsertTx fails, the
	// caller's transaction may be aborted (PostgreSQL): roll it back.
	InsertTx(ctx context.Context, tx any, tasks []NewTask) ([]Inserted, error)

	// CancelTx is Cancel inside tx, as InsertTx is Insert: the task is CANCELLED if,
	// and only if, tx commits, and until then a claim of it waits for tx. A tx on
	// another database or schema than the store's is ErrInvalid, found before
	// anything is written (the caller's transaction is not aborted by it).
	CancelTx(ctx context.Context, tx any, name, key string) (*Task, error)

	// TriggerTx is a trigger inside tx: the SCHEDULED or FAILED task becomes
	// SCHEDULED, due now by the store's clock, with TriggeredAt stamped — from FAILED
	// with one more attempt (Attempt + 1) and FinishedAt cleared — and a fresh
	// sequence number, if and only if tx commits. Unlike Trigger it does not claim the
	// task (no scheduler could start it before the commit): the claim that follows
	// applies its key's overlap rule, as for any due task. It returns ErrNotFound, or
	// the unchanged task with ErrNotTriggerable; a tx elsewhere is ErrInvalid, as for
	// CancelTx. A nil tx runs it in a transaction of the store's own: how a scheduler
	// that will not run the task itself hands it to one that will.
	TriggerTx(ctx context.Context, tx any, id int64) (*Task, error)

	// ClaimTriggerTx is Trigger inside tx: the SCHEDULED or FAILED task becomes
	// DISPATCHING under executionID, as Trigger makes it, if and only if tx commits;
	// the caller dispatches it once tx has committed. Its refusals are Trigger's
	// (KeyHeld included); a tx elsewhere is ErrInvalid, as for CancelTx.
	ClaimTriggerTx(ctx context.Context, tx any, id int64, executionID string) (*Task, error)

	// RescheduleTx is Reschedule inside tx, and RetryTx Retry, as CancelTx is
	// Cancel.
	RescheduleTx(ctx context.Context, tx any, name, key string, at time.Time) (*Task, error)
	RetryTx(ctx context.Context, tx any, id int64) (*Task, error)

	// PauseScheduleTx is PauseSchedule inside tx, and ResumeScheduleTx
	// ResumeSchedule. PauseScheduleTx cancels the occurrences a statement of tx
	// sees after the schedule's row is locked: at READ COMMITTED (InTx's), every
	// occurrence committed before the pause.
	PauseScheduleTx(ctx context.Context, tx any, name string) (*Schedule, error)
	ResumeScheduleTx(ctx context.Context, tx any, name string, next time.Time) (*Schedule, error)

	// GetTx is Get inside tx: the task as tx sees it, its own changes included.
	GetTx(ctx context.Context, tx any, id int64) (*Task, error)

	// AuditTx is Auditor.Audit inside tx: the record is kept if, and only if, tx
	// commits — with the change it records, written in the same transaction.
	AuditTx(ctx context.Context, tx any, rec AuditRecord) (*AuditRecord, error)

	// InTx runs fn in a transaction of the store's own, at READ COMMITTED where the
	// database has levels, and commits it if fn returns nil, else rolls it back and
	// returns fn's error. fn gets the transaction as the Tx methods take it (a
	// pgx.Tx on PostgreSQL, a *sql.Tx on MySQL and SQLite); it must not commit or
	// roll it back, nor write through the store's other methods meanwhile (SQLite:
	// its writer is held by the transaction). fn may be called again, in a new
	// transaction, when the store retries a transient failure (a deadlock). fn must
	// not run or wait for another InTx of the store: a store may bound how many are
	// open at once (PostgreSQL and MySQL: half the pool), or have one writer (SQLite).
	InTx(ctx context.Context, fn func(tx any) error) error
}

// Pruner is implemented by stores that can remove finished tasks, for retention
// (ax.Config.Retention). Every driver of this module implements it.
type Pruner interface {
	// Prune deletes, in one transaction, up to p.Limit tasks of the view's namespace
	// in status p.Status, oldest FinishedAt first: those that finished before
	// p.Before (unless it is zero) and, when p.KeepNewest is positive, those beyond
	// the p.KeepNewest that finished last — but not a task whose KeyUntil is still
	// ahead, which holds its key. Their executions go with them. It returns
	// how many tasks it deleted. The rows are read with the status condition under a
	// row lock, so a task that leaves p.Status meanwhile (a Retry of a FAILED task) is
	// never deleted. A status that is not terminal, a Limit outside [1, MaxPrune], or
	// neither a Before nor a KeepNewest is ErrInvalid.
	Prune(ctx context.Context, p PruneParams) (int, error)
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

// Auditor is implemented by stores that keep the audit log of the operations API
// (package admin): one row per mutating call, allowed or refused, per namespace.
// Every driver of this module implements it.
type Auditor interface {
	// Audit appends rec to the view's namespace's log and returns it with its ID
	// and At (the store's clock) set. A record without an Actor, Action or Result,
	// or with a field longer than MaxAuditText bytes (Reason: MaxAuditReason), is
	// ErrInvalid.
	Audit(ctx context.Context, rec AuditRecord) (*AuditRecord, error)
	// AuditLog returns the records of the view's namespace that match q, newest
	// first (see AuditQuery for the order). A Limit outside [1, MaxQueryLimit], or a
	// Since not before Until when both are set, is ErrInvalid.
	AuditLog(ctx context.Context, q AuditQuery) ([]AuditRecord, error)
	// PruneAudit deletes up to limit records (in [1, MaxPrune]) of the view's
	// namespace older than before, oldest first, and returns how many.
	PruneAudit(ctx context.Context, before time.Time, limit int) (int, error)
}

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

// Notifier is implemented by stores that can signal, soon after a transaction that
// inserted tasks or made them SCHEDULED commits, that a refill would find something
// (PostgreSQL LISTEN/NOTIFY). Signals may be coalesced or lost; the scheduler's
// periodic refill stays the guarantee.
type Notifier interface {
	// Listen calls f, on a goroutine of the store's, for each signal until ctx ends
	// or the listening connection fails; it returns then (nil when ctx ended). The
	// caller re-Listens after an error.
	Listen(ctx context.Context, f func()) error
}

// Leaser is implemented by stores that can hold a leader lease per namespace
// (elect/sqllease): one row of ax_leader per namespace with holder, epoch and expires_at,
// changed only by conditional writes in the store's own clock ([Store.Now]), so that the
// holders' clocks never decide who leads.
//
// The epoch is the fencing token: it never decreases and is never reused. AcquireLease
// raises it by one atomically with the change of holder; ReleaseLease keeps it.
type Leaser interface {
	// AcquireLease takes the namespace's lease for holder for ttl if it is free or
	// expired (expires_at <= now), raising the epoch by one: it returns the lease, with
	// the new epoch and Remaining = ttl, and true. If a lease is live (another holder's,
	// or holder's own) it changes nothing and returns that lease and false. ttl must be
	// positive and holder non-empty, else ErrInvalid.
	AcquireLease(ctx context.Context, namespace, holder string, ttl time.Duration) (LeaseInfo, bool, error)

	// RenewLease sets the expiry of holder's live lease of that epoch to now + ttl; false
	// when the lease is not, or no longer, holder's of that epoch or has expired.
	RenewLease(ctx context.Context, namespace, holder string, epoch int64, ttl time.Duration) (bool, error)

	// ReleaseLease ends holder's live lease of that epoch (it expires now, the epoch is
	// kept), so that the next AcquireLease succeeds at once; false when it is not holder's.
	ReleaseLease(ctx context.Context, namespace, holder string, epoch int64) (bool, error)

	// Lease reads the namespace's lease: the zero LeaseInfo when none was ever taken, and
	// Remaining <= 0 when it expired or was released (Holder and Epoch are the last ones).
	Lease(ctx context.Context, namespace string) (LeaseInfo, error)
}

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

// Namespaced is implemented by stores that can keep several namespaces apart on one
// database, so that services sharing it have separate tasks, schedules, nodes and
// audit logs.
//
// A store as opened is the view of DefaultNamespace; InNamespace returns the view of
// another. Every method of a view reads and writes only the view's rows, except those
// that name their namespace explicitly: the Leaser's, RaiseFence, and the Fence the
// transitions check, so leaders are separate too. Another namespace's row is as good
// as missing: its id is ErrNotFound, or left out of a batch's result (Lost for Start,
// false for the others). An execution id is recorded once across namespaces, and
// another namespace's execution is not a Duplicate to Start: it is Lost. The business
// key is unique per namespace: (namespace, name, key). A view shares the store's
// connections and its Close: closing one closes all.
type Namespaced interface {
	// InNamespace returns the view of namespace ns: non-empty, at most MaxNamespace
	// bytes, no white space, else ErrInvalid.
	InNamespace(ns string) (Store, error)
}

// NodeRegistry is implemented by stores that keep the registry of executors (ax_nodes):
// one row per (namespace, node), refreshed by each replica's heartbeat and read by the
// leader to route tasks. Times are the store's ([Store.Now]).
type NodeRegistry interface {
	// RegisterNode writes the node's row (inserting it or replacing every field of an
	// existing one, ClockOffset included) with HeartbeatAt = now, and StartedAt = now
	// when the row is new or n.StartedAt is zero. An empty name, a negative capacity or in-flight count, or a
	// handler name that is empty or holds a line break, is ErrInvalid.
	RegisterNode(ctx context.Context, n NodeInfo) error

	// Nodes returns the nodes whose heartbeat is newer than now − aliveWithin, by name.
	// aliveWithin must be positive, else ErrInvalid.
	Nodes(ctx context.Context, aliveWithin time.Duration) ([]NodeInfo, error)

	// RemoveNode deletes the node's row (a replica stopping); a missing one is not an
	// error.
	RemoveNode(ctx context.Context, name string) error

	// ExpireNodes deletes the rows whose heartbeat is older than now − deadFor and
	// returns how many; deadFor must be positive, else ErrInvalid.
	ExpireNodes(ctx context.Context, deadFor time.Duration) (int, error)
}

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

// LeadershipLog is implemented by stores that keep each namespace's leadership history
// (the console's cluster page): who led, under which epoch, from when, and why the
// leader changed. Every driver of this module implements it.
//
// A term has two changes. Its "acquired" change is appended by RaiseFence, in the write
// that raises the epoch, so no leader writes under a fence the history lacks. Its
// "ended" change is appended by the leader when the term ends; a leader that crashed,
// or lost the store, records none, and the next "acquired" change says so. A change is
// identified by (Namespace, Epoch, Kind): appending one twice keeps the first.
type LeadershipLog interface {
	// EndLeadership appends the "ended" change of holder's term of epoch to
	// namespace's history, stamped by the store's clock, unless that term's end is
	// recorded already (then it changes nothing). An invalid namespace (see
	// InNamespace), an empty holder or one over MaxLeadershipHolder bytes, an epoch
	// below 1, a reason over MaxLeadershipReason bytes, or text not UTF-8 or with a
	// NUL, is ErrInvalid.
	EndLeadership(ctx context.Context, namespace, holder string, epoch int64, reason string) error

	// LeadershipHistory returns the newest n changes of namespace, newest first: by
	// epoch descending, a term's end before its start. It reads at most n rows of an
	// index. An invalid namespace, or n outside [1, MaxLeadershipHistory], is
	// ErrInvalid.
	LeadershipHistory(ctx context.Context, namespace string, n int) ([]LeadershipChange, error)

	// PruneLeadership deletes, in one statement or transaction, up to limit of the
	// oldest changes of namespace, in the history's order: from the oldest on, each
	// change that is beyond the newest keepNewest (when keepNewest is positive) or was
	// recorded before before (unless it is zero), stopping at the first that is
	// neither. It returns how many it deleted. An invalid namespace, a limit outside
	// [1, MaxPrune], a negative keepNewest, or neither a before nor a keepNewest, is
	// ErrInvalid.
	PruneLeadership(ctx context.Context, namespace string, before time.Time, keepNewest, limit int) (int, error)
}

// LeadershipChange is one change of a namespace's leader, as a LeadershipLog records it.
type LeadershipChange struct {
	Namespace string
	Epoch     int64 // the term's fencing epoch (Fence.Token)
	// Holder is the leader, as RaiseFence recorded it: an elector's holder value
	// (elect.Lease.Holder; elect.Candidate reads the candidate's name in it).
	Holder string
	Kind   string    // LeadershipAcquired or LeadershipEnded
	At     time.Time // when it was recorded, by the store's clock
	// Reason says why: for "acquired", how the previous term ended, as far as the
	// history knows; for "ended", the cause the leader gave.
	Reason string
}

// The kinds of a LeadershipChange.
const (
	LeadershipAcquired = "acquired" // a term began: its leader raised the fence
	LeadershipEnded    = "ended"    // a term ended, as its leader recorded
)

// The limits of a LeadershipLog: the most changes one LeadershipHistory returns, and
// the longest Holder and Reason, in bytes.
const (
	MaxLeadershipHistory = 100
	MaxLeadershipHolder  = 500
	MaxLeadershipReason  = 1000
)
