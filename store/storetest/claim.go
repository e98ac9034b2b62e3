package storetest

import (
	"errors"
	"time"

	"github.com/axsched/ax/store"
)

// claimStartTests check ClaimStart: claim and start in one write.
var claimStartTests = []test{
	{"Started", testClaimStartStarted},
	{"Mixed", testClaimStartMixed},
	{"ManyChunks", testClaimStartManyChunks},
	{"RetryAndAllow", testClaimStartRetryAndAllow},
	{"NamedTwice", testClaimStartNamedTwice},
	{"Invalid", testClaimStartInvalid},
	{"Fenced", testClaimStartFenced},
}

// here is the StartOn of the claimer in these tests: it runs the tasks newTask makes.
var here = store.StartOn{Node: "node-3", Handlers: []string{"report.send", "order.close"}}

// testClaimStartStarted: a due task claimed with Start goes straight to RUNNING, one
// time stamped as dispatched, started and alive, with its execution recorded as Start
// records it; it then lives as any started task does (Heartbeat, Start again is a
// duplicate, Finish).
func testClaimStartStarted(e *env) {
	before := e.scheduled(e.past())
	exec := newExecID()
	lo := e.settle(before)
	res, err := e.s.ClaimStart(e.ctx, store.Fence{}, here, []store.Claim{{ID: before.ID, ExecutionID: exec, Start: true}})
	hi := e.now()
	if err != nil {
		e.t.Fatalf("ClaimStart(%d) error: %v", before.ID, err)
	}
	if len(res.Started) != 1 || len(res.Claimed)+len(res.NotDue)+len(res.Skipped)+len(res.Blocked) != 0 {
		e.t.Fatalf("ClaimStart(due %d) = %+v, want it started and nothing else", before.ID, res)
	}
	got := &res.Started[0]
	checkTask(e.t, "ClaimStart", got)
	e.stamped("ClaimStart: DispatchedAt", got.DispatchedAt, lo, hi)
	if !got.StartedAt.Equal(got.DispatchedAt) || !got.HeartbeatAt.Equal(got.DispatchedAt) {
		e.t.Errorf("ClaimStart: DispatchedAt %v, StartedAt %v, HeartbeatAt %v; want one and the same stamp", got.DispatchedAt, got.StartedAt, got.HeartbeatAt)
	}
	want := *before
	want.Status = store.Running
	want.ExecutionID = exec
	want.DispatchedAt, want.StartedAt, want.HeartbeatAt, want.UpdatedAt = got.DispatchedAt, got.StartedAt, got.HeartbeatAt, got.UpdatedAt
	if d := diff(&want, got); d != "" {
		e.t.Errorf("ClaimStart(%d) mismatch (-want +got):\n%s", before.ID, d)
	}
	e.unchanged("ClaimStart", got)
	wantX := []store.Execution{{ID: exec, TaskID: before.ID, Attempt: before.Attempt, Node: here.Node, Status: store.Running,
		DueAt: before.DueAt, ClaimedAt: got.DispatchedAt, StartedAt: got.StartedAt, HeartbeatAt: got.HeartbeatAt}}
	if d := diff(wantX, e.executions(before.ID)); d != "" {
		e.t.Errorf("Executions(%d) after ClaimStart mismatch (-want +got):\n%s", before.ID, d)
	}

	// Started: a Start of the same execution is a duplicate delivery.
	dup, err := e.s.Start(e.ctx, store.Fence{}, []store.StartParams{{TaskID: before.ID, ExecutionID: exec, Name: before.Name, Node: "node-9"}})
	if err != nil || len(dup) != 1 || dup[0].Outcome != store.Duplicate || dup[0].Execution == nil || dup[0].Execution.Node != here.Node {
		e.t.Errorf("Start after ClaimStart = %+v, %v; want Duplicate with the execution of %s", dup, err, here.Node)
	}
	if alive, err := e.s.Heartbeat(e.ctx, []store.ExecRef{{TaskID: before.ID, ExecutionID: exec}}); err != nil || len(alive) != 1 || alive[0] != store.BeatAlive {
		e.t.Errorf("Heartbeat after ClaimStart = %v, %v; want [true]", alive, err)
	}
	e.finish(store.Finish{TaskID: before.ID, ExecutionID: exec, Status: store.Succeeded})
	if execs := e.executions(before.ID); len(execs) != 1 || execs[0].Status != store.Succeeded {
		e.t.Errorf("Executions(%d) after Finish = %+v, want one SUCCEEDED", before.ID, execs)
	}
}

// testClaimStartMixed: only claimed tasks that ask to start and have a handler here
// start; the others get Claim's outcomes, and no execution record.
func testClaimStartMixed(e *env) {
	start1, start2 := e.scheduled(e.past()), e.scheduled(e.past())
	unasked := e.scheduled(e.past())
	other := e.newTask(e.past())
	other.Name = "invoice.send" // no handler here
	unhandled := e.insert(other)[0]
	later := e.scheduled(e.future())
	keyed := e.insert(e.keyed(e.past(), "k", store.OverlapSkip))[0]
	running := e.inState(store.Running)

	claims := []store.Claim{
		{ID: start2.ID, ExecutionID: newExecID(), Start: true},
		{ID: unasked.ID, ExecutionID: newExecID()},
		{ID: unhandled.ID, ExecutionID: newExecID(), Start: true},
		{ID: later.ID, ExecutionID: newExecID(), Start: true},
		{ID: keyed.ID, ExecutionID: newExecID(), Start: true},
		{ID: running.ID, ExecutionID: newExecID(), Start: true},
		{ID: start1.ID, ExecutionID: newExecID(), Start: true},
	}
	execs := map[int64]string{}
	for _, c := range claims {
		execs[c.ID] = c.ExecutionID
	}
	res, err := e.s.ClaimStart(e.ctx, store.Fence{}, here, claims)
	if err != nil {
		e.t.Fatalf("ClaimStart error: %v", err)
	}
	ids := func(ts []store.Task, status store.Status) []int64 {
		var out []int64
		for _, t := range ts {
			out = append(out, t.ID)
			if t.Status != status || t.ExecutionID != execs[t.ID] {
				e.t.Errorf("ClaimStart: task %d is %s with execution %s, want %s with %s", t.ID, t.Status, t.ExecutionID, status, execs[t.ID])
			}
		}
		return out
	}
	if d := diff([]int64{start1.ID, start2.ID}, ids(res.Started, store.Running)); d != "" {
		e.t.Errorf("ClaimStart.Started ids mismatch, want the two that asked, with a handler, in id order (-want +got):\n%s", d)
	}
	if d := diff([]int64{unasked.ID, unhandled.ID, keyed.ID}, ids(res.Claimed, store.Dispatching)); d != "" {
		e.t.Errorf("ClaimStart.Claimed ids mismatch, want the unasked, the unhandled and the keyed one (-want +got):\n%s", d)
	}
	if d := diff([]store.Due{{ID: later.ID, DueAt: later.DueAt}}, res.NotDue); d != "" {
		e.t.Errorf("ClaimStart.NotDue mismatch (-want +got):\n%s", d)
	}
	for _, id := range []int64{unasked.ID, unhandled.ID, keyed.ID, later.ID} {
		if x := e.executions(id); len(x) != 0 {
			e.t.Errorf("task %d, not started: executions %+v, want none", id, x)
		}
	}
	for _, id := range []int64{start1.ID, start2.ID} {
		if x := e.executions(id); len(x) != 1 || x[0].ID != execs[id] || x[0].Status != store.Running || x[0].Node != here.Node {
			e.t.Errorf("task %d, started: executions %+v, want one RUNNING on %s", id, x, here.Node)
		}
	}
	e.unchanged("ClaimStart", later)
	e.unchanged("ClaimStart", running)

	// Without handlers (or with Claim) nothing starts.
	a := e.scheduled(e.past())
	res, err = e.s.ClaimStart(e.ctx, store.Fence{}, store.StartOn{Node: "node-3"}, []store.Claim{{ID: a.ID, ExecutionID: newExecID(), Start: true}})
	if err != nil || len(res.Started) != 0 || len(res.Claimed) != 1 {
		e.t.Errorf("ClaimStart with no handlers = %+v, %v; want the task claimed, not started", res, err)
	}
	b := e.scheduled(e.past())
	res, err = e.s.Claim(e.ctx, store.Fence{}, []store.Claim{{ID: b.ID, ExecutionID: newExecID(), Start: true}})
	if err != nil || len(res.Started) != 0 || len(res.Claimed) != 1 {
		e.t.Errorf("Claim with Start set = %+v, %v; want the task claimed, not started", res, err)
	}
}

// testClaimStartManyChunks: a call of more than a batch, every other claim asking to
// start, starts exactly those, with a record each.
func testClaimStartManyChunks(e *env) {
	n := 2*store.MaxBatch + 7
	news := make([]store.NewTask, n)
	for i := range news {
		news[i] = e.newTask(e.past())
	}
	tasks := e.insert(news...)
	claims := make([]store.Claim, n)
	for i, t := range tasks {
		claims[i] = store.Claim{ID: t.ID, ExecutionID: newExecID(), Start: i%2 == 0}
	}
	res, err := e.s.ClaimStart(e.ctx, store.Fence{}, here, claims)
	if err != nil {
		e.t.Fatalf("ClaimStart(%d) error: %v", n, err)
	}
	if len(res.Started) != (n+1)/2 || len(res.Claimed) != n/2 {
		e.t.Fatalf("ClaimStart(%d, every other to start): %d started, %d claimed; want %d and %d", n, len(res.Started), len(res.Claimed), (n+1)/2, n/2)
	}
	for i, t := range tasks {
		x := e.executions(t.ID)
		if want := i%2 == 0; (len(x) == 1) != want || (want && x[0].ID != claims[i].ExecutionID) {
			e.t.Fatalf("task %d (start %v): executions %+v", t.ID, want, x)
		}
	}
}

// testClaimStartRetryAndAllow: the execution of a retried task records its attempt; a
// task with a key and Overlap allow is not restricted by it, and starts.
func testClaimStartRetryAndAllow(e *env) {
	retried := e.claim(e.scheduled(e.past()).ID)
	e.start(retried)
	e.finish(store.Finish{TaskID: retried.ID, ExecutionID: retried.ExecutionID, Status: store.Scheduled, Attempt: 2, Error: "boom", DueAt: e.past()})
	allow := e.insert(e.keyed(e.past(), "shared", store.OverlapAllow))[0]
	claims := []store.Claim{{ID: retried.ID, ExecutionID: newExecID(), Start: true}, {ID: allow.ID, ExecutionID: newExecID(), Start: true}}
	res, err := e.s.ClaimStart(e.ctx, store.Fence{}, here, claims)
	if err != nil || len(res.Started) != 2 {
		e.t.Fatalf("ClaimStart(retried, keyed allow) = %+v, %v; want both started", res, err)
	}
	if x := e.executions(retried.ID); len(x) != 2 || x[1].ID != claims[0].ExecutionID || x[1].Attempt != 2 || x[1].Status != store.Running {
		e.t.Errorf("retried task: executions %+v, want the second RUNNING at attempt 2", x)
	}
	if x := e.executions(allow.ID); len(x) != 1 || x[0].Status != store.Running {
		e.t.Errorf("keyed allow task: executions %+v, want one RUNNING", x)
	}
}

// testClaimStartNamedTwice: a task named twice in one call is claimed with its first
// claim, execution id and Start flag alike: here not started, whatever the second asks.
func testClaimStartNamedTwice(e *env) {
	a := e.scheduled(e.past())
	first := newExecID()
	res, err := e.s.ClaimStart(e.ctx, store.Fence{}, here, []store.Claim{{ID: a.ID, ExecutionID: first}, {ID: a.ID, ExecutionID: newExecID(), Start: true}})
	if err != nil || len(res.Claimed) != 1 || len(res.Started) != 0 || res.Claimed[0].ExecutionID != first {
		e.t.Fatalf("ClaimStart(the task twice, the second to start) = %+v, %v; want it claimed once, with the first claim", res, err)
	}
	if x := e.executions(a.ID); len(x) != 0 {
		e.t.Errorf("executions %+v, want none: the claim did not start it", x)
	}
}

func testClaimStartInvalid(e *env) {
	a := e.scheduled(e.past())
	claims := []store.Claim{{ID: a.ID, ExecutionID: newExecID(), Start: true}}
	if res, err := e.s.ClaimStart(e.ctx, store.Fence{}, store.StartOn{Handlers: here.Handlers}, claims); !errors.Is(err, store.ErrInvalid) {
		e.t.Errorf("ClaimStart with no node = %+v, %v; want ErrInvalid", res, err)
	}
	if res, err := e.s.ClaimStart(e.ctx, store.Fence{}, here, append(claims, store.Claim{ID: a.ID + 1})); !errors.Is(err, store.ErrInvalid) {
		e.t.Errorf("ClaimStart with an empty execution id = %+v, %v; want ErrInvalid", res, err)
	}
	e.unchanged("an invalid ClaimStart", a)
	if x := e.executions(a.ID); len(x) != 0 {
		e.t.Errorf("after an invalid ClaimStart, executions %+v, want none", x)
	}
}

// testClaimStartFenced: a stale leader's ClaimStart starts nothing and records nothing.
func testClaimStartFenced(e *env) {
	old := e.raise("ns", "a", 1, 1)
	e.raise("ns", "b", 1, 2)
	a := e.scheduled(e.past())
	_, err := e.s.ClaimStart(e.ctx, old, here, []store.Claim{{ID: a.ID, ExecutionID: newExecID(), Start: true}})
	e.fenced("ClaimStart", err)
	e.unchanged("a fenced ClaimStart", a)
	if x := e.executions(a.ID); len(x) != 0 {
		e.t.Errorf("after a fenced ClaimStart, executions %+v, want none", x)
	}
}

var claimTests = []test{
	{"Due", testClaimDue},
	{"NotDue", testClaimNotDue},
	{"Mixed", testClaimMixed},
	{"BecomesDue", testClaimBecomesDue},
	{"Empty", testClaimEmpty},
	{"Invalid", testClaimInvalid},
}

func testClaimDue(e *env) {
	before := e.scheduled(e.past())
	exec := newExecID()
	lo := e.settle(before)
	res, err := e.s.Claim(e.ctx, store.Fence{}, []store.Claim{{ID: before.ID, ExecutionID: exec}})
	hi := e.now()
	if err != nil {
		e.t.Fatalf("Claim(%d) error: %v", before.ID, err)
	}
	if len(res.Claimed) != 1 || len(res.NotDue) != 0 {
		e.t.Fatalf("Claim(due %d) = %+v, want it claimed", before.ID, res)
	}
	got := &res.Claimed[0]
	checkTask(e.t, "Claim", got)
	e.stamped("Claim: DispatchedAt", got.DispatchedAt, lo, hi)
	e.stamped("Claim: UpdatedAt", got.UpdatedAt, lo, hi)
	want := *before
	want.Status = store.Dispatching
	want.ExecutionID = exec
	want.DispatchedAt, want.UpdatedAt = got.DispatchedAt, got.UpdatedAt
	if d := diff(&want, got); d != "" {
		e.t.Errorf("Claim(%d) mismatch (-want +got):\n%s", before.ID, d)
	}
	e.unchanged("Claim", got)

	// A second claim finds it DISPATCHING and leaves it alone.
	res, err = e.s.Claim(e.ctx, store.Fence{}, []store.Claim{{ID: before.ID, ExecutionID: newExecID()}})
	if err != nil || len(res.Claimed)+len(res.NotDue) != 0 {
		e.t.Errorf("Claim(dispatching %d) = %+v, %v; want nothing", before.ID, res, err)
	}
	e.unchanged("a second Claim", got)
}

func testClaimNotDue(e *env) {
	before := e.scheduled(e.future())
	res, err := e.s.Claim(e.ctx, store.Fence{}, []store.Claim{{ID: before.ID, ExecutionID: newExecID()}})
	if err != nil {
		e.t.Fatalf("Claim(%d) error: %v", before.ID, err)
	}
	want := &store.ClaimResult{NotDue: []store.Due{{ID: before.ID, DueAt: before.DueAt}}}
	if d := diff(want, res); d != "" {
		e.t.Errorf("Claim(not due %d) mismatch (-want +got):\n%s", before.ID, d)
	}
	e.unchanged("Claim of a task not yet due", before)
}

func testClaimMixed(e *env) {
	due1, due2 := e.scheduled(e.past()), e.scheduled(e.past())
	later := e.scheduled(e.future())
	others := []*store.Task{e.inState(store.Cancelled), e.inState(store.Running), e.inState(store.Succeeded), e.inState(store.Dispatching)}
	missing := others[len(others)-1].ID + 1000

	ids := []int64{missing, due2.ID, later.ID, due1.ID}
	for _, o := range others {
		ids = append(ids, o.ID)
	}
	claims := make([]store.Claim, len(ids))
	execs := make(map[int64]string)
	for i, id := range ids {
		claims[i] = store.Claim{ID: id, ExecutionID: newExecID()}
		execs[id] = claims[i].ExecutionID
	}
	res, err := e.s.Claim(e.ctx, store.Fence{}, claims)
	if err != nil {
		e.t.Fatalf("Claim(%v) error: %v", ids, err)
	}
	var claimed []int64
	for _, c := range res.Claimed {
		claimed = append(claimed, c.ID)
		if c.ExecutionID != execs[c.ID] {
			e.t.Errorf("Claim: task %d got execution id %s, want %s", c.ID, c.ExecutionID, execs[c.ID])
		}
	}
	if d := diff([]int64{due1.ID, due2.ID}, claimed); d != "" {
		e.t.Errorf("Claim(%v).Claimed ids mismatch, want the due ones in id order (-want +got):\n%s", ids, d)
	}
	if d := diff([]store.Due{{ID: later.ID, DueAt: later.DueAt}}, res.NotDue); d != "" {
		e.t.Errorf("Claim(%v).NotDue mismatch (-want +got):\n%s", ids, d)
	}
	e.unchanged("Claim", later)
	for _, o := range others {
		e.unchanged("Claim", o)
	}
}

func testClaimBecomesDue(e *env) {
	task := e.scheduled(e.now().Add(30 * time.Millisecond))
	end := time.Now().Add(deadline)
	for {
		res, err := e.s.Claim(e.ctx, store.Fence{}, []store.Claim{{ID: task.ID, ExecutionID: newExecID()}})
		if err != nil {
			e.t.Fatalf("Claim(%d) error: %v", task.ID, err)
		}
		if len(res.Claimed) == 1 {
			got := res.Claimed[0]
			if got.DispatchedAt.Before(task.DueAt.Add(-precision)) {
				e.t.Errorf("Claim(%d) dispatched at %v, before it was due at %v", task.ID, got.DispatchedAt, task.DueAt)
			}
			if now := e.now(); now.Before(task.DueAt.Add(-precision)) {
				e.t.Errorf("Claim(%d) succeeded while Now() = %v is before DueAt %v", task.ID, now, task.DueAt)
			}
			return
		}
		if d := diff([]store.Due{{ID: task.ID, DueAt: task.DueAt}}, res.NotDue); d != "" || len(res.Claimed) != 0 {
			e.t.Fatalf("Claim(%d) = %+v, want it claimed or not due (-want +got NotDue):\n%s", task.ID, res, d)
		}
		if time.Now().After(end) {
			e.t.Fatalf("Claim(%d) still not due %v after its DueAt %v", task.ID, deadline, task.DueAt)
		}
		time.Sleep(time.Millisecond)
	}
}

func testClaimEmpty(e *env) {
	res, err := e.s.Claim(e.ctx, store.Fence{}, nil)
	if err != nil || res == nil || len(res.Claimed)+len(res.NotDue) != 0 {
		e.t.Errorf("Claim(nil) = %+v, %v; want an empty result", res, err)
	}
}

func testClaimInvalid(e *env) {
	a, b := e.scheduled(e.past()), e.scheduled(e.past())
	res, err := e.s.Claim(e.ctx, store.Fence{}, []store.Claim{{ID: a.ID, ExecutionID: newExecID()}, {ID: b.ID}})
	if !errors.Is(err, store.ErrInvalid) {
		e.t.Errorf("Claim(valid, empty execution id) = %+v, %v; want ErrInvalid", res, err)
	}
	e.unchanged("an invalid Claim", a)
	e.unchanged("an invalid Claim", b)
}
