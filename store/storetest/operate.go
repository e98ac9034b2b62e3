package storetest

import (
	"errors"
	"strings"
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
	{"Dispatching", testCancelDispatching},
	{"Running", testCancelRunning},
	{"RunningSucceeds", testCancelRunningSucceeds},
	{"Refused", testCancelRefused},
	{"Invalid", testCancelInvalid},
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
	got, err := e.s.Cancel(e.ctx, before.Name, before.Key, "storetest")
	hi := e.now()
	if err != nil {
		e.t.Fatalf("Cancel(%q, %q) error: %v", before.Name, before.Key, err)
	}
	checkTask(e.t, "Cancel", got)
	e.stamped("Cancel: FinishedAt", got.FinishedAt, lo, hi)
	e.stamped("Cancel: UpdatedAt", got.UpdatedAt, lo, hi)
	e.stamped("Cancel: CancelRequestedAt", got.CancelRequestedAt, lo, hi)
	want := *before
	want.Status = store.Cancelled
	want.FinishedAt, want.UpdatedAt = got.FinishedAt, got.UpdatedAt
	want.CancelledBy, want.CancelRequestedAt = "storetest", got.CancelRequestedAt
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

// A DISPATCHING task is cancelled at once: its execution never starts, and its
// hand-back does not apply.
func testCancelDispatching(e *env) {
	before := e.inState(store.Dispatching)
	lo := e.settle(before)
	got, err := e.s.Cancel(e.ctx, before.Name, before.Key, "alice")
	hi := e.now()
	if err != nil {
		e.t.Fatalf("Cancel(dispatching %d) error: %v", before.ID, err)
	}
	e.stamped("Cancel: FinishedAt", got.FinishedAt, lo, hi)
	e.stamped("Cancel: CancelRequestedAt", got.CancelRequestedAt, lo, hi)
	want := *before
	want.Status, want.CancelledBy = store.Cancelled, "alice"
	want.FinishedAt, want.UpdatedAt, want.CancelRequestedAt = got.FinishedAt, got.UpdatedAt, got.CancelRequestedAt
	if d := diff(&want, got); d != "" {
		e.t.Errorf("Cancel(dispatching %d) mismatch (-want +got):\n%s", before.ID, d)
	}
	e.unchanged("Cancel", got)
	res, err := e.s.Start(e.ctx, store.Fence{}, []store.StartParams{{TaskID: before.ID, ExecutionID: before.ExecutionID, Name: before.Name, Node: "node-1"}})
	if err != nil || len(res) != 1 || res[0].Outcome != store.Lost {
		e.t.Errorf("Start of a cancelled claim = %+v, %v; want Lost", res, err)
	}
	ok, err := e.s.Requeue(e.ctx, store.Fence{}, []store.Requeue{{TaskID: before.ID, ExecutionID: before.ExecutionID,
		DueAt: e.now(), Error: "busy", MaxDispatchRetries: 3}})
	if err != nil || len(ok) != 1 || ok[0] {
		e.t.Errorf("Requeue of a cancelled claim = %v, %v; want [false]", ok, err)
	}
	e.unchanged("Start and Requeue of a cancelled claim", got)
}

// A RUNNING task's cancel is requested: it stays RUNNING, its heartbeat answers
// BeatCancel, a second request changes nothing, and a result that would run it again
// ends it CANCELLED, its record saying who asked.
func testCancelRunning(e *env) {
	for _, result := range []store.Finish{
		{Status: store.Scheduled, Error: "boom", Attempt: 1, DueAt: e.past()},
		{Status: store.Scheduled, Error: "snoozed for 1s", DueAt: e.past(), Snooze: true},
		{Status: store.Failed, Error: ""},
	} {
		before := e.inState(store.Running)
		lo := e.settle(before)
		got, err := e.s.Cancel(e.ctx, before.Name, before.Key, "alice")
		hi := e.now()
		if err != nil {
			e.t.Fatalf("Cancel(running %d) error: %v", before.ID, err)
		}
		e.stamped("Cancel: CancelRequestedAt", got.CancelRequestedAt, lo, hi)
		want := *before
		want.CancelledBy, want.CancelRequestedAt, want.UpdatedAt = "alice", got.CancelRequestedAt, got.UpdatedAt
		if d := diff(&want, got); d != "" {
			e.t.Errorf("Cancel(running %d) mismatch (-want +got):\n%s", before.ID, d)
		}
		e.unchanged("Cancel", got)
		again, err := e.s.Cancel(e.ctx, before.Name, before.Key, "bob")
		if err != nil || diff(got, again) != "" {
			e.t.Errorf("a second Cancel(running %d) = %+v, %v; want the task as the first left it", before.ID, again, err)
		}
		beats, err := e.s.Heartbeat(e.ctx, []store.ExecRef{{TaskID: before.ID, ExecutionID: before.ExecutionID}})
		if err != nil || len(beats) != 1 || beats[0] != store.BeatCancel {
			e.t.Errorf("Heartbeat(cancel requested) = %v, %v; want [BeatCancel]", beats, err)
		}
		result.TaskID, result.ExecutionID = before.ID, before.ExecutionID
		lo = e.now()
		e.finish(result)
		hi = e.now()
		done := e.get(before.ID)
		text := "cancelled by alice"
		if result.Error != "" {
			text += ": " + result.Error
		}
		e.stamped("Finish(cancel requested): FinishedAt", done.FinishedAt, lo, hi)
		if done.Status != store.Cancelled || done.LastError != text || done.Attempt != before.Attempt ||
			done.Snoozes != before.Snoozes || !done.DueAt.Equal(before.DueAt) {
			e.t.Errorf("Finish(%s, snooze %v) of a task cancelled while running = %s %q attempt %d snoozes %d due %v; want CANCELLED %q %d %d %v",
				result.Status, result.Snooze, done.Status, done.LastError, done.Attempt, done.Snoozes, done.DueAt,
				text, before.Attempt, before.Snoozes, before.DueAt)
		}
		e.checkClosed(before, store.Cancelled, text, lo, hi)
	}
}

// A handler that succeeds although its task's cancel was requested has its success
// recorded.
func testCancelRunningSucceeds(e *env) {
	before := e.inState(store.Running)
	if _, err := e.s.Cancel(e.ctx, before.Name, before.Key, "alice"); err != nil {
		e.t.Fatalf("Cancel(running %d) error: %v", before.ID, err)
	}
	e.finish(store.Finish{TaskID: before.ID, ExecutionID: before.ExecutionID, Status: store.Succeeded})
	if got := e.get(before.ID); got.Status != store.Succeeded || got.CancelledBy != "alice" {
		e.t.Errorf("after a success: status %s cancelled by %q; want SUCCEEDED, alice", got.Status, got.CancelledBy)
	}
}

func testCancelInvalid(e *env) {
	task := e.scheduled(e.future())
	for _, by := range []string{"", "a\x00b", "\xff", strings.Repeat("a", store.MaxCancelledBy+1)} {
		if _, err := e.s.Cancel(e.ctx, task.Name, task.Key, by); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("Cancel(by %q) error = %v, want ErrInvalid", by, err)
		}
	}
	e.unchanged("an invalid Cancel", task)
}

func testCancelRefused(e *env) {
	e.refused("Cancel", store.ErrNotCancellable,
		[]store.Status{store.Succeeded, store.Failed, store.Cancelled, store.Skipped},
		func(t *store.Task) (*store.Task, error) { return e.s.Cancel(e.ctx, t.Name, t.Key, "storetest") })
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
