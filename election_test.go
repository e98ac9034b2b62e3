package ax_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/elect/sqllease"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/memory"
)

// roles records the EventLeadership events of one scheduler.
type roles struct {
	mu     sync.Mutex
	events []ax.Event
}

func (r *roles) Observe(e ax.Event) {
	if e.Kind == ax.EventLeadership || e.Kind == ax.EventFenceRejected {
		r.mu.Lock()
		r.events = append(r.events, e)
		r.mu.Unlock()
	}
}

// leading reports whether the last leadership event says this scheduler leads.
func (r *roles) leading() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.events) - 1; i >= 0; i-- {
		if r.events[i].Kind == ax.EventLeadership {
			return r.events[i].Leader
		}
	}
	return false
}

func (r *roles) list() []ax.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// starts records every handler start: the node and the task key.
type starts struct {
	mu   sync.Mutex
	by   map[string][]string // key → nodes
	when map[string]time.Time
}

func (r *starts) handler(node string) func(ctx context.Context, t *ax.Task) error {
	return func(ctx context.Context, t *ax.Task) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.by == nil {
			r.by, r.when = map[string][]string{}, map[string]time.Time{}
		}
		r.by[t.Key] = append(r.by[t.Key], node)
		r.when[t.Key] = time.Now()
		return nil
	}
}

// electedPair starts two schedulers on st, elected by SQL leases on st with ttl.
func electedPair(t *testing.T, st store.Store, ttl time.Duration, rec *starts) (s [2]*ax.Scheduler, obs [2]*roles) {
	t.Helper()
	for i := range s {
		el, err := sqllease.New(st, sqllease.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		obs[i] = &roles{}
		node := fmt.Sprintf("node-%d", i)
		s[i], err = ax.New(ax.Config{Store: st, Node: node, Elector: el, Observer: obs[i], Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		s[i].HandleFunc("job", rec.handler(node))
		if err := s[i].Start(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	return s, obs
}

// TestElectedLeaderHandsOverOnStop: of two schedulers under one SQL lease only the
// leader starts tasks; when it stops, the other leads within a second and starts the rest,
// each task once and none early.
func TestElectedLeaderHandsOverOnStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		rec := &starts{}
		s, obs := electedPair(t, st, 2*time.Second, rec)
		defer s[0].Stop(context.Background())
		defer s[1].Stop(context.Background())
		synctest.Wait()
		time.Sleep(10 * time.Millisecond) // the observers deliver
		synctest.Wait()
		leader := -1
		for i := range obs {
			if obs[i].leading() {
				if leader >= 0 {
					t.Fatal("both schedulers lead")
				}
				leader = i
			}
		}
		if leader < 0 {
			t.Fatal("no scheduler leads")
		}
		other := 1 - leader

		ctx := context.Background()
		due := map[string]time.Time{}
		for i := range 20 {
			key := fmt.Sprintf("k%02d", i)
			d := time.Duration(i)*500*time.Millisecond + 250*time.Millisecond
			if _, err := s[other].Delay(ctx, "job", key, d); err != nil {
				t.Fatal(err)
			}
			due[key] = time.Now().Add(d)
		}
		time.Sleep(3 * time.Second) // the first five ran on the leader
		stopped := time.Now()
		if err := s[leader].Stop(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()

		rec.mu.Lock()
		defer rec.mu.Unlock()
		for key, at := range due {
			nodes := rec.by[key]
			if len(nodes) != 1 {
				t.Errorf("task %s ran %d times (%v), want once", key, len(nodes), nodes)
				continue
			}
			if rec.when[key].Before(at) {
				t.Errorf("task %s started at %v, before its due time %v", key, rec.when[key], at)
			}
			want := fmt.Sprintf("node-%d", leader)
			if at.After(stopped) {
				want = fmt.Sprintf("node-%d", other)
				if late := rec.when[key].Sub(at); at.Sub(stopped) > time.Second && late > 100*time.Millisecond {
					t.Errorf("task %s, due %v after the leader stopped, ran %v late", key, at.Sub(stopped), late)
				}
			}
			if nodes[0] != want {
				t.Errorf("task %s (due %v) ran on %s, want %s", key, at, nodes[0], want)
			}
		}
		ev := obs[other].list()
		took := -1
		for i, e := range ev {
			if e.Kind == ax.EventLeadership && e.Leader {
				took = i
			}
		}
		if took < 0 || ev[took].At.Sub(stopped) > time.Second {
			t.Fatalf("the standby's leadership events %+v: want it leading within 1s of the stop", ev)
		}
		for _, e := range obs[leader].list() {
			if e.Kind == ax.EventLeadership && !e.Leader && e.Reason != "stopping" {
				t.Errorf("the stopped leader's term ended with reason %q, want stopping", e.Reason)
			}
		}
		if ev[took].Epoch <= 1 {
			t.Errorf("the new leader's epoch is %d, want above the first leader's", ev[took].Epoch)
		}
	})
}

// TestFencedLeaderStepsDown: once the store records a newer leader, the old one's next
// claim is refused and its term ends at once (reason fenced); none of its tasks starts
// under the old token, and it leads again, with a higher token, when it can.
func TestFencedLeaderStepsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		el, err := sqllease.New(st, sqllease.WithTTL(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		obs := &roles{}
		rec := &starts{}
		s, err := ax.New(ax.Config{Store: st, Node: "a", Elector: el, Observer: obs, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		s.HandleFunc("job", rec.handler("a"))
		ctx := context.Background()
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer s.Stop(ctx)
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if !obs.leading() {
			t.Fatal("the only candidate does not lead")
		}
		// A newer leader, as far as the store knows.
		if _, err := st.RaiseFence(ctx, ax.DefaultNamespace, "usurper", 100); err != nil {
			t.Fatal(err)
		}
		task, err := s.Delay(ctx, "job", "k", 500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		ev := obs.list()
		var fenced, ended bool
		for _, e := range ev {
			fenced = fenced || e.Kind == ax.EventFenceRejected && e.Reason == "claim"
			ended = ended || e.Kind == ax.EventLeadership && !e.Leader && e.Reason == "fenced"
		}
		if !fenced || !ended {
			t.Fatalf("events %+v: want a claim fenced and the term ended, reason fenced", ev)
		}
		if got, _ := s.Get(ctx, task.ID); got.Status != ax.Scheduled {
			t.Fatalf("task after the fenced claim: %s, want SCHEDULED (not claimed under the old token)", got.Status)
		}
		// The usurper never renews: after the lease expires, a shows it leads again.
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got, _ := s.Get(ctx, task.ID); got.Status != ax.Succeeded {
			t.Fatalf("task once a leads again: %s, want SUCCEEDED", got.Status)
		}
		ev = obs.list()
		last := ev[len(ev)-1]
		if last.Kind != ax.EventLeadership || !last.Leader || last.Epoch <= 100 {
			t.Fatalf("last event %+v: want a leading again with an epoch above 100", last)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if n := len(rec.by["k"]); n != 1 {
			t.Fatalf("task ran %d times, want once", n)
		}
	})
}

// TestExecutorOnlyNeverSchedules: a scheduler that may not lead starts no scheduling loop.
func TestExecutorOnlyNeverSchedules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		no := false
		rec := &starts{}
		s, err := ax.New(ax.Config{Store: st, CanLead: &no, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		s.HandleFunc("job", rec.handler("x"))
		ctx := context.Background()
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer s.Stop(ctx)
		task, err := s.Delay(ctx, "job", "k", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if got, _ := s.Get(ctx, task.ID); got.Status != ax.Scheduled {
			t.Fatalf("task on an executor-only scheduler: %s, want SCHEDULED", got.Status)
		}
		if err := s.Trigger(ctx, task.ID); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got, _ := s.Get(ctx, task.ID); got.Status != ax.Succeeded {
			t.Fatalf("triggered task: %s, want SUCCEEDED", got.Status)
		}
	})
}

// cutNow is a store whose clock reads fail while cut is set: the leader's link to its
// database, cut, while its election (a separate backend) goes on.
type cutNow struct {
	store.Store
	cut *atomic.Bool
}

func (c cutNow) Now(ctx context.Context) (time.Time, error) {
	if c.cut.Load() {
		return time.Time{}, errors.New("connection refused")
	}
	return c.Store.Now(ctx)
}

// InNamespace keeps the namespace's view behind the same cut.
func (c cutNow) InNamespace(ns string) (store.Store, error) {
	v, err := c.Store.InNamespace(ns)
	if err != nil {
		return nil, err
	}
	return cutNow{v, c.cut}, nil
}

// TestLeaderCutFromItsStoreResigns: a leader whose store stops answering for
// StoreTimeout ends its term (reason store_down) and resigns although its lease is still
// renewed, another replica leads, and the cut one campaigns again only once its store
// answers.
func TestLeaderCutFromItsStoreResigns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New()
		defer mem.Close()
		ctx := context.Background()
		var ss [2]*ax.Scheduler
		var obs [2]*roles
		var links [2]cutNow
		for i := range ss {
			el, err := sqllease.New(mem, sqllease.WithTTL(2*time.Second)) // the election does not go through the cut link
			if err != nil {
				t.Fatal(err)
			}
			links[i], obs[i] = cutNow{Store: mem, cut: new(atomic.Bool)}, &roles{}
			ss[i], err = ax.New(ax.Config{Store: links[i], Node: fmt.Sprintf("node-%d", i), Elector: el, Observer: obs[i],
				Logger: quietLogger(), StoreTimeout: 3 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if err := ss[i].Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer ss[i].Stop(ctx)
			time.Sleep(100 * time.Millisecond) // node-0 campaigns first
		}
		synctest.Wait()
		if !obs[0].leading() || obs[1].leading() {
			t.Fatal("node-0 does not lead")
		}
		links[0].cut.Store(true)
		cutAt := time.Now()
		time.Sleep(6 * time.Second)
		synctest.Wait()
		var ended time.Time
		for _, e := range obs[0].list() {
			if e.Kind == ax.EventLeadership && !e.Leader {
				if e.Reason != "store_down" {
					t.Fatalf("node-0's term ended with reason %q, want store_down", e.Reason)
				}
				ended = e.At
			}
		}
		if ended.IsZero() || obs[0].leading() || !obs[1].leading() {
			t.Fatalf("6s into the cut: node-0 leading %v (term ended at %v), node-1 leading %v; want node-0 stepped down, node-1 leading",
				obs[0].leading(), ended, obs[1].leading())
		}
		// Counted from the start of the last ping that answered, at most a second before the cut.
		if d := ended.Sub(cutAt); d < 2*time.Second {
			t.Fatalf("node-0 stepped down %v into the cut, before StoreTimeout since its last answer", d)
		}
		// Restored, node-0 is a candidate again: it leads when node-1 stops.
		links[0].cut.Store(false)
		if err := ss[1].Stop(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if !obs[0].leading() {
			t.Fatal("node-0 does not lead again once its store answers and node-1 stopped")
		}
	})
}

// TestElectorNamespaceMustMatch: an elector of another namespace than the scheduler's
// is a configuration error: the leader it elects would be fenced in another namespace.
func TestElectorNamespaceMustMatch(t *testing.T) {
	st := memory.New()
	defer st.Close()
	el, err := sqllease.New(st, sqllease.WithNamespace("billing"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ax.New(ax.Config{Store: st, Elector: el}); !errors.Is(err, ax.ErrInvalid) {
		t.Fatalf("New with an elector of namespace billing, scheduler in default: %v, want ErrInvalid", err)
	}
	if _, err := ax.New(ax.Config{Store: st, Elector: el, Namespace: "billing"}); err != nil {
		t.Fatalf("New with matching namespaces: %v", err)
	}
}
