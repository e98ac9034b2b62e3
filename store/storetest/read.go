package storetest

import (
	"errors"
	"time"

	"github.com/axsched/ax/store"
)

var readTests = []test{
	{"Now", testNow},
	{"Missing", testReadMissing},
	{"NoExecutions", testNoExecutions},
	{"TaskStats", testTaskStats},
}

func testNow(e *env) {
	a := e.now()
	b := e.now()
	for _, ts := range []time.Time{a, b} {
		if ts.IsZero() || ts.Location() != time.UTC {
			e.t.Errorf("Now() = %v, want a UTC time", ts)
		}
		if ts != ts.Round(0) {
			e.t.Errorf("Now() = %v carries a monotonic reading; want the database clock only", ts)
		}
	}
	if b.Before(a.Add(-precision)) {
		e.t.Errorf("Now() went back from %v to %v", a, b)
	}
}

func testReadMissing(e *env) {
	existing := e.scheduled(e.future())
	for _, id := range []int64{0, -1, existing.ID + 1000} {
		if got, err := e.s.Get(e.ctx, id); !errors.Is(err, store.ErrNotFound) {
			e.t.Errorf("Get(%d) = %v, %v; want ErrNotFound", id, got, err)
		}
		if got, err := e.s.Executions(e.ctx, id); !errors.Is(err, store.ErrNotFound) {
			e.t.Errorf("Executions(%d) = %v, %v; want ErrNotFound", id, got, err)
		}
	}
	for _, nk := range [][2]string{{existing.Name, "missing"}, {"missing", existing.Key}, {"", ""}} {
		if got, err := e.s.Lookup(e.ctx, nk[0], nk[1]); !errors.Is(err, store.ErrNotFound) {
			e.t.Errorf("Lookup(%q, %q) = %v, %v; want ErrNotFound", nk[0], nk[1], got, err)
		}
		if got, err := e.s.Cancel(e.ctx, nk[0], nk[1], "storetest"); !errors.Is(err, store.ErrNotFound) {
			e.t.Errorf("Cancel(%q, %q) = %v, %v; want ErrNotFound", nk[0], nk[1], got, err)
		}
	}
	if got, err := e.s.Trigger(e.ctx, existing.ID+1000, newExecID()); !errors.Is(err, store.ErrNotFound) {
		e.t.Errorf("Trigger(%d) = %v, %v; want ErrNotFound", existing.ID+1000, got, err)
	}
	e.unchanged("reading missing tasks", existing)
}

func testNoExecutions(e *env) {
	for _, status := range []store.Status{store.Scheduled, store.Dispatching, store.Cancelled} {
		task := e.inState(status)
		if got := e.executions(task.ID); len(got) != 0 {
			e.t.Errorf("Executions(%d) of a %s task = %+v, want none", task.ID, status, got)
		}
	}
}

func testTaskStats(e *env) {
	empty := &store.TaskStats{Counts: counts(nil)}
	if d := diff(empty, e.taskStats(e.now())); d != "" {
		e.t.Errorf("TaskStats of an empty store (-want +got):\n%s", d)
	}

	oldest := e.scheduled(e.now().Add(-2 * time.Hour))   // the oldest due task
	e.scheduled(e.past())                                // due, later
	e.scheduled(e.future())                              // not due
	e.claim(e.scheduled(e.now().Add(-3 * time.Hour)).ID) // due before the oldest, but claimed
	for _, status := range []store.Status{store.Running, store.Running, store.Succeeded, store.Failed, store.Cancelled} {
		e.inState(status)
	}
	holder := e.holding("stats", store.OverlapSkip, store.Dispatching)
	late := e.insert(e.keyed(e.past(), "stats", store.OverlapSkip))[0]
	if res := e.claimAll(late.ID); len(res.Skipped) != 1 {
		e.t.Fatalf("Claim of a skip task while task %d holds its key = %+v, want it skipped", holder.ID, res)
	}
	want := &store.TaskStats{
		Counts: counts(map[store.Status]int64{store.Scheduled: 3, store.Dispatching: 2, store.Running: 2,
			store.Succeeded: 1, store.Failed: 1, store.Cancelled: 1, store.Skipped: 1}),
		OldestDue: oldest.DueAt,
	}
	for name, now := range map[string]time.Time{"now": e.now(), "the oldest due time": oldest.DueAt} {
		if d := diff(want, e.taskStats(now)); d != "" {
			e.t.Errorf("TaskStats at %s (-want +got):\n%s", name, d)
		}
	}
	// Before the oldest due time nothing is due; the counts stay.
	want.OldestDue = time.Time{}
	if d := diff(want, e.taskStats(oldest.DueAt.Add(-time.Millisecond))); d != "" {
		e.t.Errorf("TaskStats before anything is due (-want +got):\n%s", d)
	}
	if st, err := e.s.TaskStats(e.ctx, time.Time{}); !errors.Is(err, store.ErrInvalid) {
		e.t.Errorf("TaskStats(zero time) = %+v, %v; want ErrInvalid", st, err)
	}
}
