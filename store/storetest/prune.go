package storetest

import (
	"errors"

	"github.com/axsched/ax/store"
)

var pruneTests = []test{
	{"ByAge", testPruneByAge},
	{"KeepNewest", testPruneKeepNewest},
	{"Invalid", testPruneInvalid},
}

// finishedInOrder returns n fresh tasks in status, each finished after the one
// before it by the store's clock.
func (e *env) finishedInOrder(status store.Status, n int) []*store.Task {
	e.t.Helper()
	out := make([]*store.Task, n)
	for i := range out {
		out[i] = e.inState(status)
		e.after(out[i].FinishedAt.Add(2 * slack))
	}
	return out
}

// prune runs one Prune and fails unless it deleted want tasks.
func (e *env) prune(p store.PruneParams, want int) {
	e.t.Helper()
	n, err := e.s.Prune(e.ctx, p)
	if err != nil || n != want {
		e.t.Fatalf("Prune(%+v) = %d, %v; want %d", p, n, err, want)
	}
}

// gone fails unless the tasks and their executions are gone.
func (e *env) gone(what string, tasks ...*store.Task) {
	e.t.Helper()
	for _, t := range tasks {
		if _, err := e.s.Get(e.ctx, t.ID); !errors.Is(err, store.ErrNotFound) {
			e.t.Errorf("%s: Get(%d) after Prune: %v, want ErrNotFound", what, t.ID, err)
		}
		if _, err := e.s.Executions(e.ctx, t.ID); !errors.Is(err, store.ErrNotFound) {
			e.t.Errorf("%s: Executions(%d) after Prune: %v, want ErrNotFound", what, t.ID, err)
		}
	}
}

// Prune deletes the tasks of its status that finished before its time, oldest
// first, at most its limit, with their executions; nothing of another status,
// nothing live, nothing of another namespace. A pruned task's key is free.
func testPruneByAge(e *env) {
	old := e.finishedInOrder(store.Succeeded, 3)
	cut := e.now()
	recent := e.inState(store.Succeeded)
	failed := e.inState(store.Failed)
	live := []*store.Task{e.inState(store.Scheduled), e.inState(store.Running)}
	other := e.view("other-ns")
	otherOld := other.inState(store.Succeeded)

	e.prune(store.PruneParams{Status: store.Succeeded, Before: cut, Limit: 2}, 2)
	e.gone("the two oldest", old[0], old[1])
	e.unchanged("Prune of the two oldest", old[2])
	e.prune(store.PruneParams{Status: store.Succeeded, Before: cut, Limit: 10}, 1)
	e.gone("the third", old[2])
	e.prune(store.PruneParams{Status: store.Succeeded, Before: cut, Limit: 10}, 0)
	for _, t := range append(live, recent, failed) {
		e.unchanged("Prune of SUCCEEDED", t)
	}
	other.unchanged("Prune in another namespace", otherOld)
	if got := len(e.executions(recent.ID)); got != 1 {
		e.t.Errorf("the recent task has %d executions after Prune, want 1", got)
	}
	// The store reads on: a refill from the start, more inserts.
	e.refill(store.RefillParams{AfterSeq: 0, To: e.future(), Limit: 100})
	// A task within its UniqueFor window is kept: it holds its key.
	nt := e.newTask(e.now())
	nt.KeyUntil = e.future()
	windowed := e.inStateAs(store.Succeeded, nt)
	e.prune(store.PruneParams{Status: store.Succeeded, Before: e.future(), Limit: 10}, 1) // recent, not windowed
	e.unchanged("Prune of a task within its window", windowed)
	// A pruned task's key is free: inserting it writes a new task.
	res, err := e.s.Insert(e.ctx, []store.NewTask{{Name: old[0].Name, Key: old[0].Key, DueAt: e.future()}})
	if err != nil || res[0].Err != nil || res[0].Task.ID == old[0].ID {
		e.t.Errorf("Insert of a pruned task's key = %+v, %v; want a new task", res, err)
	}
}

// KeepNewest keeps the tasks that finished last, alone or with an age limit.
func testPruneKeepNewest(e *env) {
	cancelled := e.finishedInOrder(store.Cancelled, 4)
	e.prune(store.PruneParams{Status: store.Cancelled, KeepNewest: 3, Limit: 10}, 1)
	e.gone("beyond the newest 3", cancelled[0])
	e.prune(store.PruneParams{Status: store.Cancelled, KeepNewest: 3, Limit: 10}, 0)
	// With a time too: what is older, or beyond the newest, goes.
	e.prune(store.PruneParams{Status: store.Cancelled, Before: cancelled[2].FinishedAt, KeepNewest: 3, Limit: 10}, 1)
	e.gone("older than the third", cancelled[1])
	e.prune(store.PruneParams{Status: store.Cancelled, KeepNewest: 1, Limit: 10}, 1)
	e.gone("beyond the newest", cancelled[2])
	e.unchanged("Prune keeping the newest", cancelled[3])
	skipped := e.inState(store.Skipped)
	e.prune(store.PruneParams{Status: store.Skipped, Before: e.future(), Limit: 10}, 1)
	e.gone("skipped", skipped)
	e.unchanged("Prune of SKIPPED", cancelled[3])
}

func testPruneInvalid(e *env) {
	done := e.inState(store.Succeeded)
	future := e.future()
	for _, p := range []store.PruneParams{
		{Status: store.Scheduled, Before: future, Limit: 10},
		{Status: store.Running, Before: future, Limit: 10},
		{Status: "DONE", Before: future, Limit: 10},
		{Status: store.Succeeded, Before: future, Limit: 0},
		{Status: store.Succeeded, Before: future, Limit: store.MaxPrune + 1},
		{Status: store.Succeeded, Limit: 10},
		{Status: store.Succeeded, KeepNewest: -1, Before: future, Limit: 10},
	} {
		if n, err := e.s.Prune(e.ctx, p); !errors.Is(err, store.ErrInvalid) || n != 0 {
			e.t.Errorf("Prune(%+v) = %d, %v; want ErrInvalid", p, n, err)
		}
	}
	e.unchanged("invalid Prunes", done)
}
