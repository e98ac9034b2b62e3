package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

var overlapTests = []test{
	{"RoundTrip", testKeyRoundTrip},
	{"Invalid", testKeyInvalid},
	{"SkipWhileHeld", testSkipWhileHeld},
	{"QueueWhileHeld", testQueueWhileHeld},
	{"AllowWhileHeld", testAllowWhileHeld},
	{"OnePerKeyInOneClaim", testOnePerKeyInOneClaim},
	{"FreedByFinish", testFreedByFinish},
	{"OtherKeysFree", testOtherKeysFree},
	{"TriggerWhileHeld", testTriggerWhileHeld},
	{"Race", testKeyRace},
}

// keyed returns a NewTask with a task key and overlap policy, due at due.
func (e *env) keyed(due time.Time, key string, p store.OverlapPolicy) store.NewTask {
	nt := e.newTask(due)
	nt.TaskKey, nt.Overlap = key, p
	return nt
}

// claimAll claims ids, each with a fresh execution id.
func (e *env) claimAll(ids ...int64) *store.ClaimResult {
	e.t.Helper()
	claims := make([]store.Claim, len(ids))
	for i, id := range ids {
		claims[i] = store.Claim{ID: id, ExecutionID: newExecID()}
	}
	res, err := e.s.Claim(e.ctx, store.Fence{}, claims)
	if err != nil {
		e.t.Fatalf("Claim(%v) error: %v", ids, err)
	}
	return res
}

// taskIDs returns the ids of tasks, in order.
func taskIDs(tasks []store.Task) []int64 {
	ids := make([]int64, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	return ids
}

func blockedIDs(res *store.ClaimResult) []int64 {
	ids := make([]int64, len(res.Blocked))
	for i, b := range res.Blocked {
		ids[i] = b.ID
	}
	return ids
}

func testKeyRoundTrip(e *env) {
	for _, p := range []store.OverlapPolicy{store.OverlapSkip, store.OverlapQueue, store.OverlapAllow} {
		nt := e.keyed(e.future(), "reconcile/"+string(p), p)
		got := e.insert(nt)[0]
		if got.TaskKey != nt.TaskKey || got.Overlap != p {
			e.t.Errorf("Insert: TaskKey, Overlap = %q, %q; want %q, %q", got.TaskKey, got.Overlap, nt.TaskKey, p)
		}
		if d := diff(got, e.get(got.ID)); d != "" {
			e.t.Errorf("Get after Insert differs (-insert +get):\n%s", d)
		}
	}
	plain := e.scheduled(e.future())
	if plain.TaskKey != "" || plain.Overlap != "" {
		e.t.Errorf("Insert without a key: TaskKey, Overlap = %q, %q; want empty", plain.TaskKey, plain.Overlap)
	}
}

func testKeyInvalid(e *env) {
	e.insertInvalid(map[string]func(*store.NewTask){
		"overlap without key": func(nt *store.NewTask) { nt.Overlap = store.OverlapSkip },
		"key without overlap": func(nt *store.NewTask) { nt.TaskKey = "k" },
		"unknown overlap":     func(nt *store.NewTask) { nt.TaskKey, nt.Overlap = "k", "sometimes" },
	})
}

// holding inserts a task with key and policy p and moves it to status (DISPATCHING
// or RUNNING), so that it holds the key.
func (e *env) holding(key string, p store.OverlapPolicy, status store.Status) *store.Task {
	e.t.Helper()
	task := e.claim(e.insert(e.keyed(e.past(), key, p))[0].ID)
	if status == store.Running {
		e.start(task)
	}
	return e.get(task.ID)
}

func testSkipWhileHeld(e *env) {
	for _, status := range []store.Status{store.Dispatching, store.Running} {
		key := "reconcile-" + string(status)
		holder := e.holding(key, store.OverlapSkip, status)
		late := e.insert(e.keyed(e.past(), key, store.OverlapSkip))[0]
		lo := e.now()
		res := e.claimAll(late.ID)
		hi := e.now()
		if len(res.Claimed) != 0 || len(res.Blocked) != 0 || len(res.Skipped) != 1 || res.Skipped[0].ID != late.ID {
			e.t.Fatalf("Claim of a skip task while its key is held (%s) = %+v; want it skipped", status, res)
		}
		got := e.get(late.ID)
		if d := diff(&res.Skipped[0], got); d != "" {
			e.t.Errorf("Skipped differs from Get (-claim +get):\n%s", d)
		}
		if got.Status != store.Skipped {
			e.t.Errorf("skipped task status = %s, want SKIPPED", got.Status)
		}
		if want := driverkit.SkipReason(key, holder.ID); got.LastError != want {
			e.t.Errorf("skipped task LastError = %q, want %q", got.LastError, want)
		}
		e.stamped("skipped task FinishedAt", got.FinishedAt, lo, hi)
		e.stamped("skipped task UpdatedAt", got.UpdatedAt, lo, hi)
		if got.ExecutionID != "" || got.Attempt != 0 || !got.DispatchedAt.IsZero() {
			e.t.Errorf("skipped task = %+v; want no execution, attempt 0, no DispatchedAt", got)
		}
		if x := e.executions(late.ID); len(x) != 0 {
			e.t.Errorf("skipped task has executions %+v", x)
		}
		e.unchanged("Claim of a skipped sibling", holder)
	}
}

func testQueueWhileHeld(e *env) {
	holder := e.holding("nightly", store.OverlapQueue, store.Running)
	waiting := e.insert(e.keyed(e.past(), "nightly", store.OverlapQueue))[0]
	res := e.claimAll(waiting.ID)
	want := []store.Blocked{{Due: store.Due{ID: waiting.ID, DueAt: waiting.DueAt}, TaskKey: "nightly"}}
	if len(res.Claimed)+len(res.Skipped)+len(res.NotDue) != 0 || diff(want, res.Blocked) != "" {
		e.t.Fatalf("Claim of a queue task while its key is held = %+v; want Blocked %v", res, want)
	}
	e.unchanged("Claim of a blocked task", waiting)
	e.unchanged("Claim of a blocked sibling", holder)
}

func testAllowWhileHeld(e *env) {
	e.holding("fanout", store.OverlapAllow, store.Running)
	other := e.insert(e.keyed(e.past(), "fanout", store.OverlapAllow))[0]
	if res := e.claimAll(other.ID); len(res.Claimed) != 1 {
		e.t.Fatalf("Claim of an allow task while its key is in use = %+v; want it claimed", res)
	}
	// A skip task is held off by an allow task holding the key: the rule is about
	// the task that comes due.
	skip := e.insert(e.keyed(e.past(), "fanout", store.OverlapSkip))[0]
	if res := e.claimAll(skip.ID); len(res.Skipped) != 1 {
		e.t.Errorf("Claim of a skip task while allow tasks hold the key = %+v; want it skipped", res)
	}
}

func testOnePerKeyInOneClaim(e *env) {
	base := e.past()
	// Inserted in reverse due order, so that the winner is not simply the lowest id.
	tasks := e.insert(
		e.keyed(base.Add(3*time.Second), "k", store.OverlapSkip),
		e.keyed(base.Add(2*time.Second), "k", store.OverlapQueue),
		e.keyed(base.Add(1*time.Second), "k", store.OverlapSkip),
		e.keyed(base.Add(1*time.Second), "j", store.OverlapQueue),
		e.keyed(base, "j", store.OverlapQueue),
	)
	res := e.claimAll(tasks[0].ID, tasks[1].ID, tasks[2].ID, tasks[3].ID, tasks[4].ID)
	if got, want := taskIDs(res.Claimed), sortedIDs([]int64{tasks[2].ID, tasks[4].ID}); diff(want, got) != "" {
		e.t.Errorf("Claimed = %v, want %v (the earliest due per key)", got, want)
	}
	if got, want := taskIDs(res.Skipped), []int64{tasks[0].ID}; diff(want, got) != "" {
		e.t.Errorf("Skipped = %v, want %v", got, want)
	}
	if got, want := blockedIDs(res), sortedIDs([]int64{tasks[1].ID, tasks[3].ID}); diff(want, got) != "" {
		e.t.Errorf("Blocked = %v, want %v", got, want)
	}
	if got := e.get(tasks[0].ID).LastError; got != driverkit.SkipReason("k", tasks[2].ID) {
		e.t.Errorf("LastError of the skipped task = %q, want it to name the winner %d", got, tasks[2].ID)
	}
}

func testFreedByFinish(e *env) {
	for _, end := range []store.Status{store.Succeeded, store.Failed, store.Scheduled} {
		key := "freed-" + string(end)
		holder := e.holding(key, store.OverlapQueue, store.Running)
		waiting := e.insert(e.keyed(e.past(), key, store.OverlapQueue))[0]
		if res := e.claimAll(waiting.ID); len(res.Blocked) != 1 {
			e.t.Fatalf("Claim while held = %+v, want Blocked", res)
		}
		e.finish(store.Finish{TaskID: holder.ID, ExecutionID: holder.ExecutionID, Status: end,
			Attempt: 1, DueAt: e.future(), Error: "boom"})
		if res := e.claimAll(waiting.ID); len(res.Claimed) != 1 {
			e.t.Errorf("Claim after the holder finished (%s) = %+v, want claimed", end, res)
		}
	}
	// A requeued (undispatched) holder frees the key too.
	holder := e.holding("requeued", store.OverlapQueue, store.Dispatching)
	waiting := e.insert(e.keyed(e.past(), "requeued", store.OverlapQueue))[0]
	ok, err := e.s.Requeue(e.ctx, store.Fence{}, []store.Requeue{{TaskID: holder.ID, ExecutionID: holder.ExecutionID,
		DueAt: e.future(), Error: "no executor", MaxDispatchRetries: 5}})
	if err != nil || len(ok) != 1 || !ok[0] {
		e.t.Fatalf("Requeue = %v, %v", ok, err)
	}
	if res := e.claimAll(waiting.ID); len(res.Claimed) != 1 {
		e.t.Errorf("Claim after the holder was requeued = %+v, want claimed", res)
	}
}

func testOtherKeysFree(e *env) {
	e.holding("a", store.OverlapSkip, store.Running)
	tasks := e.insert(
		e.keyed(e.past(), "b", store.OverlapSkip),
		e.newTask(e.past()),
		e.keyed(e.future(), "a", store.OverlapSkip), // not due: NotDue, not skipped
	)
	res := e.claimAll(tasks[0].ID, tasks[1].ID, tasks[2].ID)
	if got, want := taskIDs(res.Claimed), []int64{tasks[0].ID, tasks[1].ID}; diff(want, got) != "" {
		e.t.Errorf("Claimed = %v, want %v", got, want)
	}
	if len(res.Skipped)+len(res.Blocked) != 0 || len(res.NotDue) != 1 || res.NotDue[0].ID != tasks[2].ID {
		e.t.Errorf("Claim = %+v, want task %d NotDue and nothing skipped or blocked", res, tasks[2].ID)
	}
}

func testTriggerWhileHeld(e *env) {
	for _, p := range []store.OverlapPolicy{store.OverlapSkip, store.OverlapQueue} {
		key := "manual-" + string(p)
		holder := e.holding(key, p, store.Running)
		other := e.insert(e.keyed(e.future(), key, p))[0]
		got, err := e.s.Trigger(e.ctx, other.ID, newExecID())
		var held *store.KeyHeldError
		if !errors.Is(err, store.ErrNotTriggerable) || !errors.As(err, &held) || held.Holder != holder.ID || held.TaskKey != key {
			e.t.Errorf("Trigger(%s task while key held) error = %v; want a KeyHeldError naming task %d and key %q", p, err, holder.ID, key)
		}
		if got == nil || got.ID != other.ID {
			e.t.Errorf("Trigger refused: task = %+v, want the unchanged task", got)
		}
		e.unchanged("a refused Trigger", other)
	}
	e.holding("manual-allow", store.OverlapAllow, store.Running)
	other := e.insert(e.keyed(e.future(), "manual-allow", store.OverlapAllow))[0]
	if _, err := e.s.Trigger(e.ctx, other.ID, newExecID()); err != nil {
		e.t.Errorf("Trigger(allow task while key in use) error = %v", err)
	}
}

// testKeyRace has workers claim, start and finish tasks of a few keys at once, each
// asking for a random mix, and checks that no two tasks of a key are ever
// DISPATCHING or RUNNING together: the check must be part of the claim.
func testKeyRace(e *env) {
	const keys, perKey, workers = 4, 30, 8
	var nts []store.NewTask
	base := e.past()
	for k := range keys {
		for i := range perKey {
			p := store.OverlapQueue
			if i%5 == 4 {
				p = store.OverlapSkip
			}
			nts = append(nts, e.keyed(base.Add(time.Duration(i)*time.Millisecond), fmt.Sprintf("race-%d", k), p))
		}
	}
	tasks := e.insert(nts...)
	ids := make([]int64, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	var active [keys]atomic.Int32
	var violations, done atomic.Int64
	seed := e.seed()
	e.race(workers, stuckAfter, "key race workers", func(w int) error {
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
			done.Add(int64(len(res.Skipped)))
			for _, t := range res.Claimed {
				k := t.TaskKey[len("race-"):]
				a := &active[k[0]-'0']
				if a.Add(1) > 1 {
					violations.Add(1)
				}
				if _, err := e.s.Start(e.ctx, store.Fence{}, []store.StartParams{{TaskID: t.ID, ExecutionID: t.ExecutionID, Name: t.Name, Node: "race"}}); err != nil {
					return fmt.Errorf("Start: %w", err)
				}
				// Leave the key before the write that frees it, so that a claim
				// it lets through cannot be counted while this one still is.
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
		e.t.Fatalf("%d claims found their key already held by a DISPATCHING or RUNNING task", n)
	}
	var succeeded, skipped int
	for _, id := range ids {
		switch t := e.get(id); t.Status {
		case store.Succeeded:
			succeeded++
		case store.Skipped:
			skipped++
			if t.Overlap != store.OverlapSkip {
				e.t.Errorf("task %d with overlap %s was skipped", id, t.Overlap)
			}
		default:
			e.t.Errorf("task %d is %s after the race, want SUCCEEDED or SKIPPED", id, t.Status)
		}
	}
	e.t.Logf("%d succeeded, %d skipped", succeeded, skipped)
}
