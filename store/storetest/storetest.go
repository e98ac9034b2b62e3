// Package storetest is the conformance suite for [store.Store] drivers.
//
// Every driver runs it from its own tests:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s := openIsolated(t) // a fresh, empty, migrated store for this test only
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// The suite checks the contract written in the doc comments of package store: every
// method, every legal transition and every refused one, the Refill cursors, time
// precision and concurrency. It decides "due" with the store's own clock ([store.Store.Now])
// and never sleeps to hope something happened: it polls a condition with a deadline.
package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/store"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"
)

// Run runs the conformance suite against the stores that open returns. Each subtest
// runs in parallel and calls open once: open must return a fresh, empty, migrated
// store isolated from every other call, and register its own cleanup with t.Cleanup.
// Some subtests close the store themselves, so that cleanup must ignore the ErrClosed
// a second Close returns.
//
// The suite takes a few seconds; under testing.Short it uses smaller counts and
// durations.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	run(t, open, []group{
		{"Insert", insertTests},
		{"KeyReuse", reuseTests},
		{"Read", readTests},
		{"Query", queryTests},
		{"Cancel", cancelTests},
		{"Reschedule", rescheduleTests},
		{"Retry", retryTests},
		{"Prune", pruneTests},
		{"Audit", auditTests},
		{"InTx", txTests},
		{"Claim", claimTests},
		{"ClaimStart", claimStartTests},
		{"Trigger", triggerTests},
		{"MakeDue", makeDueTests},
		{"Start", startTests},
		{"Heartbeat", heartbeatTests},
		{"Finish", finishTests},
		{"Requeue", requeueTests},
		{"Stale", staleTests},
		{"Refill", refillTests},
		{"Close", closeTests},
		{"Concurrency", concurrencyTests},
		{"Overlap", overlapTests},
		{"Schedules", scheduleTests},
		{"Names", nameTests},
		{"Limits", limitTests},
		{"Slots", slotTests},
		{"Lease", leaseTests},
		{"Fence", fenceTests},
		{"Leadership", leadershipTests},
		{"Namespace", namespaceTests},
		{"Nodes", nodeTests},
		{"Stats", statsTests},
	})
}

// RunInsert runs the suite's Insert group and its concurrent inserts of one key: for a
// store's second insert path (a bulk one, above a size threshold), forced for every
// size by open.
func RunInsert(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	run(t, open, []group{{"Insert", append(slices.Clone(insertTests), test{"SameKey", testInsertSameKey})}})
}

// group is a named set of the suite's subtests.
type group struct {
	name  string
	tests []test
}

func run(t *testing.T, open func(t *testing.T) store.Store, groups []group) {
	t.Helper()
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.fn(setup(t, open))
				})
			}
		})
	}
}

// test is one subtest of the suite.
type test struct {
	name string
	fn   func(e *env)
}

// env is one subtest's store and the helpers that drive it.
type env struct {
	t   *testing.T
	s   store.Store
	ctx context.Context
	n   *atomic.Int64 // for unique keys, shared by the views of one store
}

func setup(t *testing.T, open func(t *testing.T) store.Store) *env {
	t.Helper()
	s := open(t)
	if s == nil {
		t.Fatal("open returned a nil store")
	}
	return &env{t: t, s: s, ctx: t.Context(), n: new(atomic.Int64)}
}

// precision is how far a time may move on its way through the store.
const precision = time.Microsecond

// slack is how far outside the bracket of two Now calls a stamped time may fall: the
// store stamps with its Now clock, so only its precision.
const slack = precision

// deadline bounds every wait on a condition.
const deadline = 10 * time.Second

// opts compares rows: times to the store's precision, nil and empty slices alike (the
// Payload test checks nil-ness itself).
var opts = cmp.Options{cmpopts.EquateApproxTime(precision), cmpopts.EquateEmpty()}

// diff reports the difference between want and got, or "".
func diff(want, got any) string { return cmp.Diff(want, got, opts) }

// newExecID returns a fresh execution id, a UUIDv7 as the scheduler makes them.
func newExecID() string { return uuid.Must(uuid.NewV7()).String() }

// now returns the store's time.
func (e *env) now() time.Time {
	e.t.Helper()
	now, err := e.s.Now(e.ctx)
	if err != nil {
		e.t.Fatalf("Now() error: %v", err)
	}
	return now
}

// after waits until the store's clock has passed ts and returns its time then.
func (e *env) after(ts time.Time) time.Time {
	e.t.Helper()
	end := time.Now().Add(deadline)
	for {
		if now := e.now(); now.After(ts) {
			return now
		}
		if time.Now().After(end) {
			e.t.Fatalf("the store's clock did not pass %v within %v", ts, deadline)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// settle waits until the store's clock is clearly past every time the store stamped on
// task, so that a transition that forgets to stamp one cannot pass for one that did,
// and returns the store's time then.
func (e *env) settle(task *store.Task) time.Time {
	e.t.Helper()
	var last time.Time
	for _, ts := range []time.Time{task.CreatedAt, task.UpdatedAt, task.DispatchedAt, task.StartedAt,
		task.HeartbeatAt, task.FinishedAt, task.TriggeredAt} {
		if ts.After(last) {
			last = ts
		}
	}
	return e.after(last.Add(2 * slack))
}

// newTask returns a valid NewTask with a unique key, due at due.
func (e *env) newTask(due time.Time) store.NewTask {
	return store.NewTask{
		Name:         "order.close",
		Key:          fmt.Sprintf("order-%d", e.n.Add(1)),
		Payload:      []byte(`{"order":42}`),
		DueAt:        due,
		MaxRetry:     5,
		OwnerService: "orders",
	}
}

// insert inserts tasks and fails unless every one was written.
func (e *env) insert(tasks ...store.NewTask) []*store.Task {
	e.t.Helper()
	res, err := e.s.Insert(e.ctx, tasks)
	if err != nil {
		e.t.Fatalf("Insert(%d tasks) error: %v", len(tasks), err)
	}
	if len(res) != len(tasks) {
		e.t.Fatalf("Insert(%d tasks) returned %d results", len(tasks), len(res))
	}
	out := make([]*store.Task, len(res))
	for i, r := range res {
		if r.Err != nil || r.Task == nil {
			e.t.Fatalf("Insert(%d tasks)[%d] = %v, %v; want a task", len(tasks), i, r.Task, r.Err)
		}
		checkTask(e.t, "Insert", r.Task)
		out[i] = r.Task
	}
	return out
}

// scheduled inserts one task due at due.
func (e *env) scheduled(due time.Time) *store.Task {
	e.t.Helper()
	return e.insert(e.newTask(due))[0]
}

// get returns the task with id and checks its times.
func (e *env) get(id int64) *store.Task {
	e.t.Helper()
	task, err := e.s.Get(e.ctx, id)
	if err != nil {
		e.t.Fatalf("Get(%d) error: %v", id, err)
	}
	checkTask(e.t, "Get", task)
	return task
}

// executions returns the executions of task id.
func (e *env) executions(id int64) []store.Execution {
	e.t.Helper()
	execs, err := e.s.Executions(e.ctx, id)
	if err != nil {
		e.t.Fatalf("Executions(%d) error: %v", id, err)
	}
	for i := range execs {
		checkExecution(e.t, "Executions", &execs[i])
	}
	return execs
}

// claim claims a due task and returns it.
func (e *env) claim(id int64) *store.Task {
	e.t.Helper()
	exec := newExecID()
	res, err := e.s.Claim(e.ctx, store.Fence{}, []store.Claim{{ID: id, ExecutionID: exec}})
	if err != nil {
		e.t.Fatalf("Claim(%d) error: %v", id, err)
	}
	if len(res.Claimed) != 1 || res.Claimed[0].ID != id || res.Claimed[0].ExecutionID != exec {
		e.t.Fatalf("Claim(%d) = %+v, want task %d claimed with %s", id, res, id, exec)
	}
	return &res.Claimed[0]
}

// start starts the dispatching task and returns the result.
func (e *env) start(task *store.Task) store.StartResult {
	e.t.Helper()
	res, err := e.s.Start(e.ctx, store.Fence{}, []store.StartParams{{TaskID: task.ID, ExecutionID: task.ExecutionID, Name: task.Name, Node: "node-1"}})
	if err != nil {
		e.t.Fatalf("Start(%d, %s) error: %v", task.ID, task.ExecutionID, err)
	}
	if len(res) != 1 || res[0].Outcome != store.Started {
		e.t.Fatalf("Start(%d, %s) = %+v, want Started", task.ID, task.ExecutionID, res)
	}
	return res[0]
}

// finish applies one result and fails unless it applied.
func (e *env) finish(f store.Finish) {
	e.t.Helper()
	ok, err := e.s.Finish(e.ctx, store.Fence{}, []store.Finish{f})
	if err != nil {
		e.t.Fatalf("Finish(%+v) error: %v", f, err)
	}
	if len(ok) != 1 || !ok[0] {
		e.t.Fatalf("Finish(%+v) = %v, want [true]", f, ok)
	}
}

// past is a due time an hour before the store's clock.
func (e *env) past() time.Time { e.t.Helper(); return e.now().Add(-time.Hour) }

// future is a due time an hour after the store's clock.
func (e *env) future() time.Time { e.t.Helper(); return e.now().Add(time.Hour) }

// inState returns a fresh task in status, reached through the store's own transitions.
func (e *env) inState(status store.Status) *store.Task {
	e.t.Helper()
	return e.inStateAs(status, e.newTask(e.now()))
}

// inStateAs is inState for the task nt (its DueAt is set here), which must not
// exist yet: in status SKIPPED, its TaskKey and Overlap are set here too.
func (e *env) inStateAs(status store.Status, nt store.NewTask) *store.Task {
	e.t.Helper()
	switch status {
	case store.Scheduled:
		nt.DueAt = e.future()
		return e.insert(nt)[0]
	case store.Cancelled:
		nt.DueAt = e.future()
		task := e.insert(nt)[0]
		if _, err := e.s.Cancel(e.ctx, task.Name, task.Key, "storetest"); err != nil {
			e.t.Fatalf("Cancel(%q, %q) error: %v", task.Name, task.Key, err)
		}
		return e.get(task.ID)
	case store.Skipped:
		key := fmt.Sprintf("skip-%d", e.n.Add(1))
		e.holding(key, store.OverlapSkip, store.Running)
		nt.DueAt, nt.TaskKey, nt.Overlap = e.past(), key, store.OverlapSkip
		task := e.insert(nt)[0]
		if res := e.claimAll(task.ID); len(res.Skipped) != 1 {
			e.t.Fatalf("Claim of %d while its key is held = %+v, want it skipped", task.ID, res)
		}
		return e.get(task.ID)
	}
	nt.DueAt = e.past()
	task := e.claim(e.insert(nt)[0].ID)
	if status == store.Dispatching {
		return task
	}
	e.start(task)
	switch status {
	case store.Running:
	case store.Succeeded, store.Failed:
		e.finish(store.Finish{TaskID: task.ID, ExecutionID: task.ExecutionID, Status: status, Error: "boom"})
	default:
		e.t.Fatalf("inState(%s): no way to reach it through the Store interface", status)
	}
	return e.get(task.ID)
}

// unchanged fails if the stored task differs from want.
func (e *env) unchanged(op string, want *store.Task) {
	e.t.Helper()
	if d := diff(want, e.get(want.ID)); d != "" {
		e.t.Errorf("after %s, Get(%d) changed (-before +after):\n%s", op, want.ID, d)
	}
}

// stamped checks that a time the store stamped lies between two readings of its clock.
func (e *env) stamped(what string, got, lo, hi time.Time) {
	e.t.Helper()
	if got.Before(lo.Add(-slack)) || got.After(hi.Add(slack)) {
		e.t.Errorf("%s = %v, want between %v and %v", what, got, lo, hi)
	}
}

// checkTask fails if a time of task is not UTC.
func checkTask(t *testing.T, op string, task *store.Task) {
	t.Helper()
	for name, ts := range map[string]time.Time{
		"DueAt": task.DueAt, "CreatedAt": task.CreatedAt, "UpdatedAt": task.UpdatedAt,
		"DispatchedAt": task.DispatchedAt, "StartedAt": task.StartedAt, "HeartbeatAt": task.HeartbeatAt,
		"FinishedAt": task.FinishedAt, "TriggeredAt": task.TriggeredAt,
	} {
		if ts.Location() != time.UTC {
			t.Errorf("%s: task %d: %s = %v, want UTC", op, task.ID, name, ts)
		}
	}
}

// checkExecution fails if a time of x is not UTC.
func checkExecution(t *testing.T, op string, x *store.Execution) {
	t.Helper()
	for name, ts := range map[string]time.Time{
		"StartedAt": x.StartedAt, "HeartbeatAt": x.HeartbeatAt, "FinishedAt": x.FinishedAt,
		"DueAt": x.DueAt, "ClaimedAt": x.ClaimedAt,
	} {
		if ts.Location() != time.UTC {
			t.Errorf("%s: execution %s: %s = %v, want UTC", op, x.ID, name, ts)
		}
	}
}
