package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/store"
)

var limitTests = []test{
	{"HoldsClaims", testLimitHoldsClaims},
	{"FreedByFinish", testLimitFreedByFinish},
	{"WithKeys", testLimitWithKeys},
	{"Trigger", testLimitTrigger},
	{"Lowered", testLimitLowered},
	{"States", testLimitStates},
	{"Race", testLimitRace},
	{"RateHoldsClaims", testRateHoldsClaims},
	{"RateWindow", testRateWindow},
	{"RateStates", testRateStates},
	{"RateRace", testRateRace},
	{"RateRemovedForgets", testRateRemovedForgets},
	{"KeyConcurrency", testKeyConcurrency},
	{"KeyConcurrencyRace", testKeyConcurrencyRace},
	{"KeyConcurrencyAcrossBatches", testKeyConcurrencyAcrossBatches},
	{"KeyRateHoldsClaims", testKeyRateHoldsClaims},
	{"KeyRateWindow", testKeyRateWindow},
	{"KeyRateStates", testKeyRateStates},
	{"KeyRateRace", testKeyRateRace},
}

// setConcurrency sets name's limit to n and checks the state it answers.
func (e *env) setConcurrency(name string, n int) {
	e.t.Helper()
	st, err := e.s.SetConcurrency(e.ctx, name, n, "alice")
	if err != nil || st.Name != name || st.Concurrency != n {
		e.t.Fatalf("SetConcurrency(%q, %d) = %+v, %v; want the limit set", name, n, st, err)
	}
}

// limitedIDs returns the ids of res.Limited, checking each carries name and limit.
func (e *env) limitedIDs(res *store.ClaimResult, name string, limit int) []int64 {
	e.t.Helper()
	var ids []int64
	for _, l := range res.Limited {
		if l.Name != name || l.Limit != limit {
			e.t.Errorf("Limited %+v, want name %q and limit %d", l, name, limit)
		}
		ids = append(ids, l.ID)
	}
	return ids
}

// A limited name's due tasks are claimed up to its limit, the first in (DueAt, ID)
// order, the rest left SCHEDULED and reported Limited; other names are not held back,
// and ClaimStart claims a limited name's tasks DISPATCHING, never RUNNING.
func testLimitHoldsClaims(e *env) {
	e.setConcurrency("report", 2)
	base := e.past()
	// Inserted in an order unlike their due order: the earliest due win.
	late := e.nameTask("report", e.newTask(base.Add(3*time.Second)))
	first := e.nameTask("report", e.newTask(base))
	later := e.nameTask("report", e.newTask(base.Add(2*time.Second)))
	second := e.nameTask("report", e.newTask(base.Add(time.Second)))
	free := e.nameTask("mail", e.newTask(base))
	res, err := e.s.ClaimStart(e.ctx, store.Fence{}, store.StartOn{Node: "node-1", Handlers: []string{"report", "mail"}}, []store.Claim{
		{ID: late.ID, ExecutionID: newExecID(), Start: true},
		{ID: first.ID, ExecutionID: newExecID(), Start: true},
		{ID: later.ID, ExecutionID: newExecID(), Start: true},
		{ID: second.ID, ExecutionID: newExecID(), Start: true},
		{ID: free.ID, ExecutionID: newExecID(), Start: true},
	})
	if err != nil {
		e.t.Fatalf("ClaimStart: %v", err)
	}
	if got, want := taskIDs(res.Claimed), sortedIDs([]int64{first.ID, second.ID}); !slices.Equal(got, want) {
		e.t.Errorf("ClaimStart claimed %v, want the two due first %v, DISPATCHING", got, want)
	}
	for _, t := range res.Claimed {
		if t.Status != store.Dispatching {
			e.t.Errorf("limited task %d claimed %s, want DISPATCHING", t.ID, t.Status)
		}
	}
	if got := taskIDs(res.Started); !slices.Equal(got, []int64{free.ID}) {
		e.t.Errorf("ClaimStart started %v, want only %d: its name has no limit", got, free.ID)
	}
	if got, want := e.limitedIDs(res, "report", 2), sortedIDs([]int64{late.ID, later.ID}); !slices.Equal(got, want) {
		e.t.Errorf("Limited = %v, want %v", got, want)
	}
	e.unchanged("a limited claim", late)
	e.unchanged("a limited claim", later)
	// Asked again, they are limited again: both slots are taken.
	if again := e.claimAll(late.ID, later.ID); len(again.Claimed) != 0 || len(again.Limited) != 2 {
		e.t.Errorf("Claim with no free slot = %+v, want both Limited", again)
	}
	// Names counts the slots in use: the two claimed, not the mail.
	names, err := e.s.Names(e.ctx)
	if err != nil || len(names) != 1 || names[0].InFlight != 2 {
		e.t.Errorf("Names = %+v, %v; want report with 2 in flight", names, err)
	}
	// A task not yet due is NotDue, limit or not.
	notDue := e.nameTask("report", e.newTask(e.future()))
	if res := e.claimAll(notDue.ID); len(res.NotDue) != 1 || len(res.Limited) != 0 {
		e.t.Errorf("Claim of a task not due = %+v, want it NotDue", res)
	}
}

// A slot frees when a task of the name finishes (or is handed back), not before;
// RUNNING tasks hold slots as DISPATCHING ones do.
func testLimitFreedByFinish(e *env) {
	e.setConcurrency("report", 1)
	a := e.nameTask("report", e.newTask(e.past()))
	b := e.nameTask("report", e.newTask(e.past().Add(time.Second)))
	c := e.nameTask("report", e.newTask(e.past().Add(2*time.Second)))
	res := e.claimAll(a.ID, b.ID, c.ID)
	if len(res.Claimed) != 1 || res.Claimed[0].ID != a.ID {
		e.t.Fatalf("Claim = %+v, want only %d", res, a.ID)
	}
	held := &res.Claimed[0]
	e.start(held)
	if res := e.claimAll(b.ID, c.ID); len(res.Claimed) != 0 {
		e.t.Fatalf("Claim while the slot is RUNNING = %+v, want none claimed", res)
	}
	e.finish(store.Finish{TaskID: a.ID, ExecutionID: held.ExecutionID, Status: store.Succeeded})
	res = e.claimAll(c.ID, b.ID)
	if len(res.Claimed) != 1 || res.Claimed[0].ID != b.ID {
		e.t.Fatalf("Claim after the finish = %+v, want %d, due first", res, b.ID)
	}
	ok, err := e.s.Requeue(e.ctx, store.Fence{}, []store.Requeue{{TaskID: b.ID, ExecutionID: res.Claimed[0].ExecutionID, DueAt: e.past(), MaxDispatchRetries: 5}})
	if err != nil || !ok[0] {
		e.t.Fatalf("Requeue = %v, %v", ok, err)
	}
	if res := e.claimAll(c.ID); len(res.Claimed) != 1 {
		e.t.Errorf("Claim after the hand-back = %+v, want %d claimed", res, c.ID)
	}
}

// A task both keyed and limited needs its key free and a slot: a held key decides
// first (skipped or blocked), then the limit.
func testLimitWithKeys(e *env) {
	e.setConcurrency("report", 2)
	holder := e.nameTask("report", e.keyed(e.past(), "k", store.OverlapQueue))
	if res := e.claimAll(holder.ID); len(res.Claimed) != 1 {
		e.t.Fatalf("Claim = %+v, want the holder claimed", res)
	}
	blocked := e.nameTask("report", e.keyed(e.past(), "k", store.OverlapQueue))
	skipped := e.nameTask("report", e.keyed(e.past(), "k", store.OverlapSkip))
	other := e.nameTask("report", e.keyed(e.past().Add(time.Second), "other", store.OverlapQueue))
	allowed := e.nameTask("report", e.keyed(e.past().Add(2*time.Second), "k", store.OverlapAllow))
	res := e.claimAll(blocked.ID, skipped.ID, other.ID, allowed.ID)
	if got := blockedIDs(res); !slices.Equal(got, []int64{blocked.ID}) {
		e.t.Errorf("Blocked = %v, want %d: its key is held", got, blocked.ID)
	}
	if got := taskIDs(res.Skipped); !slices.Equal(got, []int64{skipped.ID}) {
		e.t.Errorf("Skipped = %v, want %d", got, skipped.ID)
	}
	if got := taskIDs(res.Claimed); !slices.Equal(got, []int64{other.ID}) {
		e.t.Errorf("Claimed = %v, want %d: its key is free and one slot is", got, other.ID)
	}
	if got := e.limitedIDs(res, "report", 2); !slices.Equal(got, []int64{allowed.ID}) {
		e.t.Errorf("Limited = %v, want %d: Overlap allow ignores the key, not the limit", got, allowed.ID)
	}
}

// Trigger does not claim a limited name's task, which could exceed the limit: it
// makes it due now, SCHEDULED, for the next claim.
func testLimitTrigger(e *env) {
	e.setConcurrency("report", 1)
	task := e.nameTask("report", e.newTask(e.future()))
	before := e.now()
	got, err := e.s.Trigger(e.ctx, task.ID, newExecID())
	if err != nil || got.Status != store.Scheduled || got.ExecutionID != "" {
		e.t.Fatalf("Trigger of a limited name's task = %+v, %v; want it SCHEDULED, no execution", got, err)
	}
	e.stamped("DueAt", got.DueAt, before, e.now())
	e.stamped("TriggeredAt", got.TriggeredAt, before, e.now())
	if res := e.claimAll(task.ID); len(res.Claimed) != 1 {
		e.t.Errorf("Claim after the trigger = %+v, want it claimed", res)
	}
	// A held key refuses first, as it does for any keyed task.
	holder := e.nameTask("other", e.keyed(e.past(), "k", store.OverlapQueue))
	if res := e.claimAll(holder.ID); len(res.Claimed) != 1 {
		e.t.Fatalf("Claim of the key's holder = %+v", res)
	}
	keyed := e.nameTask("report", e.keyed(e.future(), "k", store.OverlapQueue))
	got, err = e.s.Trigger(e.ctx, keyed.ID, newExecID())
	var held *store.KeyHeldError
	if !errors.Is(err, store.ErrNotTriggerable) || !errors.As(err, &held) || held.Holder != holder.ID {
		e.t.Errorf("Trigger of a limited name's task whose key is held = %+v, %v; want ErrNotTriggerable naming task %d", got, err, holder.ID)
	}
	e.unchanged("a refused trigger", keyed)
}

// Lowering a limit below the tasks in flight stops nothing, and claims none until
// fewer than it are; removing it (0) claims without limit again.
func testLimitLowered(e *env) {
	e.setConcurrency("report", 3)
	var ids []int64
	for i := range 5 {
		ids = append(ids, e.nameTask("report", e.newTask(e.past().Add(time.Duration(i)*time.Second))).ID)
	}
	res := e.claimAll(ids...)
	if len(res.Claimed) != 3 {
		e.t.Fatalf("Claim = %+v, want 3 claimed", res)
	}
	e.setConcurrency("report", 1)
	for _, t := range res.Claimed {
		if got := e.get(t.ID); got.Status != store.Dispatching {
			e.t.Errorf("task %d is %s after the limit was lowered, want still DISPATCHING", t.ID, got.Status)
		}
	}
	e.start(&res.Claimed[0])
	e.start(&res.Claimed[1])
	e.finish(store.Finish{TaskID: res.Claimed[0].ID, ExecutionID: res.Claimed[0].ExecutionID, Status: store.Succeeded})
	e.finish(store.Finish{TaskID: res.Claimed[1].ID, ExecutionID: res.Claimed[1].ExecutionID, Status: store.Succeeded}) // 1 in flight
	if again := e.claimAll(ids[3:]...); len(again.Claimed) != 0 || len(again.Limited) != 2 {
		e.t.Errorf("Claim at the lowered limit = %+v, want both Limited", again)
	}
	e.setConcurrency("report", 0)
	if again := e.claimAll(ids[3:]...); len(again.Claimed) != 2 {
		e.t.Errorf("Claim with the limit removed = %+v, want both claimed", again)
	}
}

// SetConcurrency is recorded, listed by Names with the pause, kept per namespace, and
// refuses what is invalid.
func testLimitStates(e *env) {
	if _, err := e.s.PauseName(e.ctx, "report", "bob"); err != nil {
		e.t.Fatal(err)
	}
	before := e.now()
	st, err := e.s.SetConcurrency(e.ctx, "report", 7, "alice")
	if err != nil || !st.Paused || st.Concurrency != 7 || st.ChangedBy != "alice" {
		e.t.Fatalf("SetConcurrency = %+v, %v; want paused, 7, by alice", st, err)
	}
	e.stamped("ChangedAt", st.ChangedAt, before, e.now())
	again, err := e.s.SetConcurrency(e.ctx, "report", 7, "carol")
	if err != nil || again.ChangedBy != "alice" || !again.ChangedAt.Equal(st.ChangedAt) {
		e.t.Errorf("SetConcurrency of the limit it has = %+v, %v; want it unchanged", again, err)
	}
	e.setConcurrency("mail", 2)
	names, err := e.s.Names(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var got []string
	for _, n := range names {
		got = append(got, fmt.Sprintf("%s:%v:%d", n.Name, n.Paused, n.Concurrency))
	}
	if want := []string{"mail:false:2", "report:true:7"}; !slices.Equal(got, want) {
		e.t.Errorf("Names = %v, want %v", got, want)
	}
	if names, err := e.view("limits-other").s.Names(e.ctx); err != nil || len(names) != 0 {
		e.t.Errorf("Names of another namespace = %+v, %v; want none", names, err)
	}
	for _, c := range []struct {
		name, by string
		n        int
	}{
		{"report", "alice", -1},
		{"report", "alice", store.MaxConcurrency + 1},
		{"", "alice", 1},
		{"report", "", 1},
		{"rep\x00ort", "alice", 1},
	} {
		if st, err := e.s.SetConcurrency(e.ctx, c.name, c.n, c.by); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("SetConcurrency(%q, %d, %q) = %+v, %v; want ErrInvalid", c.name, c.n, c.by, st, err)
		}
	}
	if got, err := e.s.Names(e.ctx); err != nil || len(got) != 2 || got[1].Concurrency != 7 {
		e.t.Errorf("Names after invalid calls = %+v, %v; want them unchanged", got, err)
	}
}

// Claimers racing, several tasks per call, never leave more tasks of a limited name
// DISPATCHING or RUNNING than its limit, and leave none behind.
func testLimitRace(e *env) {
	const limit, tasks, workers = 3, 90, 8
	e.setConcurrency("race", limit)
	base := e.past()
	var nts []store.NewTask
	for i := range tasks {
		nts = append(nts, e.newTask(base.Add(time.Duration(i)*time.Millisecond)))
		nts[i].Name = "race"
	}
	ids := taskIDs(derefTasks(e.insert(nts...)))
	var active, most atomic.Int32
	var done atomic.Int64
	seed := e.seed()
	e.race(workers, stuckAfter, "limit race workers", func(w int) error {
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		for e.ctx.Err() == nil && done.Load() < tasks {
			pick := make([]store.Claim, 1+rng.IntN(12))
			for i := range pick {
				pick[i] = store.Claim{ID: ids[rng.IntN(len(ids))], ExecutionID: newExecID()}
			}
			res, err := e.s.Claim(e.ctx, store.Fence{}, pick)
			if err != nil {
				return fmt.Errorf("Claim: %w", err)
			}
			for _, t := range res.Claimed {
				n := active.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				if _, err := e.s.Start(e.ctx, store.Fence{}, []store.StartParams{{TaskID: t.ID, ExecutionID: t.ExecutionID, Name: t.Name, Node: "race"}}); err != nil {
					return fmt.Errorf("Start: %w", err)
				}
				// Leave the slot before the write that frees it, so that a claim it
				// lets through cannot be counted while this one still is.
				active.Add(-1)
				ok, err := e.s.Finish(e.ctx, store.Fence{}, []store.Finish{{TaskID: t.ID, ExecutionID: t.ExecutionID, Status: store.Succeeded}})
				if err != nil || !ok[0] {
					return fmt.Errorf("Finish = %v, %w", ok, err)
				}
				done.Add(1)
			}
		}
		return nil
	})
	if m := most.Load(); m > limit {
		e.t.Fatalf("%d tasks of a name limited to %d were in flight at once", m, limit)
	}
	for _, id := range ids {
		if t := e.get(id); t.Status != store.Succeeded {
			e.t.Errorf("task %d is %s after the race, want SUCCEEDED", id, t.Status)
		}
	}
}

func derefTasks(ts []*store.Task) []store.Task {
	out := make([]store.Task, len(ts))
	for i, t := range ts {
		out[i] = *t
	}
	return out
}

// invalidRates are rates SetRate and SetKeyRate refuse.
var invalidRates = []struct {
	n   int
	per time.Duration
}{{-1, time.Second}, {store.MaxRate + 1, time.Second}, {1, 0}, {1, store.MinRatePer - 1}, {1, store.MaxRatePer + 1}}

// mostInWindow sorts ts and returns the most of them in one closed window of per,
// and where that window starts.
func mostInWindow(ts []time.Time, per time.Duration) (most int, from time.Time) {
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	for i := range ts {
		j := i
		for j < len(ts) && !ts[j].After(ts[i].Add(per)) {
			j++
		}
		if j-i > most {
			most, from = j-i, ts[i]
		}
	}
	return most, from
}

// setRate sets name's rate limit and checks the state it answers.
func (e *env) setRate(name string, n int, per time.Duration) {
	e.t.Helper()
	st, err := e.s.SetRate(e.ctx, name, n, per, "alice")
	if err != nil || st.Name != name || st.Rate != n || (n > 0 && st.Per != per) {
		e.t.Fatalf("SetRate(%q, %d, %v) = %+v, %v; want the limit set", name, n, per, st, err)
	}
}

// A rate-limited name's due tasks are claimed up to its rate in the window, the first
// in due order; the rest are Limited with the rate's n and RetryAt, when the window
// admits the next; finishing a task frees no start; other names are not held back.
func testRateHoldsClaims(e *env) {
	e.setRate("mail", 2, time.Hour)
	base := e.past()
	var ids []int64
	for i := range 4 {
		ids = append(ids, e.nameTask("mail", e.newTask(base.Add(time.Duration(3-i)*time.Second))).ID) // due in reverse
	}
	free := e.nameTask("report", e.newTask(base))
	res, err := e.s.ClaimStart(e.ctx, store.Fence{}, store.StartOn{Node: "node-1", Handlers: []string{"mail", "report"}},
		[]store.Claim{{ID: ids[0], ExecutionID: newExecID(), Start: true}, {ID: ids[1], ExecutionID: newExecID(), Start: true},
			{ID: ids[2], ExecutionID: newExecID(), Start: true}, {ID: ids[3], ExecutionID: newExecID(), Start: true},
			{ID: free.ID, ExecutionID: newExecID(), Start: true}})
	if err != nil {
		e.t.Fatal(err)
	}
	if got := taskIDs(res.Claimed); !slices.Equal(got, []int64{ids[2], ids[3]}) {
		e.t.Fatalf("claimed %v, want %v: the two due first, DISPATCHING", got, []int64{ids[2], ids[3]})
	}
	if got := taskIDs(res.Started); !slices.Equal(got, []int64{free.ID}) {
		e.t.Errorf("started %v, want %d", got, free.ID)
	}
	first := res.Claimed[0].DispatchedAt
	if len(res.Limited) != 2 {
		e.t.Fatalf("Limited = %+v, want 2", res.Limited)
	}
	for _, l := range res.Limited {
		if l.Name != "mail" || l.Limit != 2 || l.RetryAt.Before(first.Add(time.Hour)) || l.RetryAt.After(first.Add(time.Hour+time.Millisecond)) {
			e.t.Errorf("Limited %+v, want mail, limit 2, RetryAt an hour after the claims at %v", l, first)
		}
	}
	for _, t := range res.Claimed {
		e.start(&t)
		e.finish(store.Finish{TaskID: t.ID, ExecutionID: t.ExecutionID, Status: store.Succeeded})
	}
	if again := e.claimAll(ids[0], ids[1]); len(again.Claimed) != 0 || len(again.Limited) != 2 {
		e.t.Errorf("Claim after the first two finished = %+v, want both Limited: a finish frees no start", again)
	}
	if got, err := e.s.Trigger(e.ctx, ids[0], newExecID()); err != nil || got.Status != store.Scheduled {
		e.t.Errorf("Trigger of a rate-limited name's task = %+v, %v; want it made due, SCHEDULED", got, err)
	}
}

// Once the window has passed the claims it held, the rate admits as many more; a
// claim at RetryAt is admitted.
func testRateWindow(e *env) {
	const per = 300 * time.Millisecond
	e.setRate("mail", 2, per)
	var ids []int64
	for i := range 3 {
		ids = append(ids, e.nameTask("mail", e.newTask(e.past().Add(time.Duration(i)*time.Millisecond))).ID)
	}
	res := e.claimAll(ids...)
	if len(res.Claimed) != 2 || len(res.Limited) != 1 {
		e.t.Fatalf("Claim = %+v, want 2 claimed and 1 Limited", res)
	}
	retry := res.Limited[0].RetryAt
	for e.now().Before(retry) {
		time.Sleep(10 * time.Millisecond)
	}
	again := e.claimAll(ids[2])
	if len(again.Claimed) != 1 {
		e.t.Fatalf("Claim at RetryAt %v = %+v, want it claimed", retry, again)
	}
	if d := again.Claimed[0].DispatchedAt.Sub(res.Claimed[0].DispatchedAt); d <= per {
		e.t.Errorf("the third claim came %v after the first, want more than %v", d, per)
	}
}

// SetRate is recorded and listed by Names, beside the concurrency limit; 0 removes it;
// invalid input is refused.
func testRateStates(e *env) {
	e.setConcurrency("mail", 3)
	e.setRate("mail", 10, time.Minute)
	names, err := e.s.Names(e.ctx)
	if err != nil || len(names) != 1 || names[0].Concurrency != 3 || names[0].Rate != 10 || names[0].Per != time.Minute {
		e.t.Fatalf("Names = %+v, %v; want mail with concurrency 3 and rate 10 per minute", names, err)
	}
	again, err := e.s.SetRate(e.ctx, "mail", 10, time.Minute, "carol")
	if err != nil || again.ChangedBy != "alice" {
		e.t.Errorf("SetRate of the limit it has = %+v, %v; want it unchanged", again, err)
	}
	e.setRate("mail", 0, 0)
	if names, err := e.s.Names(e.ctx); err != nil || names[0].Rate != 0 || names[0].Per != 0 || names[0].Concurrency != 3 {
		e.t.Errorf("Names after the rate was removed = %+v, %v", names, err)
	}
	for _, c := range invalidRates {
		if st, err := e.s.SetRate(e.ctx, "mail", c.n, c.per, "alice"); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("SetRate(%d, %v) = %+v, %v; want ErrInvalid", c.n, c.per, st, err)
		}
	}
}

// A name's rate removed forgets the claims it recorded: set again, the claims made
// before do not count toward it.
func testRateRemovedForgets(e *env) {
	e.setRate("mail", 1, time.Hour)
	a := e.nameTask("mail", e.newTask(e.past()))
	b := e.nameTask("mail", e.newTask(e.past()))
	if res := e.claimAll(a.ID); len(res.Claimed) != 1 {
		e.t.Fatalf("Claim = %+v, want it claimed", res)
	}
	e.setRate("mail", 0, 0)
	e.setRate("mail", 1, time.Hour)
	if res := e.claimAll(b.ID); len(res.Claimed) != 1 {
		e.t.Errorf("Claim after the rate was removed and set again = %+v, want it claimed: the earlier claim does not count", res)
	}
}

// Claimers racing, several tasks per call, never claim more of a rate-limited name's
// tasks in any window of its period than its rate, by the claims' own stamps, and
// leave none behind.
func testRateRace(e *env) {
	const rate, per, tasks, workers = 4, 200 * time.Millisecond, 24, 8
	e.setRate("race", rate, per)
	var nts []store.NewTask
	for i := range tasks {
		nts = append(nts, e.newTask(e.past().Add(time.Duration(i)*time.Millisecond)))
		nts[i].Name = "race"
	}
	ids := taskIDs(derefTasks(e.insert(nts...)))
	var mu sync.Mutex
	var claims []time.Time
	seed := e.seed()
	e.race(workers, stuckAfter, "rate race workers", func(w int) error {
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		for e.ctx.Err() == nil {
			mu.Lock()
			n := len(claims)
			mu.Unlock()
			if n >= tasks {
				return nil
			}
			pick := make([]store.Claim, 1+rng.IntN(8))
			for i := range pick {
				pick[i] = store.Claim{ID: ids[rng.IntN(len(ids))], ExecutionID: newExecID()}
			}
			res, err := e.s.Claim(e.ctx, store.Fence{}, pick)
			if err != nil {
				return fmt.Errorf("Claim: %w", err)
			}
			mu.Lock()
			for _, t := range res.Claimed {
				claims = append(claims, t.DispatchedAt)
			}
			mu.Unlock()
			time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
		}
		return nil
	})
	if most, from := mostInWindow(claims, per); most > rate {
		e.t.Fatalf("%d claims in the window [%v, +%v], over the rate of %d", most, from, per, rate)
	}
	if len(claims) != tasks {
		e.t.Errorf("%d claims, want %d: each task once", len(claims), tasks)
	}
}

// A name's key concurrency n lets n of its tasks sharing a key run at once, the
// first in due order; the next is blocked or skipped by its policy, naming the key's
// lowest holder; a key's holders of other names count; Trigger makes such a task due.
func testKeyConcurrency(e *env) {
	st, err := e.s.SetKeyConcurrency(e.ctx, "export", 2, "alice")
	if err != nil || st.KeyConcurrency != 2 || st.ChangedBy != "alice" {
		e.t.Fatalf("SetKeyConcurrency = %+v, %v; want 2 by alice", st, err)
	}
	base := e.past()
	a := e.nameTask("export", e.keyed(base, "cust-1", store.OverlapQueue))
	b := e.nameTask("export", e.keyed(base.Add(time.Second), "cust-1", store.OverlapQueue))
	c := e.nameTask("export", e.keyed(base.Add(2*time.Second), "cust-1", store.OverlapQueue))
	d := e.nameTask("export", e.keyed(base.Add(3*time.Second), "cust-1", store.OverlapSkip))
	other := e.nameTask("export", e.keyed(base.Add(4*time.Second), "cust-2", store.OverlapQueue))
	res := e.claimAll(d.ID, c.ID, b.ID, a.ID, other.ID)
	if got := taskIDs(res.Claimed); !slices.Equal(got, sortedIDs([]int64{a.ID, b.ID, other.ID})) {
		e.t.Fatalf("claimed %v, want the two due first of cust-1 and the one of cust-2", got)
	}
	if got := blockedIDs(res); !slices.Equal(got, []int64{c.ID}) {
		e.t.Errorf("Blocked = %v, want %d", got, c.ID)
	}
	if len(res.Skipped) != 1 || res.Skipped[0].ID != d.ID || res.Skipped[0].LastError != fmt.Sprintf("skipped: task key %q held by task %d", "cust-1", a.ID) {
		e.t.Errorf("Skipped = %+v, want %d, naming holder %d", res.Skipped, d.ID, a.ID)
	}
	// A holder of another name, with the rule of one, finds the key held.
	mail := e.nameTask("mail", e.keyed(base, "cust-2", store.OverlapQueue))
	if res := e.claimAll(mail.ID); len(res.Blocked) != 1 {
		e.t.Errorf("Claim of another name's task of a key held once = %+v, want it Blocked: its name admits one", res)
	}
	var held store.Task
	for _, t := range res.Claimed {
		if t.ID == a.ID {
			held = t
		}
	}
	e.start(&held)
	e.finish(store.Finish{TaskID: a.ID, ExecutionID: held.ExecutionID, Status: store.Succeeded})
	if res := e.claimAll(c.ID); len(res.Claimed) != 1 {
		e.t.Errorf("Claim after a holder finished = %+v, want it claimed", res)
	}
	later := e.nameTask("export", e.keyed(e.future(), "cust-3", store.OverlapQueue))
	if got, err := e.s.Trigger(e.ctx, later.ID, newExecID()); err != nil || got.Status != store.Scheduled {
		e.t.Errorf("Trigger of a task whose name has a key concurrency = %+v, %v; want it made due", got, err)
	}
	if st, err := e.s.SetKeyConcurrency(e.ctx, "export", 1, "alice"); err != nil || st.KeyConcurrency != 0 {
		e.t.Errorf("SetKeyConcurrency(1) = %+v, %v; want the rule of one, stored as 0", st, err)
	}
	if _, err := e.s.SetKeyConcurrency(e.ctx, "export", -1, "alice"); !errors.Is(err, store.ErrInvalid) {
		e.t.Errorf("SetKeyConcurrency(-1) error = %v, want ErrInvalid", err)
	}
}

// Claimers racing never leave more tasks of one key in flight than the name's key
// concurrency.
func testKeyConcurrencyRace(e *env) {
	const keys, perKey, workers, admits = 3, 20, 8, 2
	if _, err := e.s.SetKeyConcurrency(e.ctx, "race", admits, "alice"); err != nil {
		e.t.Fatal(err)
	}
	var nts []store.NewTask
	for k := range keys {
		for i := range perKey {
			nt := e.keyed(e.past().Add(time.Duration(i)*time.Millisecond), fmt.Sprintf("race-%d", k), store.OverlapQueue)
			nt.Name = "race"
			nts = append(nts, nt)
		}
	}
	ids := taskIDs(derefTasks(e.insert(nts...)))
	var active [keys]atomic.Int32
	var violations, done atomic.Int64
	seed := e.seed()
	e.race(workers, stuckAfter, "key concurrency race workers", func(w int) error {
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		for e.ctx.Err() == nil && done.Load() < int64(len(ids)) {
			pick := make([]store.Claim, 1+rng.IntN(12))
			for i := range pick {
				pick[i] = store.Claim{ID: ids[rng.IntN(len(ids))], ExecutionID: newExecID()}
			}
			res, err := e.s.Claim(e.ctx, store.Fence{}, pick)
			if err != nil {
				return fmt.Errorf("Claim: %w", err)
			}
			for _, t := range res.Claimed {
				a := &active[t.TaskKey[len("race-")]-'0']
				if a.Add(1) > admits {
					violations.Add(1)
				}
				if _, err := e.s.Start(e.ctx, store.Fence{}, []store.StartParams{{TaskID: t.ID, ExecutionID: t.ExecutionID, Name: t.Name, Node: "race"}}); err != nil {
					return fmt.Errorf("Start: %w", err)
				}
				a.Add(-1)
				ok, err := e.s.Finish(e.ctx, store.Fence{}, []store.Finish{{TaskID: t.ID, ExecutionID: t.ExecutionID, Status: store.Succeeded}})
				if err != nil || !ok[0] {
					return fmt.Errorf("Finish = %v, %w", ok, err)
				}
				done.Add(1)
			}
		}
		return nil
	})
	if n := violations.Load(); n != 0 {
		e.t.Fatalf("%d claims found their key held by %d tasks already", n, admits)
	}
}

// One claim of more than a batch of restricted tasks fills a key shared by names that
// admit different numbers as it decided, in due order: a task of a name admitting
// one, due first, and one admitting three are both claimed, however the store splits
// its writes.
func testKeyConcurrencyAcrossBatches(e *env) {
	for name, n := range map[string]int{"a-wide": 3, "b-fill": 2} {
		if _, err := e.s.SetKeyConcurrency(e.ctx, name, n, "alice"); err != nil {
			e.t.Fatal(err)
		}
	}
	// Named so that ids, whether a store gives them in input order or in (name, key)
	// order, put the wide task first and the narrow one last.
	nts := []store.NewTask{e.keyed(e.past(), "k", store.OverlapQueue)}
	nts[0].Name = "a-wide"
	for range store.MaxBatch { // restricted too: their name has a key concurrency
		nt := e.newTask(e.past())
		nt.Name = "b-fill"
		nts = append(nts, nt)
	}
	narrow := e.keyed(e.past().Add(-time.Hour), "k", store.OverlapQueue)
	narrow.Name = "c-narrow"
	nts = append(nts, narrow)
	tasks := e.insert(nts...)
	ids := make([]int64, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	res := e.claimAll(ids...)
	if len(res.Claimed) != len(ids) {
		e.t.Fatalf("claimed %d of %d tasks (blocked %+v), want every one: the key admits the wide task beside the narrow one",
			len(res.Claimed), len(ids), res.Blocked)
	}
}

// setKeyRate sets name's rate per task key and checks the state it answers.
func (e *env) setKeyRate(name string, n int, per time.Duration) {
	e.t.Helper()
	st, err := e.s.SetKeyRate(e.ctx, name, n, per, "alice")
	if err != nil || st.Name != name || st.KeyRate != n || (n > 0 && st.KeyPer != per) {
		e.t.Fatalf("SetKeyRate(%q, %d, %v) = %+v, %v; want the limit set", name, n, per, st, err)
	}
}

// A name's rate per task key claims up to its rate of the tasks of each key in the
// window, the first in due order; the rest are Limited with the rate's n, RetryAt
// and their key; other keys, tasks of the name without a key or with Overlap allow,
// and other names' tasks of the key are not held back by it.
func testKeyRateHoldsClaims(e *env) {
	e.setKeyRate("sync", 2, time.Hour)
	if _, err := e.s.SetKeyConcurrency(e.ctx, "sync", 10, "alice"); err != nil {
		e.t.Fatal(err)
	}
	base := e.past()
	var one []int64 // cust-1's, due in reverse of their ids
	for i := range 4 {
		one = append(one, e.nameTask("sync", e.keyed(base.Add(time.Duration(3-i)*time.Second), "cust-1", store.OverlapQueue)).ID)
	}
	two := e.nameTask("sync", e.keyed(base, "cust-2", store.OverlapSkip))
	bare := e.nameTask("sync", e.newTask(base))
	allow := e.nameTask("sync", e.keyed(base, "cust-1", store.OverlapAllow))
	res := e.claimAll(append([]int64{two.ID, bare.ID, allow.ID}, one...)...)
	want := sortedIDs([]int64{one[2], one[3], two.ID, bare.ID, allow.ID})
	if got := taskIDs(res.Claimed); !slices.Equal(got, want) {
		e.t.Fatalf("claimed %v, want %v: cust-1's two due first, and the others", got, want)
	}
	var first time.Time
	for _, t := range res.Claimed {
		if t.ID == one[3] {
			first = t.DispatchedAt
		}
	}
	if got := e.limitedIDs(res, "sync", 2); !slices.Equal(got, sortedIDs(one[:2])) {
		e.t.Fatalf("Limited %v, want %v", got, sortedIDs(one[:2]))
	}
	for _, l := range res.Limited {
		if l.TaskKey != "cust-1" || l.RetryAt.Before(first.Add(time.Hour)) || l.RetryAt.After(first.Add(time.Hour+time.Millisecond)) {
			e.t.Errorf("Limited %+v, want key cust-1 and RetryAt an hour after the claims at %v", l, first)
		}
	}
	// Another name's task of the key is not held back by sync's rate.
	mail := e.nameTask("mail", e.keyed(base, "cust-3", store.OverlapQueue))
	if res := e.claimAll(mail.ID); len(res.Claimed) != 1 {
		e.t.Errorf("Claim of another name's keyed task = %+v, want it claimed", res)
	}
	for _, t := range res.Claimed {
		if t.TaskKey == "cust-1" && t.Overlap == store.OverlapQueue {
			e.start(&t)
			e.finish(store.Finish{TaskID: t.ID, ExecutionID: t.ExecutionID, Status: store.Succeeded})
		}
	}
	if again := e.claimAll(one[0], one[1]); len(again.Claimed) != 0 || len(again.Limited) != 2 {
		e.t.Errorf("Claim after cust-1's two finished = %+v, want both Limited: a finish frees no start", again)
	}
	if got, err := e.s.Trigger(e.ctx, one[0], newExecID()); err != nil || got.Status != store.Scheduled {
		e.t.Errorf("Trigger of a task whose name has a rate per key = %+v, %v; want it made due, SCHEDULED", got, err)
	}
}

// Once the window has passed a key's claims, the rate admits as many more of it; a
// claim at RetryAt is admitted.
func testKeyRateWindow(e *env) {
	const per = 300 * time.Millisecond
	e.setKeyRate("sync", 1, per)
	a := e.nameTask("sync", e.keyed(e.past(), "cust-1", store.OverlapQueue))
	b := e.nameTask("sync", e.keyed(e.past().Add(time.Millisecond), "cust-1", store.OverlapQueue))
	res := e.claimAll(a.ID)
	if len(res.Claimed) != 1 {
		e.t.Fatalf("Claim = %+v, want it claimed", res)
	}
	t := res.Claimed[0]
	e.start(&t)
	e.finish(store.Finish{TaskID: t.ID, ExecutionID: t.ExecutionID, Status: store.Succeeded})
	held := e.claimAll(b.ID)
	if len(held.Limited) != 1 || held.Limited[0].TaskKey != "cust-1" {
		e.t.Fatalf("Claim in the window = %+v, want it Limited by cust-1's rate", held)
	}
	retry := held.Limited[0].RetryAt
	for e.now().Before(retry) {
		time.Sleep(10 * time.Millisecond)
	}
	again := e.claimAll(b.ID)
	if len(again.Claimed) != 1 {
		e.t.Fatalf("Claim at RetryAt %v = %+v, want it claimed", retry, again)
	}
	if d := again.Claimed[0].DispatchedAt.Sub(t.DispatchedAt); d <= per {
		e.t.Errorf("the second claim came %v after the first, want more than %v", d, per)
	}
}

// SetKeyRate is recorded and listed by Names beside the name's other limits; 0
// removes it; invalid input is refused; PruneKeyStarts keeps the times a window can
// reach and refuses a limit out of range.
func testKeyRateStates(e *env) {
	e.setRate("sync", 10, time.Minute)
	e.setKeyRate("sync", 3, time.Second)
	names, err := e.s.Names(e.ctx)
	if err != nil || len(names) != 1 || names[0].Rate != 10 || names[0].KeyRate != 3 || names[0].KeyPer != time.Second {
		e.t.Fatalf("Names = %+v, %v; want sync with rate 10 per minute and 3 per second per key", names, err)
	}
	if again, err := e.s.SetKeyRate(e.ctx, "sync", 3, time.Second, "carol"); err != nil || again.ChangedBy != "alice" {
		e.t.Errorf("SetKeyRate of the limit it has = %+v, %v; want it unchanged", again, err)
	}
	a := e.nameTask("sync", e.keyed(e.past(), "cust-1", store.OverlapQueue))
	if res := e.claimAll(a.ID); len(res.Claimed) != 1 {
		e.t.Fatalf("Claim = %+v, want it claimed", res)
	}
	if n, err := e.s.PruneKeyStarts(e.ctx, 10); err != nil || n != 0 {
		e.t.Errorf("PruneKeyStarts after a claim now = %d, %v; want 0: its window reaches it", n, err)
	}
	for _, limit := range []int{0, store.MaxPrune + 1} {
		if _, err := e.s.PruneKeyStarts(e.ctx, limit); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("PruneKeyStarts(%d) error = %v, want ErrInvalid", limit, err)
		}
	}
	e.setKeyRate("sync", 0, 0)
	if names, err := e.s.Names(e.ctx); err != nil || names[0].KeyRate != 0 || names[0].KeyPer != 0 || names[0].Rate != 10 {
		e.t.Errorf("Names after the rate per key was removed = %+v, %v", names, err)
	}
	for _, c := range invalidRates {
		if st, err := e.s.SetKeyRate(e.ctx, "sync", c.n, c.per, "alice"); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("SetKeyRate(%d, %v) = %+v, %v; want ErrInvalid", c.n, c.per, st, err)
		}
	}
}

// Claimers racing, several tasks per call, never claim more of one key's tasks in
// any window of the period than the name's rate per key, by the claims' own stamps,
// and leave none behind.
func testKeyRateRace(e *env) {
	const keys, perKey, rate, per, workers = 2, 12, 3, 200 * time.Millisecond, 8
	e.setKeyRate("race", rate, per)
	if _, err := e.s.SetKeyConcurrency(e.ctx, "race", perKey, "alice"); err != nil {
		e.t.Fatal(err)
	}
	var nts []store.NewTask
	for k := range keys {
		for i := range perKey {
			nt := e.keyed(e.past().Add(time.Duration(i)*time.Millisecond), fmt.Sprintf("race-%d", k), store.OverlapQueue)
			nt.Name = "race"
			nts = append(nts, nt)
		}
	}
	ids := taskIDs(derefTasks(e.insert(nts...)))
	var mu sync.Mutex
	claims := map[string][]time.Time{}
	count := 0
	seed := e.seed()
	e.race(workers, stuckAfter, "key rate race workers", func(w int) error {
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		for e.ctx.Err() == nil {
			mu.Lock()
			n := count
			mu.Unlock()
			if n >= len(ids) {
				return nil
			}
			pick := make([]store.Claim, 1+rng.IntN(8))
			for i := range pick {
				pick[i] = store.Claim{ID: ids[rng.IntN(len(ids))], ExecutionID: newExecID()}
			}
			res, err := e.s.Claim(e.ctx, store.Fence{}, pick)
			if err != nil {
				return fmt.Errorf("Claim: %w", err)
			}
			mu.Lock()
			for _, t := range res.Claimed {
				claims[t.TaskKey] = append(claims[t.TaskKey], t.DispatchedAt)
				count++
			}
			mu.Unlock()
			time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
		}
		return nil
	})
	for key, ts := range claims {
		if most, from := mostInWindow(ts, per); most > rate {
			e.t.Fatalf("%d claims of key %s in the window [%v, +%v], over the rate of %d", most, key, from, per, rate)
		}
	}
	if count != len(ids) {
		e.t.Errorf("%d claims, want %d: each task once", count, len(ids))
	}
}
