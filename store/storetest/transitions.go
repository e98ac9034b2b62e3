package storetest

import (
	"errors"
	"time"

	"github.com/axsched/ax/store"
)

// refused calls op on a fresh task in each status and checks that it answers sentinel
// with the unchanged task, and changes nothing.
func (e *env) refused(op string, sentinel error, statuses []store.Status, call func(*store.Task) (*store.Task, error)) {
	e.t.Helper()
	for _, status := range statuses {
		before := e.inState(status)
		got, err := call(before)
		if !errors.Is(err, sentinel) {
			e.t.Errorf("%s(%s task %d) error = %v, want %v", op, status, before.ID, err, sentinel)
		}
		if d := diff(before, got); d != "" {
			e.t.Errorf("%s(%s task %d) did not return the unchanged task (-want +got):\n%s", op, status, before.ID, d)
		}
		e.unchanged("a refused "+op, before)
	}
}

// trigger triggers before with a fresh execution id, checks the times Trigger stamps,
// and returns the task it answered and what it should be: before, DISPATCHING with the
// new execution id and those stamps.
func (e *env) trigger(before *store.Task) (got *store.Task, want store.Task) {
	e.t.Helper()
	exec := newExecID()
	lo := e.settle(before)
	got, err := e.s.Trigger(e.ctx, before.ID, exec)
	hi := e.now()
	if err != nil {
		e.t.Fatalf("Trigger(%d) error: %v", before.ID, err)
	}
	checkTask(e.t, "Trigger", got)
	e.stamped("Trigger: DispatchedAt", got.DispatchedAt, lo, hi)
	e.stamped("Trigger: TriggeredAt", got.TriggeredAt, lo, hi)
	if !got.TriggeredAt.Equal(got.DispatchedAt) {
		e.t.Errorf("Trigger: TriggeredAt %v and DispatchedAt %v differ; want one and the same stamp", got.TriggeredAt, got.DispatchedAt)
	}
	e.stamped("Trigger: UpdatedAt", got.UpdatedAt, lo, hi)
	want = *before
	want.Status = store.Dispatching
	want.ExecutionID = exec
	want.DispatchedAt, want.TriggeredAt, want.UpdatedAt = got.DispatchedAt, got.TriggeredAt, got.UpdatedAt
	return got, want
}

// makeDue makes before due with MakeDue and checks what every MakeDue does: the task
// SCHEDULED, due now and triggered now by the store's clock, stamped for the refill,
// and not claimed.
func (e *env) makeDue(before *store.Task) *store.Task {
	e.t.Helper()
	cur := e.cursor()
	lo := e.settle(before)
	got, err := e.s.MakeDue(e.ctx, before.ID)
	hi := e.now()
	if err != nil {
		e.t.Fatalf("MakeDue(%d) error: %v", before.ID, err)
	}
	checkTask(e.t, "MakeDue", got)
	if got.ID != before.ID || got.Status != store.Scheduled || got.ExecutionID != before.ExecutionID {
		e.t.Errorf("MakeDue(%d) = task %d %s under %q, want it SCHEDULED under %q", before.ID, got.ID, got.Status, got.ExecutionID, before.ExecutionID)
	}
	e.stamped("MakeDue: DueAt", got.DueAt, lo, hi)
	e.stamped("MakeDue: TriggeredAt", got.TriggeredAt, lo, hi)
	e.unchanged("MakeDue", got)
	res := e.changed(cur, e.future().Add(time.Hour), 10)
	if len(res.Changed) != 1 || res.Changed[0].ID != got.ID {
		e.t.Errorf("Refill after MakeDue: changed %v, want task %d", res.Changed, got.ID)
	}
	return got
}

// lostStart checks that the Start of p is Lost, without a task or an execution.
func (e *env) lostStart(what string, p store.StartParams) {
	e.t.Helper()
	res, err := e.s.Start(e.ctx, store.Fence{}, []store.StartParams{p})
	if err != nil {
		e.t.Fatalf("Start(%s) error: %v", what, err)
	}
	if len(res) != 1 || res[0].Outcome != store.Lost || res[0].Task != nil || res[0].Execution != nil {
		e.t.Errorf("Start(%s) = %+v, want Lost without task or execution", what, res)
	}
}

// checkClosed checks the execution record of task's current execution after a Finish.
func (e *env) checkClosed(task *store.Task, status store.Status, errText string, lo, hi time.Time) {
	e.t.Helper()
	for _, x := range e.executions(task.ID) {
		if x.ID != task.ExecutionID {
			continue
		}
		e.stamped("Finish: Execution.FinishedAt", x.FinishedAt, lo, hi)
		if x.Status != status || x.Error != errText {
			e.t.Errorf("Finish: execution %s = status %s error %q, want %s %q", x.ID, x.Status, x.Error, status, errText)
		}
		return
	}
	e.t.Errorf("Executions(%d) has no execution %s", task.ID, task.ExecutionID)
}

func (e *env) checkStale(status store.Status, before time.Time, limit int, want []*store.Task) {
	e.t.Helper()
	got, err := e.s.Stale(e.ctx, status, before, limit)
	if err != nil {
		e.t.Fatalf("Stale(%s, %v, %d) error: %v", status, before, limit, err)
	}
	wantTasks := []store.Task{}
	for _, w := range want {
		wantTasks = append(wantTasks, *e.get(w.ID))
	}
	if d := diff(wantTasks, got); d != "" {
		e.t.Errorf("Stale(%s, %v, %d) mismatch (-want +got):\n%s", status, before, limit, d)
	}
}
