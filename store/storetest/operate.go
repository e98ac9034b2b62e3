package storetest

import (
	"errors"
	"time"

	"github.com/axsched/ax/store"
)

var rescheduleTests = []test{
	{"Scheduled", testRescheduleScheduled},
	{"Refused", testRescheduleRefused},
}

var retryTests = []test{
	{"Failed", testRetryFailed},
	{"Refused", testRetryRefused},
}

// Reschedule moves a SCHEDULED task's due time in place — same id, everything else
// kept — and stamps it for the refill: the change cursor finds it past a cursor taken
// before, at its new due time; a claim then follows the new time.
func testRescheduleScheduled(e *env) {
	before := e.scheduled(e.future())
	cur := e.cursor()
	lo := e.settle(before)
	at := e.past().Add(-time.Minute).Truncate(time.Microsecond)
	got, err := e.s.Reschedule(e.ctx, before.Name, before.Key, at)
	hi := e.now()
	if err != nil {
		e.t.Fatalf("Reschedule(%q, %q) error: %v", before.Name, before.Key, err)
	}
	checkTask(e.t, "Reschedule", got)
	e.stamped("Reschedule: UpdatedAt", got.UpdatedAt, lo, hi)
	want := *before
	want.DueAt, want.UpdatedAt = at, got.UpdatedAt
	if d := diff(&want, got); d != "" {
		e.t.Errorf("Reschedule mismatch (-want +got):\n%s", d)
	}
	e.unchanged("Reschedule", got)
	res := e.changed(cur, e.future().Add(time.Hour), 10)
	if len(res.Changed) != 1 || res.Changed[0].ID != got.ID || !res.Changed[0].DueAt.Equal(at) {
		e.t.Errorf("Refill after Reschedule: changed %v, want task %d due %v", res.Changed, got.ID, at)
	}
	// Moved into the past, it is due now.
	if claimed := e.claim(got.ID); claimed.Status != store.Dispatching {
		e.t.Errorf("Claim after Reschedule into the past: %s, want DISPATCHING", claimed.Status)
	}
	// And back out: a task due in an hour is not claimed.
	later := e.scheduled(e.past())
	if _, err := e.s.Reschedule(e.ctx, later.Name, later.Key, e.future()); err != nil {
		e.t.Fatal(err)
	}
	cres, err := e.s.Claim(e.ctx, store.Fence{}, []store.Claim{{ID: later.ID, ExecutionID: newExecID()}})
	if err != nil || len(cres.Claimed) != 0 || len(cres.NotDue) != 1 {
		e.t.Errorf("Claim after Reschedule into the future = %+v, %v; want it not due", cres, err)
	}
}

func testRescheduleRefused(e *env) {
	at := e.future()
	e.refused("Reschedule", store.ErrNotReschedulable,
		[]store.Status{store.Dispatching, store.Running, store.Succeeded, store.Failed, store.Cancelled},
		func(t *store.Task) (*store.Task, error) { return e.s.Reschedule(e.ctx, t.Name, t.Key, at) })
	if _, err := e.s.Reschedule(e.ctx, "order.close", "no-such-key", at); !errors.Is(err, store.ErrNotFound) {
		e.t.Errorf("Reschedule(missing) error = %v, want ErrNotFound", err)
	}
	task := e.scheduled(e.future())
	if _, err := e.s.Reschedule(e.ctx, task.Name, task.Key, time.Time{}); !errors.Is(err, store.ErrInvalid) {
		e.t.Errorf("Reschedule(zero time) error = %v, want ErrInvalid", err)
	}
	e.unchanged("Reschedule(zero time)", task)
}

// Retry puts a FAILED task back to SCHEDULED, due now, with a fresh retry budget,
// stamped for the refill; its history (executions, LastError) stays.
func testRetryFailed(e *env) {
	failed := e.inState(store.Failed)
	cur := e.cursor()
	lo := e.settle(failed)
	got, err := e.s.Retry(e.ctx, failed.ID)
	hi := e.now()
	if err != nil {
		e.t.Fatalf("Retry(%d) error: %v", failed.ID, err)
	}
	checkTask(e.t, "Retry", got)
	e.stamped("Retry: DueAt", got.DueAt, lo, hi)
	e.stamped("Retry: UpdatedAt", got.UpdatedAt, lo, hi)
	want := *failed
	want.Status, want.Attempt, want.DispatchRetries, want.FinishedAt = store.Scheduled, 0, 0, time.Time{}
	want.DueAt, want.UpdatedAt = got.DueAt, got.UpdatedAt
	if d := diff(&want, got); d != "" {
		e.t.Errorf("Retry mismatch (-want +got):\n%s", d)
	}
	e.unchanged("Retry", got)
	if len(e.executions(got.ID)) != 1 {
		e.t.Errorf("Retry: the failed execution's record is gone")
	}
	res := e.changed(cur, e.future(), 10)
	if len(res.Changed) != 1 || res.Changed[0].ID != got.ID {
		e.t.Errorf("Refill after Retry: changed %v, want task %d", res.Changed, got.ID)
	}
	if claimed := e.claim(got.ID); claimed.Status != store.Dispatching || claimed.Attempt != 0 {
		e.t.Errorf("Claim after Retry: %s attempt %d, want DISPATCHING attempt 0", claimed.Status, claimed.Attempt)
	}
}

func testRetryRefused(e *env) {
	e.refused("Retry", store.ErrNotRetryable,
		[]store.Status{store.Scheduled, store.Dispatching, store.Running, store.Succeeded, store.Cancelled},
		func(t *store.Task) (*store.Task, error) { return e.s.Retry(e.ctx, t.ID) })
	if _, err := e.s.Retry(e.ctx, 1<<40); !errors.Is(err, store.ErrNotFound) {
		e.t.Errorf("Retry(missing) error = %v, want ErrNotFound", err)
	}
}

var cancelTests = []test{
	{"Scheduled", testCancelScheduled},
	{"Refused", testCancelRefused},
}

var triggerTests = []test{
	{"Scheduled", testTriggerScheduled},
	{"Failed", testTriggerFailed},
	{"Refused", testTriggerRefused},
	{"Invalid", testTriggerInvalid},
}

var makeDueTests = []test{
	{"Scheduled", testMakeDueScheduled},
	{"Failed", testMakeDueFailed},
	{"Refused", testMakeDueRefused},
}

func testCancelScheduled(e *env) {
	before := e.scheduled(e.future())
	lo := e.settle(before)
	got, err := e.s.Cancel(e.ctx, before.Name, before.Key)
	hi := e.now()
	if err != nil {
		e.t.Fatalf("Cancel(%q, %q) error: %v", before.Name, before.Key, err)
	}
	checkTask(e.t, "Cancel", got)
	e.stamped("Cancel: FinishedAt", got.FinishedAt, lo, hi)
	e.stamped("Cancel: UpdatedAt", got.UpdatedAt, lo, hi)
	want := *before
	want.Status = store.Cancelled
	want.FinishedAt, want.UpdatedAt = got.FinishedAt, got.UpdatedAt
	if d := diff(&want, got); d != "" {
		e.t.Errorf("Cancel(%q, %q) mismatch (-want +got):\n%s", before.Name, before.Key, d)
	}
	e.unchanged("Cancel", got)

	// A cancelled task is out of the scheduler's sight.
	res, err := e.s.Claim(e.ctx, store.Fence{}, []store.Claim{{ID: got.ID, ExecutionID: newExecID()}})
	if err != nil || len(res.Claimed)+len(res.NotDue) != 0 {
		e.t.Errorf("Claim(cancelled %d) = %+v, %v; want nothing", got.ID, res, err)
	}
	refill, err := e.s.Refill(e.ctx, store.RefillParams{AfterSeq: 0, To: before.DueAt.Add(time.Hour), Limit: 10})
	if err != nil || len(refill.Changed)+len(refill.Entered) != 0 {
		e.t.Errorf("Refill after Cancel = %+v, %v; want no tasks", refill, err)
	}
}

func testCancelRefused(e *env) {
	e.refused("Cancel", store.ErrNotCancellable,
		[]store.Status{store.Dispatching, store.Running, store.Succeeded, store.Failed, store.Cancelled},
		func(t *store.Task) (*store.Task, error) { return e.s.Cancel(e.ctx, t.Name, t.Key) })
}

func testTriggerScheduled(e *env) {
	before := e.scheduled(e.future())
	got, want := e.trigger(before)
	if d := diff(&want, got); d != "" {
		e.t.Errorf("Trigger(scheduled %d) mismatch (-want +got):\n%s", before.ID, d)
	}
	e.unchanged("Trigger", got)
	e.start(got)
}

func testTriggerFailed(e *env) {
	before := e.inState(store.Failed)
	got, want := e.trigger(before)
	want.Attempt = before.Attempt + 1
	want.FinishedAt = got.FinishedAt // the contract does not say whether leaving FAILED clears it
	if d := diff(&want, got); d != "" {
		e.t.Errorf("Trigger(failed %d) mismatch (-want +got):\n%s", before.ID, d)
	}
	e.unchanged("Trigger", got)

	started := e.start(got)
	if started.Execution.Attempt != before.Attempt+1 {
		e.t.Errorf("Start after Trigger: Execution.Attempt = %d, want %d", started.Execution.Attempt, before.Attempt+1)
	}
	execs := e.executions(before.ID)
	if len(execs) != 2 || execs[0].ID != before.ExecutionID || execs[1].ID != want.ExecutionID {
		e.t.Errorf("Executions(%d) = %+v, want the failed execution %s then %s", before.ID, execs, before.ExecutionID, want.ExecutionID)
	}
}

func testTriggerRefused(e *env) {
	e.refused("Trigger", store.ErrNotTriggerable,
		[]store.Status{store.Dispatching, store.Running, store.Succeeded, store.Cancelled},
		func(t *store.Task) (*store.Task, error) { return e.s.Trigger(e.ctx, t.ID, newExecID()) })
}

func testTriggerInvalid(e *env) {
	before := e.scheduled(e.future())
	if got, err := e.s.Trigger(e.ctx, before.ID, ""); !errors.Is(err, store.ErrInvalid) {
		e.t.Errorf("Trigger(%d, \"\") = %v, %v; want ErrInvalid", before.ID, got, err)
	}
	e.unchanged("an invalid Trigger", before)
}

// MakeDue makes a SCHEDULED task due now, keeping everything else, and a claim then
// takes it.
func testMakeDueScheduled(e *env) {
	before := e.scheduled(e.future())
	got := e.makeDue(before)
	want := *before
	want.DueAt, want.TriggeredAt, want.UpdatedAt = got.DueAt, got.TriggeredAt, got.UpdatedAt
	if d := diff(&want, got); d != "" {
		e.t.Errorf("MakeDue(scheduled %d) mismatch (-want +got):\n%s", before.ID, d)
	}
	if claimed := e.claim(got.ID); claimed.Status != store.Dispatching {
		e.t.Errorf("Claim after MakeDue: %s, want DISPATCHING", claimed.Status)
	}
}

// MakeDue takes a FAILED task back to SCHEDULED with one more attempt, unfinished.
func testMakeDueFailed(e *env) {
	before := e.inState(store.Failed)
	got := e.makeDue(before)
	if got.Attempt != before.Attempt+1 || !got.FinishedAt.IsZero() || got.LastError != before.LastError {
		e.t.Errorf("MakeDue(failed %d): attempt %d, finished %v, last error %q; want attempt %d, unfinished, %q",
			before.ID, got.Attempt, got.FinishedAt, got.LastError, before.Attempt+1, before.LastError)
	}
}

func testMakeDueRefused(e *env) {
	e.refused("MakeDue", store.ErrNotTriggerable,
		[]store.Status{store.Dispatching, store.Running, store.Succeeded, store.Cancelled},
		func(t *store.Task) (*store.Task, error) { return e.s.MakeDue(e.ctx, t.ID) })
	if _, err := e.s.MakeDue(e.ctx, 1<<40); !errors.Is(err, store.ErrNotFound) {
		e.t.Errorf("MakeDue(missing) error = %v, want ErrNotFound", err)
	}
}
