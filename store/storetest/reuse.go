package storetest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/axsched/ax/store"
)

var reuseTests = []test{
	{"AfterFinish", testReuseAfterFinish},
	{"Holds", testReuseHolds},
	{"Superseded", testReuseSuperseded},
	{"InBatch", testReuseInBatch},
	{"Race", testReuseRace},
}

// reuse inserts a task with old's business key and returns the result.
func (e *env) reuse(old *store.Task) store.Inserted {
	e.t.Helper()
	nt := e.newTask(e.future())
	nt.Name, nt.Key, nt.Payload = old.Name, old.Key, []byte("again")
	res, err := e.s.Insert(e.ctx, []store.NewTask{nt})
	if err != nil || len(res) != 1 {
		e.t.Fatalf("Insert(%q, %q) again = %v, %v; want one result", old.Name, old.Key, res, err)
	}
	return res[0]
}

// reused checks that a second insert of old's key wrote a new task, that old gave its
// key up to it and is otherwise unchanged, and that the key is now the new task's.
func (e *env) reused(what string, old *store.Task, got store.Inserted) *store.Task {
	e.t.Helper()
	if got.Err != nil || got.Task == nil || got.Task.ID <= old.ID || got.Task.Status != store.Scheduled {
		e.t.Fatalf("%s: Insert of the key of task %d (%s) = %+v, %v; want a new SCHEDULED task", what, old.ID, old.Status, got.Task, got.Err)
	}
	want := *old
	want.Superseded = true
	if d := diff(&want, e.get(old.ID)); d != "" {
		e.t.Errorf("%s: the task that gave its key up changed (-want +got):\n%s", what, d)
	}
	if d := diff(got.Task, e.get(got.Task.ID)); d != "" || got.Task.Superseded {
		e.t.Errorf("%s: the new task as stored differs from what Insert returned (-insert +get):\n%s", what, d)
	}
	looked, err := e.s.Lookup(e.ctx, old.Name, old.Key)
	if err != nil || looked.ID != got.Task.ID {
		e.t.Errorf("%s: Lookup(%q, %q) = %+v, %v; want the new task %d", what, old.Name, old.Key, looked, err, got.Task.ID)
	}
	if again := e.reuse(old); !errors.Is(again.Err, store.ErrDuplicate) || again.Task == nil || again.Task.ID != got.Task.ID {
		e.t.Errorf("%s: a third Insert of the key = %+v, %v; want ErrDuplicate with task %d", what, again.Task, again.Err, got.Task.ID)
	}
	return got.Task
}

// held checks that a second insert of old's key was a duplicate of old, which is
// unchanged.
func (e *env) held(what string, old *store.Task, got store.Inserted) {
	e.t.Helper()
	if !errors.Is(got.Err, store.ErrDuplicate) || got.Task == nil || got.Task.ID != old.ID {
		e.t.Errorf("%s: Insert of the key of task %d (%s) = %+v, %v; want ErrDuplicate with the task", what, old.ID, old.Status, got.Task, got.Err)
	}
	e.unchanged(what, old)
}

// By default a task gives its key up when it SUCCEEDED, was CANCELLED or SKIPPED, not
// while it is live nor when it FAILED: an operator may still retry it.
func testReuseAfterFinish(e *env) {
	for _, status := range []store.Status{store.Succeeded, store.Cancelled, store.Skipped} {
		old := e.inState(status)
		e.reused(string(status), old, e.reuse(old))
	}
	for _, status := range []store.Status{store.Scheduled, store.Dispatching, store.Running, store.Failed} {
		old := e.inState(status)
		e.held(string(status), old, e.reuse(old))
	}
}

// HoldActive gives the key up when FAILED too; HoldForever never; a KeyUntil in the
// future keeps it whatever the status, one in the past does not. A live task holds its
// key whatever its hold.
func testReuseHolds(e *env) {
	type tc struct {
		status store.Status
		hold   store.KeyHold
		until  time.Time
		frees  bool
	}
	future, past := e.future(), e.past()
	cases := []tc{
		{store.Failed, store.HoldActive, time.Time{}, true},
		{store.Failed, store.HoldActive, past, true},
		{store.Succeeded, store.HoldLive, past, true},
		{store.Failed, store.HoldLive, past, false},
	}
	for _, st := range []store.Status{store.Succeeded, store.Failed, store.Cancelled, store.Skipped} {
		cases = append(cases, tc{st, store.HoldForever, time.Time{}, false}, tc{st, store.HoldActive, future, false})
	}
	for _, st := range []store.Status{store.Scheduled, store.Dispatching, store.Running} {
		cases = append(cases, tc{st, store.HoldActive, past, false})
	}
	for _, c := range cases {
		what := fmt.Sprintf("%s, hold %q, until %v", c.status, c.hold, c.until)
		if got := c.hold.Frees(c.status, c.until, e.now()); got != c.frees {
			e.t.Errorf("%s: KeyHold.Frees = %t, want %t", what, got, c.frees)
		}
		nt := e.newTask(e.now())
		nt.KeyHold, nt.KeyUntil = c.hold, c.until
		old := e.inStateAs(c.status, nt)
		if old.KeyHold != c.hold || !old.KeyUntil.Equal(c.until.Truncate(time.Microsecond)) {
			e.t.Errorf("%s: stored hold %q until %v", what, old.KeyHold, old.KeyUntil)
		}
		if c.frees {
			e.reused(what, old, e.reuse(old))
		} else {
			e.held(what, old, e.reuse(old))
		}
	}
}

// A task that gave its key up can no longer be retried or triggered (a newer task
// has its key); Cancel and Reschedule by key act on the newer one; the newer one
// gives the key up in turn.
func testReuseSuperseded(e *env) {
	nt := e.newTask(e.now())
	nt.KeyHold = store.HoldActive
	first := e.inStateAs(store.Failed, nt)
	second := e.reused("FAILED, active", first, e.reuse(first))
	first = e.get(first.ID)
	if _, err := e.s.Retry(e.ctx, first.ID); !errors.Is(err, store.ErrNotRetryable) {
		e.t.Errorf("Retry of a superseded task: %v, want ErrNotRetryable", err)
	}
	if _, err := e.s.Trigger(e.ctx, first.ID, newExecID()); !errors.Is(err, store.ErrNotTriggerable) {
		e.t.Errorf("Trigger of a superseded task: %v, want ErrNotTriggerable", err)
	}
	e.unchanged("Retry and Trigger of a superseded task", first)
	at := e.future().Add(time.Hour).Truncate(time.Microsecond)
	moved, err := e.s.Reschedule(e.ctx, second.Name, second.Key, at)
	if err != nil || moved.ID != second.ID || !moved.DueAt.Equal(at) {
		e.t.Errorf("Reschedule by key = %+v, %v; want task %d due %v", moved, err, second.ID, at)
	}
	cancelled, err := e.s.Cancel(e.ctx, second.Name, second.Key, "storetest")
	if err != nil || cancelled.ID != second.ID || cancelled.Status != store.Cancelled {
		e.t.Fatalf("Cancel by key = %+v, %v; want task %d CANCELLED", cancelled, err, second.ID)
	}
	e.unchanged("Cancel and Reschedule of the newer task", first)
	third := e.reused("CANCELLED after reuse", cancelled, e.reuse(cancelled))
	if _, err := e.s.Cancel(e.ctx, third.Name, third.Key, "storetest"); err != nil {
		e.t.Errorf("Cancel of the third task by key: %v", err)
	}
	// Nothing live is left: Cancel by key answers for the newest task.
	if got, err := e.s.Cancel(e.ctx, third.Name, third.Key, "storetest"); !errors.Is(err, store.ErrNotCancellable) || got == nil || got.ID != third.ID {
		e.t.Errorf("Cancel with no live task of the key = %+v, %v; want task %d and ErrNotCancellable", got, err, third.ID)
	}
}

// Two copies of a freed key in one Insert: the first is written, the second is its
// duplicate.
func testReuseInBatch(e *env) {
	old := e.inState(store.Succeeded)
	a, b := e.newTask(e.future()), e.newTask(e.future())
	a.Name, a.Key, b.Name, b.Key = old.Name, old.Key, old.Name, old.Key
	other := e.newTask(e.future())
	res, err := e.s.Insert(e.ctx, []store.NewTask{a, other, b})
	if err != nil || len(res) != 3 {
		e.t.Fatalf("Insert(a, other, b) = %v, %v", res, err)
	}
	if res[0].Err != nil || res[0].Task == nil || res[0].Task.ID == old.ID {
		e.t.Fatalf("Insert(a) = %+v, %v; want a new task", res[0].Task, res[0].Err)
	}
	if res[1].Err != nil {
		e.t.Errorf("Insert(other) error: %v", res[1].Err)
	}
	if !errors.Is(res[2].Err, store.ErrDuplicate) || res[2].Task == nil || res[2].Task.ID != res[0].Task.ID {
		e.t.Errorf("Insert(b) = %+v, %v; want ErrDuplicate with task %d", res[2].Task, res[2].Err, res[0].Task.ID)
	}
	if !e.get(old.ID).Superseded {
		e.t.Errorf("task %d is not superseded", old.ID)
	}
}

// Concurrent inserts of a key whose task has finished: exactly one writes a new
// task, every other answers ErrDuplicate with it.
func testReuseRace(e *env) {
	const workers = 12
	old := e.inState(store.Cancelled)
	results := make([]store.Inserted, workers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		nt := e.newTask(e.future())
		nt.Name, nt.Key = old.Name, old.Key
		wg.Go(func() {
			<-start
			res, err := e.s.Insert(e.ctx, []store.NewTask{nt})
			if err != nil || len(res) != 1 {
				e.t.Errorf("worker %d: Insert = %v, %v; want one result", w, res, err)
				return
			}
			results[w] = res[0]
		})
	}
	close(start)
	e.wait(&wg, deadline, "concurrent inserts of a freed key")
	if e.t.Failed() {
		return
	}
	live, err := e.s.Lookup(e.ctx, old.Name, old.Key)
	if err != nil || live.ID == old.ID || live.Status != store.Scheduled {
		e.t.Fatalf("Lookup after the race = %+v, %v; want a new SCHEDULED task", live, err)
	}
	written := 0
	for w, r := range results {
		switch {
		case r.Err == nil:
			written++
		case !errors.Is(r.Err, store.ErrDuplicate):
			e.t.Errorf("worker %d: Insert error %v, want nil or ErrDuplicate", w, r.Err)
		}
		if r.Task == nil || r.Task.ID != live.ID {
			e.t.Errorf("worker %d: Insert answered task %+v, want %d", w, r.Task, live.ID)
		}
	}
	if written != 1 {
		e.t.Errorf("%d concurrent inserts of a freed key wrote it %d times, want once", workers, written)
	}
}
