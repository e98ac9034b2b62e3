package storetest

import (
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

var closeTests = []test{
	{"ErrClosed", testClose},
}

var concurrencyTests = []test{
	{"OneWinner", testOneWinner},
	{"InsertSameKey", testInsertSameKey},
	{"Claimers", testClaimers},
	{"Lifecycle", testLifecycle},
}

func testClose(e *env) {
	task := e.inState(store.Running)
	if err := e.s.Close(); err != nil {
		e.t.Fatalf("Close() error: %v", err)
	}
	ctx, s := e.ctx, e.s
	ref := store.ExecRef{TaskID: task.ID, ExecutionID: task.ExecutionID}
	calls := map[string]func() error{
		"Now":        func() error { _, err := s.Now(ctx); return err },
		"Insert":     func() error { _, err := s.Insert(ctx, []store.NewTask{e.newTask(time.Now())}); return err },
		"Get":        func() error { _, err := s.Get(ctx, task.ID); return err },
		"Lookup":     func() error { _, err := s.Lookup(ctx, task.Name, task.Key); return err },
		"Executions": func() error { _, err := s.Executions(ctx, task.ID); return err },
		"Cancel":     func() error { _, err := s.Cancel(ctx, task.Name, task.Key, "storetest"); return err },
		"Refill": func() error {
			_, err := s.Refill(ctx, store.RefillParams{AfterSeq: 0, To: time.Now(), Limit: 10})
			return err
		},
		"Claim": func() error {
			_, err := s.Claim(ctx, store.Fence{}, []store.Claim{{ID: task.ID, ExecutionID: newExecID()}})
			return err
		},
		"Trigger": func() error { _, err := s.Trigger(ctx, task.ID, newExecID()); return err },
		"Start": func() error {
			_, err := s.Start(ctx, store.Fence{}, []store.StartParams{{TaskID: task.ID, ExecutionID: task.ExecutionID, Name: task.Name}})
			return err
		},
		"Heartbeat": func() error { _, err := s.Heartbeat(ctx, []store.ExecRef{ref}); return err },
		"Finish": func() error {
			_, err := s.Finish(ctx, store.Fence{}, []store.Finish{{TaskID: task.ID, ExecutionID: task.ExecutionID, Status: store.Succeeded}})
			return err
		},
		"Requeue": func() error {
			_, err := s.Requeue(ctx, store.Fence{}, []store.Requeue{{TaskID: task.ID, ExecutionID: task.ExecutionID, DueAt: time.Now(), MaxDispatchRetries: 1}})
			return err
		},
		"Stale": func() error { _, err := s.Stale(ctx, store.Running, time.Now(), 10); return err },
		"RegisterSchedules": func() error {
			_, err := s.RegisterSchedules(ctx, []store.ScheduleDef{def("s", time.Now())})
			return err
		},
		"Schedules":      func() error { _, err := s.Schedules(ctx); return err },
		"PauseSchedule":  func() error { _, err := s.PauseSchedule(ctx, "s"); return err },
		"DeleteSchedule": func() error { _, err := s.DeleteSchedule(ctx, "s"); return err },
		"TaskStats":      func() error { _, err := s.TaskStats(ctx, time.Now()); return err },
		"ResumeSchedule": func() error { _, err := s.ResumeSchedule(ctx, "s", time.Now()); return err },
		"FireSchedule": func() error {
			_, err := s.FireSchedule(ctx, store.FireParams{Name: "s", Expect: time.Now(), Next: time.Now()})
			return err
		},
		"Close": s.Close,
	}
	l := s
	calls["AcquireLease"] = func() error { _, _, err := l.AcquireLease(ctx, "ns", "a", time.Second); return err }
	calls["RenewLease"] = func() error { _, err := l.RenewLease(ctx, "ns", "a", 1, time.Second); return err }
	calls["ReleaseLease"] = func() error { _, err := l.ReleaseLease(ctx, "ns", "a", 1); return err }
	calls["Lease"] = func() error { _, err := l.Lease(ctx, "ns"); return err }
	for name, call := range calls {
		if err := call(); !errors.Is(err, store.ErrClosed) {
			e.t.Errorf("%s after Close: error = %v, want ErrClosed", name, err)
		}
	}
}

// stuckAfter is how long the heavy concurrent tests may take before they are taken
// for a deadlock: generous, because under -race on a busy two-core machine the
// 10,000-task claim race alone takes about a minute on SQLite.
const stuckAfter = 5 * time.Minute

// wait waits for wg, failing the test if it takes longer than limit: a store that
// deadlocks must not hang the suite.
func (e *env) wait(wg *sync.WaitGroup, limit time.Duration, what string) {
	e.t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		e.t.Fatalf("%s still running after %v: deadlock?", what, limit)
	}
}

// race runs work on n goroutines at once and waits for them as wait does; then it
// fails the test with the errors the workers returned.
func (e *env) race(n int, limit time.Duration, what string, work func(w int) error) {
	e.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range n {
		wg.Go(func() {
			if err := work(w); err != nil {
				errs <- err
			}
		})
	}
	e.wait(&wg, limit, what)
	close(errs)
	for err := range errs {
		e.t.Errorf("%s: %v", what, err)
	}
	if e.t.Failed() {
		e.t.FailNow()
	}
}

// seed returns a random seed and logs it, so that a failure can be replayed.
func (e *env) seed() (seed uint64) {
	seed = rand.Uint64()
	e.t.Logf("random seed %d", seed)
	return seed
}

func testOneWinner(e *env) {
	rounds, workers := 20, 12
	if testing.Short() {
		rounds = 5
	}
	for round := range rounds {
		// Even rounds race on a due SCHEDULED task: Claim, Cancel and Trigger can all
		// win. Odd rounds race on a FAILED task: only Trigger can, and then Cancel.
		var task *store.Task
		if round%2 == 0 {
			task = e.scheduled(e.past())
		} else {
			task = e.inState(store.Failed)
		}
		type win struct{ op, exec string }
		var (
			mu      sync.Mutex
			winners []win
			wg      sync.WaitGroup
		)
		start := make(chan struct{})
		for w := range workers {
			wg.Go(func() {
				exec := newExecID()
				<-start
				won := false
				var err error
				switch w % 3 {
				case 0:
					var res *store.ClaimResult
					res, err = e.s.Claim(e.ctx, store.Fence{}, []store.Claim{{ID: task.ID, ExecutionID: exec}})
					won = err == nil && len(res.Claimed) == 1
					if err == nil && len(res.NotDue) != 0 {
						e.t.Errorf("Claim(%d) = %+v, want it due", task.ID, res)
					}
				case 1:
					_, err = e.s.Cancel(e.ctx, task.Name, task.Key, "storetest")
					won = err == nil
					if errors.Is(err, store.ErrNotCancellable) {
						err = nil
					}
				case 2:
					_, err = e.s.Trigger(e.ctx, task.ID, exec)
					won = err == nil
					if errors.Is(err, store.ErrNotTriggerable) {
						err = nil
					}
				}
				if err != nil {
					e.t.Errorf("racing on task %d: op %d error: %v", task.ID, w%3, err)
				}
				if won {
					mu.Lock()
					winners = append(winners, win{[...]string{"claim", "cancel", "trigger"}[w%3], exec})
					mu.Unlock()
				}
			})
		}
		close(start)
		e.wait(&wg, deadline, "racing Claim/Cancel/Trigger")
		// One claim or trigger at most moves the task, and one cancel at most: a
		// cancel after the claim cancels the claim (a DISPATCHING task is
		// cancellable), so the two can both win, the claim first.
		var moved, cancels []win
		for _, w := range winners {
			if w.op == "cancel" {
				cancels = append(cancels, w)
			} else {
				moved = append(moved, w)
			}
		}
		if len(moved) > 1 || len(cancels) > 1 || len(winners) == 0 {
			e.t.Fatalf("round %d: winners on task %d %+v, want one claim or trigger at most, one cancel at most, and one at least", round, task.ID, winners)
		}
		got := e.get(task.ID)
		switch {
		case len(cancels) == 1 && got.Status != store.Cancelled:
			e.t.Errorf("round %d: cancel won but Get(%d).Status = %s", round, task.ID, got.Status)
		case len(moved) == 1 && got.ExecutionID != moved[0].exec:
			e.t.Errorf("round %d: %s %s won but Get(%d) has execution %s", round, moved[0].op, moved[0].exec, task.ID, got.ExecutionID)
		case len(moved) == 1 && len(cancels) == 0 && got.Status != store.Dispatching:
			e.t.Errorf("round %d: %s won alone but Get(%d).Status = %s", round, moved[0].op, task.ID, got.Status)
		case round%2 == 1 && (len(moved) != 1 || moved[0].op != "trigger"):
			// A FAILED task is not cancellable; the task a trigger claimed is.
			e.t.Errorf("round %d: %+v won on a FAILED task; only trigger may, then cancel", round, winners)
		}
	}
}

func testInsertSameKey(e *env) {
	const workers = 12
	shared := e.newTask(e.future())
	results := make([][]store.Inserted, workers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		own := e.newTask(e.future())
		wg.Go(func() {
			<-start
			res, err := e.s.Insert(e.ctx, []store.NewTask{own, shared})
			if err != nil || len(res) != 2 {
				e.t.Errorf("Insert(own, shared) = %v, %v; want two results", res, err)
				return
			}
			results[w] = res
		})
	}
	close(start)
	e.wait(&wg, deadline, "concurrent inserts")
	if e.t.Failed() {
		return
	}
	stored, err := e.s.Lookup(e.ctx, shared.Name, shared.Key)
	if err != nil {
		e.t.Fatalf("Lookup(%q, %q) error: %v", shared.Name, shared.Key, err)
	}
	inserted := 0
	for w, res := range results {
		if res[0].Err != nil {
			e.t.Errorf("worker %d: Insert(own).Err = %v, want nil", w, res[0].Err)
		}
		switch {
		case res[1].Err == nil:
			inserted++
		case !errors.Is(res[1].Err, store.ErrDuplicate):
			e.t.Errorf("worker %d: Insert(shared).Err = %v, want nil or ErrDuplicate", w, res[1].Err)
		}
		if res[1].Task == nil || res[1].Task.ID != stored.ID {
			e.t.Errorf("worker %d: Insert(shared).Task = %+v, want task %d", w, res[1].Task, stored.ID)
		}
	}
	if inserted != 1 {
		e.t.Errorf("%d concurrent inserts of one key wrote it %d times, want once", workers, inserted)
	}
}

func testClaimers(e *env) {
	// 1,000 tasks, each asked for by all 8 claimers in its own order: 8,000 claims
	// racing, in batches of 1 to 64. At 5,000 it was CI's longest test (45 s on SQLite
	// under the race detector, with the other tests running), and at 2,000 still 26 s
	// on a slower machine.
	n, workers := 1_000, 8
	if testing.Short() {
		n = 200
	}
	due := e.past()
	var ids []int64
	for len(ids) < n {
		nts := make([]store.NewTask, min(500, n-len(ids)))
		for i := range nts {
			nts[i] = e.newTask(due)
		}
		for _, task := range e.insert(nts...) {
			ids = append(ids, task.ID)
		}
	}
	seed := e.seed()
	claimed := make([]map[int64]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		claimed[w] = make(map[int64]string)
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			perm := rng.Perm(n)
			for i := 0; i < n; {
				end := min(n, i+1+rng.IntN(64))
				var claims []store.Claim
				asked := make(map[int64]string)
				for _, j := range perm[i:end] {
					c := store.Claim{ID: ids[j], ExecutionID: newExecID()}
					claims = append(claims, c)
					asked[c.ID] = c.ExecutionID
				}
				i = end
				res, err := e.s.Claim(e.ctx, store.Fence{}, claims)
				if err != nil {
					e.t.Errorf("claimer %d: Claim(%d tasks) error: %v", w, len(claims), err)
					return
				}
				if len(res.NotDue) != 0 {
					e.t.Errorf("claimer %d: Claim.NotDue = %v, want none", w, res.NotDue)
				}
				for _, c := range res.Claimed {
					if asked[c.ID] != c.ExecutionID {
						e.t.Errorf("claimer %d: claimed task %d with execution %q, asked %q", w, c.ID, c.ExecutionID, asked[c.ID])
					}
					if _, dup := claimed[w][c.ID]; dup {
						e.t.Errorf("claimer %d: claimed task %d twice", w, c.ID)
					}
					claimed[w][c.ID] = c.ExecutionID
				}
			}
		})
	}
	e.wait(&wg, stuckAfter, "concurrent claimers")

	winner := make(map[int64]string)
	for w := range claimed {
		for id, exec := range claimed[w] {
			if _, dup := winner[id]; dup {
				e.t.Errorf("task %d claimed by two claimers", id)
			}
			winner[id] = exec
		}
	}
	if len(winner) != n {
		e.t.Errorf("%d of %d tasks claimed, want all", len(winner), n)
	}
	for _, id := range ids {
		if got := e.get(id); got.Status != store.Dispatching || got.ExecutionID != winner[id] {
			e.t.Errorf("Get(%d) = %s %q, want %s %q", id, got.Status, got.ExecutionID, store.Dispatching, winner[id])
		}
	}
}

// StormEnv names the environment variable that sets how long the lifecycle storm
// runs (a Go duration, default 2s). CI sets it to 20s.
const StormEnv = "AX_STORETEST_STORM"

func stormDuration() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(StormEnv)); err == nil && d > 0 {
		return d
	}
	return 2 * time.Second
}

// testLifecycle runs Claim, Start, Heartbeat, Finish, Requeue and Trigger batches in
// random order from several goroutines for a while, then checks that every task and
// execution record is consistent with what the workers were told.
func testLifecycle(e *env) {
	n, workers, run := 200, 8, stormDuration()
	if testing.Short() {
		n, run = 50, 300*time.Millisecond
	}
	due := e.past()
	nts := make([]store.NewTask, n)
	for i := range nts {
		nts[i] = e.newTask(due)
	}
	var ids []int64
	for _, task := range e.insert(nts...) {
		ids = append(ids, task.ID)
	}
	seed := e.seed()
	var started, finished atomic.Int64
	stop := time.Now().Add(run)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for time.Now().Before(stop) && !e.t.Failed() {
				if err := lifecycleStep(e, rng, ids, &started, &finished); err != nil {
					e.t.Errorf("worker %d: %v", w, err)
					return
				}
			}
		})
	}
	e.wait(&wg, run+time.Minute, "lifecycle workers")
	if e.t.Failed() {
		return
	}

	seen := make(map[string]bool)
	var records, closed int64
	var running []store.ExecRef
	var scheduled []int64
	statuses := make(map[store.Status]int)
	for _, id := range ids {
		task := e.get(id)
		statuses[task.Status]++
		execs := e.executions(id)
		records += int64(len(execs))
		current := false
		for _, x := range execs {
			if seen[x.ID] {
				e.t.Errorf("execution id %s recorded twice", x.ID)
			}
			seen[x.ID] = true
			if x.TaskID != id {
				e.t.Errorf("Executions(%d) holds %+v of another task", id, x)
			}
			if x.ID == task.ExecutionID {
				current = true
			}
			switch x.Status {
			case store.Running:
				if task.Status != store.Running || x.ID != task.ExecutionID || !x.FinishedAt.IsZero() {
					e.t.Errorf("execution %+v is RUNNING but task %d is %s with execution %s", x, id, task.Status, task.ExecutionID)
				}
			case store.Succeeded, store.Failed, store.Cancelled:
				closed++
				if x.FinishedAt.IsZero() {
					e.t.Errorf("execution %+v is closed without FinishedAt", x)
				}
				if x.Status == store.Succeeded && (task.Status != store.Succeeded || x.ID != task.ExecutionID) {
					e.t.Errorf("execution %+v succeeded but task %d is %s with execution %s", x, id, task.Status, task.ExecutionID)
				}
			default:
				e.t.Errorf("execution %+v has status %s", x, x.Status)
			}
		}
		switch task.Status {
		case store.Running, store.Succeeded:
			if !current {
				e.t.Errorf("task %d is %s with execution %s, which has no record", id, task.Status, task.ExecutionID)
			}
		case store.Dispatching:
			if current {
				e.t.Errorf("task %d is DISPATCHING with execution %s, which is already recorded", id, task.ExecutionID)
			}
		case store.Scheduled:
			scheduled = append(scheduled, id)
		}
		if task.Status == store.Running {
			running = append(running, store.ExecRef{TaskID: id, ExecutionID: task.ExecutionID})
		}
		if !task.Status.Valid() {
			e.t.Errorf("task %d has status %q", id, task.Status)
		}
	}
	if records != started.Load() {
		e.t.Errorf("%d execution records, want %d (the Started outcomes)", records, started.Load())
	}
	if closed != finished.Load() {
		e.t.Errorf("%d closed execution records, want %d (the applied Finishes)", closed, finished.Load())
	}
	if len(running) > 0 {
		ok, err := e.s.Heartbeat(e.ctx, running)
		if err != nil {
			e.t.Fatalf("Heartbeat(%d running) error: %v", len(running), err)
		}
		for i, b := range ok {
			if want := beatOf(e.get(running[i].TaskID)); b != want {
				e.t.Errorf("Heartbeat(%+v) = %v for a RUNNING task, want %v", running[i], b, want)
			}
		}
	}
	// The window scan sees exactly the SCHEDULED tasks.
	r := e.refill(store.RefillParams{AfterSeq: -1, To: e.future(), Limit: n + 1})
	var window []int64
	for _, d := range r.Entered {
		window = append(window, d.ID)
	}
	if d := diff(sortedIDs(scheduled), sortedIDs(window)); d != "" {
		e.t.Errorf("Refill window after the storm differs from the SCHEDULED tasks (-scheduled +window):\n%s", d)
	}
	e.t.Logf("%d tasks: %d executions started, %d finished; final statuses %v",
		n, started.Load(), finished.Load(), statuses)
}

func sortedIDs(ids []int64) []int64 { return slices.Sorted(slices.Values(ids)) }

// lifecycleStep runs one random batch against random tasks, in random order, with
// the execution ids the tasks had a moment ago (or a wrong one now and then).
func lifecycleStep(e *env, rng *rand.Rand, ids []int64, started, finished *atomic.Int64) error {
	k := 1 + rng.IntN(20)
	batch := make([]*store.Task, 0, k)
	for range k {
		task, err := e.s.Get(e.ctx, ids[rng.IntN(len(ids))])
		if err != nil {
			return err
		}
		if task.ExecutionID == "" || rng.IntN(10) == 0 {
			task.ExecutionID = newExecID()
		}
		batch = append(batch, task)
	}
	past := time.Now().Add(-time.Hour)
	switch rng.IntN(6) {
	case 0:
		claims := make([]store.Claim, len(batch))
		for i, t := range batch {
			claims[i] = store.Claim{ID: t.ID, ExecutionID: newExecID()}
		}
		_, err := e.s.Claim(e.ctx, store.Fence{}, claims)
		return err
	case 1:
		starts := make([]store.StartParams, len(batch))
		for i, t := range batch {
			starts[i] = store.StartParams{TaskID: t.ID, ExecutionID: t.ExecutionID, Name: t.Name, Node: "node"}
		}
		res, err := e.s.Start(e.ctx, store.Fence{}, starts)
		for _, r := range res {
			if r.Outcome == store.Started {
				started.Add(1)
			}
		}
		return err
	case 2:
		refs := make([]store.ExecRef, len(batch))
		for i, t := range batch {
			refs[i] = store.ExecRef{TaskID: t.ID, ExecutionID: t.ExecutionID}
		}
		_, err := e.s.Heartbeat(e.ctx, refs)
		return err
	case 3:
		results := make([]store.Finish, len(batch))
		for i, t := range batch {
			f := store.Finish{TaskID: t.ID, ExecutionID: t.ExecutionID, Status: store.Scheduled,
				Error: "retry", Attempt: t.Attempt + 1, DueAt: past}
			switch rng.IntN(30) {
			case 0:
				f = store.Finish{TaskID: t.ID, ExecutionID: t.ExecutionID, Status: store.Succeeded}
			case 1:
				f = store.Finish{TaskID: t.ID, ExecutionID: t.ExecutionID, Status: store.Failed, Error: "failed"}
			}
			results[i] = f
		}
		ok, err := e.s.Finish(e.ctx, store.Fence{}, results)
		for _, b := range ok {
			if b {
				finished.Add(1)
			}
		}
		return err
	case 4:
		requeues := make([]store.Requeue, len(batch))
		for i, t := range batch {
			requeues[i] = store.Requeue{TaskID: t.ID, ExecutionID: t.ExecutionID, DueAt: past,
				Error: "busy", MaxDispatchRetries: 1 << 20}
			if rng.IntN(4) == 0 {
				requeues[i].MaxDispatchRetries = rng.IntN(3)
			}
		}
		_, err := e.s.Requeue(e.ctx, store.Fence{}, requeues)
		return err
	default:
		t := batch[0]
		if rng.IntN(50) == 0 {
			_, err := e.s.Cancel(e.ctx, t.Name, t.Key, "storetest")
			if errors.Is(err, store.ErrNotCancellable) {
				err = nil
			}
			return err
		}
		_, err := e.s.Trigger(e.ctx, t.ID, newExecID())
		if errors.Is(err, store.ErrNotTriggerable) {
			err = nil
		}
		return err
	}
}

// beatOf is what Heartbeat answers for the execution of t, a RUNNING task.
func beatOf(t *store.Task) store.Beat {
	if t.CancelRequestedAt.IsZero() {
		return store.BeatAlive
	}
	return store.BeatCancel
}
