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
