package storetest

import (
	"errors"
	"strings"
	"time"

	"github.com/axsched/ax/store"
)

var startTests = []test{
	{"Started", testStartStarted},
	{"Duplicate", testStartDuplicate},
	{"DuplicateOfAnotherTask", testStartDuplicateOfAnotherTask},
	{"DuplicateAfterFinish", testStartDuplicateAfterFinish},
	{"Lost", testStartLost},
	{"LostUnderAnotherName", testStartLostUnderAnotherName},
	{"LostInAnotherNamespace", testStartLostInAnotherNamespace},
	{"LostToAnotherNamespacesExecution", testStartLostToAnotherNamespacesExecution},
	{"InputOrder", testStartInputOrder},
	{"Invalid", testStartInvalid},
	{"DueAndClaimTimes", testStartDueAndClaimTimes},
}

var heartbeatTests = []test{
	{"Running", testHeartbeatRunning},
	{"NotRunning", testHeartbeatNotRunning},
	{"NotInAnotherNamespace", testHeartbeatNotInAnotherNamespace},
}

var finishTests = []test{
	{"Succeeded", testFinishSucceeded},
	{"Retry", testFinishRetry},
	{"Released", testFinishReleased},
	{"Snooze", testFinishSnooze},
	{"Failed", testFinishFailed},
	{"NotApplied", testFinishNotApplied},
	{"NotInAnotherNamespace", testFinishNotInAnotherNamespace},
	{"Invalid", testFinishInvalid},
}

var requeueTests = []test{
	{"Scheduled", testRequeueScheduled},
	{"Exhausted", testRequeueExhausted},
	{"NotApplied", testRequeueNotApplied},
	{"NotInAnotherNamespace", testRequeueNotInAnotherNamespace},
}

var staleTests = []test{
	{"Running", testStaleRunning},
	{"Dispatching", testStaleDispatching},
	{"Invalid", testStaleInvalid},
}

func testStartStarted(e *env) {
	before := e.inState(store.Dispatching)
	lo := e.settle(before)
	res, err := e.s.Start(e.ctx, store.Fence{}, []store.StartParams{{TaskID: before.ID, ExecutionID: before.ExecutionID, Name: before.Name, Node: "node-7"}})
	hi := e.now()
	if err != nil {
		e.t.Fatalf("Start(%d) error: %v", before.ID, err)
	}
	if len(res) != 1 || res[0].Outcome != store.Started || res[0].Task == nil || res[0].Execution == nil {
		e.t.Fatalf("Start(%d) = %+v, want Started with the task and its execution", before.ID, res)
	}
	got, x := res[0].Task, res[0].Execution
	checkTask(e.t, "Start", got)
	checkExecution(e.t, "Start", x)
	e.stamped("Start: Task.StartedAt", got.StartedAt, lo, hi)
	e.stamped("Start: Task.HeartbeatAt", got.HeartbeatAt, lo, hi)
	e.stamped("Start: Task.UpdatedAt", got.UpdatedAt, lo, hi)
	e.stamped("Start: Execution.StartedAt", x.StartedAt, lo, hi)
	e.stamped("Start: Execution.HeartbeatAt", x.HeartbeatAt, lo, hi)
	want := *before
	want.Status = store.Running
	want.StartedAt, want.HeartbeatAt, want.UpdatedAt = got.StartedAt, got.HeartbeatAt, got.UpdatedAt
	if d := diff(&want, got); d != "" {
		e.t.Errorf("Start(%d).Task mismatch (-want +got):\n%s", before.ID, d)
	}
	wantX := &store.Execution{
		ID:          before.ExecutionID,
		TaskID:      before.ID,
		Attempt:     before.Attempt,
		Node:        "node-7",
		Status:      store.Running,
		DueAt:       before.DueAt,
		ClaimedAt:   before.DispatchedAt,
		StartedAt:   x.StartedAt,
		HeartbeatAt: x.HeartbeatAt,
	}
	if d := diff(wantX, x); d != "" {
		e.t.Errorf("Start(%d).Execution mismatch (-want +got):\n%s", before.ID, d)
	}
	e.unchanged("Start", got)
	if d := diff([]store.Execution{*x}, e.executions(before.ID)); d != "" {
		e.t.Errorf("Executions(%d) after Start mismatch (-want +got):\n%s", before.ID, d)
	}
}

func testStartDuplicate(e *env) {
	// A second delivery after the first.
	task := e.inState(store.Dispatching)
	first := e.start(task)
	running := e.get(task.ID)
	res, err := e.s.Start(e.ctx, store.Fence{}, []store.StartParams{{TaskID: task.ID, ExecutionID: task.ExecutionID, Name: task.Name, Node: "node-2"}})
	if err != nil {
		e.t.Fatalf("Start(%d) again error: %v", task.ID, err)
	}
	if len(res) != 1 || res[0].Outcome != store.Duplicate || res[0].Task != nil {
		e.t.Fatalf("Start(%d) again = %+v, want Duplicate without a task", task.ID, res)
	}
	if d := diff(first.Execution, res[0].Execution); d != "" {
		e.t.Errorf("Start(%d) again: Execution is not the recorded one (-recorded +got):\n%s", task.ID, d)
	}
	e.unchanged("a duplicate Start", running)
	if got := e.executions(task.ID); len(got) != 1 {
		e.t.Errorf("Executions(%d) after a duplicate Start = %+v, want one record", task.ID, got)
	}

	// Two deliveries in one batch.
	task = e.inState(store.Dispatching)
	p := store.StartParams{TaskID: task.ID, ExecutionID: task.ExecutionID, Name: task.Name, Node: "node-1"}
	res, err = e.s.Start(e.ctx, store.Fence{}, []store.StartParams{p, p})
	if err != nil {
		e.t.Fatalf("Start(%d twice) error: %v", task.ID, err)
	}
	if len(res) != 2 || res[0].Outcome != store.Started || res[1].Outcome != store.Duplicate {
		e.t.Fatalf("Start(%d twice) = %+v, want Started then Duplicate", task.ID, res)
	}
	if d := diff(res[0].Execution, res[1].Execution); d != "" {
		e.t.Errorf("Start(%d twice): the duplicate's Execution differs (-started +duplicate):\n%s", task.ID, d)
	}
	if got := e.executions(task.ID); len(got) != 1 {
		e.t.Errorf("Executions(%d) after Start(twice) = %+v, want one record", task.ID, got)
	}
}

func testStartDuplicateOfAnotherTask(e *env) {
	// Execution ids are unique across the store: an id recorded for one task is a
	// duplicate whatever task it is presented with.
	a := e.inState(store.Running)
	b := e.inState(store.Dispatching)
	recorded := e.executions(a.ID)[0]
	res, err := e.s.Start(e.ctx, store.Fence{}, []store.StartParams{{TaskID: b.ID, ExecutionID: a.ExecutionID, Name: b.Name, Node: "node-1"}})
	if err != nil {
		e.t.Fatalf("Start(%d, execution of %d) error: %v", b.ID, a.ID, err)
	}
	if len(res) != 1 || res[0].Outcome != store.Duplicate {
		e.t.Fatalf("Start(%d, execution of %d) = %+v, want Duplicate", b.ID, a.ID, res)
	}
	if d := diff(&recorded, res[0].Execution); d != "" {
		e.t.Errorf("Start(%d, execution of %d): Execution mismatch (-recorded +got):\n%s", b.ID, a.ID, d)
	}
	e.unchanged("Start", a)
	e.unchanged("Start", b)
}

func testStartDuplicateAfterFinish(e *env) {
	// A delivery that arrives once the execution has finished — it succeeded, failed,
	// or failed and the task waits for its retry — is a duplicate with the record as
	// Executions reads it: closed, Succeeded or Failed.
	for _, status := range []store.Status{store.Succeeded, store.Failed, store.Scheduled} {
		task := e.inState(store.Dispatching)
		e.start(task)
		f := store.Finish{TaskID: task.ID, ExecutionID: task.ExecutionID, Status: status}
		want := store.Succeeded
		if status != store.Succeeded {
			f.Error, want = "boom", store.Failed
		}
		if status == store.Scheduled {
			f.Attempt, f.DueAt = task.Attempt+1, e.past().Add(time.Hour)
		}
		e.finish(f)
		recorded := e.executions(task.ID)
		if len(recorded) != 1 || recorded[0].Status != want || recorded[0].FinishedAt.IsZero() {
			e.t.Fatalf("Executions(%d) after Finish(%s) = %+v, want one record, %s and finished", task.ID, status, recorded, want)
		}
		finished, other := e.get(task.ID), e.inState(store.Dispatching)
		for _, of := range []int64{task.ID, other.ID} { // its own task, and another
			res, err := e.s.Start(e.ctx, store.Fence{}, []store.StartParams{{TaskID: of, ExecutionID: task.ExecutionID, Name: task.Name, Node: "node-3"}})
			if err != nil {
				e.t.Fatalf("Start(%d, execution of %d, after %s) error: %v", of, task.ID, status, err)
			}
			if len(res) != 1 || res[0].Outcome != store.Duplicate {
				e.t.Fatalf("Start(%d, execution of %d, after %s) = %+v, want Duplicate", of, task.ID, status, res)
			}
			if d := diff(&recorded[0], res[0].Execution); d != "" {
				e.t.Errorf("Start(%d, execution of %d, after %s): Execution is not the closed record (-recorded +got):\n%s", of, task.ID, status, d)
			}
		}
		e.unchanged("a Start after Finish", finished)
		e.unchanged("a Start with another task's execution id", other)
		if got := e.executions(other.ID); len(got) != 0 {
			e.t.Errorf("Executions(%d) after a Start with another task's execution id = %+v, want none", other.ID, got)
		}
	}
}

func testStartLost(e *env) {
	disp := e.inState(store.Dispatching)
	sched := e.scheduled(e.past())
	running := e.inState(store.Running)
	cases := []struct {
		what   string
		before *store.Task
		p      store.StartParams
	}{
		{"wrong execution id", disp, store.StartParams{TaskID: disp.ID, ExecutionID: newExecID(), Name: disp.Name}},
		{"scheduled task", sched, store.StartParams{TaskID: sched.ID, ExecutionID: newExecID(), Name: sched.Name}},
		{"running task, new execution id", running, store.StartParams{TaskID: running.ID, ExecutionID: newExecID(), Name: running.Name}},
		{"missing task", nil, store.StartParams{TaskID: running.ID + 1000, ExecutionID: newExecID(), Name: running.Name}},
	}
	for _, c := range cases {
		res, err := e.s.Start(e.ctx, store.Fence{}, []store.StartParams{c.p})
		if err != nil {
			e.t.Fatalf("Start(%s) error: %v", c.what, err)
		}
		if len(res) != 1 || res[0].Outcome != store.Lost || res[0].Task != nil || res[0].Execution != nil {
			e.t.Errorf("Start(%s) = %+v, want Lost without task or execution", c.what, res)
		}
		if c.before != nil {
			e.unchanged("Start("+c.what+")", c.before)
		}
	}
	if got := e.executions(disp.ID); len(got) != 0 {
		e.t.Errorf("Executions(%d) after a lost Start = %+v, want none", disp.ID, got)
	}
	if got := e.executions(running.ID); len(got) != 1 {
		e.t.Errorf("Executions(%d) after a lost Start = %+v, want its one record", running.ID, got)
	}
}

// A Start whose Name is not the stored task's is Lost and writes nothing: the task
// stays DISPATCHING with its execution id, and a Start with its own name starts it.
func testStartLostUnderAnotherName(e *env) {
	task := e.inState(store.Dispatching)
	for _, name := range []string{"payment.refund", "Order.close", "order.close ", "order.clos", "order.close.x"} {
		if name == task.Name {
			e.t.Fatalf("the suite's task is named %q: pick other names", name)
		}
		e.lostStart("named "+name, store.StartParams{TaskID: task.ID, ExecutionID: task.ExecutionID, Name: name, Node: "node-1"})
		e.unchanged("a Start under another name", task)
		if got := e.executions(task.ID); len(got) != 0 {
			e.t.Fatalf("Executions(%d) after a Start named %q = %+v, want none", task.ID, name, got)
		}
	}
	// In a batch with a Start that applies, only that one does.
	other := e.inState(store.Dispatching)
	res, err := e.s.Start(e.ctx, store.Fence{}, []store.StartParams{
		{TaskID: task.ID, ExecutionID: task.ExecutionID, Name: "payment.refund", Node: "node-1"},
		{TaskID: other.ID, ExecutionID: other.ExecutionID, Name: other.Name, Node: "node-1"},
	})
	if err != nil || len(res) != 2 || res[0].Outcome != store.Lost || res[1].Outcome != store.Started {
		e.t.Fatalf("Start(another name, its own name) = %+v, %v; want Lost, Started", res, err)
	}
	e.unchanged("a Start under another name", task)
	if got := e.get(task.ID); got.Status != store.Dispatching || got.ExecutionID != task.ExecutionID {
		e.t.Fatalf("after Starts under other names, task %d is %s with %s, want DISPATCHING with %s", task.ID, got.Status, got.ExecutionID, task.ExecutionID)
	}
	if started := e.start(task); started.Task.Name != task.Name || started.Execution.ID != task.ExecutionID {
		e.t.Errorf("Start under its own name = %+v, want the task started with %s", started, task.ExecutionID)
	}
}

// A Start through one namespace's view of a task of another namespace is Lost and
// writes nothing, whatever ids and name it is given; the task still starts in its
// own namespace, and once it has, the other view's Start of it is still Lost, not a
// duplicate: that view does not see the record.
func testStartLostInAnotherNamespace(e *env) {
	a, b := e.view("a"), e.view("b")
	task := b.inState(store.Dispatching)
	p := store.StartParams{TaskID: task.ID, ExecutionID: task.ExecutionID, Name: task.Name, Node: "node-a"}
	a.lostStart("of b's task in a", p)
	e.lostStart("of b's task in the default namespace", p)
	b.unchanged("a Start from another namespace", task)
	if got := b.executions(task.ID); len(got) != 0 {
		e.t.Fatalf("Executions(%d) in b after a Start in a = %+v, want none", task.ID, got)
	}
	started := b.start(task)
	a.lostStart("of b's started task in a", p)
	running := b.get(task.ID)
	if d := diff([]store.Execution{*started.Execution}, b.executions(task.ID)); d != "" {
		e.t.Errorf("Executions(%d) in b after a's Start (-want +got):\n%s", task.ID, d)
	}
	b.unchanged("a's Start of b's running task", running)
}

// An execution id recorded for another namespace's task stays that namespace's: a
// view whose own task is DISPATCHING with that id (Claim takes the id it is given)
// gets Lost from Start, without an error, and nothing is written in either namespace.
func testStartLostToAnotherNamespacesExecution(e *env) {
	a, b := e.view("a"), e.view("b")
	theirs := b.inState(store.Running)
	mine := a.insert(a.newTask(a.past()))[0]
	res, err := a.s.Claim(a.ctx, store.Fence{}, []store.Claim{{ID: mine.ID, ExecutionID: theirs.ExecutionID}})
	if err != nil || len(res.Claimed) != 1 || res.Claimed[0].ExecutionID != theirs.ExecutionID {
		e.t.Fatalf("Claim(%d) in a with b's execution id %s = %+v, %v; want it claimed", mine.ID, theirs.ExecutionID, res, err)
	}
	dispatching := a.get(mine.ID)
	a.lostStart("in a, with b's recorded execution id", store.StartParams{TaskID: mine.ID, ExecutionID: theirs.ExecutionID, Name: mine.Name, Node: "node-a"})
	a.unchanged("a Start with another namespace's execution id", dispatching)
	if got := a.executions(mine.ID); len(got) != 0 {
		e.t.Errorf("Executions(%d) in a after its Start was lost = %+v, want none", mine.ID, got)
	}
	b.unchanged("a's Start with b's execution id", theirs)
	if got := b.executions(theirs.ID); len(got) != 1 || got[0].ID != theirs.ExecutionID || got[0].Node != "node-1" {
		e.t.Errorf("Executions(%d) in b after a's Start = %+v, want its one record on node-1", theirs.ID, got)
	}
}

func testStartInputOrder(e *env) {
	d1, d2 := e.inState(store.Dispatching), e.inState(store.Dispatching)
	r := e.inState(store.Running)
	res, err := e.s.Start(e.ctx, store.Fence{}, []store.StartParams{
		{TaskID: d1.ID, ExecutionID: newExecID(), Name: d1.Name},
		{TaskID: r.ID, ExecutionID: r.ExecutionID, Name: r.Name},
		{TaskID: d2.ID, ExecutionID: d2.ExecutionID, Name: d2.Name},
	})
	if err != nil {
		e.t.Fatalf("Start(lost, duplicate, started) error: %v", err)
	}
	var got []store.StartOutcome
	for _, x := range res {
		got = append(got, x.Outcome)
	}
	if d := diff([]store.StartOutcome{store.Lost, store.Duplicate, store.Started}, got); d != "" {
		e.t.Errorf("Start(lost, duplicate, started) outcomes mismatch (-want +got):\n%s", d)
	}
	if len(res) == 3 && (res[2].Task == nil || res[2].Task.ID != d2.ID) {
		e.t.Errorf("Start(...)[2].Task = %+v, want task %d", res[2].Task, d2.ID)
	}
}

// A Start with an empty execution id, or with a task name that is empty, not UTF-8
// or holds a NUL, is ErrInvalid and writes nothing, not even the valid Start beside it.
func testStartInvalid(e *env) {
	for what, spoil := range map[string]func(*store.StartParams){
		"empty execution id": func(p *store.StartParams) { p.ExecutionID = "" },
		"long execution id":  func(p *store.StartParams) { p.ExecutionID = strings.Repeat("e", store.MaxExecutionIDLen+1) },
		"execution id NUL":   func(p *store.StartParams) { p.ExecutionID = "e\x00" },
		"empty name":         func(p *store.StartParams) { p.Name = "" },
		"name not UTF-8":     func(p *store.StartParams) { p.Name = "order.\xff" },
		"name with a NUL":    func(p *store.StartParams) { p.Name = "order.close\x00" },
	} {
		d1, d2 := e.inState(store.Dispatching), e.inState(store.Dispatching)
		bad := store.StartParams{TaskID: d2.ID, ExecutionID: d2.ExecutionID, Name: d2.Name, Node: "node-1"}
		spoil(&bad)
		res, err := e.s.Start(e.ctx, store.Fence{}, []store.StartParams{
			{TaskID: d1.ID, ExecutionID: d1.ExecutionID, Name: d1.Name, Node: "node-1"},
			bad,
		})
		if !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("Start(valid, %s) = %+v, %v; want ErrInvalid", what, res, err)
		}
		e.unchanged("an invalid Start", d1)
		e.unchanged("an invalid Start", d2)
		for _, d := range []*store.Task{d1, d2} {
			if got := e.executions(d.ID); len(got) != 0 {
				e.t.Errorf("Executions(%d) after an invalid Start (%s) = %+v, want none", d.ID, what, got)
			}
		}
	}
}

func testHeartbeatRunning(e *env) {
	before := e.inState(store.Running)
	lo := e.settle(before)
	ok, err := e.s.Heartbeat(e.ctx, []store.ExecRef{{TaskID: before.ID, ExecutionID: before.ExecutionID}})
	hi := e.now()
	if err != nil {
		e.t.Fatalf("Heartbeat(%d) error: %v", before.ID, err)
	}
	if d := diff([]store.Beat{store.BeatAlive}, ok); d != "" {
		e.t.Fatalf("Heartbeat(running %d) mismatch (-want +got):\n%s", before.ID, d)
	}
	got := e.get(before.ID)
	e.stamped("Heartbeat: Task.HeartbeatAt", got.HeartbeatAt, lo, hi)
	if !got.HeartbeatAt.After(before.HeartbeatAt) {
		e.t.Errorf("Heartbeat: HeartbeatAt = %v, want after the start's %v", got.HeartbeatAt, before.HeartbeatAt)
	}
	want := *before
	want.HeartbeatAt = got.HeartbeatAt
	want.UpdatedAt = got.UpdatedAt // the contract does not say whether a heartbeat is an update
	if d := diff(&want, got); d != "" {
		e.t.Errorf("Heartbeat(%d) changed more than HeartbeatAt (-want +got):\n%s", before.ID, d)
	}
	execs := e.executions(before.ID)
	if len(execs) != 1 {
		e.t.Fatalf("Executions(%d) = %+v, want one", before.ID, execs)
	}
	e.stamped("Heartbeat: Execution.HeartbeatAt", execs[0].HeartbeatAt, lo, hi)
	if !execs[0].HeartbeatAt.After(execs[0].StartedAt) {
		e.t.Errorf("Heartbeat: Execution.HeartbeatAt = %v, want after its StartedAt %v", execs[0].HeartbeatAt, execs[0].StartedAt)
	}
	if execs[0].Status != store.Running || !execs[0].FinishedAt.IsZero() {
		e.t.Errorf("Heartbeat: execution = %+v, want still running", execs[0])
	}
}

func testHeartbeatNotRunning(e *env) {
	running := e.inState(store.Running)
	other := e.inState(store.Running)
	disp := e.inState(store.Dispatching)
	done := e.inState(store.Succeeded)
	refs := []store.ExecRef{
		{TaskID: other.ID, ExecutionID: newExecID()},
		{TaskID: disp.ID, ExecutionID: disp.ExecutionID},
		{TaskID: running.ID, ExecutionID: running.ExecutionID},
		{TaskID: done.ID, ExecutionID: done.ExecutionID},
		{TaskID: done.ID + 1000, ExecutionID: newExecID()},
	}
	ok, err := e.s.Heartbeat(e.ctx, refs)
	if err != nil {
		e.t.Fatalf("Heartbeat error: %v", err)
	}
	if d := diff([]store.Beat{store.BeatGone, store.BeatGone, store.BeatAlive, store.BeatGone, store.BeatGone}, ok); d != "" {
		e.t.Errorf("Heartbeat(wrong execution, dispatching, running, succeeded, missing) mismatch (-want +got):\n%s", d)
	}
	e.unchanged("Heartbeat with another execution id", other)
	e.unchanged("Heartbeat", disp)
	e.unchanged("Heartbeat", done)
	ok, err = e.s.Heartbeat(e.ctx, nil)
	if err != nil || len(ok) != 0 {
		e.t.Errorf("Heartbeat(nil) = %v, %v; want no results", ok, err)
	}
}

// A Heartbeat through one namespace's view of another namespace's running task does
// not apply and stamps nothing.
func testHeartbeatNotInAnotherNamespace(e *env) {
	a, b := e.view("a"), e.view("b")
	task := b.inState(store.Running)
	execs := b.executions(task.ID)
	e.settle(task)
	ok, err := a.s.Heartbeat(e.ctx, []store.ExecRef{{TaskID: task.ID, ExecutionID: task.ExecutionID}})
	if err != nil || len(ok) != 1 || ok[0] != store.BeatGone {
		e.t.Fatalf("Heartbeat in a of b's running task = %v, %v; want [BeatGone]", ok, err)
	}
	b.unchanged("a's Heartbeat of b's task", task)
	if d := diff(execs, b.executions(task.ID)); d != "" {
		e.t.Errorf("a's Heartbeat of b's task changed its execution (-before +after):\n%s", d)
	}
}

func testFinishSucceeded(e *env) {
	before := e.inState(store.Running)
	lo := e.settle(before)
	e.finish(store.Finish{TaskID: before.ID, ExecutionID: before.ExecutionID, Status: store.Succeeded, Error: "not an error"})
	hi := e.now()
	got := e.get(before.ID)
	e.stamped("Finish(Succeeded): FinishedAt", got.FinishedAt, lo, hi)
	e.stamped("Finish(Succeeded): UpdatedAt", got.UpdatedAt, lo, hi)
	want := *before
	want.Status = store.Succeeded
	want.FinishedAt, want.UpdatedAt = got.FinishedAt, got.UpdatedAt
	if d := diff(&want, got); d != "" {
		e.t.Errorf("Finish(Succeeded) mismatch (-want +got):\n%s", d)
	}
	e.checkClosed(before, store.Succeeded, "", lo, hi)
}

func testFinishRetry(e *env) {
	before := e.inState(store.Running)
	due := e.past()
	lo := e.settle(before)
	e.finish(store.Finish{TaskID: before.ID, ExecutionID: before.ExecutionID, Status: store.Scheduled,
		Error: "handler timed out", Attempt: before.Attempt + 1, DueAt: due})
	hi := e.now()
	got := e.get(before.ID)
	e.stamped("Finish(Scheduled): UpdatedAt", got.UpdatedAt, lo, hi)
	want := *before
	want.Status = store.Scheduled
	want.Attempt = before.Attempt + 1
	want.DueAt = due
	want.LastError = "handler timed out"
	want.UpdatedAt = got.UpdatedAt
	if d := diff(&want, got); d != "" {
		e.t.Errorf("Finish(Scheduled) mismatch (-want +got):\n%s", d)
	}
	e.checkClosed(before, store.Failed, "handler timed out", lo, hi)

	// The retry runs as a second execution, and success keeps the last error.
	second := e.claim(before.ID)
	started := e.start(second)
	if started.Execution.Attempt != before.Attempt+1 {
		e.t.Errorf("Start of the retry: Execution.Attempt = %d, want %d", started.Execution.Attempt, before.Attempt+1)
	}
	e.finish(store.Finish{TaskID: second.ID, ExecutionID: second.ExecutionID, Status: store.Succeeded})
	got = e.get(before.ID)
	if got.Status != store.Succeeded || got.LastError != "handler timed out" || got.Attempt != before.Attempt+1 {
		e.t.Errorf("after the retry succeeded, Get(%d) = status %s attempt %d last error %q; want %s %d %q",
			got.ID, got.Status, got.Attempt, got.LastError, store.Succeeded, before.Attempt+1, "handler timed out")
	}
	execs := e.executions(before.ID)
	var ids []string
	var statuses []store.Status
	for _, x := range execs {
		ids = append(ids, x.ID)
		statuses = append(statuses, x.Status)
	}
	if d := diff([]string{before.ExecutionID, second.ExecutionID}, ids); d != "" {
		e.t.Errorf("Executions(%d) ids, want oldest first (-want +got):\n%s", before.ID, d)
	}
	if d := diff([]store.Status{store.Failed, store.Succeeded}, statuses); d != "" {
		e.t.Errorf("Executions(%d) statuses mismatch (-want +got):\n%s", before.ID, d)
	}
}

func testFinishReleased(e *env) {
	before := e.inState(store.Running)
	due := e.future()
	e.finish(store.Finish{TaskID: before.ID, ExecutionID: before.ExecutionID, Status: store.Scheduled,
		Error: "released at shutdown", Attempt: before.Attempt, DueAt: due})
	got := e.get(before.ID)
	if got.Status != store.Scheduled || got.Attempt != before.Attempt || diff(due, got.DueAt) != "" {
		e.t.Errorf("Finish(released) → Get(%d) = status %s attempt %d due %v; want %s %d %v",
			got.ID, got.Status, got.Attempt, got.DueAt, store.Scheduled, before.Attempt, due)
	}
}

// A snooze puts the task back to SCHEDULED at DueAt with its Attempt, counts it in
// Snoozes and closes the record SNOOZED; a second snooze counts again, and an
// operator's Retry of the task, once failed, starts the count again.
func testFinishSnooze(e *env) {
	before := e.inState(store.Running)
	due := e.past()
	lo := e.settle(before)
	e.finish(store.Finish{TaskID: before.ID, ExecutionID: before.ExecutionID, Status: store.Scheduled,
		Error: "snoozed for 1s", Attempt: before.Attempt, DueAt: due, Snooze: true})
	hi := e.now()
	got := e.get(before.ID)
	e.stamped("Finish(snooze): UpdatedAt", got.UpdatedAt, lo, hi)
	want := *before
	want.Status, want.DueAt, want.LastError, want.Snoozes = store.Scheduled, due, "snoozed for 1s", before.Snoozes+1
	want.UpdatedAt = got.UpdatedAt
	if d := diff(&want, got); d != "" {
		e.t.Errorf("Finish(snooze) mismatch (-want +got):\n%s", d)
	}
	e.checkClosed(before, store.Snoozed, "snoozed for 1s", lo, hi)

	// Snoozed again, then run and failed: two snoozes, two SNOOZED records.
	second := e.claim(before.ID)
	e.start(second)
	e.finish(store.Finish{TaskID: second.ID, ExecutionID: second.ExecutionID, Status: store.Scheduled,
		Error: "snoozed until later", Attempt: before.Attempt, DueAt: e.past(), Snooze: true})
	third := e.claim(before.ID)
	e.start(third)
	e.finish(store.Finish{TaskID: third.ID, ExecutionID: third.ExecutionID, Status: store.Failed, Error: "gave up"})
	got = e.get(before.ID)
	if got.Status != store.Failed || got.Snoozes != before.Snoozes+2 || got.Attempt != before.Attempt {
		e.t.Errorf("after two snoozes and a failure: status %s snoozes %d attempt %d; want %s %d %d",
			got.Status, got.Snoozes, got.Attempt, store.Failed, before.Snoozes+2, before.Attempt)
	}
	var statuses []store.Status
	for _, x := range e.executions(before.ID) {
		statuses = append(statuses, x.Status)
	}
	if d := diff([]store.Status{store.Snoozed, store.Snoozed, store.Failed}, statuses); d != "" {
		e.t.Errorf("Executions(%d) statuses mismatch (-want +got):\n%s", before.ID, d)
	}
	retried, err := e.s.Retry(e.ctx, before.ID)
	if err != nil {
		e.t.Fatalf("Retry(%d) error: %v", before.ID, err)
	}
	if retried.Snoozes != 0 {
		e.t.Errorf("Retry: Snoozes = %d, want 0 (a fresh budget)", retried.Snoozes)
	}
}

func testFinishFailed(e *env) {
	before := e.inState(store.Running)
	lo := e.settle(before)
	e.finish(store.Finish{TaskID: before.ID, ExecutionID: before.ExecutionID, Status: store.Failed, Error: "retries exhausted"})
	hi := e.now()
	got := e.get(before.ID)
	e.stamped("Finish(Failed): FinishedAt", got.FinishedAt, lo, hi)
	e.stamped("Finish(Failed): UpdatedAt", got.UpdatedAt, lo, hi)
	want := *before
	want.Status = store.Failed
	want.LastError = "retries exhausted"
	want.FinishedAt, want.UpdatedAt = got.FinishedAt, got.UpdatedAt
	if d := diff(&want, got); d != "" {
		e.t.Errorf("Finish(Failed) mismatch (-want +got):\n%s", d)
	}
	e.checkClosed(before, store.Failed, "retries exhausted", lo, hi)
}

func testFinishNotApplied(e *env) {
	// Superseded: the first execution was retried and the task runs again.
	old := e.inState(store.Running)
	e.finish(store.Finish{TaskID: old.ID, ExecutionID: old.ExecutionID, Status: store.Scheduled,
		Error: "orphaned", Attempt: 1, DueAt: e.past()})
	e.start(e.claim(old.ID))
	superseded := e.get(old.ID)
	oldExecs := e.executions(old.ID)

	running := e.inState(store.Running)
	disp := e.inState(store.Dispatching)
	done := e.inState(store.Succeeded)
	doneExecs := e.executions(done.ID)
	results := []store.Finish{
		{TaskID: old.ID, ExecutionID: old.ExecutionID, Status: store.Succeeded},
		{TaskID: running.ID, ExecutionID: newExecID(), Status: store.Failed, Error: "x"},
		{TaskID: disp.ID, ExecutionID: disp.ExecutionID, Status: store.Succeeded},
		{TaskID: done.ID, ExecutionID: done.ExecutionID, Status: store.Failed, Error: "twice"},
		{TaskID: done.ID + 1000, ExecutionID: newExecID(), Status: store.Succeeded},
	}
	ok, err := e.s.Finish(e.ctx, store.Fence{}, results)
	if err != nil {
		e.t.Fatalf("Finish error: %v", err)
	}
	if d := diff([]bool{false, false, false, false, false}, ok); d != "" {
		e.t.Errorf("Finish(superseded, wrong execution, dispatching, finished, missing) mismatch (-want +got):\n%s", d)
	}
	e.unchanged("Finish with a superseded execution id", superseded)
	e.unchanged("Finish with a wrong execution id", running)
	e.unchanged("Finish of a dispatching task", disp)
	e.unchanged("a second Finish", done)
	if d := diff(oldExecs, e.executions(old.ID)); d != "" {
		e.t.Errorf("Finish with a superseded execution id changed the records (-before +after):\n%s", d)
	}
	if d := diff(doneExecs, e.executions(done.ID)); d != "" {
		e.t.Errorf("a second Finish changed the record (-before +after):\n%s", d)
	}
}

// A Finish through one namespace's view of another namespace's running task does not
// apply: the task keeps running and its execution stays open.
func testFinishNotInAnotherNamespace(e *env) {
	a, b := e.view("a"), e.view("b")
	for _, f := range []store.Finish{
		{Status: store.Succeeded},
		{Status: store.Failed, Error: "boom"},
		{Status: store.Scheduled, Error: "boom", Attempt: 1, DueAt: e.past()},
	} {
		task := b.inState(store.Running)
		execs := b.executions(task.ID)
		f.TaskID, f.ExecutionID = task.ID, task.ExecutionID
		ok, err := a.s.Finish(e.ctx, store.Fence{}, []store.Finish{f})
		if err != nil || len(ok) != 1 || ok[0] {
			e.t.Fatalf("Finish(%s) in a of b's running task = %v, %v; want [false]", f.Status, ok, err)
		}
		b.unchanged("a's Finish of b's task", task)
		if d := diff(execs, b.executions(task.ID)); d != "" {
			e.t.Errorf("a's Finish(%s) of b's task changed its execution (-before +after):\n%s", f.Status, d)
		}
		b.finish(f) // b's own still applies
	}
}

func testFinishInvalid(e *env) {
	cases := map[string]store.Finish{
		"status RUNNING":        {Status: store.Running},
		"status CANCELLED":      {Status: store.Cancelled},
		"empty status":          {},
		"retry without DueAt":   {Status: store.Scheduled, Attempt: 1},
		"empty execution id":    {Status: store.Succeeded},
		"status DISPATCHING":    {Status: store.Dispatching},
		"status SKIPPED":        {Status: store.Skipped},
		"unknown status BOGUS":  {Status: "BOGUS"},
		"retry, status lowcase": {Status: "scheduled", DueAt: time.Now()},
		"snooze, status FAILED": {Status: store.Failed, Snooze: true},
		"snooze, SUCCEEDED":     {Status: store.Succeeded, Snooze: true},
	}
	for what, bad := range cases {
		valid := e.inState(store.Running)
		victim := e.inState(store.Running)
		bad.TaskID = victim.ID
		bad.ExecutionID = victim.ExecutionID
		if what == "empty execution id" {
			bad.ExecutionID = ""
		}
		ok, err := e.s.Finish(e.ctx, store.Fence{}, []store.Finish{
			{TaskID: valid.ID, ExecutionID: valid.ExecutionID, Status: store.Succeeded},
			bad,
		})
		if !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("Finish(valid, %s) = %v, %v; want ErrInvalid", what, ok, err)
		}
		e.unchanged("an invalid Finish", valid)
		e.unchanged("an invalid Finish", victim)
	}
}

func testRequeueScheduled(e *env) {
	before := e.inState(store.Dispatching)
	due := e.now().Add(2 * time.Second)
	lo := e.settle(before)
	ok, err := e.s.Requeue(e.ctx, store.Fence{}, []store.Requeue{{TaskID: before.ID, ExecutionID: before.ExecutionID,
		DueAt: due, Error: "executor busy", MaxDispatchRetries: 3}})
	hi := e.now()
	if err != nil {
		e.t.Fatalf("Requeue(%d) error: %v", before.ID, err)
	}
	if d := diff([]bool{true}, ok); d != "" {
		e.t.Fatalf("Requeue(%d) mismatch (-want +got):\n%s", before.ID, d)
	}
	got := e.get(before.ID)
	e.stamped("Requeue: UpdatedAt", got.UpdatedAt, lo, hi)
	want := *before
	want.Status = store.Scheduled
	want.DueAt = due
	want.DispatchRetries = before.DispatchRetries + 1
	want.LastError = "executor busy"
	want.UpdatedAt = got.UpdatedAt
	if d := diff(&want, got); d != "" {
		e.t.Errorf("Requeue(%d) mismatch (-want +got):\n%s", before.ID, d)
	}
	if got := e.executions(before.ID); len(got) != 0 {
		e.t.Errorf("Executions(%d) after Requeue = %+v, want none", before.ID, got)
	}
}

func testRequeueExhausted(e *env) {
	const max = 2
	task := e.scheduled(e.past())
	for i := 1; i <= max+1; i++ {
		claimed := e.claim(task.ID)
		lo := e.now()
		ok, err := e.s.Requeue(e.ctx, store.Fence{}, []store.Requeue{{TaskID: task.ID, ExecutionID: claimed.ExecutionID,
			DueAt: e.past(), Error: "no executor", MaxDispatchRetries: max}})
		hi := e.now()
		if err != nil || len(ok) != 1 || !ok[0] {
			e.t.Fatalf("Requeue #%d = %v, %v; want [true]", i, ok, err)
		}
		got := e.get(task.ID)
		wantStatus := store.Scheduled
		if i > max {
			wantStatus = store.Failed
			e.stamped("Requeue to FAILED: FinishedAt", got.FinishedAt, lo, hi)
		}
		if got.Status != wantStatus || got.DispatchRetries != i || got.Attempt != 0 || got.LastError != "no executor" {
			e.t.Errorf("after Requeue #%d (max %d), Get(%d) = status %s dispatch retries %d attempt %d last error %q; want %s %d 0 %q",
				i, max, task.ID, got.Status, got.DispatchRetries, got.Attempt, got.LastError, wantStatus, i, "no executor")
		}
	}

	// No dispatch retries at all: the first failure is final.
	claimed := e.claim(e.scheduled(e.past()).ID)
	ok, err := e.s.Requeue(e.ctx, store.Fence{}, []store.Requeue{{TaskID: claimed.ID, ExecutionID: claimed.ExecutionID,
		DueAt: e.past(), Error: "no executor", MaxDispatchRetries: 0}})
	if err != nil || len(ok) != 1 || !ok[0] {
		e.t.Fatalf("Requeue(max 0) = %v, %v; want [true]", ok, err)
	}
	if got := e.get(claimed.ID); got.Status != store.Failed || got.DispatchRetries != 1 {
		e.t.Errorf("after Requeue(max 0), Get(%d) = status %s dispatch retries %d; want %s 1",
			got.ID, got.Status, got.DispatchRetries, store.Failed)
	}
}

func testRequeueNotApplied(e *env) {
	disp := e.inState(store.Dispatching)
	running := e.inState(store.Running)
	sched := e.scheduled(e.past())
	q := func(id int64, exec string) store.Requeue {
		return store.Requeue{TaskID: id, ExecutionID: exec, DueAt: e.past(), Error: "x", MaxDispatchRetries: 5}
	}
	ok, err := e.s.Requeue(e.ctx, store.Fence{}, []store.Requeue{
		q(disp.ID, newExecID()),
		q(running.ID, running.ExecutionID),
		q(sched.ID, newExecID()),
		q(sched.ID+1000, newExecID()),
	})
	if err != nil {
		e.t.Fatalf("Requeue error: %v", err)
	}
	if d := diff([]bool{false, false, false, false}, ok); d != "" {
		e.t.Errorf("Requeue(wrong execution, running, scheduled, missing) mismatch (-want +got):\n%s", d)
	}
	e.unchanged("Requeue with a wrong execution id", disp)
	e.unchanged("Requeue of a running task", running)
	e.unchanged("Requeue of a scheduled task", sched)
}

// A Requeue through one namespace's view of another namespace's DISPATCHING task does
// not apply: the task stays DISPATCHING with its execution id.
func testRequeueNotInAnotherNamespace(e *env) {
	a, b := e.view("a"), e.view("b")
	for _, max := range []int{5, 0} { // back to SCHEDULED, or to FAILED
		task := b.inState(store.Dispatching)
		q := store.Requeue{TaskID: task.ID, ExecutionID: task.ExecutionID, DueAt: e.past(), Error: "busy", MaxDispatchRetries: max}
		ok, err := a.s.Requeue(e.ctx, store.Fence{}, []store.Requeue{q})
		if err != nil || len(ok) != 1 || ok[0] {
			e.t.Fatalf("Requeue(max %d) in a of b's dispatching task = %v, %v; want [false]", max, ok, err)
		}
		b.unchanged("a's Requeue of b's task", task)
		if ok, err := b.s.Requeue(e.ctx, store.Fence{}, []store.Requeue{q}); err != nil || len(ok) != 1 || !ok[0] {
			e.t.Fatalf("Requeue(max %d) in b of its own task = %v, %v; want [true]", max, ok, err)
		}
	}
}

func testStaleRunning(e *env) {
	e.inState(store.Dispatching) // before the cut, but not RUNNING
	r1 := e.inState(store.Running)
	e.after(r1.HeartbeatAt)
	r2 := e.inState(store.Running)
	e.after(r2.HeartbeatAt)
	r3 := e.inState(store.Running)
	cut := e.after(r3.HeartbeatAt)
	if ok, err := e.s.Heartbeat(e.ctx, []store.ExecRef{{TaskID: r2.ID, ExecutionID: r2.ExecutionID}}); err != nil || ok[0] != store.BeatAlive {
		e.t.Fatalf("Heartbeat(%d) = %v, %v; want [BeatAlive]", r2.ID, ok, err)
	}
	e.checkStale(store.Running, cut, 10, []*store.Task{r1, r3})
	e.checkStale(store.Running, cut, 1, []*store.Task{r1})
	e.checkStale(store.Running, r1.HeartbeatAt, 10, nil)
}

func testStaleDispatching(e *env) {
	e.inState(store.Running) // dispatched before the cut, but not DISPATCHING
	d1 := e.inState(store.Dispatching)
	e.after(d1.DispatchedAt)
	d2 := e.inState(store.Dispatching)
	cut := e.after(d2.DispatchedAt)
	e.inState(store.Dispatching) // dispatched after the cut
	e.checkStale(store.Dispatching, cut, 10, []*store.Task{d1, d2})
	e.checkStale(store.Dispatching, cut, 1, []*store.Task{d1})
}

func testStaleInvalid(e *env) {
	e.inState(store.Running)
	now := e.after(e.now())
	for _, status := range []store.Status{store.Scheduled, store.Succeeded, store.Failed, store.Cancelled, store.Skipped, "BOGUS", ""} {
		if got, err := e.s.Stale(e.ctx, status, now, 10); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("Stale(%q) = %v, %v; want ErrInvalid", status, got, err)
		}
	}
	for _, limit := range []int{0, -1} {
		if got, err := e.s.Stale(e.ctx, store.Running, now, limit); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("Stale(RUNNING, limit %d) = %v, %v; want ErrInvalid", limit, got, err)
		}
	}
}

// testStartDueAndClaimTimes: each execution record keeps its task's DueAt and
// DispatchedAt as the attempt started — through Start, a business retry to a new due
// time started by ClaimStart, and a trigger — and reads them back the same from
// Executions and as a duplicate's record.
func testStartDueAndClaimTimes(e *env) {
	task := e.scheduled(e.past())
	claimed := e.claim(task.ID)
	e.settle(claimed)
	first := e.start(claimed).Execution
	if !first.DueAt.Equal(task.DueAt) || !first.ClaimedAt.Equal(claimed.DispatchedAt) {
		e.t.Errorf("Start: Execution DueAt %v, ClaimedAt %v; want the task's DueAt %v and DispatchedAt %v",
			first.DueAt, first.ClaimedAt, task.DueAt, claimed.DispatchedAt)
	}
	if got, want := first.Lateness(), first.StartedAt.Sub(task.DueAt); got != want || got < time.Hour {
		e.t.Errorf("Start: Lateness = %v, want StartedAt − DueAt = %v (an hour or more)", got, want)
	}
	if first.ClaimedAt.Equal(first.StartedAt) {
		e.t.Errorf("Start: ClaimedAt %v is the start's stamp, want the claim's", first.ClaimedAt)
	}

	// A business retry, due again a minute ago, claimed and started in one write.
	retryDue := e.now().Add(-time.Minute)
	e.finish(store.Finish{TaskID: task.ID, ExecutionID: first.ID, Status: store.Scheduled, Error: "boom", Attempt: 1, DueAt: retryDue})
	exec := newExecID()
	res, err := e.s.ClaimStart(e.ctx, store.Fence{}, here, []store.Claim{{ID: task.ID, ExecutionID: exec, Start: true}})
	if err != nil || len(res.Started) != 1 {
		e.t.Fatalf("ClaimStart(%d) = %+v, %v; want it started", task.ID, res, err)
	}
	started := res.Started[0]
	execs := e.executions(task.ID)
	if len(execs) != 2 {
		e.t.Fatalf("Executions(%d) = %+v, want two", task.ID, execs)
	}
	if d := diff([]time.Time{task.DueAt, claimed.DispatchedAt, retryDue, started.DispatchedAt},
		[]time.Time{execs[0].DueAt, execs[0].ClaimedAt, execs[1].DueAt, execs[1].ClaimedAt}); d != "" {
		e.t.Errorf("Executions(%d): DueAt, ClaimedAt of each attempt (-want +got):\n%s", task.ID, d)
	}
	if !execs[1].ClaimedAt.Equal(execs[1].StartedAt) {
		e.t.Errorf("ClaimStart: ClaimedAt %v, StartedAt %v; want one stamp", execs[1].ClaimedAt, execs[1].StartedAt)
	}
	dup, err := e.s.Start(e.ctx, store.Fence{}, []store.StartParams{{TaskID: task.ID, ExecutionID: exec, Name: task.Name, Node: "node-9"}})
	if err != nil || len(dup) != 1 || dup[0].Outcome != store.Duplicate {
		e.t.Fatalf("Start again of %s = %+v, %v; want Duplicate", exec, dup, err)
	}
	if d := diff(execs[1], *dup[0].Execution); d != "" {
		e.t.Errorf("Start again: the recorded execution differs from Executions' (-want +got):\n%s", d)
	}

	// A trigger from FAILED: the attempt keeps the task's DueAt, and its claim is the
	// trigger.
	e.finish(store.Finish{TaskID: task.ID, ExecutionID: exec, Status: store.Failed, Error: "boom"})
	trig, err := e.s.Trigger(e.ctx, task.ID, newExecID())
	if err != nil {
		e.t.Fatalf("Trigger(%d) error: %v", task.ID, err)
	}
	third := e.start(trig).Execution
	if !third.DueAt.Equal(retryDue) || !third.ClaimedAt.Equal(trig.TriggeredAt) {
		e.t.Errorf("Start after Trigger: DueAt %v, ClaimedAt %v; want %v and the trigger's %v", third.DueAt, third.ClaimedAt, retryDue, trig.TriggeredAt)
	}
	if execs := e.executions(task.ID); len(execs) != 3 || diff(*third, execs[2]) != "" {
		e.t.Errorf("Executions(%d) = %+v, want the third as Start returned it: %+v", task.ID, execs, *third)
	}
}
