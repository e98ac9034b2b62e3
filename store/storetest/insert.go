package storetest

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/axsched/ax/store"
)

var insertTests = []test{
	{"RoundTrip", testInsertRoundTrip},
	{"TimePrecision", testInsertTimePrecision},
	{"Payload", testInsertPayload},
	{"BackoffTimeout", testInsertBackoffTimeout},
	{"DuplicateAcrossBatches", testInsertDuplicateAcrossBatches},
	{"DuplicateInBatch", testInsertDuplicateInBatch},
	{"DuplicatesAmongNew", testInsertDuplicatesAmongNew},
	{"Invalid", testInsertInvalid},
	{"Empty", testInsertEmpty},
	{"BeyondMaxBatch", testInsertBeyondMaxBatch},
	{"Trace", testInsertTrace},
}

func testInsertRoundTrip(e *env) {
	due := e.now().Add(90 * time.Second)
	nt := store.NewTask{
		Name:         "order.close",
		Key:          "订单-42",
		Payload:      []byte(`{"order":42}`),
		DueAt:        due,
		MaxRetry:     7,
		OwnerService: "orders",
		Timeout:      45 * time.Second,
		Backoff:      []time.Duration{time.Second, 2 * time.Second},
		KeyHold:      store.HoldActive,
		KeyUntil:     due.Add(time.Hour),
		Trace:        traceparent(1),
	}
	lo := e.now()
	got := e.insert(nt)[0]
	hi := e.now()

	if got.ID <= 0 {
		e.t.Errorf("Insert: ID = %d, want > 0", got.ID)
	}
	e.stamped("Insert: CreatedAt", got.CreatedAt, lo, hi)
	if !got.UpdatedAt.Equal(got.CreatedAt) {
		e.t.Errorf("Insert: UpdatedAt = %v, want CreatedAt %v", got.UpdatedAt, got.CreatedAt)
	}
	want := &store.Task{
		ID:           got.ID,
		Name:         nt.Name,
		Key:          nt.Key,
		Payload:      nt.Payload,
		Status:       store.Scheduled,
		DueAt:        due,
		MaxRetry:     7,
		OwnerService: "orders",
		Timeout:      nt.Timeout,
		Backoff:      nt.Backoff,
		KeyHold:      store.HoldActive,
		KeyUntil:     due.Add(time.Hour),
		Trace:        nt.Trace,
		CreatedAt:    got.CreatedAt,
		UpdatedAt:    got.UpdatedAt,
	}
	if d := diff(want, got); d != "" {
		e.t.Errorf("Insert(%+v) mismatch (-want +got):\n%s", nt, d)
	}
	if d := diff(got, e.get(got.ID)); d != "" {
		e.t.Errorf("Get(%d) differs from what Insert returned (-insert +get):\n%s", got.ID, d)
	}
	looked, err := e.s.Lookup(e.ctx, nt.Name, nt.Key)
	if err != nil {
		e.t.Fatalf("Lookup(%q, %q) error: %v", nt.Name, nt.Key, err)
	}
	if d := diff(got, looked); d != "" {
		e.t.Errorf("Lookup(%q, %q) differs from what Insert returned (-insert +lookup):\n%s", nt.Name, nt.Key, d)
	}
	// The same key under another name is another task.
	other := nt
	other.Name = "order.remind"
	if o := e.insert(other)[0]; o.ID == got.ID {
		e.t.Errorf("Insert(%q, %q) reused id %d of (%q, %q)", other.Name, other.Key, o.ID, nt.Name, nt.Key)
	}

	// Callers must not alias the store's state.
	got.Payload[0] = 'X'
	got.Backoff[0] = time.Hour
	nt.Payload[1] = 'Y'
	if again := e.get(got.ID); string(again.Payload) != `{"order":42}` || again.Backoff[0] != time.Second {
		e.t.Errorf("Get(%d) = payload %q backoff %v after the caller changed its copies; want %q, %v",
			got.ID, again.Payload, again.Backoff, `{"order":42}`, time.Second)
	}
}

func testInsertTimePrecision(e *env) {
	zone := time.FixedZone("UTC+05:30", 5*3600+30*60)
	dues := []time.Time{
		time.Date(2031, 3, 4, 5, 6, 7, 123456789, time.UTC),
		time.Date(2031, 3, 4, 5, 6, 7, 123456000, zone),
		time.Date(2000, 1, 1, 0, 0, 0, 1000, time.UTC),
		time.Date(2099, 12, 31, 23, 59, 59, 999999000, time.UTC),
		time.Now().Add(-time.Hour), // local zone, with a monotonic reading
	}
	var nts []store.NewTask
	for _, due := range dues {
		nts = append(nts, e.newTask(due))
	}
	for i, task := range e.insert(nts...) {
		got := e.get(task.ID)
		if d := got.DueAt.Sub(dues[i]); d < -precision || d > precision {
			e.t.Errorf("Get(%d).DueAt = %v, want %v (±%v)", task.ID, got.DueAt, dues[i], precision)
		}
		if got.DueAt.Location() != time.UTC {
			e.t.Errorf("Get(%d).DueAt location = %v, want UTC", task.ID, got.DueAt.Location())
		}
	}
}

func testInsertPayload(e *env) {
	binaryPayload := make([]byte, 256)
	for i := range binaryPayload {
		binaryPayload[i] = byte(i)
	}
	big := make([]byte, 64<<10)
	for i := range big {
		big[i] = byte(i * 7)
	}
	payloads := map[string][]byte{
		"nil":    nil,
		"empty":  {},
		"binary": binaryPayload,
		"utf8":   []byte("ax ✓ 定时"),
		"64KiB":  big,
	}
	for name, p := range payloads {
		nt := e.newTask(e.future())
		nt.Payload = p
		task := e.insert(nt)[0]
		for _, got := range []*store.Task{task, e.get(task.ID)} {
			if (got.Payload == nil) != (p == nil) || string(got.Payload) != string(p) {
				e.t.Errorf("%s payload: Get(%d).Payload = %v (nil %t), want %v (nil %t)",
					name, task.ID, short(got.Payload), got.Payload == nil, short(p), p == nil)
			}
		}
	}
}

// short formats a payload for a failure message.
func short(p []byte) string {
	if len(p) > 16 {
		return fmt.Sprintf("%q… (%d bytes)", p[:16], len(p))
	}
	return fmt.Sprintf("%q", p)
}

func testInsertBackoffTimeout(e *env) {
	cases := []struct {
		timeout time.Duration
		backoff []time.Duration
	}{
		{0, nil},
		{time.Nanosecond * 1000, []time.Duration{}},
		{90*time.Second + time.Millisecond, []time.Duration{5 * time.Second, 25 * time.Second, 125 * time.Second, 625 * time.Second, 3125 * time.Second}},
		{24 * time.Hour, []time.Duration{1500 * time.Microsecond, time.Millisecond, 0}},
	}
	for _, c := range cases {
		nt := e.newTask(e.future())
		nt.Timeout, nt.Backoff = c.timeout, c.backoff
		task := e.insert(nt)[0]
		got := e.get(task.ID)
		if got.Timeout != c.timeout {
			e.t.Errorf("Get(%d).Timeout = %v, want %v", task.ID, got.Timeout, c.timeout)
		}
		if d := diff(c.backoff, got.Backoff); d != "" {
			e.t.Errorf("Get(%d).Backoff mismatch (-want +got):\n%s", task.ID, d)
		}
		if d := diff(task, got); d != "" { // what Insert answered is what it wrote
			e.t.Errorf("Insert's answer differs from Get(%d) (-insert +get):\n%s", task.ID, d)
		}
	}
}

func testInsertDuplicateAcrossBatches(e *env) {
	first := e.newTask(e.future())
	existing := e.insert(first)[0]

	again := first
	again.Payload = []byte("other")
	again.DueAt = e.past()
	b, c := e.newTask(e.future()), e.newTask(e.future())
	res, err := e.s.Insert(e.ctx, []store.NewTask{b, again, c})
	if err != nil {
		e.t.Fatalf("Insert(new, duplicate, new) error: %v", err)
	}
	if len(res) != 3 {
		e.t.Fatalf("Insert(3 tasks) returned %d results", len(res))
	}
	for _, i := range []int{0, 2} {
		if res[i].Err != nil || res[i].Task == nil || res[i].Task.ID == existing.ID {
			e.t.Errorf("Insert(...)[%d] = %+v, %v; want a new task", i, res[i].Task, res[i].Err)
		}
	}
	if !errors.Is(res[1].Err, store.ErrDuplicate) {
		e.t.Errorf("Insert(duplicate).Err = %v, want ErrDuplicate", res[1].Err)
	}
	if d := diff(existing, res[1].Task); d != "" {
		e.t.Errorf("Insert(duplicate).Task is not the existing task (-existing +got):\n%s", d)
	}
	e.unchanged("Insert(duplicate)", existing)
}

// A batch whose existing keys sort into the middle and at the end of a store's
// chunk, not first: the new rows around them are written, each answer is its own row,
// and the existing tasks are answered ErrDuplicate, unchanged.
func testInsertDuplicatesAmongNew(e *env) {
	batch := make([]store.NewTask, 12)
	for i := range batch {
		batch[i] = e.newTask(e.future())
		batch[i].Key = fmt.Sprintf("among-%02d", i)
		batch[i].Payload = []byte(fmt.Sprintf("new %d", i))
	}
	dup := map[int]*store.Task{}
	for _, i := range []int{5, 6, 11} {
		dup[i] = e.insert(batch[i])[0]
	}
	// Input order is not key order: the store sorts its chunks itself.
	order := []int{11, 3, 5, 0, 8, 6, 1, 10, 2, 9, 4, 7}
	in := make([]store.NewTask, len(order))
	for k, i := range order {
		in[k] = batch[i]
	}
	res, err := e.s.Insert(e.ctx, in)
	if err != nil {
		e.t.Fatalf("Insert(12 tasks, 3 of them existing) error: %v", err)
	}
	if len(res) != len(in) {
		e.t.Fatalf("Insert(12 tasks) returned %d results", len(res))
	}
	ids := map[int64]bool{}
	for k, i := range order {
		r := res[k]
		if old, ok := dup[i]; ok {
			if !errors.Is(r.Err, store.ErrDuplicate) {
				e.t.Errorf("Insert(existing %s)[%d].Err = %v, want ErrDuplicate", batch[i].Key, k, r.Err)
			}
			if d := diff(old, r.Task); d != "" {
				e.t.Errorf("Insert(existing %s).Task is not the existing task (-existing +got):\n%s", batch[i].Key, d)
			}
			e.unchanged("Insert(duplicates among new)", old)
			continue
		}
		if r.Err != nil || r.Task == nil {
			e.t.Fatalf("Insert(new %s)[%d] = %+v, %v; want a new task", batch[i].Key, k, r.Task, r.Err)
		}
		if r.Task.Key != batch[i].Key || ids[r.Task.ID] {
			e.t.Errorf("Insert(new %s)[%d] = task %d with key %q; want its own new task", batch[i].Key, k, r.Task.ID, r.Task.Key)
		}
		ids[r.Task.ID] = true
		got := e.get(r.Task.ID)
		if d := diff(r.Task, got); d != "" {
			e.t.Errorf("Insert(new %s).Task differs from the stored task (-returned +stored):\n%s", batch[i].Key, d)
		}
		if string(got.Payload) != string(batch[i].Payload) {
			e.t.Errorf("Get(%d).Payload = %q, want %q", got.ID, got.Payload, batch[i].Payload)
		}
	}
}

func testInsertDuplicateInBatch(e *env) {
	nt := e.newTask(e.future())
	dup := nt
	dup.Payload = []byte("second")
	res, err := e.s.Insert(e.ctx, []store.NewTask{nt, dup})
	if err != nil {
		e.t.Fatalf("Insert(task, same task) error: %v", err)
	}
	if len(res) != 2 {
		e.t.Fatalf("Insert(2 tasks) returned %d results", len(res))
	}
	if res[0].Err != nil || res[0].Task == nil {
		e.t.Fatalf("Insert(task, same task)[0] = %+v, %v; want the new task", res[0].Task, res[0].Err)
	}
	if !errors.Is(res[1].Err, store.ErrDuplicate) {
		e.t.Errorf("Insert(task, same task)[1].Err = %v, want ErrDuplicate", res[1].Err)
	}
	if d := diff(res[0].Task, res[1].Task); d != "" {
		e.t.Errorf("Insert(task, same task)[1].Task is not the first (-first +second):\n%s", d)
	}
	if got := e.get(res[0].Task.ID); string(got.Payload) != string(nt.Payload) {
		e.t.Errorf("Get(%d).Payload = %q, want the first insert's %q", got.ID, got.Payload, nt.Payload)
	}
}

// insertInvalid inserts, for each case, a valid task and one the case spoils, and
// checks that the store refuses both with ErrInvalid.
func (e *env) insertInvalid(cases map[string]func(*store.NewTask)) {
	e.t.Helper()
	for name, spoil := range cases {
		valid, bad := e.newTask(e.past()), e.newTask(e.past())
		spoil(&bad)
		if res, err := e.s.Insert(e.ctx, []store.NewTask{valid, bad}); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("Insert(valid, %s) = %v, %v; want ErrInvalid", name, res, err)
		}
		if _, err := e.s.Lookup(e.ctx, valid.Name, valid.Key); !errors.Is(err, store.ErrNotFound) {
			e.t.Errorf("after Insert(valid, %s) failed, Lookup(valid) error = %v, want ErrNotFound", name, err)
		}
	}
}

func testInsertInvalid(e *env) {
	e.insertInvalid(map[string]func(*store.NewTask){
		"empty name":      func(nt *store.NewTask) { nt.Name = "" },
		"empty key":       func(nt *store.NewTask) { nt.Key = "" },
		"zero due time":   func(nt *store.NewTask) { nt.DueAt = time.Time{} },
		"unknown hold":    func(nt *store.NewTask) { nt.KeyHold = "sometimes" },
		"long trace":      func(nt *store.NewTask) { nt.Trace = strings.Repeat("t", store.MaxTraceLen+1) },
		"trace not UTF-8": func(nt *store.NewTask) { nt.Trace = "traceparent=\xff" },
		"trace with NUL":  func(nt *store.NewTask) { nt.Trace = "traceparent=\x00" },
	})
	res, err := e.s.Refill(e.ctx, store.RefillParams{AfterSeq: 0, To: e.future(), Limit: 10})
	if err != nil {
		e.t.Fatalf("Refill error: %v", err)
	}
	if len(res.Changed)+len(res.Entered) != 0 {
		e.t.Errorf("Refill after failed inserts = %+v, want no tasks", res)
	}
}

func testInsertEmpty(e *env) {
	res, err := e.s.Insert(e.ctx, nil)
	if err != nil || len(res) != 0 {
		e.t.Errorf("Insert(nil) = %v, %v; want no results, nil", res, err)
	}
}

func testInsertBeyondMaxBatch(e *env) {
	n := 2*store.MaxBatch + 50
	due := e.past()
	nts := make([]store.NewTask, n)
	for i := range nts {
		nts[i] = e.newTask(due)
	}
	tasks := e.insert(nts...)
	seen := make(map[int64]bool)
	claims := make([]store.Claim, n)
	for i, task := range tasks {
		if seen[task.ID] {
			e.t.Fatalf("Insert(%d tasks) returned id %d twice", n, task.ID)
		}
		seen[task.ID] = true
		if task.Key != nts[i].Key {
			e.t.Fatalf("Insert(%d tasks)[%d].Key = %q, want %q: results out of input order", n, i, task.Key, nts[i].Key)
		}
		// Reverse order: the store sorts.
		claims[n-1-i] = store.Claim{ID: task.ID, ExecutionID: newExecID()}
	}
	res, err := e.s.Claim(e.ctx, store.Fence{}, claims)
	if err != nil {
		e.t.Fatalf("Claim(%d tasks) error: %v", n, err)
	}
	if len(res.Claimed) != n || len(res.NotDue) != 0 {
		e.t.Fatalf("Claim(%d due tasks) claimed %d, not due %d; want %d, 0", n, len(res.Claimed), len(res.NotDue), n)
	}
	for i := 1; i < n; i++ {
		if res.Claimed[i-1].ID >= res.Claimed[i].ID {
			e.t.Fatalf("Claim(%d tasks).Claimed not in id order at %d: %d then %d", n, i, res.Claimed[i-1].ID, res.Claimed[i].ID)
		}
	}

	// Start, Heartbeat and Finish the whole lot, each in one call, in input order.
	starts := make([]store.StartParams, n)
	refs := make([]store.ExecRef, n)
	results := make([]store.Finish, n)
	for i, c := range claims {
		starts[i] = store.StartParams{TaskID: c.ID, ExecutionID: c.ExecutionID, Name: nts[0].Name, Node: "node-1"}
		refs[i] = store.ExecRef{TaskID: c.ID, ExecutionID: c.ExecutionID}
		results[i] = store.Finish{TaskID: c.ID, ExecutionID: c.ExecutionID, Status: store.Succeeded}
	}
	started, err := e.s.Start(e.ctx, store.Fence{}, starts)
	if err != nil || len(started) != n {
		e.t.Fatalf("Start(%d executions) = %d results, %v; want %d", n, len(started), err, n)
	}
	for i, r := range started {
		if r.Outcome != store.Started || r.Task == nil || r.Task.ID != starts[i].TaskID {
			e.t.Fatalf("Start(%d executions)[%d] = %+v, want task %d started", n, i, r, starts[i].TaskID)
		}
	}
	for _, call := range []struct {
		name string
		fn   func() ([]bool, error)
	}{
		{"Heartbeat", func() ([]bool, error) {
			beats, err := e.s.Heartbeat(e.ctx, refs)
			ok := make([]bool, len(beats))
			for i, b := range beats {
				ok[i] = b == store.BeatAlive
			}
			return ok, err
		}},
		{"Finish", func() ([]bool, error) { return e.s.Finish(e.ctx, store.Fence{}, results) }},
	} {
		ok, err := call.fn()
		if err != nil || len(ok) != n {
			e.t.Fatalf("%s(%d executions) = %d results, %v; want %d", call.name, n, len(ok), err, n)
		}
		for i, b := range ok {
			if !b {
				e.t.Fatalf("%s(%d executions)[%d] did not apply", call.name, n, i)
			}
		}
	}
}

// taskStats calls TaskStats and fails on error.
func (e *env) taskStats(now time.Time) *store.TaskStats {
	e.t.Helper()
	st, err := e.s.TaskStats(e.ctx, now)
	if err != nil {
		e.t.Fatalf("TaskStats(%v) error: %v", now, err)
	}
	if st == nil || st.OldestDue.Location() != time.UTC {
		e.t.Fatalf("TaskStats(%v) = %+v, want stats with a UTC OldestDue", now, st)
	}
	return st
}

// counts returns a TaskStats.Counts with every status zero but those given.
func counts(n map[store.Status]int64) map[store.Status]int64 {
	out := make(map[store.Status]int64)
	for _, s := range store.Statuses() {
		out[s] = n[s]
	}
	return out
}

// traceparent returns a trace context as a tracer would write it, distinct for each i.
func traceparent(i int) string {
	return fmt.Sprintf("traceparent=00-4bf92f3577b34da6a3ce929d0e0e%04x-00f067aa0ba9%04x-01", i, i)
}

// longTrace returns a trace context of exactly store.MaxTraceLen bytes, with
// characters of several bytes, distinct for each i.
func longTrace(i int) string {
	s := fmt.Sprintf("%s&tracestate=%d", traceparent(i), i)
	for len(s)+len("é") <= store.MaxTraceLen {
		s += "é"
	}
	return s + strings.Repeat("x", store.MaxTraceLen-len(s))
}

// Every task keeps the trace context it was inserted with, the longest allowed too,
// in one Insert of more than a batch, its tasks with and without one mixed; reads and
// the writes that answer with the task (Claim, Start, ClaimStart) return it. A
// duplicate answers with the stored task's trace, not its own.
func testInsertTrace(e *env) {
	n := store.MaxBatch + 10
	nts := make([]store.NewTask, n)
	for i := range nts {
		nts[i] = e.newTask(e.past())
		switch i % 3 {
		case 1:
			nts[i].Trace = traceparent(i)
		case 2:
			nts[i].Trace = longTrace(i)
		}
	}
	for i, task := range e.insert(nts...) {
		if task.Trace != nts[i].Trace {
			e.t.Fatalf("Insert(%d tasks)[%d].Trace = %q, want %q", n, i, task.Trace, nts[i].Trace)
		}
		if got := e.get(task.ID); got.Trace != nts[i].Trace {
			e.t.Fatalf("Get(%d).Trace = %q, want %q", task.ID, got.Trace, nts[i].Trace)
		}
	}

	traced := e.insert(func() store.NewTask { nt := e.newTask(e.past()); nt.Trace = traceparent(n); return nt }())[0]
	again := e.newTask(e.past())
	again.Key, again.Trace = traced.Key, traceparent(n+1)
	res, err := e.s.Insert(e.ctx, []store.NewTask{again})
	if err != nil || !errors.Is(res[0].Err, store.ErrDuplicate) || res[0].Task.Trace != traced.Trace {
		e.t.Errorf("Insert(duplicate with another trace) = %+v, %v; want ErrDuplicate with the stored trace %q", res, err, traced.Trace)
	}
	if looked, err := e.s.Lookup(e.ctx, traced.Name, traced.Key); err != nil || looked.Trace != traced.Trace {
		e.t.Errorf("Lookup(%q, %q) = %+v, %v; want Trace %q", traced.Name, traced.Key, looked, err, traced.Trace)
	}
	claimed := e.claim(traced.ID)
	if claimed.Trace != traced.Trace {
		e.t.Errorf("Claim: Trace = %q, want %q", claimed.Trace, traced.Trace)
	}
	if r := e.start(claimed); r.Task == nil || r.Task.Trace != traced.Trace {
		e.t.Errorf("Start = %+v; want the task with Trace %q", r, traced.Trace)
	}

	direct := e.insert(func() store.NewTask { nt := e.newTask(e.past()); nt.Trace = longTrace(n + 2); return nt }())[0]
	cr, err := e.s.ClaimStart(e.ctx, store.Fence{}, store.StartOn{Node: "node-1", Handlers: []string{direct.Name}},
		[]store.Claim{{ID: direct.ID, ExecutionID: newExecID(), Start: true}})
	if err != nil || len(cr.Started) != 1 || cr.Started[0].Trace != direct.Trace {
		e.t.Errorf("ClaimStart = %+v, %v; want the task started with Trace %q", cr, err, direct.Trace)
	}
}
