package storetest

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/axsched/ax/store"
)

var refillTests = []test{
	{"ChangedInsert", testRefillChangedInsert},
	{"ChangedAgain", testRefillChangedAgain},
	{"ChangedFilters", testRefillChangedFilters},
	{"ChangedPaging", testRefillChangedPaging},
	{"NegativeAfterSeq", testRefillNegativeAfterSeq},
	{"WindowPaging", testRefillWindowPaging},
	{"Invalid", testRefillInvalid},
}

// refill calls Refill and checks the shape of the answer.
func (e *env) refill(p store.RefillParams) *store.RefillResult {
	e.t.Helper()
	res, err := e.s.Refill(e.ctx, p)
	if err != nil {
		e.t.Fatalf("Refill(%+v) error: %v", p, err)
	}
	if len(res.Changed) > p.Limit || len(res.Entered) > p.Limit {
		e.t.Errorf("Refill(%+v) returned %d changed and %d entered, over the limit", p, len(res.Changed), len(res.Entered))
	}
	if p.AfterSeq < 0 && len(res.Changed) != 0 {
		e.t.Errorf("Refill(%+v).Changed = %v, want none for a negative AfterSeq", p, res.Changed)
	}
	if res.Seq < 0 || (p.AfterSeq >= 0 && res.Seq < p.AfterSeq) {
		e.t.Errorf("Refill(%+v).Seq = %d, want at least max(0, AfterSeq)", p, res.Seq)
	}
	for _, d := range append(slices.Clone(res.Changed), res.Entered...) {
		if d.DueAt.Location() != time.UTC {
			e.t.Errorf("Refill(%+v): %v is not UTC", p, d)
		}
		if !d.DueAt.Before(p.To) {
			e.t.Errorf("Refill(%+v): %v is not due before To", p, d)
		}
	}
	return res
}

// changed asks for the changed set alone: From = To leaves the window empty.
func (e *env) changed(afterSeq int64, to time.Time, limit int) *store.RefillResult {
	e.t.Helper()
	res := e.refill(store.RefillParams{AfterSeq: afterSeq, From: to, FromID: 0, To: to, Limit: limit})
	if len(res.Entered) != 0 {
		e.t.Errorf("Refill(From = To = %v).Entered = %v, want none", to, res.Entered)
	}
	return res
}

// cursor returns the current change cursor.
func (e *env) cursor() int64 {
	e.t.Helper()
	to := e.now()
	return e.refill(store.RefillParams{AfterSeq: -1, From: to, To: to, Limit: 1}).Seq
}

func due(tasks ...*store.Task) []store.Due {
	out := []store.Due{}
	for _, t := range tasks {
		out = append(out, store.Due{ID: t.ID, DueAt: t.DueAt})
	}
	return out
}

func testRefillChangedInsert(e *env) {
	to := e.now().Add(24 * time.Hour)
	c0 := e.cursor()
	a := e.scheduled(e.past())
	r1 := e.changed(c0, to, 10)
	if d := diff(due(a), r1.Changed); d != "" || r1.More {
		e.t.Errorf("Refill(AfterSeq %d) after one insert = %+v, want only task %d and no more (-want +got):\n%s", c0, r1, a.ID, d)
	}
	if r1.Seq <= c0 {
		e.t.Errorf("Refill(AfterSeq %d).Seq = %d after an insert, want more", c0, r1.Seq)
	}
	r2 := e.changed(r1.Seq, to, 10)
	if len(r2.Changed) != 0 || r2.More {
		e.t.Errorf("Refill(AfterSeq %d) with no change = %+v, want nothing", r1.Seq, r2)
	}
	b := e.scheduled(e.now().Add(time.Hour))
	c := e.scheduled(e.past())
	r3 := e.changed(r2.Seq, to, 10)
	if d := diff(due(b, c), r3.Changed); d != "" {
		e.t.Errorf("Refill(AfterSeq %d) after two inserts: Changed mismatch, want sequence order (-want +got):\n%s", r2.Seq, d)
	}
	if r3.Seq <= r2.Seq {
		e.t.Errorf("Refill(AfterSeq %d).Seq = %d after two inserts, want more", r2.Seq, r3.Seq)
	}
}

func testRefillChangedAgain(e *env) {
	to := e.now().Add(24 * time.Hour)
	task := e.inState(store.Running)
	c1 := e.cursor()

	// A business retry leaves it SCHEDULED again.
	retryAt := e.past().Add(time.Minute)
	e.finish(store.Finish{TaskID: task.ID, ExecutionID: task.ExecutionID, Status: store.Scheduled,
		Error: "boom", Attempt: 1, DueAt: retryAt})
	r2 := e.changed(c1, to, 10)
	if d := diff([]store.Due{{ID: task.ID, DueAt: retryAt}}, r2.Changed); d != "" {
		e.t.Errorf("Refill(AfterSeq %d) after Finish(Scheduled) mismatch (-want +got):\n%s", c1, d)
	}
	if r2.Seq <= c1 {
		e.t.Errorf("Refill(AfterSeq %d).Seq = %d after a retry, want more", c1, r2.Seq)
	}

	// So does a dispatch retry.
	claimed := e.claim(task.ID)
	requeueAt := e.now().Add(time.Minute)
	ok, err := e.s.Requeue(e.ctx, store.Fence{}, []store.Requeue{{TaskID: task.ID, ExecutionID: claimed.ExecutionID,
		DueAt: requeueAt, Error: "busy", MaxDispatchRetries: 3}})
	if err != nil || !ok[0] {
		e.t.Fatalf("Requeue(%d) = %v, %v; want [true]", task.ID, ok, err)
	}
	r3 := e.changed(r2.Seq, to, 10)
	if d := diff([]store.Due{{ID: task.ID, DueAt: requeueAt}}, r3.Changed); d != "" {
		e.t.Errorf("Refill(AfterSeq %d) after Requeue mismatch (-want +got):\n%s", r2.Seq, d)
	}
	if r3.Seq <= r2.Seq {
		e.t.Errorf("Refill(AfterSeq %d).Seq = %d after a requeue, want more", r2.Seq, r3.Seq)
	}

	// From the oldest cursor it appears once, at its latest due time.
	r := e.changed(c1, to, 10)
	if d := diff([]store.Due{{ID: task.ID, DueAt: requeueAt}}, r.Changed); d != "" {
		e.t.Errorf("Refill(AfterSeq %d) after a retry and a requeue mismatch (-want +got):\n%s", c1, d)
	}
}

func testRefillChangedFilters(e *env) {
	now := e.now()
	to := now.Add(time.Hour)
	c0 := e.cursor()
	kept := e.scheduled(e.past())
	e.inState(store.Cancelled)
	e.inState(store.Dispatching)
	e.inState(store.Running)
	later := e.scheduled(now.Add(2 * time.Hour))
	atTo := e.scheduled(to)
	r := e.changed(c0, to, 10)
	if d := diff(due(kept), r.Changed); d != "" {
		e.t.Errorf("Refill(AfterSeq %d, To %v).Changed mismatch, want only the SCHEDULED task due before To (-want +got):\n%s", c0, to, d)
	}

	// The window scan finds the later ones once To moves past them.
	w := e.refill(store.RefillParams{AfterSeq: -1, To: now.Add(3 * time.Hour), Limit: 10})
	if d := diff(due(kept, atTo, later), w.Entered); d != "" {
		e.t.Errorf("Refill(window to %v).Entered mismatch (-want +got):\n%s", now.Add(3*time.Hour), d)
	}
}

func testRefillChangedPaging(e *env) {
	to := e.now().Add(24 * time.Hour)
	c0 := e.cursor()
	var tasks []*store.Task
	for range 5 {
		tasks = append(tasks, e.scheduled(e.past()))
	}
	seq := c0
	var got []store.Due
	for i, want := range []struct {
		n    int
		more bool
	}{{2, true}, {2, true}, {1, false}} {
		r := e.changed(seq, to, 2)
		if len(r.Changed) != want.n || r.More != want.more {
			e.t.Errorf("Refill page %d (AfterSeq %d, Limit 2) = %d changed, More %t; want %d, %t", i, seq, len(r.Changed), r.More, want.n, want.more)
		}
		if r.Seq <= seq {
			e.t.Fatalf("Refill page %d (AfterSeq %d).Seq = %d, want more", i, seq, r.Seq)
		}
		got = append(got, r.Changed...)
		seq = r.Seq
	}
	if d := diff(due(tasks...), got); d != "" {
		e.t.Errorf("Refill pages of Changed mismatch, want every insert once in sequence order (-want +got):\n%s", d)
	}
	if r := e.changed(seq, to, 2); len(r.Changed) != 0 || r.More {
		e.t.Errorf("Refill(AfterSeq %d) after the last page = %+v, want nothing", seq, r)
	}
}

func testRefillNegativeAfterSeq(e *env) {
	now := e.now()
	to := now.Add(time.Hour)
	a := e.scheduled(now.Add(-time.Minute))
	b := e.scheduled(now.Add(time.Minute))
	r := e.refill(store.RefillParams{AfterSeq: -1, To: to, Limit: 10})
	if d := diff(due(a, b), r.Entered); d != "" || r.More {
		e.t.Errorf("Refill(AfterSeq -1) = %+v, want the window set only (-want +got Entered):\n%s", r, d)
	}
	// The cursor covers the inserts above: nothing has changed since.
	if again := e.changed(r.Seq, to, 10); len(again.Changed) != 0 {
		e.t.Errorf("Refill(AfterSeq %d) right after Refill(AfterSeq -1) = %v, want nothing changed", r.Seq, again.Changed)
	}
	c := e.scheduled(now.Add(-time.Minute))
	if got := e.changed(r.Seq, to, 10); diff(due(c), got.Changed) != "" {
		e.t.Errorf("Refill(AfterSeq %d) after an insert = %v, want %v", r.Seq, got.Changed, due(c))
	}
}

func testRefillWindowPaging(e *env) {
	now := e.now()
	to := now.Add(5 * time.Minute)
	// Inserted out of due order, two with the same due time.
	var nts []store.NewTask
	for _, d := range []time.Duration{3 * time.Minute, -time.Hour, 2 * time.Minute, -2 * time.Hour, 2 * time.Minute, time.Minute, 10 * time.Minute} {
		nts = append(nts, e.newTask(now.Add(d)))
	}
	tasks := e.insert(nts...)
	e.scheduled(to) // not before To
	cancelled := e.scheduled(now.Add(time.Minute))
	if _, err := e.s.Cancel(e.ctx, cancelled.Name, cancelled.Key, "storetest"); err != nil {
		e.t.Fatalf("Cancel(%q, %q) error: %v", cancelled.Name, cancelled.Key, err)
	}
	e.inState(store.Dispatching)
	e.inState(store.Running)

	var want []*store.Task
	for _, t := range tasks {
		if t.DueAt.Before(to) {
			want = append(want, t)
		}
	}
	slices.SortFunc(want, func(a, b *store.Task) int {
		if c := a.DueAt.Compare(b.DueAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})

	const limit = 2
	p := store.RefillParams{AfterSeq: -1, To: to, Limit: limit}
	var got []store.Due
	for page := 0; ; page++ {
		if page > len(want) {
			e.t.Fatalf("Refill window paging did not end after %d pages", page)
		}
		r := e.refill(p)
		got = append(got, r.Entered...)
		if remaining := len(want) - len(got) + len(r.Entered); remaining > limit && !r.More {
			e.t.Errorf("Refill page %d (From %v, FromID %d) returned %d of %d remaining with More false", page, p.From, p.FromID, len(r.Entered), remaining)
		}
		if len(r.Entered) < limit && r.More {
			e.t.Errorf("Refill page %d (From %v, FromID %d) returned %d < Limit with More true", page, p.From, p.FromID, len(r.Entered))
		}
		if !r.More || len(r.Entered) == 0 {
			break
		}
		last := r.Entered[len(r.Entered)-1]
		p.From, p.FromID = last.DueAt, last.ID
	}
	if d := diff(due(want...), got); d != "" {
		e.t.Errorf("Refill window pages mismatch, want overdue first, (DueAt, ID) order, nothing at or after To (-want +got):\n%s", d)
	}
}

func testRefillInvalid(e *env) {
	for _, limit := range []int{0, -1} {
		p := store.RefillParams{AfterSeq: 0, To: e.future(), Limit: limit}
		if res, err := e.s.Refill(e.ctx, p); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("Refill(%+v) = %+v, %v; want ErrInvalid", p, res, err)
		}
	}
}
