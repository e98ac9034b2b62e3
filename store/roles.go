package store

import (
	"context"
	"time"
)

// Store is the contract a driver implements: every role below, over the rows of one
// namespace. Implementations must be safe for concurrent use by several goroutines
// and, when the database is shared, by several processes.
//
// Times passed in are absolute and already in the scheduler's clock. Times the store
// stamps on its own (CreatedAt, UpdatedAt, StartedAt, …) come from [Clock.Now]'s clock.
// Every state change is a conditional write: a row whose condition fails is left out
// of the result, and nothing about it changes.
//
// On a network database an error can leave the outcome unknown (the connection failed
// during COMMIT), so the caller must not assume nothing was written. Every write is
// safe to repeat. Insert is repeated through the business key: a repeat answers
// ErrDuplicate with the row, unless the task has finished and given its key up
// meanwhile (see KeyHold). The transitions are repeated through their conditions: a
// repeat does not apply, or, for Start, answers Duplicate with the recorded execution.
//
// Three capabilities are optional, because a database may lack them: [Transactor]
// (writes inside a transaction), [Notifier] (signals of new work) and [Marker]
// (signals that name their sender).
type Store interface {
	Clock
	TaskWriter
	TaskReader
	Queue
	ScheduleKeeper
	NameKeeper
	SlotHistory
	Fencer
	Leaser
	NodeRegistry
	Auditor
	StatsKeeper
	Pruner

	// InNamespace returns the view of namespace ns: non-empty, at most MaxNamespace
	// bytes, no white space, else ErrInvalid. See "Namespaces" in the package doc.
	// The scheduler works on its namespace's view, so a store that wraps another
	// (to count, bound or fail its calls) wraps the views it returns too.
	InNamespace(ns string) (Store, error)

	// Close releases the store's resources. Calls after Close return ErrClosed.
	Close() error
}

// Clock is the database's clock: the one that has the final word on "due".
type Clock interface {
	// Now returns the database's current time: the clock that has the final word on
	// "due". Claim compares DueAt with this clock.
	Now(ctx context.Context) (time.Time, error)
}

// TaskWriter submits tasks and acts on them: the writes of a task's life that a
// caller, not the kernel, asks for. A [Tx] has the same methods, run in its
// transaction.
type TaskWriter interface {
	// Insert writes new SCHEDULED tasks, all in one transaction, and returns one
	// result per input in input order. A task whose (Name, Key) is held by a task
	// that exists (see KeyHold) is not written: its result holds the existing task
	// and ErrDuplicate. A task whose key is held by none is written, and the task that
	// held it last, if any, is marked Superseded in the same transaction; of two
	// Inserts of one key racing, in any number of processes, one writes it and the
	// other answers ErrDuplicate. A returned error means nothing was written.
	Insert(ctx context.Context, tasks []NewTask) ([]Inserted, error)

	// Cancel cancels the task (name, key) and returns it, with by (who asked) in
	// CancelledBy and the store's time in CancelRequestedAt:
	//   - SCHEDULED or DISPATCHING: it becomes CANCELLED at once, FinishedAt set. A
	//     DISPATCHING task's execution never starts: Start answers Lost, and its
	//     hand-back (Requeue) does not apply.
	//   - RUNNING: it stays RUNNING with its cancel requested: Heartbeat answers
	//     BeatCancel for its execution, and Finish ends it CANCELLED unless its handler
	//     succeeded (see [Finish]). Cancelling it again changes nothing and returns it.
	//
	// It returns ErrNotFound, or the unchanged task with ErrNotCancellable (a finished
	// one). An empty by, one over MaxCancelledBy bytes, or one not UTF-8 or holding a
	// NUL, is ErrInvalid.
	Cancel(ctx context.Context, name, key, by string) (*Task, error)

	// Reschedule moves the SCHEDULED task (name, key) to be due at at, keeping its id,
	// in one conditional write that stamps it with a fresh sequence number, as every
	// write that leaves a row SCHEDULED does (see RefillParams), and returns it. It
	// returns ErrNotFound, or the unchanged task with ErrNotReschedulable. A zero at
	// is ErrInvalid.
	Reschedule(ctx context.Context, name, key string, at time.Time) (*Task, error)

	// Retry moves a FAILED task back to SCHEDULED, due now by the store's clock,
	// with a fresh business retry budget — Attempt, DispatchRetries and Snoozes 0,
	// FinishedAt cleared, LastError kept — in one conditional write that stamps it with a fresh
	// sequence number, and returns it. It returns ErrNotFound, or the unchanged task
	// with ErrNotRetryable (also for a Superseded task: a newer one has its key).
	Retry(ctx context.Context, id int64) (*Task, error)

	// Trigger moves one task from SCHEDULED or FAILED to DISPATCHING now, bypassing
	// DueAt, with a new execution id; it sets DispatchedAt and TriggeredAt to one
	// and the same time, so that a triggered execution can be told from a claimed
	// one. From FAILED, Attempt grows by one. It returns ErrNotFound, or the unchanged task
	// with ErrNotTriggerable — also when the task's key is held (Overlap skip or
	// queue, as in Claim), with an error naming the task holding it, and when the
	// task is Superseded. A task whose name has a concurrency limit is not moved to
	// DISPATCHING, which could exceed the limit: Trigger makes it due as MakeDue does
	// and returns it SCHEDULED, for a claim to apply the limit. So is one whose name
	// has a rate limit, or a key concurrency above 1 (its key free or not).
	Trigger(ctx context.Context, id int64, executionID string) (*Task, error)

	// MakeDue makes the SCHEDULED or FAILED task due now by the store's clock,
	// without claiming it: it stays (or becomes) SCHEDULED with TriggeredAt stamped
	// — from FAILED with one more attempt (Attempt + 1) and FinishedAt cleared — and
	// a fresh sequence number. The claim that follows applies its key's overlap
	// rule, as for any due task. It is how a scheduler that will not run the task
	// itself hands it to one that will, and how a transaction triggers (no scheduler
	// could start the task before the commit). It returns ErrNotFound, or the
	// unchanged task with ErrNotTriggerable (also when the task is Superseded).
	MakeDue(ctx context.Context, id int64) (*Task, error)
}

// TaskReader reads tasks and their executions. It only reads.
type TaskReader interface {
	// Get returns the task with this id, or ErrNotFound.
	Get(ctx context.Context, id int64) (*Task, error)
	// Lookup returns the newest task with this name and key — the one holding the
	// key, if any — or ErrNotFound.
	Lookup(ctx context.Context, name, key string) (*Task, error)
	// Executions returns the task's executions, oldest first, or ErrNotFound when
	// the task does not exist.
	Executions(ctx context.Context, taskID int64) ([]Execution, error)

	// Tasks returns the tasks of the view's namespace that q selects, at most q.Limit,
	// in q's order, starting after q.After. It only reads. An invalid q (see
	// [CheckTaskQuery]) is ErrInvalid.
	Tasks(ctx context.Context, q TaskQuery) ([]Task, error)

	// CountTasks counts the tasks of the view's namespace in each status, each count
	// stopping at atMost + 1: a count above atMost is reported as atMost + 1, so that
	// counting stays bounded on a table of tens of millions of rows. Every Status is
	// present, zero included. atMost below 1 is ErrInvalid.
	CountTasks(ctx context.Context, atMost int64) (map[Status]int64, error)

	// TaskStats counts the tasks in each status and finds the oldest SCHEDULED task
	// due at or before now (see [TaskStats]), as of one moment where the database
	// allows. It only reads: it takes no write lock and blocks no writer. Its cost
	// grows with the table (the counts read every row), so it is for metrics
	// scraped every few seconds, not for the execution path. A zero now is ErrInvalid.
	TaskStats(ctx context.Context, now time.Time) (*TaskStats, error)
}

// Queue is the kernel's path through the store: the timing wheel's refill, the claim,
// and an execution's start, heartbeat and finish, with the hand-back of what could not
// be dispatched and the search for what was orphaned.
type Queue interface {
	// Refill reads what the timing wheel needs: scheduled tasks whose row changed
	// since a sequence cursor, and scheduled tasks that entered the window. See
	// [RefillParams]. Its cost grows with the rows it returns, not with the table.
	Refill(ctx context.Context, p RefillParams) (*RefillResult, error)

	// Claim moves the given tasks from SCHEDULED to DISPATCHING, each with its new
	// execution id, if and only if DueAt <= Now. It sets DispatchedAt. A row locked by
	// another transaction is waited for, not skipped, so every task asked for is
	// either claimed, NotDue, Skipped, Blocked, Paused, or no longer SCHEDULED (or not
	// visible yet).
	//
	// A due task whose name is paused (NameKeeper) is left SCHEDULED and reported
	// Paused, whatever its key: the check is part of the claiming write, so a Claim
	// that begins after PauseName returned claims none of the name's tasks.
	//
	// A due task whose name has a concurrency limit n (NameKeeper.SetConcurrency) is
	// claimed only while fewer than n tasks of the name are DISPATCHING or RUNNING in
	// the namespace, counting those the call claims, which are the first in (DueAt, ID)
	// order; the others are left SCHEDULED and reported Limited, with n. The check is
	// part of the claiming write, serialised per name: concurrent Claims, in any number
	// of processes, never leave more than n tasks of the name DISPATCHING or RUNNING.
	// A limited name's tasks are claimed DISPATCHING, never started by ClaimStart. A
	// task whose key restricts it (below) must also find its key free: a held key
	// decides first (skipped or Blocked), then the name's limit.
	//
	// A due task whose name has a rate limit of n per period (NameKeeper.SetRate) is
	// claimed only while fewer than n of the name's tasks were claimed in the closed
	// window [now − period, now] of the store's clock, counting those the call claims,
	// in (DueAt, ID) order; the others are left SCHEDULED and reported Limited, with
	// n and RetryAt, when the window admits the next. A claim's time, the DispatchedAt
	// it writes, is its execution's start for the rate: in no window of period do more
	// than n of the name's executions start (their records' ClaimedAt), across any
	// number of processes. Such claims serialise per name as for a concurrency limit,
	// and record their times with the name (the last n). A name may have both limits.
	//
	// A due task whose key restricts it (below) and whose name has a rate limit per
	// task key of n per period (NameKeeper.SetKeyRate) is claimed only while fewer
	// than n of the name's tasks with that key were claimed in the closed window
	// [now − period, now], counted as for a name's rate; the others are left
	// SCHEDULED and reported Limited, with n, RetryAt and their TaskKey. Such claims
	// serialise on the key, and record their times per name and key (the last n),
	// kept until no window can reach them (Pruner.PruneKeyStarts). The key's holders
	// decide first, then the name's limits, then its rate per key.
	//
	// A due task with a TaskKey and Overlap skip or queue is claimed only if no other
	// task with that key is DISPATCHING or RUNNING, and of several such tasks in one
	// call only the first in (DueAt, ID) order is. The check is part of the claiming
	// write: concurrent Claims, in any number of processes, never leave two tasks of
	// one key DISPATCHING or RUNNING. A task that loses is, by its policy, SKIPPED
	// (FinishedAt set, LastError naming the key and the task holding it) or left
	// SCHEDULED and reported Blocked. A skipped task's LastError is exactly
	// fmt.Sprintf("skipped: task key %q held by task %d", key, holderID). A task
	// whose name has a key concurrency n above 1 (NameKeeper.SetKeyConcurrency) is
	// claimed while fewer than n tasks with its key, of any name, are DISPATCHING or
	// RUNNING, counting those the call claims; the others lose as above, their
	// LastError naming the key's lowest holder. A task with Overlap allow ignores the
	// key and takes no lock for it: it counts as a holder once claimed, but a claim
	// racing with it is not serialised, so one key should not mix allow with the
	// others.
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
	// returns, in input order, what it found of each (see [Beat]): BeatGone when the
	// task is no longer RUNNING with that execution id (nothing is stamped), else
	// BeatAlive, or BeatCancel when the task's cancel was requested (Cancel).
	Heartbeat(ctx context.Context, refs []ExecRef) ([]Beat, error)

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
}

// ScheduleKeeper stores periodic schedules and fires their occurrences.
type ScheduleKeeper interface {
	// RegisterSchedules upserts schedule definitions, in one transaction, and
	// returns the stored schedules in input order. A new schedule starts at its
	// NextFireAt, not paused. An existing one takes the new Overlap, Misfire, Payload
	// and Trace and keeps Paused and LastFireAt; if its Spec or TimeZone changed, it
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

	// FireSchedule materialises occurrences: if the schedule exists, is not paused and
	// its NextFireAt equals p.Expect, then in one transaction NextFireAt becomes
	// p.Next, LastFireAt p.Last (unless zero), p.Tasks are inserted as Insert does (an
	// occurrence already stored is ErrDuplicate in its result, not an error) and p.Gaps
	// are recorded (see SlotHistory). Otherwise nothing is written and Applied is
	// false: another scheduler got there first, or an operator paused it. It fails with
	// ErrFenced, writing nothing, unless p.Fence admits it.
	FireSchedule(ctx context.Context, p FireParams) (*FireResult, error)
}

// NameKeeper keeps what operators set per task name in a namespace (ax_names): whether
// the name is paused, its concurrency limit and its rate limit. A paused name's due tasks are not
// claimed: Claim leaves them SCHEDULED and reports them Paused, so they wait, and
// count as late, until the name is resumed. Trigger, an operator's own act, is not
// held back. A limited name's tasks are claimed only while it has a free slot and its
// rate admits them (see Claim).
type NameKeeper interface {
	// PauseName pauses the task name in the view's namespace, recording by (who
	// asked) and the store's time, and returns its state. Every Claim that begins
	// after it returns leaves the name's due tasks SCHEDULED. Pausing a paused name
	// changes nothing. An empty name, one over MaxNameLen bytes, an empty by, one over
	// MaxCancelledBy bytes, or text that is not UTF-8 or holds a NUL, is ErrInvalid.
	PauseName(ctx context.Context, name, by string) (*NameState, error)

	// ResumeName resumes the paused task name, recording by and the store's time, and
	// in the same transaction stamps each of its SCHEDULED tasks with a fresh sequence
	// number (see RefillParams), so that a refill brings back to the timing wheel the
	// due tasks a claim left out while it was paused: they then run in due order. Its
	// cost grows with the name's SCHEDULED tasks. Resuming a name that is not paused
	// changes nothing and returns its state (the zero state, with Name, when it was
	// never paused). Invalid input is ErrInvalid, as for PauseName.
	ResumeName(ctx context.Context, name, by string) (*NameState, error)

	// SetConcurrency sets the name's concurrency limit to n (0: none), recording by and
	// the store's time, and returns its state. Every Claim that begins after it
	// returns applies it. Lowering a limit below the tasks in flight stops nothing: no
	// task of the name is claimed until fewer than n are. Setting the limit it has
	// changes nothing. n below 0 or above MaxConcurrency, or invalid text as for
	// PauseName, is ErrInvalid.
	SetConcurrency(ctx context.Context, name string, n int, by string) (*NameState, error)

	// SetRate sets the name's rate limit to n claims per period per (n 0: none, and per
	// ignored), recording by and the store's time, and returns its state. Every Claim
	// that begins after it returns applies it; the claims of the name recorded before
	// count toward it (none, when it had no rate limit). Setting the limit it has
	// changes nothing. n below 0 or above MaxRate, a per outside [MinRatePer,
	// MaxRatePer] with n above 0, or invalid text as for PauseName, is ErrInvalid.
	SetRate(ctx context.Context, name string, n int, per time.Duration, by string) (*NameState, error)

	// SetKeyConcurrency sets how many of the name's tasks sharing a task key may be
	// DISPATCHING or RUNNING at once (see Claim) — n of 0 or 1 restores the rule of
	// one — recording by and the store's time, and returns its state. Every Claim
	// that begins after it returns applies it. n below 0 or above MaxConcurrency, or
	// invalid text as for PauseName, is ErrInvalid.
	SetKeyConcurrency(ctx context.Context, name string, n int, by string) (*NameState, error)

	// SetKeyRate sets the name's rate limit per task key to n claims per period per
	// for each task key (n 0: none, and per ignored; see Claim), recording by and the
	// store's time, and returns its state. It applies to the name's tasks whose key
	// restricts them (a TaskKey with Overlap skip or queue). Every Claim that begins
	// after it returns applies it; the claims recorded per key before count toward
	// it. Invalid input is ErrInvalid, as for SetRate.
	SetKeyRate(ctx context.Context, name string, n int, per time.Duration, by string) (*NameState, error)

	// Names returns the state of every name of the view's namespace that was ever
	// paused or limited, by name, with the slots in use of each limited one
	// (InFlight), counted as Claim counts them. It only reads.
	Names(ctx context.Context) ([]NameState, error)
}

// SlotHistory accounts for every slot of a schedule, for the console's schedule page:
// the gaps FireSchedule and ResumeSchedule record, and the reads of occurrences by
// their business keys.
//
// A slot of a schedule is either an occurrence (a task named after the schedule, keyed
// by the slot) or inside a gap: a run of slots the schedule was advanced past without
// writing an occurrence. FireSchedule records the gaps of FireParams.Gaps with the
// compare-and-set that advances the schedule, and ResumeSchedule the gap of the slots
// that passed while the schedule was paused, in the transaction that resumes it: a
// schedule never moves past a slot without either.
type SlotHistory interface {
	// SlotGaps returns the gaps of schedule name, in the view's namespace, that
	// overlap [from, to]: From <= to and Until > from. The newest come first (by
	// Until, then ID, descending), at most limit of them. A limit outside [1,
	// MaxQueryLimit], or from after to, is ErrInvalid. It only reads.
	SlotGaps(ctx context.Context, name string, from, to time.Time, limit int) ([]SlotGap, error)

	// TasksByKeys returns the tasks named name whose Key is one of keys (at most
	// MaxKeys of them), in the view's namespace, by ID. A key can have several
	// tasks (a task that gave its key up, and the one that took it: see KeyHold);
	// all are returned. It reads through the business key's index: one lookup per
	// key. More than MaxKeys keys, or a key that is not valid UTF-8 or holds a NUL,
	// is ErrInvalid.
	TasksByKeys(ctx context.Context, name string, keys []string) ([]Task, error)

	// TasksByKeyRange returns up to limit tasks named name whose Key k has from <= k
	// < before (byte-wise), in the view's namespace, the greatest keys first (then
	// ID descending): a range scan of the business key's index. An empty range, a
	// bound that is not valid UTF-8 or holds a NUL, or a limit outside [1,
	// MaxQueryLimit] is ErrInvalid.
	TasksByKeyRange(ctx context.Context, name, from, before string, limit int) ([]Task, error)
}

// Fencer records each namespace's leaders: the epoch every leader-only write is
// checked against (see [Fence]), and the history of who led.
//
// A term has two changes in the history. Its "acquired" change is appended by
// RaiseFence, in the write that raises the epoch, so no leader writes under a fence
// the history lacks. Its "ended" change is appended by the leader when the term ends;
// a leader that crashed, or lost the store, records none, and the next "acquired"
// change says so. A change is identified by (Namespace, Epoch, Kind): appending one
// twice keeps the first.
type Fencer interface {
	// RaiseFence records a new leader of namespace in its ax_leader row, so that every
	// write fenced with an older leader's token fails from now on. Unless the row
	// already records holder with epoch token (elect/sqllease acquired the lease so, or
	// this call repeats one whose answer was lost), it sets the holder to holder and
	// the epoch to max(token, epoch+1) — strictly above every epoch recorded before,
	// whatever token is (a Redis that lost its data hands out small tokens again) — in
	// one write that waits for the fenced writes in flight. It returns the Fence the
	// new leader's writes carry. It leaves the lease's expiry alone (a row it creates
	// holds no live lease). namespace and holder must be non-empty and token positive,
	// else ErrInvalid. It appends, in the same write, the "acquired" change of the
	// epoch it returns, unless that epoch's is recorded already.
	RaiseFence(ctx context.Context, namespace, holder string, token int64) (Fence, error)

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
}

// Leaser holds a leader lease per namespace (elect/sqllease): one row of ax_leader per
// namespace with holder, epoch and expires_at, changed only by conditional writes in
// the store's own clock ([Clock.Now]), so that the holders' clocks never decide who
// leads.
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

// NodeRegistry keeps the registry of executors (ax_nodes): one row per (namespace,
// node), refreshed by each replica's heartbeat and read by the leader to route tasks.
// Times are the store's ([Clock.Now]).
type NodeRegistry interface {
	// RegisterNode writes the node's row (inserting it or replacing every field of an
	// existing one, ClockOffset included) with HeartbeatAt = now, and StartedAt = now
	// when the row is new or n.StartedAt is zero. An empty name, a negative capacity or
	// in-flight count, or a handler name that is empty or holds a line break, is
	// ErrInvalid.
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

// Auditor keeps the audit log of the operations API (package admin): one row per
// mutating call, allowed or refused, per namespace.
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
}

// StatsKeeper keeps per-minute, per-node execution statistics (ax_stats): what each
// replica's executions did in each minute, so that a console reads an hour of the
// whole cluster's history in one bounded query instead of scanning the executions.
type StatsKeeper interface {
	// WriteStats upserts rows in the view's namespace. A row replaces the stored row
	// of (namespace, Node, Minute), whatever it held: the writer sends its cumulative
	// totals for that minute, so a repeated write (an unknown outcome retried) changes
	// nothing. All rows are written in one transaction. No rows is a no-op. More than
	// MaxStatsRows rows, two rows of one (Node, Minute), or a row that CheckStats
	// refuses is ErrInvalid, and nothing is written.
	WriteStats(ctx context.Context, rows []MinuteStats) error

	// Stats returns the rows of every node of the view's namespace whose Minute is at
	// or after since, ordered by (Minute, Node), at most MaxStatsRead of them: when
	// more match, the newest minutes are kept. It reads through the primary key
	// (namespace, minute, node). A zero since is ErrInvalid.
	Stats(ctx context.Context, since time.Time) ([]MinuteStats, error)
}

// Pruner deletes what retention (ax.Config.Retention) no longer keeps: finished tasks,
// audit records, statistics, gaps of schedules and leadership changes. Each call is
// bounded: it deletes at most its limit, in [1, MaxPrune].
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

	// PruneAudit deletes up to limit records (in [1, MaxPrune]) of the view's
	// namespace older than before, oldest first, and returns how many.
	PruneAudit(ctx context.Context, before time.Time, limit int) (int, error)

	// PruneStats deletes up to limit rows (in [1, MaxPrune]) of the view's namespace
	// whose Minute is before before, oldest first, and returns how many. A zero
	// before is ErrInvalid.
	PruneStats(ctx context.Context, before time.Time, limit int) (int, error)

	// PruneKeyStarts deletes up to limit (in [1, MaxPrune]) of the view's namespace's
	// claim times kept per task name and key for rates per key (NameKeeper.SetKeyRate)
	// whose last claim is at least MaxRatePer before the store's time, so that no
	// window reaches it, and returns how many (name, key) records it deleted.
	PruneKeyStarts(ctx context.Context, limit int) (int, error)

	// PruneSlotGaps deletes up to limit gaps (in [1, MaxPrune]) of the view's
	// namespace whose Until is at or before before, oldest Until first, and returns
	// how many. A zero before is ErrInvalid.
	PruneSlotGaps(ctx context.Context, before time.Time, limit int) (int, error)

	// PruneLeadership deletes, in one statement or transaction, up to limit of the
	// oldest changes of namespace, in the history's order: from the oldest on, each
	// change that is beyond the newest keepNewest (when keepNewest is positive) or was
	// recorded before before (unless it is zero), stopping at the first that is
	// neither. It returns how many it deleted. An invalid namespace, a limit outside
	// [1, MaxPrune], a negative keepNewest, or neither a before nor a keepNewest, is
	// ErrInvalid.
	PruneLeadership(ctx context.Context, namespace string, before time.Time, keepNewest, limit int) (int, error)
}

// Notifier is implemented by stores that can signal, soon after a transaction commits,
// that a refill would find something (it inserted tasks or made them SCHEDULED:
// SignalWork), or that a slot of a name's concurrency limit freed (Finish ended a
// task of a name with a concurrency limit: SignalFreed; a hand-back or a recovery
// does not signal) — PostgreSQL LISTEN/NOTIFY. Signals may be
// coalesced or lost; the scheduler's periodic refill and retries stay the guarantee.
type Notifier interface {
	// Listen calls f, on a goroutine of the store's, for each signal until ctx ends
	// or the listening connection fails; it returns then (nil when ctx ended). The
	// caller re-Listens after an error.
	Listen(ctx context.Context, f func(Signal)) error
}

// Signal is what a Notifier's signal says.
type Signal int

// The signals.
const (
	SignalWork   Signal = iota // tasks were inserted or made SCHEDULED: a refill would find them
	SignalFreed                // Finish ended a task of a name with a concurrency limit
	SignalMarked               // tasks were inserted through a view with the listening view's mark (Marker)
)

// Marker is implemented by a Notifier that can tell a listener the signals of its
// own inserts from the others' (PostgreSQL). A scheduler puts the tasks it submits in
// its wheel as it writes them: the refill their signal would wake finds nothing new,
// and hands the wheel back tasks it may have claimed meanwhile, to be claimed a second
// time for nothing.
type Marker interface {
	// Marked returns a view of the store's namespace, with its optional interfaces,
	// whose Insert marks its SignalWork with mark, and whose Listen reports a signal
	// so marked — whichever view of that mark sent it — as SignalMarked; every other
	// as the store's Listen does. Only Insert marks: the view's other writes, and
	// inserts in a transaction it binds, signal SignalWork. Its InNamespace views
	// are unmarked. A mark of 1 to MaxMark printable ASCII bytes; another is
	// ErrInvalid.
	Marked(mark string) (Store, error)
}

// Transactor is implemented by stores that write in transactions (every SQL driver of
// this module; not store/memory). It binds a transaction once and returns a [Tx]: the
// store's writes, run inside it. See "Transactions" in the package doc.
type Transactor interface {
	// Bind returns the view of the store inside tx, a transaction the caller owns and
	// will commit or roll back: a *sql.Tx on the store's database for every SQL store,
	// and the store's native kinds where it has them (pgx.Tx on PostgreSQL). A tx of
	// another kind, or on another database or schema than the store's, is ErrInvalid,
	// found by a read that leaves the transaction usable, before anything is written.
	Bind(ctx context.Context, tx any) (Tx, error)

	// InTx runs fn in a transaction of the store's own, at READ COMMITTED where the
	// database has levels, and commits it if fn returns nil. Otherwise it rolls the
	// transaction back and returns fn's error. See "Transactions" in the package doc
	// for what fn must not do, and when it is called again.
	InTx(ctx context.Context, fn func(tx Tx) error) error
}

// Tx is a store bound to one transaction: each method is the store's method of that
// name, run inside the transaction. What it writes becomes visible if, and only if,
// the transaction commits, and a claim of a row it changed waits for the transaction.
// It neither commits nor rolls back. If a method fails, the transaction may be
// aborted (PostgreSQL): roll it back.
type Tx interface {
	TaskWriter

	// Get returns the task as the transaction sees it, its own changes included.
	Get(ctx context.Context, id int64) (*Task, error)

	// PauseSchedule cancels the occurrences a statement of the transaction sees
	// after the schedule's row is locked: at READ COMMITTED, every occurrence
	// committed before the pause.
	PauseSchedule(ctx context.Context, name string) (*Schedule, error)
	ResumeSchedule(ctx context.Context, name string, next time.Time) (*Schedule, error)

	// Audit keeps the record if, and only if, the transaction commits: with the
	// change it records, written in the same transaction.
	Audit(ctx context.Context, rec AuditRecord) (*AuditRecord, error)

	// Complete finishes an execution as Finish does a success — the task RUNNING with
	// ref's execution id becomes SUCCEEDED, FinishedAt set, its record SUCCEEDED — in
	// the transaction, so that it commits with the caller's own writes or not at all.
	// It reports whether it applied: false, changing nothing, when the execution is not
	// (or no longer) the task's current RUNNING one — recovered and run again
	// elsewhere, finished, or of another namespace —, and the caller must then roll its
	// writes back. The task's row stays locked until the transaction ends: a recovery
	// of the execution, which would run it again, waits for the outcome.
	Complete(ctx context.Context, ref ExecRef) (bool, error)

	// Raw returns the transaction the view is bound to (a pgx.Tx on PostgreSQL, a
	// *sql.Tx on MySQL and SQLite), for the caller's own statements.
	Raw() any
}
