package execute

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/axsched/ax/internal/clock"
	"github.com/axsched/ax/internal/storecount"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/memory"
)

// claimStarter is an executor over a counted memory store, with n tasks "job" due, and
// a handler that records its runs and waits for gate (nil: returns at once).
type claimStarter struct {
	st    *storecount.Store
	ex    *Executor
	ids   []int64
	src   *Source
	mu    sync.Mutex
	runs  map[int64]int
	done  int // told to src.Done
	gate  chan struct{}
	rooms int // OnRoom calls
}

func newClaimStarter(t *testing.T, concurrency, n int, gate chan struct{}) *claimStarter {
	t.Helper()
	return newClaimStarterOn(t, concurrency, n, gate, func(st store.Store) store.Store { return st })
}

// newClaimStarterOn is newClaimStarter with the executor's store wrapped by wrap.
func newClaimStarterOn(t *testing.T, concurrency, n int, gate chan struct{}, wrap func(store.Store) store.Store) *claimStarter {
	t.Helper()
	c := &claimStarter{st: storecount.New(memory.New()), runs: map[int64]int{}, gate: gate}
	ctx := context.Background()
	news := make([]store.NewTask, n)
	for i := range news {
		news[i] = store.NewTask{Name: "job", Key: fmt.Sprint(i), DueAt: time.Now().Add(-time.Second), MaxRetry: 3}
	}
	ins, err := c.st.Insert(ctx, news)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ins {
		c.ids = append(c.ids, r.Task.ID)
	}
	c.src = &Source{Done: func(n int) { c.mu.Lock(); c.done += n; c.mu.Unlock() }}
	c.ex = New(Config{
		Store: wrap(c.st), Clock: clock.New(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Node: "here", Concurrency: concurrency, HeartbeatInterval: time.Second, MaxDispatchRetries: 3,
		Handler: func(string) *Handler {
			return &Handler{Timeout: time.Minute, Run: func(ctx context.Context, task *store.Task) error {
				c.mu.Lock()
				c.runs[task.ID]++
				c.mu.Unlock()
				if c.gate != nil {
					<-c.gate
				}
				return nil
			}}
		},
		Handlers: func() []string { return []string{"job"} },
		OnRoom:   func() { c.mu.Lock(); c.rooms++; c.mu.Unlock() },
	})
	c.ex.Start()
	return c
}

// claim reserves room for the tasks ids[lo:], claims them with the first k asked to
// start, and launches what started; it returns k and the claim's result.
func (c *claimStarter) claim(t *testing.T, lo int) (int, *store.ClaimResult) {
	t.Helper()
	on, k, wait := c.ex.Reserve(len(c.ids) - lo)
	if wait {
		return 0, nil
	}
	claims := make([]store.Claim, k)
	for i := range claims {
		claims[i] = store.Claim{ID: c.ids[lo+i], ExecutionID: uuid.Must(uuid.NewV7()).String(), Start: true}
	}
	sent := time.Now()
	res, err := c.st.ClaimStart(context.Background(), store.Fence{}, on, claims)
	if err != nil {
		t.Fatal(err)
	}
	c.ex.Launch(c.src, res.Started, k, sent)
	return k, res
}

func (c *claimStarter) status(t *testing.T, id int64) *store.Task {
	t.Helper()
	task, err := c.st.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// Tasks a claim started run once each, with one execution record, and without a Start
// call: one write claimed and started them.
func TestClaimStartRunsWithoutStart(t *testing.T) {
	t.Parallel()
	c := newClaimStarter(t, 4, 4, nil)
	defer c.ex.Stop(context.Background())
	k, res := c.claim(t, 0)
	if k != 4 || len(res.Started) != 4 {
		t.Fatalf("Reserve gave %d, the claim started %d; want 4 and 4", k, len(res.Started))
	}
	waitFor(t, 10*time.Second, "the tasks to succeed", func() bool {
		for _, id := range c.ids {
			if c.status(t, id).Status != store.Succeeded {
				return false
			}
		}
		return true
	})
	for _, id := range c.ids {
		if x, _ := c.st.Executions(context.Background(), id); len(x) != 1 || x[0].Node != "here" || x[0].Status != store.Succeeded {
			t.Errorf("task %d: executions %+v, want one SUCCEEDED on here", id, x)
		}
	}
	if n := c.st.Snapshot().Calls["Start"]; n != 0 {
		t.Errorf("%d Start calls, want none", n)
	}
	waitFor(t, 5*time.Second, "Done for every task", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.done == 4 })
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range c.ids {
		if c.runs[id] != 1 {
			t.Errorf("task %d ran %d times, want 1", id, c.runs[id])
		}
	}
}

// With every slot busy and nothing prefetched, Reserve asks the claim to wait, and
// OnRoom says when a slot frees; a prefetch lets the claim start tasks ahead of free
// slots, which queue and run as slots free; at Stop the queued ones are released —
// SCHEDULED again, their attempt unchanged, their handlers never run.
func TestPrefetchQueuesAndStopReleases(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	c := newClaimStarter(t, 1, 6, gate)
	if k, _ := c.claim(t, 0); k != 1 {
		t.Fatalf("Reserve with one free slot and no prefetch gave %d, want 1", k)
	}
	waitFor(t, 5*time.Second, "the first handler to run", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.runs) == 1 })
	if _, k, wait := c.ex.Reserve(5); !wait || k != 0 {
		t.Fatalf("Reserve with the slot busy, no prefetch: %d, wait %v; want 0, wait", k, wait)
	}
	c.ex.mu.Lock()
	c.ex.pace.prefetch = 3
	c.ex.mu.Unlock()
	k, res := c.claim(t, 1)
	if k != 3 || len(res.Started) != 3 {
		t.Fatalf("Reserve with a prefetch of 3 gave %d, the claim started %d; want 3 and 3", k, len(res.Started))
	}
	for _, id := range c.ids[1:4] {
		if got := c.status(t, id); got.Status != store.Running {
			t.Fatalf("prefetched task %d is %s, want RUNNING (started by the claim)", id, got.Status)
		}
	}
	if _, _, wait := c.ex.Reserve(5); !wait {
		t.Fatalf("Reserve with the slot busy and the prefetch queued: no wait")
	}
	gate <- struct{}{} // the first returns; the second runs, the other two stay queued
	waitFor(t, 5*time.Second, "the second handler to run", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.runs) == 2 })
	waitFor(t, 5*time.Second, "OnRoom, once the returned handler left room", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.rooms > 0 })

	stopped := make(chan error, 1)
	go func() { stopped <- c.ex.Stop(context.Background()) }()
	waitFor(t, 5*time.Second, "the queued tasks to be released", func() bool {
		return c.status(t, c.ids[2]).Status == store.Scheduled && c.status(t, c.ids[3]).Status == store.Scheduled
	})
	close(gate)
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	for _, id := range c.ids[2:4] {
		task := c.status(t, id)
		x, _ := c.st.Executions(context.Background(), id)
		if task.Status != store.Scheduled || task.Attempt != 0 || len(x) != 1 || x[0].Status != store.Failed ||
			!strings.Contains(x[0].Error, "released") {
			t.Errorf("released task %d: %s attempt %d, executions %+v; want SCHEDULED, attempt 0, one released execution", id, task.Status, task.Attempt, x)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.runs) != 2 {
		t.Errorf("%d handlers ran, want 2 (the released ones never)", len(c.runs))
	}
	if c.done != 4 {
		t.Errorf("Done told %d, want 4 (2 run, 2 released)", c.done)
	}
}

// A claim whose answer was lost may have started its tasks: ClaimFailed finds those
// and runs them, and tells Done of the rest.
func TestClaimFailedRunsWhatCommitted(t *testing.T) {
	t.Parallel()
	c := newClaimStarter(t, 4, 3, nil)
	defer c.ex.Stop(context.Background())
	on, k, _ := c.ex.Reserve(3)
	claims := []store.Claim{
		{ID: c.ids[0], ExecutionID: uuid.Must(uuid.NewV7()).String(), Start: true},
		{ID: c.ids[1], ExecutionID: uuid.Must(uuid.NewV7()).String(), Start: true},
		{ID: c.ids[2], ExecutionID: uuid.Must(uuid.NewV7()).String(), Start: true},
	}
	// The first two committed; the third did not.
	if _, err := c.st.ClaimStart(context.Background(), store.Fence{}, on, claims[:2]); err != nil {
		t.Fatal(err)
	}
	c.ex.ClaimFailed(c.src, claims, k, time.Now())
	waitFor(t, 10*time.Second, "the committed two to succeed", func() bool {
		return c.status(t, c.ids[0]).Status == store.Succeeded && c.status(t, c.ids[1]).Status == store.Succeeded
	})
	if got := c.status(t, c.ids[2]); got.Status != store.Scheduled {
		t.Errorf("the task the failed claim did not start is %s, want SCHEDULED", got.Status)
	}
	waitFor(t, 5*time.Second, "Done for all three", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.done == 3 })
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs[c.ids[0]] != 1 || c.runs[c.ids[1]] != 1 || c.runs[c.ids[2]] != 0 {
		t.Errorf("runs %v, want the two committed once each", c.runs)
	}
}

// refusingBeats is a store whose Heartbeat fails its first refuse calls, as a
// read-only server refuses a write (a primary demoted), and then answers every
// execution as answer: the reads still show what that server holds.
type refusingBeats struct {
	store.Store
	refuse int32
	answer store.Beat
	calls  atomic.Int32
}

func (s *refusingBeats) Heartbeat(ctx context.Context, refs []store.ExecRef) ([]store.Beat, error) {
	if s.calls.Add(1) <= s.refuse {
		return nil, errors.New("cannot execute UPDATE in a read-only transaction (SQLSTATE 25006)")
	}
	beats := make([]store.Beat, len(refs))
	for i := range beats {
		beats[i] = s.answer
	}
	return beats, nil
}

// A task a failed claim is read back as having started runs here only once a write
// confirms it: a read may come from a demoted primary that holds a commit the cluster
// never had (issue 37's zombie primary), whose writes fail; while they fail the
// handler waits, and if the write then finds the task moved on, it never runs.
func TestClaimFailedRunsOnlyWhatAWriteConfirms(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		answer store.Beat
		runs   int
	}{
		{"alive", store.BeatAlive, 1},
		{"moved on", store.BeatGone, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			beats := &refusingBeats{refuse: 2, answer: c.answer}
			cs := newClaimStarterOn(t, 4, 1, nil, func(st store.Store) store.Store { beats.Store = st; return beats })
			defer cs.ex.Stop(context.Background())
			on, k, _ := cs.ex.Reserve(1)
			claims := []store.Claim{{ID: cs.ids[0], ExecutionID: uuid.Must(uuid.NewV7()).String(), Start: true}}
			if _, err := cs.st.ClaimStart(context.Background(), store.Fence{}, on, claims); err != nil {
				t.Fatal(err)
			}
			cs.ex.ClaimFailed(cs.src, claims, k, time.Now())
			waitFor(t, 10*time.Second, "Done for the task", func() bool { cs.mu.Lock(); defer cs.mu.Unlock(); return cs.done == 1 })
			if n := beats.calls.Load(); n != 3 {
				t.Errorf("%d heartbeats, want 3 (two refused, then answered)", n)
			}
			if c.runs == 1 {
				waitFor(t, 10*time.Second, "the task to succeed", func() bool { return cs.status(t, cs.ids[0]).Status == store.Succeeded })
			}
			cs.mu.Lock()
			defer cs.mu.Unlock()
			if got := cs.runs[cs.ids[0]]; got != c.runs {
				t.Errorf("handler ran %d times, want %d", got, c.runs)
			}
		})
	}
}

// The prefetch is four times what the handlers get through in one claim round trip,
// at most a batch: one task for slow handlers, a batch for fast ones.
func TestPaceSizesPrefetch(t *testing.T) {
	t0 := time.Now()
	for _, c := range []struct {
		returns int
		rtt     time.Duration
		want    int
	}{
		{returns: 2, rtt: 2 * time.Millisecond, want: 1},        // 20/s: slow handlers
		{returns: 1000, rtt: 2 * time.Millisecond, want: 80},    // 10,000/s
		{returns: 100000, rtt: 5 * time.Millisecond, want: 200}, // capped at a batch
	} {
		var p pace
		p.claimed(c.rtt)
		p.update(t0)
		p.done = c.returns
		p.update(t0.Add(100 * time.Millisecond))
		p.done = c.returns
		p.update(t0.Add(200 * time.Millisecond)) // the smoothed rate settles
		p.done = c.returns
		p.update(t0.Add(300 * time.Millisecond))
		p.done = c.returns
		p.update(t0.Add(400 * time.Millisecond))
		if p.prefetch < c.want*9/10 || p.prefetch > c.want {
			t.Errorf("%d returns per 100ms, round trip %v: prefetch %d, want about %d", c.returns, c.rtt, p.prefetch, c.want)
		}
	}
}

// A prefetched task that a heartbeat finds moved on while it waits for a slot (here:
// orphaned by another scheduler) never runs its handler.
func TestQueuedSupersededDoesNotRun(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	c := newClaimStarter(t, 1, 2, gate)
	defer c.ex.Stop(context.Background())
	if k, _ := c.claim(t, 0); k != 1 {
		t.Fatalf("Reserve gave %d, want 1", k)
	}
	waitFor(t, 5*time.Second, "the first handler to run", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.runs) == 1 })
	c.ex.mu.Lock()
	c.ex.pace.prefetch = 1
	c.ex.mu.Unlock()
	if k, res := c.claim(t, 1); k != 1 || len(res.Started) != 1 {
		t.Fatalf("prefetch claim: %d reserved, %+v", k, res)
	}
	queued := c.status(t, c.ids[1])
	// Recovery elsewhere declares it orphaned and it is retried there.
	if ok, err := c.st.Finish(context.Background(), store.Fence{}, []store.Finish{{TaskID: queued.ID, ExecutionID: queued.ExecutionID,
		Status: store.Scheduled, Attempt: 1, Error: "orphaned", DueAt: time.Now().Add(time.Hour)}}); err != nil || !ok[0] {
		t.Fatalf("orphaning the queued task: %v, %v", ok, err)
	}
	waitFor(t, 5*time.Second, "a heartbeat to find it moved on", func() bool {
		c.ex.mu.Lock()
		defer c.ex.mu.Unlock()
		x := c.ex.running[queued.ExecutionID]
		return x != nil && x.ctx.Err() != nil
	})
	close(gate)
	waitFor(t, 5*time.Second, "the superseded execution to be dropped", func() bool {
		c.ex.mu.Lock()
		defer c.ex.mu.Unlock()
		return c.ex.running[queued.ExecutionID] == nil
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs[queued.ID] != 0 {
		t.Errorf("the superseded task's handler ran %d times, want never", c.runs[queued.ID])
	}
	if got := c.status(t, queued.ID); got.Status != store.Scheduled || got.Attempt != 1 || got.LastError != "orphaned" {
		t.Errorf("superseded task: %+v, want it as recovery left it (its result not applied)", got)
	}
}
