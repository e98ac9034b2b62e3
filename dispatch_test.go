package ax_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/elect/sqllease"
	"github.com/axsched/ax/store/memory"
)

// replica is one scheduler of a cluster test, with its executor endpoint served on
// loopback.
type replica struct {
	s   *ax.Scheduler
	srv *httptest.Server
}

// cluster starts n replicas on st under one SQL lease, each serving its executor
// endpoint (signed with secret) and registering handlers with reg before Start.
func cluster(t *testing.T, st *memory.Store, n int, secret []byte, reg func(i int, s *ax.Scheduler), mods ...func(i int, c *ax.Config)) []replica {
	t.Helper()
	rs := make([]replica, n)
	for i := range rs {
		el, err := sqllease.New(st, sqllease.WithTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		// The handler is mounted before the URL is known: serve through an indirection.
		var mu sync.Mutex
		var s *ax.Scheduler
		srv := httptest.NewServer(handlerFunc(func() *ax.Scheduler { mu.Lock(); defer mu.Unlock(); return s }))
		t.Cleanup(srv.Close)
		cfg := ax.Config{
			Store: st, Node: fmt.Sprintf("node-%d", i), Elector: el, Logger: quietLogger(),
			HeartbeatInterval: 200 * time.Millisecond, OrphanAfter: 5 * time.Second, RefillInterval: 100 * time.Millisecond,
			Cluster: ax.ClusterConfig{Advertise: srv.URL, Secret: secret},
		}
		if i > 0 {
			no := false
			cfg.CanLead = &no // node-0 leads
		}
		for _, mod := range mods {
			mod(i, &cfg)
		}
		sc, err := ax.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		s = sc
		mu.Unlock()
		reg(i, sc)
		if err := sc.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sc.Stop(context.Background()) })
		rs[i] = replica{s: sc, srv: srv}
	}
	return rs
}

// TestLeaderDispatchesOverHTTP: the leader has no handler for "remote.job"; the two
// executor-only replicas do, and get every such task over signed HTTP, round-robin;
// each runs once, on the replica that recorded it, never early.
func TestLeaderDispatchesOverHTTP(t *testing.T) {
	t.Parallel()
	st := memory.New()
	defer st.Close()
	secret := make([]byte, 32)
	rand.Read(secret)
	rec, rs := remoteJobs(t, st, secret)
	mu, ran := &rec.mu, rec.by // key → nodes
	ctx := context.Background()
	const n = 40
	due := map[string]time.Time{}
	for i := range n {
		key := fmt.Sprint(i)
		task, err := rs[0].s.Delay(ctx, "remote.job", key, time.Duration(i%8)*50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		due[key] = task.DueAt
	}
	waitFor(t, 20*time.Second, "every task to run", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ran) == n
	})
	mu.Lock()
	defer mu.Unlock()
	per := map[string]int{}
	for key, nodes := range ran {
		if len(nodes) != 1 {
			t.Errorf("task %s ran %d times (%v), want once", key, len(nodes), nodes)
		}
		per[nodes[0]]++
		task, err := rs[0].s.Lookup(ctx, "remote.job", key)
		if err != nil {
			t.Fatal(err)
		}
		execs, err := rs[0].s.Executions(ctx, task.ID)
		if err != nil || len(execs) != 1 || execs[0].Node != nodes[0] || execs[0].StartedAt.Before(due[key]) {
			t.Errorf("task %s: executions %+v, %v; want one, on %s, not before %v", key, execs, err, nodes[0], due[key])
		}
	}
	if per["node-1"] == 0 || per["node-2"] == 0 || per["node-0"] != 0 {
		t.Errorf("tasks per node %v: want both executor-only replicas used, none on the leader (no handler there)", per)
	}
}

// remoteJobs starts three replicas on st (node-0 leads and has no handler; node-1 and
// node-2 record their runs of "remote.job" in rec) and waits until all are registered.
func remoteJobs(t *testing.T, st *memory.Store, secret []byte) (*starts, []replica) {
	t.Helper()
	rec := &starts{by: map[string][]string{}, when: map[string]time.Time{}}
	rs := cluster(t, st, 3, secret, func(i int, s *ax.Scheduler) {
		if i > 0 {
			s.HandleFunc("remote.job", rec.handler(fmt.Sprintf("node-%d", i)))
		}
	})
	waitForNodes(t, rs[0].s, 3)
	return rec, rs
}

// TestNodeStartedAtIsKept: a replica's registration keeps its start time across its
// refreshes; only the heartbeat moves.
func TestNodeStartedAtIsKept(t *testing.T) {
	t.Parallel()
	st := memory.New()
	defer st.Close()
	_, rs := remoteJobs(t, st, nil)
	ctx := context.Background()
	first, err := rs[0].s.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "every node refreshed", func() bool {
		cs, err := rs[0].s.Cluster(ctx)
		if err != nil || len(cs.Nodes) != len(first.Nodes) {
			return false
		}
		for i, n := range cs.Nodes {
			if !n.HeartbeatAt.After(first.Nodes[i].HeartbeatAt) {
				return false
			}
		}
		for i, n := range cs.Nodes {
			if !n.StartedAt.Equal(first.Nodes[i].StartedAt) || !n.StartedAt.Before(n.HeartbeatAt) {
				t.Fatalf("%s: started %v, then %v (heartbeat %v): want its start kept, before its heartbeat",
					n.Node, first.Nodes[i].StartedAt, n.StartedAt, n.HeartbeatAt)
			}
		}
		return true
	})
}

// handlerFunc serves the executor endpoint of the scheduler get returns, once there is
// one.
func handlerFunc(get func() *ax.Scheduler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := get()
		if s == nil {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		s.ExecutorHandler().ServeHTTP(w, r)
	})
}

// TestUnreachableExecutorIsSkipped: one of two executor-only replicas stops answering
// (its endpoint closed, its registration still fresh): its share goes to the other, and
// every task still runs once.
func TestUnreachableExecutorIsSkipped(t *testing.T) {
	t.Parallel()
	st := memory.New()
	defer st.Close()
	rec, rs := remoteJobs(t, st, nil)
	mu, ran := &rec.mu, rec.by // key → nodes
	ctx := context.Background()
	rs[2].srv.CloseClientConnections()
	rs[2].srv.Close()
	const n = 30
	for i := range n {
		if _, err := rs[0].s.Delay(ctx, "remote.job", fmt.Sprint(i), time.Duration(i%5)*40*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 20*time.Second, "every task to run", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ran) == n
	})
	mu.Lock()
	defer mu.Unlock()
	for key, nodes := range ran {
		if len(nodes) != 1 || nodes[0] != "node-1" {
			t.Errorf("task %s ran on %v, want once, on node-1", key, nodes)
		}
		task, _ := rs[0].s.Lookup(ctx, "remote.job", key)
		if task.Attempt != 0 {
			t.Errorf("task %s: attempt %d, want 0 (an unreachable executor is a dispatch failure, not a business one)", key, task.Attempt)
		}
	}
}

// TestBusyExecutorsDoNotFailTasks: a backlog larger than the one executor's slots waits
// in the leader while the executor is full, instead of being handed back until its
// dispatch retries run out: every task succeeds, none handed back.
func TestBusyExecutorsDoNotFailTasks(t *testing.T) {
	t.Parallel()
	st := memory.New()
	defer st.Close()
	var mu sync.Mutex
	ran := map[string]int{}
	rs := cluster(t, st, 2, nil, func(i int, s *ax.Scheduler) {
		if i == 1 {
			s.HandleFunc("slow", func(ctx context.Context, task *ax.Task) error {
				time.Sleep(100 * time.Millisecond)
				mu.Lock()
				ran[task.Key]++
				mu.Unlock()
				return nil
			})
		}
	}, func(i int, c *ax.Config) {
		c.Concurrency = 1
		c.MaxDispatchRetries = 2
	})
	ctx := context.Background()
	waitForNodes(t, rs[0].s, 2)
	const n = 10
	for i := range n {
		if _, err := rs[0].s.Delay(ctx, "slow", fmt.Sprint(i), 0); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 20*time.Second, "every task to run", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ran) == n
	})
	for i := range n {
		task, err := rs[0].s.Lookup(ctx, "slow", fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "the task's result", func() bool {
			task, err = rs[0].s.Lookup(ctx, "slow", fmt.Sprint(i))
			return err == nil && task.Status == ax.Succeeded
		})
		if task.DispatchRetries != 0 || ran[fmt.Sprint(i)] != 1 {
			t.Errorf("task %d: %s, dispatch retries %d, ran %d times; want SUCCEEDED once, never handed back", i, task.Status, task.DispatchRetries, ran[fmt.Sprint(i)])
		}
	}
}

// requests counts the leader's executor requests by result.
type requests struct {
	mu       sync.Mutex
	byResult map[string]int
}

func (r *requests) Observe(e ax.Event) {
	if e.Kind == ax.EventExecutorRequest {
		r.mu.Lock()
		r.byResult[e.Reason]++
		r.mu.Unlock()
	}
}

// TestRefusingExecutorIsPassedOver: one of two executor-only replicas was given
// another cluster secret, so it refuses every dispatch (401). Under consistent
// hashing about half the keys hash to it; each such task goes on to the other
// replica in the same routing, instead of being handed back and hashed to the same
// replica at every claim until its dispatch retries ran out: every task runs once,
// on node-1, with no dispatch retry spent.
func TestRefusingExecutorIsPassedOver(t *testing.T) {
	t.Parallel()
	st := memory.New()
	defer st.Close()
	secret, wrong := make([]byte, 32), make([]byte, 32)
	rand.Read(secret)
	rand.Read(wrong)
	reqs := &requests{byResult: map[string]int{}}
	rec := &starts{by: map[string][]string{}, when: map[string]time.Time{}}
	rs := cluster(t, st, 3, secret, func(i int, s *ax.Scheduler) {
		if i > 0 {
			s.HandleFunc("remote.job", rec.handler(fmt.Sprintf("node-%d", i)))
		}
	}, func(i int, c *ax.Config) {
		c.Cluster.Routing = ax.RouteConsistentHash
		c.MaxDispatchRetries = 1
		switch i {
		case 0:
			c.Observer = reqs
		case 2:
			c.Cluster.Secret = wrong
		}
	})
	waitForNodes(t, rs[0].s, 3)
	ctx := context.Background()
	// The leader's router reads the registry on its own schedule: until it knows
	// node-2, every task goes to node-1. Probes, one a poll, until one was refused.
	var keys []string
	waitFor(t, 20*time.Second, "a dispatch to node-2", func() bool {
		key := fmt.Sprint("probe-", len(keys))
		if _, err := rs[0].s.Delay(ctx, "remote.job", key, 0); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
		reqs.mu.Lock()
		defer reqs.mu.Unlock()
		return reqs.byResult["error"] > 0
	})
	for i := range 30 {
		key := fmt.Sprint(i)
		if _, err := rs[0].s.Delay(ctx, "remote.job", key, time.Duration(i%5)*40*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
	}
	waitFor(t, 20*time.Second, "every task to succeed", func() bool {
		for _, key := range keys {
			task, err := rs[0].s.Lookup(ctx, "remote.job", key)
			if err != nil || task.Status != ax.Succeeded {
				return false
			}
		}
		return true
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, key := range keys {
		task, err := rs[0].s.Lookup(ctx, "remote.job", key)
		if err != nil {
			t.Fatal(err)
		}
		if nodes := rec.by[key]; len(nodes) != 1 || nodes[0] != "node-1" || task.DispatchRetries != 0 || task.Attempt != 0 {
			t.Errorf("task %s ran on %v with %d dispatch retries, attempt %d; want once, on node-1, none spent", key, nodes, task.DispatchRetries, task.Attempt)
		}
	}
	reqs.mu.Lock()
	defer reqs.mu.Unlock()
	if reqs.byResult["error"] == 0 || reqs.byResult["ok"] == 0 {
		t.Errorf("executor requests by result %v: want some refused (keys hashed to node-2) and some ok", reqs.byResult)
	}
}

// waitForNodes waits until leader leads with n replicas registered.
func waitForNodes(t *testing.T, leader *ax.Scheduler, n int) {
	t.Helper()
	waitFor(t, 10*time.Second, fmt.Sprintf("a leader with %d replicas registered", n), func() bool {
		cs, err := leader.Cluster(context.Background())
		return err == nil && cs.IsLeader && len(cs.Nodes) == n
	})
}

// TestStopTellsStandbysToCampaign: the leader's graceful Stop tells the other replica
// (a signed release notice), which campaigns at once. The replicas' SQL leases have a
// TTL of a minute and a fallback poll as long: a standby refused at the start would not
// try again for about a minute, so leading within seconds shows the notice at work.
// The tasks due after the stop run once, on the new leader, never early.
func TestStopTellsStandbysToCampaign(t *testing.T) {
	t.Parallel()
	st := memory.New()
	defer st.Close()
	secret := make([]byte, 32)
	rand.Read(secret)
	rec := &starts{}
	rs := cluster(t, st, 2, secret, func(i int, s *ax.Scheduler) {
		s.HandleFunc("job", rec.handler(fmt.Sprintf("node-%d", i)))
	}, func(i int, c *ax.Config) {
		el, err := sqllease.New(st, sqllease.WithTTL(time.Minute), sqllease.WithPollInterval(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		c.Elector, c.CanLead = el, nil
	})
	ctx := context.Background()
	leader := -1
	waitFor(t, 10*time.Second, "a leader with both replicas registered", func() bool {
		for i, r := range rs {
			if cs, err := r.s.Cluster(ctx); err == nil && cs.IsLeader && len(cs.Nodes) == 2 {
				leader = i
				return true
			}
		}
		return false
	})
	other := rs[1-leader].s
	due := map[string]time.Time{}
	for i := range 10 {
		key := fmt.Sprint(i)
		task, err := other.Delay(ctx, "job", key, time.Duration(i)*100*time.Millisecond+500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		due[key] = task.DueAt
	}
	stopped := time.Now()
	if err := rs[leader].s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the standby to lead", func() bool {
		cs, err := other.Cluster(ctx)
		return err == nil && cs.IsLeader
	})
	if took := time.Since(stopped); took > 10*time.Second {
		t.Fatalf("the standby led %v after the leader's Stop: not woken by the release notice (its next attempt was a minute away)", took)
	} else {
		t.Logf("the standby led %v after the leader's Stop began", took.Round(time.Millisecond))
	}
	waitFor(t, 20*time.Second, "every task to run", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.by) == len(due)
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for key, at := range due {
		if nodes := rec.by[key]; len(nodes) != 1 || rec.when[key].Before(at) {
			t.Errorf("task %s ran on %v at %v, due %v: want once, not early", key, nodes, rec.when[key], at)
		}
	}
}
