package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/store"
)

// The Fence group checks [store.Fence] and [store.Store.RaiseFence]: a leader-only write
// applies only while its token is at least the namespace's recorded epoch, a refused one
// writes nothing, and once RaiseFence returns no write of an older token commits.

var fenceTests = []test{
	{"RaiseRules", testRaiseFenceRules},
	{"RaiseRecognisesLease", testRaiseFenceRecognisesLease},
	{"RaiseInvalid", testRaiseFenceInvalid},
	{"RaiseConcurrent", testRaiseFenceConcurrent},
	{"Claim", testFenceClaim},
	{"ClaimKeyed", testFenceClaimKeyed},
	{"ClaimInvalid", testFenceClaimInvalid},
	{"FireSchedule", testFenceFireSchedule},
	{"Start", testFenceStart},
	{"Finish", testFenceFinish},
	{"Requeue", testFenceRequeue},
	{"RaceWithClaims", testFenceRaceWithClaims},
}

// raise calls RaiseFence and fails unless it records want.
func (e *env) raise(ns, holder string, token, want int64) store.Fence {
	e.t.Helper()
	f, err := e.s.RaiseFence(e.ctx, ns, holder, token)
	if err != nil {
		e.t.Fatalf("RaiseFence(%q, %q, %d) error: %v", ns, holder, token, err)
	}
	if f != (store.Fence{Namespace: ns, Token: want}) {
		e.t.Fatalf("RaiseFence(%q, %q, %d) = %+v, want token %d", ns, holder, token, f, want)
	}
	return f
}

// fenced fails unless err is ErrFenced.
func (e *env) fenced(op string, err error) {
	e.t.Helper()
	if !errors.Is(err, store.ErrFenced) {
		e.t.Fatalf("%s with a stale fence: error %v, want ErrFenced", op, err)
	}
}

func testRaiseFenceRules(e *env) {
	e.raise("ns", "a", 5, 5) // no row: the token as given
	e.raise("ns", "a", 5, 5) // a repeat: unchanged
	e.raise("ns", "b", 3, 6) // below the record: just above it
	e.raise("ns", "c", 6, 7) // equal to the record, another holder: above it
	e.raise("ns", "d", 10, 10)
	e.raise("ns", "b", 3, 11) // b is not the recorded holder any more
	e.raise("other", "a", 1, 1)
	l := e.s
	info := e.lease(l, "ns")
	if info.Holder != "b" || info.Epoch != 11 || info.Remaining > 0 {
		e.t.Fatalf("Lease after RaiseFence = %+v, want holder b, epoch 11, no live lease", info)
	}
	// A lease taken after a raise continues the epochs.
	if info, ok := e.acquire(l, "ns", "x", 10*time.Second); !ok || info.Epoch != 12 {
		e.t.Fatalf("AcquireLease after RaiseFence = %+v, %v; want epoch 12", info, ok)
	}
}

func testRaiseFenceRecognisesLease(e *env) {
	l := e.s
	info, ok := e.acquire(l, "ns", "h1 node-a", 10*time.Second)
	if !ok {
		e.t.Fatalf("AcquireLease(free) = %+v, false", info)
	}
	// The SQL lease already raised the epoch: the raise keeps it, and the lease.
	e.raise("ns", "h1 node-a", info.Epoch, info.Epoch)
	if ok, err := l.RenewLease(e.ctx, "ns", "h1 node-a", info.Epoch, 10*time.Second); err != nil || !ok {
		e.t.Fatalf("RenewLease after RaiseFence = %v, %v; want true", ok, err)
	}
	if got := e.lease(l, "ns"); got.Holder != "h1 node-a" || got.Epoch != info.Epoch || got.Remaining <= 0 {
		e.t.Fatalf("Lease after RaiseFence = %+v, want the live lease of epoch %d", got, info.Epoch)
	}
	// Another holder raising over a live lease fences it.
	e.raise("ns", "h2 node-b", info.Epoch, info.Epoch+1)
	if ok, err := l.RenewLease(e.ctx, "ns", "h1 node-a", info.Epoch, 10*time.Second); err != nil || ok {
		e.t.Fatalf("RenewLease of a fenced lease = %v, %v; want false", ok, err)
	}
}

func testRaiseFenceInvalid(e *env) {
	for _, c := range []struct {
		ns, holder string
		token      int64
	}{{"", "a", 1}, {"ns", "", 1}, {"ns", "a", 0}, {"ns", "a", -1}} {
		if _, err := e.s.RaiseFence(e.ctx, c.ns, c.holder, c.token); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("RaiseFence(%q, %q, %d) error %v, want ErrInvalid", c.ns, c.holder, c.token, err)
		}
	}
	e.raise("ns", "a", 1, 1) // nothing was recorded by the refused calls
}

func testRaiseFenceConcurrent(e *env) {
	const n = 8
	tokens := make([]int64, n)
	e.race(n, deadline, "RaiseFence", func(w int) error {
		f, err := e.s.RaiseFence(e.ctx, "ns", fmt.Sprintf("holder-%d", w), 1)
		tokens[w] = f.Token
		return err
	})
	seen := map[int64]bool{}
	for w, tok := range tokens {
		if tok < 1 || tok > n || seen[tok] {
			e.t.Fatalf("concurrent RaiseFence tokens %v: holder-%d got %d; want each of 1..%d once", tokens, w, tok, n)
		}
		seen[tok] = true
	}
}

func testFenceClaim(e *env) {
	old := e.raise("ns", "a", 1, 1)
	a, b := e.scheduled(e.past()), e.scheduled(e.past())
	if res, err := e.s.Claim(e.ctx, old, []store.Claim{{ID: a.ID, ExecutionID: newExecID()}}); err != nil || len(res.Claimed) != 1 {
		e.t.Fatalf("Claim with the current fence = %+v, %v; want a claimed", res, err)
	}
	cur := e.raise("ns", "b", 1, 2)
	_, err := e.s.Claim(e.ctx, old, []store.Claim{{ID: b.ID, ExecutionID: newExecID()}})
	e.fenced("Claim", err)
	e.unchanged("a fenced Claim", b)
	// Another namespace's fence, and none at all, are not held back by this one.
	for _, f := range []store.Fence{{Namespace: "other", Token: 1}, {}, cur} {
		c := e.scheduled(e.past())
		if res, err := e.s.Claim(e.ctx, f, []store.Claim{{ID: c.ID, ExecutionID: newExecID()}}); err != nil || len(res.Claimed) != 1 {
			e.t.Fatalf("Claim with fence %+v = %+v, %v; want claimed", f, res, err)
		}
	}
}

func testFenceClaimKeyed(e *env) {
	old := e.raise("ns", "a", 1, 1)
	e.raise("ns", "b", 1, 2)
	skip := e.insert(e.keyed(e.past(), "k1", store.OverlapSkip))[0]
	queue := e.insert(e.keyed(e.past(), "k2", store.OverlapQueue))[0]
	plain := e.scheduled(e.past())
	_, err := e.s.Claim(e.ctx, old, []store.Claim{{ID: skip.ID, ExecutionID: newExecID()},
		{ID: queue.ID, ExecutionID: newExecID()}, {ID: plain.ID, ExecutionID: newExecID()}})
	e.fenced("Claim of keyed tasks", err)
	for _, task := range []*store.Task{skip, queue, plain} {
		e.unchanged("a fenced Claim", task)
	}
}

func testFenceClaimInvalid(e *env) {
	task := e.scheduled(e.past())
	for _, f := range []store.Fence{{Namespace: "ns", Token: -1}, {Token: 1}} {
		if _, err := e.s.Claim(e.ctx, f, []store.Claim{{ID: task.ID, ExecutionID: newExecID()}}); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("Claim with fence %+v: error %v, want ErrInvalid", f, err)
		}
	}
	e.unchanged("an invalid Claim", task)
}

func testFenceFireSchedule(e *env) {
	old := e.raise("ns", "a", 1, 1)
	cur := e.raise("ns", "b", 1, 2)
	next := e.now().Add(time.Minute).Truncate(time.Second)
	e.register(def("report", next))
	p := store.FireParams{Name: "report", Expect: next, Next: next.Add(2 * time.Second), Last: next,
		Tasks: []store.NewTask{occurrence("report", next)}, Fence: old}
	_, err := e.s.FireSchedule(e.ctx, p)
	e.fenced("FireSchedule", err)
	if got := e.schedule("report"); !got.NextFireAt.Equal(next) || !got.LastFireAt.IsZero() {
		e.t.Fatalf("after a fenced FireSchedule, schedule = %+v, want it unchanged", got)
	}
	if _, err := e.s.Lookup(e.ctx, "report", p.Tasks[0].Key); !errors.Is(err, store.ErrNotFound) {
		e.t.Fatalf("after a fenced FireSchedule, Lookup(occurrence) error %v, want ErrNotFound", err)
	}
	p.Fence = cur
	if res := e.fire(p); !res.Applied || len(res.Inserted) != 1 || res.Inserted[0].Err != nil {
		e.t.Fatalf("FireSchedule with the current fence = %+v, want applied with its occurrence", res)
	}
}

// testFenceStart: the Start of a task claimed under an older leader's fence is refused
// once a newer one recorded itself, writing no execution record; under the current
// fence, and under none (a scheduler without an elector), it starts.
func testFenceStart(e *env) {
	old := e.raise("ns", "a", 1, 1)
	task := e.inState(store.Dispatching)
	cur := e.raise("ns", "b", 1, 2)
	p := store.StartParams{TaskID: task.ID, ExecutionID: task.ExecutionID, Name: task.Name, Node: "node-1"}
	_, err := e.s.Start(e.ctx, old, []store.StartParams{p})
	e.fenced("Start", err)
	e.unchanged("a fenced Start", task)
	if execs := e.executions(task.ID); len(execs) != 0 {
		e.t.Fatalf("after a fenced Start, executions = %+v, want none", execs)
	}
	if res, err := e.s.Start(e.ctx, cur, []store.StartParams{p}); err != nil || len(res) != 1 || res[0].Outcome != store.Started {
		e.t.Fatalf("Start with the current fence = %+v, %v; want Started", res, err)
	}
	other := e.inState(store.Dispatching)
	q := store.StartParams{TaskID: other.ID, ExecutionID: other.ExecutionID, Name: other.Name, Node: "node-1"}
	if res, err := e.s.Start(e.ctx, store.Fence{}, []store.StartParams{q}); err != nil || len(res) != 1 || res[0].Outcome != store.Started {
		e.t.Fatalf("Start with the zero fence = %+v, %v; want Started", res, err)
	}
	if _, err := e.s.Start(e.ctx, store.Fence{Token: 3}, []store.StartParams{q}); !errors.Is(err, store.ErrInvalid) {
		e.t.Fatalf("Start with a fence without a namespace: error %v, want ErrInvalid", err)
	}
}

func testFenceFinish(e *env) {
	old := e.raise("ns", "a", 1, 1)
	task := e.inState(store.Running)
	cur := e.raise("ns", "b", 1, 2)
	f := store.Finish{TaskID: task.ID, ExecutionID: task.ExecutionID, Status: store.Failed, Error: "orphaned"}
	_, err := e.s.Finish(e.ctx, old, []store.Finish{f})
	e.fenced("Finish", err)
	e.unchanged("a fenced Finish", task)
	if execs := e.executions(task.ID); len(execs) != 1 || execs[0].Status != store.Running {
		e.t.Fatalf("after a fenced Finish, executions = %+v, want one RUNNING", execs)
	}
	if ok, err := e.s.Finish(e.ctx, cur, []store.Finish{f}); err != nil || len(ok) != 1 || !ok[0] {
		e.t.Fatalf("Finish with the current fence = %v, %v; want [true]", ok, err)
	}
}

func testFenceRequeue(e *env) {
	old := e.raise("ns", "a", 1, 1)
	task := e.inState(store.Dispatching)
	cur := e.raise("ns", "b", 1, 2)
	q := store.Requeue{TaskID: task.ID, ExecutionID: task.ExecutionID, DueAt: e.future(), Error: "stuck", MaxDispatchRetries: 3}
	_, err := e.s.Requeue(e.ctx, old, []store.Requeue{q})
	e.fenced("Requeue", err)
	e.unchanged("a fenced Requeue", task)
	if ok, err := e.s.Requeue(e.ctx, cur, []store.Requeue{q}); err != nil || len(ok) != 1 || !ok[0] {
		e.t.Fatalf("Requeue with the current fence = %v, %v; want [true]", ok, err)
	}
}

// testFenceRaceWithClaims claims tasks one by one on several goroutines under a fence
// while another holder raises it: every claim that committed did so before RaiseFence
// returned, so the tasks DISPATCHING right after it returns are all there will ever be.
func testFenceRaceWithClaims(e *env) {
	const workers, perWorker = 4, 40
	old := e.raise("ns", "a", 1, 1)
	news := make([]store.NewTask, workers*perWorker)
	for i := range news {
		news[i] = e.newTask(e.past())
	}
	tasks := e.insert(news...)
	var (
		mu      sync.Mutex
		claimed = map[int64]bool{} // claims answered as committed
		started atomic.Int64
		going   = make(chan struct{}) // closed when claims are under way
		raised  = make(chan struct{}) // closed when RaiseFence returned
	)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i, task := range tasks[w*perWorker : (w+1)*perWorker] {
				if i == perWorker-3 {
					<-raised // keep a few claims for after the raise, however fast the store
				}
				res, err := e.s.Claim(e.ctx, old, []store.Claim{{ID: task.ID, ExecutionID: newExecID()}})
				if errors.Is(err, store.ErrFenced) {
					return
				}
				if err != nil {
					errs <- fmt.Errorf("Claim(%d): %w", task.ID, err)
					return
				}
				mu.Lock()
				for _, c := range res.Claimed {
					claimed[c.ID] = true
				}
				mu.Unlock()
				if started.Add(1) == workers*3 {
					close(going) // the raise goes in while claims are in flight
				}
			}
		})
	}
	select {
	case <-going:
	case <-time.After(deadline):
		close(raised)
		e.t.Fatalf("claims did not get going within %v", deadline)
	}
	e.raise("ns", "b", 1, 2)
	var atRaise []int64
	for _, task := range tasks {
		if e.get(task.ID).Status == store.Dispatching {
			atRaise = append(atRaise, task.ID)
		}
	}
	close(raised)
	e.wait(&wg, deadline, "fenced claims")
	close(errs)
	for err := range errs {
		e.t.Error(err)
	}
	var after []int64
	for _, task := range tasks {
		if e.get(task.ID).Status == store.Dispatching {
			after = append(after, task.ID)
		}
	}
	if len(after) != len(atRaise) {
		e.t.Fatalf("%d tasks DISPATCHING when RaiseFence returned, %d once the stale claims ended: a claim with the old token committed after the raise", len(atRaise), len(after))
	}
	if len(claimed) != len(after) {
		e.t.Fatalf("%d claims answered as committed, %d tasks DISPATCHING", len(claimed), len(after))
	}
	if len(after) > len(tasks)-workers*3 {
		e.t.Fatalf("%d of %d claims committed: the raise fenced fewer than the %d held back for after it", len(after), len(tasks), workers*3)
	}
}
