package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/axsched/ax/internal/clock"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is an Executor that keeps what it is given, and when.
type recorder struct {
	mu   sync.Mutex
	got  []store.Task
	when []time.Time
}

func (r *recorder) Dispatch(ts []store.Task) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range ts {
		r.got = append(r.got, t)
		r.when = append(r.when, time.Now())
	}
	return true
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

func newLoop(st store.Store, exec Executor, capacity int) *Loop {
	return New(Config{
		Store: st, Clock: clock.New(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Executor: exec,
		Tick: 10 * time.Millisecond, Window: time.Minute, RefillInterval: time.Second, Capacity: capacity,
	})
}

// Tasks are claimed at their due time, never before and within a tick, whether the
// refill finds them or Add brings them; no more than Capacity are out at once, and
// Done makes room for the rest.
func TestClaimsOnTimeWithinCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		ctx, cancel := context.WithCancel(context.Background())
		t0 := time.Now()
		var nts []store.NewTask
		for i, d := range []time.Duration{time.Second, 2 * time.Second, 2 * time.Second, 3 * time.Second} {
			nts = append(nts, store.NewTask{Name: "job", Key: string(rune('a' + i)), DueAt: t0.Add(d), MaxRetry: 1})
		}
		if _, err := st.Insert(ctx, nts); err != nil { // found by the first refill
			t.Fatal(err)
		}
		rec := &recorder{}
		l := newLoop(st, rec, 2)
		var wg sync.WaitGroup
		wg.Go(func() { l.Run(ctx) })
		late, err := st.Insert(ctx, []store.NewTask{{Name: "job", Key: "late", DueAt: t0.Add(1500 * time.Millisecond), MaxRetry: 1}})
		if err != nil {
			t.Fatal(err)
		}
		l.Add(store.Due{ID: late[0].Task.ID, DueAt: late[0].Task.DueAt}) // as Delay does

		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := rec.count(); n != 2 {
			t.Fatalf("%d tasks dispatched with capacity 2 and none done, want 2", n)
		}
		l.Done(2)
		time.Sleep(time.Second)
		synctest.Wait()
		if n := rec.count(); n != 4 {
			t.Fatalf("%d tasks dispatched after 2 were done, want 4: Done makes room for exactly as many", n)
		}
		l.Done(2)
		time.Sleep(time.Second)
		synctest.Wait()
		cancel()
		wg.Wait()

		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.got) != 5 {
			t.Fatalf("%d tasks dispatched, want all 5", len(rec.got))
		}
		for i, task := range rec.got {
			if rec.when[i].Before(task.DueAt) {
				t.Errorf("task %s dispatched at %v, before its due time %v", task.Key, rec.when[i], task.DueAt)
			}
			if i < 2 && rec.when[i].Sub(task.DueAt) > 10*time.Millisecond {
				t.Errorf("task %s dispatched %v after its due time, more than a tick", task.Key, rec.when[i].Sub(task.DueAt))
			}
			if task.Status != store.Dispatching || task.ExecutionID == "" {
				t.Errorf("task %s dispatched as %s with execution %q, want DISPATCHING with an id", task.Key, task.Status, task.ExecutionID)
			}
		}
		if rec.got[0].Key != "a" || rec.got[1].Key != "late" {
			t.Errorf("first two dispatched %s, %s; want a (due +1s) then late (+1.5s)", rec.got[0].Key, rec.got[1].Key)
		}
	})
}

// A task whose key is held waits (Blocked) and is claimed at once when the holder
// frees the key here.
func TestBlockedTaskStartsWhenItsKeyIsFreed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		ctx, cancel := context.WithCancel(context.Background())
		now := time.Now()
		ins, err := st.Insert(ctx, []store.NewTask{
			{Name: "job", Key: "holder", DueAt: now, MaxRetry: 1, TaskKey: "k", Overlap: store.OverlapQueue},
			{Name: "job", Key: "waiter", DueAt: now.Add(time.Second), MaxRetry: 1, TaskKey: "k", Overlap: store.OverlapQueue},
		})
		if err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		l := newLoop(st, rec, 10)
		var wg sync.WaitGroup
		wg.Go(func() { l.Run(ctx) })
		time.Sleep(3 * time.Second) // the waiter is due, but the holder holds k
		synctest.Wait()
		if n := rec.count(); n != 1 {
			t.Fatalf("%d dispatched while the key is held, want the holder only", n)
		}
		holder := rec.got[0]
		if _, err := st.Requeue(ctx, store.Fence{}, []store.Requeue{{TaskID: holder.ID, ExecutionID: holder.ExecutionID, DueAt: now.Add(time.Hour), Error: "x", MaxDispatchRetries: 5}}); err != nil {
			t.Fatal(err)
		}
		freedAt := time.Now()
		l.Unblock([]string{"k"}, nil)
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		cancel()
		wg.Wait()
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.got) != 2 || rec.got[1].ID != ins[1].Task.ID {
			t.Fatalf("dispatched %d tasks, want the waiter second", len(rec.got))
		}
		if d := rec.when[1].Sub(freedAt); d > 20*time.Millisecond {
			t.Errorf("the waiter was claimed %v after its key was freed, want at once (not the 1s retry)", d)
		}
	})
}

// gatedStarter is a Starter whose first Reserve waits for open to close, and which
// counts the room reserved and the room given back.
type gatedStarter struct {
	recorder
	open     chan struct{}
	entered  chan struct{}
	once     sync.Once
	reserved int
	returned int
}

func (g *gatedStarter) Reserve(n int) (store.StartOn, int, bool) {
	g.once.Do(func() { close(g.entered); <-g.open })
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reserved += n
	return store.StartOn{Node: "n", Handlers: []string{"job"}}, n, false
}

func (g *gatedStarter) Launch(started []store.Task, k int, sent time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.returned += k
}

func (g *gatedStarter) ClaimFailed(claims []store.Claim, k int, sent time.Time) {
	g.Launch(nil, k, sent)
}

// A claim the loop queues while its term ends, after the claimer has ended, is not
// lost: the room reserved for it goes back to the executor, whose Stop waits for
// every reservation (it once waited out its whole deadline instead).
func TestReservationQueuedAtTheEndGoesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		ctx, cancel := context.WithCancel(context.Background())
		if _, err := st.Insert(ctx, []store.NewTask{{Name: "job", Key: "a", DueAt: time.Now(), MaxRetry: 1}}); err != nil {
			t.Fatal(err)
		}
		g := &gatedStarter{open: make(chan struct{}), entered: make(chan struct{})}
		l := newLoop(st, g, 10)
		var wg sync.WaitGroup
		wg.Go(func() { l.Run(ctx) })
		<-g.entered // the loop is claiming the due task
		cancel()
		synctest.Wait() // the claimer and the refill have ended; the loop waits in Reserve
		close(g.open)
		wg.Wait()
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.reserved != 1 || g.returned != 1 {
			t.Fatalf("reserved %d, given back %d; want 1 and 1", g.reserved, g.returned)
		}
	})
}

// runner is an Executor that runs each task for d: it starts and finishes it in the
// store, then tells the loop, and, when frees is set, which names' slots and which
// task key it freed.
// It records the most tasks of each name it ran at once.
type runner struct {
	st    store.Store
	d     time.Duration
	frees bool
	l     *Loop

	mu      sync.Mutex
	running map[string]int
	most    map[string]int
	batches [][]int64              // task ids, as dispatched, by call
	at      []time.Time            // when each task was dispatched
	keyAt   map[string][]time.Time // when each task with a task key was dispatched, by key
	done    int
}

func (r *runner) Dispatch(ts []store.Task) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	var batch []int64
	defer func() { r.batches = append(r.batches, batch) }()
	for _, t := range ts {
		batch = append(batch, t.ID)
		r.at = append(r.at, time.Now())
		if t.TaskKey != "" {
			if r.keyAt == nil {
				r.keyAt = map[string][]time.Time{}
			}
			r.keyAt[t.TaskKey] = append(r.keyAt[t.TaskKey], time.Now())
		}
		r.running[t.Name]++
		r.most[t.Name] = max(r.most[t.Name], r.running[t.Name])
		go r.run(t)
	}
	return true
}

func (r *runner) run(t store.Task) {
	ctx := context.Background()
	if _, err := r.st.Start(ctx, store.Fence{}, []store.StartParams{{TaskID: t.ID, ExecutionID: t.ExecutionID, Name: t.Name, Node: "n"}}); err != nil {
		panic(err)
	}
	time.Sleep(r.d)
	r.mu.Lock()
	r.running[t.Name]--
	r.done++
	r.mu.Unlock()
	if _, err := r.st.Finish(ctx, store.Fence{}, []store.Finish{{TaskID: t.ID, ExecutionID: t.ExecutionID, Status: store.Succeeded}}); err != nil {
		panic(err)
	}
	r.l.Done(1)
	if r.frees {
		var keys []string
		if t.TaskKey != "" && t.Overlap != store.OverlapAllow {
			keys = []string{t.TaskKey}
		}
		r.l.Unblock(keys, []string{t.Name})
	}
}

// A limited name's tasks run at most its limit at once, in due order, one after
// another with no idle slot when the frees are seen here, within limitRetry when they
// are not (another process's); another name's tasks are not held back behind them.
func TestLimitedNameParks(t *testing.T) {
	for _, frees := range []bool{true, false} {
		t.Run(map[bool]string{true: "frees seen", false: "frees unseen"}[frees], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := memory.New()
				defer st.Close()
				ctx, cancel := context.WithCancel(context.Background())
				if _, err := st.SetConcurrency(ctx, "lim", 2, "test"); err != nil {
					t.Fatal(err)
				}
				t0 := time.Now()
				var nts []store.NewTask
				for i := range 20 { // due in the reverse of their insertion order
					nts = append(nts, store.NewTask{Name: "lim", Key: fmt.Sprint(i), DueAt: t0.Add(-time.Duration(i) * time.Millisecond), MaxRetry: 1})
				}
				for i := range 5 {
					nts = append(nts, store.NewTask{Name: "free", Key: fmt.Sprint(i), DueAt: t0, MaxRetry: 1})
				}
				ins, err := st.Insert(ctx, nts)
				if err != nil {
					t.Fatal(err)
				}
				const d = 100 * time.Millisecond
				r := &runner{st: st, d: d, frees: frees, running: map[string]int{}, most: map[string]int{}}
				l := newLoop(st, r, 100)
				r.l = l
				var wg sync.WaitGroup
				wg.Go(func() { l.Run(ctx) })
				for r.doneCount() < 25 && time.Since(t0) < time.Minute {
					time.Sleep(time.Millisecond)
				}
				took := time.Since(t0)
				cancel()
				wg.Wait()
				synctest.Wait()
				r.mu.Lock()
				defer r.mu.Unlock()
				if r.done != 25 {
					t.Fatalf("%d tasks ran in a minute, want 25", r.done)
				}
				if r.most["lim"] != 2 || r.most["free"] != 5 {
					t.Errorf("most at once: %v, want lim 2 (its limit), free 5", r.most)
				}
				// Due order: every limited task dispatched in an earlier batch than
				// another is due no later (their due times descend with their ids).
				var last int64 = 1 << 62
				for _, b := range r.batches {
					first := int64(1 << 62)
					for _, id := range b {
						if id <= ins[19].Task.ID {
							if id > last {
								t.Errorf("limited task %d ran after task %d, due later: batches %v", id, last, r.batches)
							}
							first = min(first, id)
						}
					}
					last = min(last, first)
				}
				// 10 rounds of d each: with the frees seen a slot is taken again at
				// once (the first refill and claims take a few ticks); unseen, each
				// round waits up to limitRetry more.
				want := 10 * d
				slack := 5 * 10 * time.Millisecond
				if !frees {
					slack += 10 * (limitRetry + 10*time.Millisecond)
				}
				if took < want || took > want+slack {
					t.Errorf("20 tasks limited to 2 of %v each took %v, want %v to %v", d, took, want, want+slack)
				}
				t.Logf("took %v", took)
			})
		})
	}
}

func (r *runner) doneCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done
}

// A rate-limited name's tasks are offered again when the store says its window admits
// the next (Limited.RetryAt), not before and not on a poll: 9 tasks at 3 per 300ms
// are dispatched in three rounds, 300ms apart, never more than 3 in a window.
func TestRateLimitedNameWaitsForItsWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		ctx, cancel := context.WithCancel(context.Background())
		const per = 300 * time.Millisecond
		if _, err := st.SetRate(ctx, "rated", 3, per, "test"); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		var nts []store.NewTask
		for i := range 9 {
			nts = append(nts, store.NewTask{Name: "rated", Key: fmt.Sprint(i), DueAt: t0, MaxRetry: 1})
		}
		if _, err := st.Insert(ctx, nts); err != nil {
			t.Fatal(err)
		}
		r := &runner{st: st, d: time.Millisecond, frees: true, running: map[string]int{}, most: map[string]int{}}
		l := newLoop(st, r, 100)
		r.l = l
		var wg sync.WaitGroup
		wg.Go(func() { l.Run(ctx) })
		for r.doneCount() < 9 && time.Since(t0) < time.Minute {
			time.Sleep(time.Millisecond)
		}
		took := time.Since(t0)
		cancel()
		wg.Wait()
		synctest.Wait()
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.done != 9 {
			t.Fatalf("%d tasks ran, want 9", r.done)
		}
		for i := range r.at {
			n := 0
			for _, at := range r.at[i:] {
				if !at.After(r.at[i].Add(per)) {
					n++
				}
			}
			if n > 3 {
				t.Errorf("%d tasks dispatched within %v of %v, over the rate of 3", n, per, r.at[i].Sub(t0))
			}
		}
		if took < 2*per || took > 2*per+100*time.Millisecond {
			t.Errorf("9 tasks at 3 per %v took %v, want about %v (two windows)", per, took, 2*per)
		}
	})
}

// A name's rate per task key holds back each key on its own: with 1 per 300ms per
// key, two keys' three tasks each run 300ms apart, side by side and half a period out
// of step (parked together, one key's RetryAt would delay the other's), and the name's task
// without a key runs at once; the loop parks each key's tasks until the store's
// RetryAt for that key.
func TestKeyRateWaitsPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		ctx, cancel := context.WithCancel(context.Background())
		const per = 300 * time.Millisecond
		if _, err := st.SetKeyRate(ctx, "sync", 1, per, "test"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.SetKeyConcurrency(ctx, "sync", 10, "test"); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		nts := []store.NewTask{{Name: "sync", Key: "bare", DueAt: t0, MaxRetry: 1}}
		for i := range 6 {
			// b's windows lag a's by half a period: one key's RetryAt is not the other's.
			nts = append(nts, store.NewTask{Name: "sync", Key: fmt.Sprint(i), TaskKey: []string{"a", "b"}[i%2],
				Overlap: store.OverlapQueue, DueAt: t0.Add(time.Duration(i%2)*per/2 + time.Duration(i)*time.Microsecond), MaxRetry: 1})
		}
		if _, err := st.Insert(ctx, nts); err != nil {
			t.Fatal(err)
		}
		r := &runner{st: st, d: time.Millisecond, frees: true, running: map[string]int{}, most: map[string]int{}}
		l := newLoop(st, r, 100)
		r.l = l
		var wg sync.WaitGroup
		wg.Go(func() { l.Run(ctx) })
		for r.doneCount() < 7 && time.Since(t0) < time.Minute {
			time.Sleep(time.Millisecond)
		}
		took := time.Since(t0)
		cancel()
		wg.Wait()
		synctest.Wait()
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.done != 7 {
			t.Fatalf("%d tasks ran, want 7", r.done)
		}
		if first := r.at[0].Sub(t0); first > 20*time.Millisecond {
			t.Errorf("the first dispatch came %v after the tasks were due", first)
		}
		for key, ats := range r.keyAt {
			if len(ats) != 3 {
				t.Errorf("key %s: %d dispatches, want 3", key, len(ats))
				continue
			}
			due := t0
			if key == "b" {
				due = t0.Add(per / 2)
			}
			if late := ats[0].Sub(due); late > 20*time.Millisecond {
				t.Errorf("key %s: first dispatched %v after due; another key's wait held it back", key, late)
			}
			for i := 1; i < len(ats); i++ {
				if gap := ats[i].Sub(ats[i-1]); gap <= per || gap > per+100*time.Millisecond {
					t.Errorf("key %s: dispatches %v apart, want just over %v", key, gap, per)
				}
			}
		}
		if took > 2*per+per/2+100*time.Millisecond {
			t.Errorf("two keys of three tasks at 1 per %v per key took %v, want about %v", per, took, 2*per+per/2)
		}
		if n := l.Waiting("sync"); n != 0 {
			t.Errorf("Waiting(sync) = %d after every task ran", n)
		}
	})
}

// Many keys waiting at once, each in its own group: 300 keys of two tasks at 1 per
// 300ms per key all run, each key's second just over a period after its first, the
// whole in about one period; none is left parked.
func TestKeyRateManyKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		ctx, cancel := context.WithCancel(context.Background())
		const per, keys = 300 * time.Millisecond, 300
		if _, err := st.SetKeyRate(ctx, "sync", 1, per, "test"); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		var nts []store.NewTask
		for i := range 2 * keys {
			nts = append(nts, store.NewTask{Name: "sync", Key: fmt.Sprint(i), TaskKey: fmt.Sprint("k", i%keys),
				Overlap: store.OverlapQueue, DueAt: t0.Add(time.Duration(i) * time.Microsecond), MaxRetry: 1})
		}
		if _, err := st.Insert(ctx, nts); err != nil {
			t.Fatal(err)
		}
		r := &runner{st: st, d: time.Millisecond, frees: true, running: map[string]int{}, most: map[string]int{}}
		l := newLoop(st, r, 1000)
		r.l = l
		var wg sync.WaitGroup
		wg.Go(func() { l.Run(ctx) })
		for r.doneCount() < 2*keys && time.Since(t0) < time.Minute {
			time.Sleep(time.Millisecond)
		}
		took := time.Since(t0)
		cancel()
		wg.Wait()
		synctest.Wait()
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.done != 2*keys {
			t.Fatalf("%d tasks ran, want %d", r.done, 2*keys)
		}
		for key, ats := range r.keyAt {
			if len(ats) != 2 || ats[1].Sub(ats[0]) <= per || ats[1].Sub(ats[0]) > per+100*time.Millisecond {
				t.Fatalf("key %s dispatched at %v, want twice, just over %v apart", key, ats, per)
			}
		}
		if took > per+200*time.Millisecond {
			t.Errorf("%d keys of two tasks at 1 per %v per key took %v, want about %v", keys, per, took, per)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.parked) != 0 || len(l.parkedIn) != 0 {
			t.Errorf("%d groups and %d tasks still parked after every task ran", len(l.parked), len(l.parkedIn))
		}
	})
}

// A rate whose period exceeds the loop's Window: the store's RetryAt lies beyond the
// wheel's horizon, and the tasks are offered again at half the window instead of
// being dropped (they once waited forever).
func TestRateBeyondTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		ctx, cancel := context.WithCancel(context.Background())
		const per = 2 * time.Minute // newLoop's Window is 1m
		if _, err := st.SetRate(ctx, "rated", 3, per, "test"); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		var nts []store.NewTask
		for i := range 6 {
			nts = append(nts, store.NewTask{Name: "rated", Key: fmt.Sprint(i), DueAt: t0, MaxRetry: 1})
		}
		if _, err := st.Insert(ctx, nts); err != nil {
			t.Fatal(err)
		}
		r := &runner{st: st, d: time.Millisecond, frees: true, running: map[string]int{}, most: map[string]int{}}
		l := newLoop(st, r, 100)
		r.l = l
		var wg sync.WaitGroup
		wg.Go(func() { l.Run(ctx) })
		for r.doneCount() < 6 && time.Since(t0) < 30*time.Minute {
			time.Sleep(100 * time.Millisecond)
		}
		cancel()
		wg.Wait()
		synctest.Wait()
		if n := r.doneCount(); n != 6 {
			t.Errorf("%d of 6 tasks ran in 30 minutes with a rate of 3 per %v; waiting %d", n, per, l.Waiting("rated"))
		}
	})
}

// A task offered for a rate's window and then taken out of the loop (cancelled,
// rescheduled) does not strand the name's other waiting tasks: they are offered in
// its place (they once waited forever).
func TestRemovedOfferStrandsNone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		ctx, cancel := context.WithCancel(context.Background())
		const per = 300 * time.Millisecond
		if _, err := st.SetRate(ctx, "rated", 1, per, "test"); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		var nts []store.NewTask
		for i := range 4 {
			nts = append(nts, store.NewTask{Name: "rated", Key: fmt.Sprint(i), DueAt: t0.Add(time.Duration(i) * time.Microsecond), MaxRetry: 1})
		}
		ins, err := st.Insert(ctx, nts)
		if err != nil {
			t.Fatal(err)
		}
		r := &runner{st: st, d: time.Millisecond, frees: true, running: map[string]int{}, most: map[string]int{}}
		l := newLoop(st, r, 100)
		r.l = l
		var wg sync.WaitGroup
		wg.Go(func() { l.Run(ctx) })
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		// cancel the second (offered at RetryAt) and take it out of the loop, as the facade does
		id := ins[1].Task.ID
		if _, err := st.Cancel(ctx, "rated", "1", "test"); err != nil {
			t.Log("cancel:", err)
		}
		l.Remove(id)
		for r.doneCount() < 3 && time.Since(t0) < 10*time.Minute {
			time.Sleep(100 * time.Millisecond)
		}
		cancel()
		wg.Wait()
		synctest.Wait()
		if n := r.doneCount(); n != 3 {
			t.Errorf("%d of 3 remaining tasks ran in 10 minutes; waiting %d", n, l.Waiting("rated"))
		}
	})
}

// refillFails is a store whose refill call number failAt (1, 2, …) fails, as one
// during a database's failover does; it records every call's parameters.
type refillFails struct {
	store.Store
	failAt int
	mu     sync.Mutex
	calls  []store.RefillParams
}

func (f *refillFails) Refill(ctx context.Context, p store.RefillParams) (*store.RefillResult, error) {
	f.mu.Lock()
	f.calls = append(f.calls, p)
	n := len(f.calls)
	f.mu.Unlock()
	if n == f.failAt {
		return nil, errors.New("connection reset by peer")
	}
	return f.Store.Refill(ctx, p)
}

// After a refill fails, the next one starts over — from no sequence number, with
// everything due within the window — since the database may have failed over to a
// server whose sequence is not the one read so far.
func TestRefillStartsOverAfterAnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New()
		defer mem.Close()
		ctx, cancel := context.WithCancel(context.Background())
		if _, err := mem.Insert(ctx, []store.NewTask{{Name: "job", Key: "a", DueAt: time.Now().Add(30 * time.Second)}}); err != nil {
			t.Fatal(err)
		}
		st := &refillFails{Store: mem, failAt: 2}
		l := newLoop(st, &recorder{}, 1)
		var wg sync.WaitGroup
		wg.Go(func() { l.Run(ctx) })
		time.Sleep(2500 * time.Millisecond) // refills at 0, 1s (fails) and 2s
		synctest.Wait()
		cancel()
		wg.Wait()

		st.mu.Lock()
		defer st.mu.Unlock()
		if len(st.calls) < 3 {
			t.Fatalf("%d refills in 2.5s at a 1s interval, want 3", len(st.calls))
		}
		if p := st.calls[1]; p.AfterSeq < 0 {
			t.Fatalf("the second refill read after sequence %d: the first did not move the cursor, so the test shows nothing", p.AfterSeq)
		}
		if p := st.calls[2]; p.AfterSeq != -1 || !p.From.IsZero() || p.FromID != 0 {
			t.Errorf("the refill after a failed one read after sequence %d from %v (id %d), want a fresh start: -1, the zero time, 0",
				p.AfterSeq, p.From, p.FromID)
		}
	})
}
