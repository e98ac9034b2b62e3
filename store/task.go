// Package store is the seam between the ax scheduler and the database that holds its
// state. It defines the row types, the sentinel errors and the [Store] interface that
// every driver (store/sqlite, store/memory, …) implements; it imports nothing of ax's,
// so the scheduler and the drivers never import each other.
//
// The interface is documented as a contract and checked by the conformance suite in
// store/storetest. It is meant for driver authors: applications use package ax, which
// re-exports the types they need.
//
// # State machine
//
//	           Claim / Trigger            Start                Finish(ok)
//	SCHEDULED ───────────────► DISPATCHING ─────► RUNNING ─────────────► SUCCEEDED
//	  │  ▲  ▲                      │                │ │
//	  │  │  └──── Requeue ─────────┘                │ └── Finish(retry) ──► SCHEDULED
//	  │  └──────── (dispatch retry)                 └──── Finish(fail) ───► FAILED
//	  └── Cancel ──► CANCELLED                                 FAILED ── Trigger ──► DISPATCHING
//
// Every arrow is one conditional write (UPDATE … WHERE id = ? AND status = old
// [AND execution_id = ?]); a write whose condition no longer holds changes nothing and
// is reported as not applied. Batched methods sort ids ascending and touch at most
// [MaxBatch] rows per statement.
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
	Dispatching Status = "DISPATCHING" // claimed by the leader, being handed to an executor
	Running     Status = "RUNNING"     // an executor recorded the execution and runs the handler
	Succeeded   Status = "SUCCEEDED"   // done
	Failed      Status = "FAILED"      // retries exhausted; only an operator moves it on
	Cancelled   Status = "CANCELLED"   // cancelled before it ran
	Skipped     Status = "SKIPPED"     // a periodic occurrence skipped because of overlap
)

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

// Terminal reports whether no automatic transition leaves s.
func (s Status) Terminal() bool {
	return s == Succeeded || s == Failed || s == Cancelled || s == Skipped
}

// MaxBatch is the largest number of rows a single batched statement touches
// (DESIGN.md §4): batches are split into chunks of at most MaxBatch ids, sorted
// ascending, so concurrent batches cannot deadlock.
const MaxBatch = 200

// Task is one persisted task: a row of ax_tasks. Times are UTC; a zero time means
// "not set".
type Task struct {
	ID              int64
	Name            string // handler name
	Key             string // business key; (Name, Key) is unique
	Payload         []byte
	Status          Status
	DueAt           time.Time // when it should run
	Attempt         int       // 0 on the first run; grows by one per business retry
	MaxRetry        int       // business retries allowed after the first attempt
	DispatchRetries int       // failed hand-offs to an executor; never consumes Attempt
	ExecutionID     string    // the current (or last) execution, a UUIDv7; empty before the first claim
	OwnerService    string    // the service that submitted the task
	LastError       string    // the last business or dispatch error

	// Timeout is the handler deadline for this task; 0 means the handler's default.
	Timeout time.Duration
	// Backoff, when non-empty, is the delay before business retry n+1 at index n,
	// fixed when the task was submitted; empty means the handler's backoff.
	Backoff []time.Duration

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
type Execution struct {
	ID          string // execution id (UUIDv7)
	TaskID      int64
	Attempt     int
	Node        string // the executor that ran it
	Status      Status // Running, Succeeded or Failed
	StartedAt   time.Time
	HeartbeatAt time.Time
	FinishedAt  time.Time
	Error       string
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
}

// Due is a scheduled task's id and due time: what the timing wheel holds.
type Due struct {
	ID    int64
	DueAt time.Time
}

// String formats the pair for logs and test failures.
func (d Due) String() string { return fmt.Sprintf("%d@%s", d.ID, d.DueAt.Format(time.RFC3339Nano)) }
