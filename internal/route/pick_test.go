package route

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/remote"
	"github.com/axsched/ax/store"
)

// replicas are two other replicas with executor endpoints and a handler for "job",
// and one that advertises an endpoint without it.
var replicas = []store.NodeInfo{
	{Name: "a", Advertise: "http://127.0.0.1:1", Handlers: []string{"job"}, Capacity: 4, InFlight: 3},
	{Name: "b", Advertise: "http://127.0.0.1:2", Handlers: []string{"job"}, Capacity: 4, InFlight: 1},
	{Name: "c", Advertise: "http://127.0.0.1:3", Handlers: []string{"other"}, Capacity: 4},
}

func picks(t *testing.T, r *Router, task *store.Task, tried map[string]bool, n int) []string {
	t.Helper()
	var got []string
	for range n {
		c, ok := r.pick(task, tried)
		if !ok {
			got = append(got, "none")
			continue
		}
		got = append(got, c)
	}
	return got
}

// Round-robin takes the candidates in turn — this replica (local, "") first, then the
// others by name — and passes over those tried, marked down, or without the handler.
func TestPickRoundRobin(t *testing.T) {
	r := newRouter(t)
	r.SetNodes(replicas)
	job := &store.Task{Name: "job", Key: "k"}
	if got := fmt.Sprint(picks(t, r, job, nil, 6)); got != "[ a b  a b]" {
		t.Errorf("picks = %s, want local, a, b in turn", got)
	}
	if got := fmt.Sprint(picks(t, r, job, map[string]bool{local: true, "b": true}, 2)); got != "[a a]" {
		t.Errorf("with local and b tried: picks = %s, want a only", got)
	}
	r.markDown("a")
	if got := fmt.Sprint(picks(t, r, job, map[string]bool{local: true}, 2)); got != "[b b]" {
		t.Errorf("with a down and local tried: picks = %s, want b only", got)
	}
	if got := fmt.Sprint(picks(t, r, job, map[string]bool{local: true, "b": true}, 1)); got != "[none]" {
		t.Errorf("with every candidate tried or down: picks = %s, want none", got)
	}
	if got := fmt.Sprint(picks(t, r, &store.Task{Name: "other"}, nil, 2)); got != "[c c]" {
		t.Errorf("a task only c has a handler for: picks = %s, want c only", got)
	}
	if _, ok := r.pick(&store.Task{Name: "nobody"}, nil); ok {
		t.Error("a task no replica has a handler for was given a candidate")
	}
}

// Least-in-flight takes the candidate with the fewest busy slots per slot — running or
// waiting for one, as last known, plus the tasks picked for it since — and a tie goes
// to the first in order.
func TestPickLeastInFlight(t *testing.T) {
	r := newRouter(t)
	r.cfg.Policy = LeastInFlight
	r.SetNodes(replicas)
	job := &store.Task{Name: "job"}
	if c, _ := r.pick(job, nil); c != local {
		t.Errorf("pick = %q, want this replica (no task running of its 4 slots)", c)
	}
	// a runs 3 of 4, b 1 of 4: b twice (then 3 of 4 with those picked), then the tie to a.
	if got := fmt.Sprint(picks(t, r, job, map[string]bool{local: true}, 3)); got != "[b b a]" {
		t.Errorf("picks without local = %s, want [b b a]", got)
	}
	// The request of the one task picked for a ends, and a's executor answered: 0
	// running, all 4 slots free. Its load is then 0, b's still 3 of 4 (1 running, 2
	// picked).
	r.report("a", &remote.DispatchResponse{Running: 0, Free: 4})
	r.unassign("a", 1)
	if got := fmt.Sprint(picks(t, r, job, map[string]bool{local: true}, 5)); got != "[a a a a b]" {
		t.Errorf("after a's answer: picks = %s, want a at 0, 1, 2 and 3 of 4 (the tie with b), then b", got)
	}
	// An answer counts the tasks waiting for a slot as busy: 1 running and 3 pending
	// of 4 slots is a full executor, not one at 1 of 2.
	r.report("b", &remote.DispatchResponse{Running: 1, Free: 0})
	r.unassign("b", 3)
	if n := r.nodes["b"]; n.InFlight != 4 || n.Capacity != 4 || n.assigned != 0 {
		t.Errorf("b after its answer: in flight %d of %d, %d picked; want 4 of 4, none", n.InFlight, n.Capacity, n.assigned)
	}
}

// The tasks picked for this replica count against it while one batch is routed, and
// so do those it queued and has not started: an idle leader does not take a whole batch
// that idle replicas could share, and a leader with its slots taken by pending tasks
// is not seen as idle.
func TestLeastInFlightCountsThisReplica(t *testing.T) {
	r := newRouter(t)
	r.cfg.Policy = LeastInFlight
	idle := []store.NodeInfo{
		{Name: "a", Advertise: "http://127.0.0.1:1", Handlers: []string{"job"}, Capacity: 4},
		{Name: "b", Advertise: "http://127.0.0.1:2", Handlers: []string{"job"}, Capacity: 4},
	}
	r.SetNodes(idle)
	count := map[string]int{}
	for _, c := range picks(t, r, &store.Task{Name: "job"}, nil, 12) {
		count[c]++
	}
	if count[local] != 4 || count["a"] != 4 || count["b"] != 4 {
		t.Errorf("12 tasks over three idle replicas of 4 slots: %v, want 4 each", count)
	}

	// Three tasks routed here wait, pending, in the executor (it is not running): 3 of
	// its 4 slots are taken, so a replica running 2 of 4 is the less loaded.
	r = newRouter(t)
	r.cfg.Policy = LeastInFlight
	r.SetNodes([]store.NodeInfo{{Name: "here"}}) // alone, and read from the registry
	r.route([]store.Task{{ID: 1, Name: "job"}, {ID: 2, Name: "job"}, {ID: 3, Name: "job"}}, nil)
	if running, free := r.cfg.Exec.Load(); running != 0 || free != 1 || r.assigned != 0 {
		t.Fatalf("after routing 3 tasks here: %d running, %d free, %d still counted as picked; want 0, 1, 0", running, free, r.assigned)
	}
	r.SetNodes([]store.NodeInfo{{Name: "a", Advertise: "http://127.0.0.1:1", Handlers: []string{"job"}, Capacity: 4, InFlight: 2}})
	if c, _ := r.pick(&store.Task{Name: "job"}, nil); c != "a" {
		t.Errorf("pick = %q, want a (2 of 4 busy against this replica's 3 of 4)", c)
	}
}

// Consistent hashing sends a key to the same candidate for as long as the set of
// candidates stands, spreads keys over all of them, and when a candidate leaves, moves
// only the keys that were on it. The task key, when set, is the key.
func TestPickConsistentHash(t *testing.T) {
	r := newRouter(t)
	r.cfg.Policy = ConsistentHash
	r.SetNodes(replicas)
	const keys = 300
	before := map[string]string{}
	count := map[string]int{}
	for i := range keys {
		key := fmt.Sprint("order-", i)
		task := &store.Task{Name: "job", Key: key}
		got := picks(t, r, task, nil, 3)
		if got[0] != got[1] || got[1] != got[2] {
			t.Fatalf("key %s went to %v, want one candidate every time", key, got)
		}
		before[key] = got[0]
		count[got[0]]++
	}
	for _, c := range []string{local, "a", "b"} {
		if count[c] < keys/10 {
			t.Errorf("candidate %q got %d of %d keys, want a share of them (%v)", c, count[c], keys, count)
		}
	}

	t.Logf("keys per candidate: %v", count)
	r.SetNodes([]store.NodeInfo{replicas[0], replicas[2]}) // b leaves
	for key, was := range before {
		now, _ := r.pick(&store.Task{Name: "job", Key: key}, nil)
		switch {
		case was == "b" && now == "b":
			t.Errorf("key %s still goes to b, which left", key)
		case was == "b": // moved, as it must
		case now != was:
			t.Errorf("key %s moved from %q to %q though %q is still here", key, was, now, was)
		}
	}

	// Another leader, with the same replicas, routes every key alike: a, leading,
	// weighs itself by its name as the others see it.
	r.SetNodes(replicas)
	other := newRouter(t)
	other.cfg.Policy, other.cfg.Local = ConsistentHash, "a"
	other.SetNodes([]store.NodeInfo{
		{Name: "here", Advertise: "http://127.0.0.1:4", Handlers: []string{"job"}, Capacity: 4},
		replicas[1], replicas[2],
	})
	name := func(leader *Router, c string) string {
		if c == local {
			return leader.cfg.Local
		}
		return c
	}
	for key := range before {
		task := &store.Task{Name: "job", Key: key}
		c1, _ := r.pick(task, nil)
		c2, _ := other.pick(task, nil)
		if name(r, c1) != name(other, c2) {
			t.Errorf("key %s: leader here routes it to %s, leader a to %s", key, name(r, c1), name(other, c2))
		}
	}

	// Tasks of one task key go together, whatever their business keys.
	first, _ := r.pick(&store.Task{Name: "job", Key: "x", TaskKey: "tenant-7"}, nil)
	for i := range 20 {
		if c, _ := r.pick(&store.Task{Name: "job", Key: fmt.Sprint(i), TaskKey: "tenant-7"}, nil); c != first {
			t.Fatalf("task key tenant-7: key %d went to %q, the first to %q", i, c, first)
		}
	}
}

// A leader without an executor endpoint is a candidate of its own terms only: under
// consistent hashing it leaves every key to the replicas the other leaders see, so
// that they all route each key alike, and takes keys itself only when none of those
// can.
func TestConsistentHashLeaderWithoutEndpoint(t *testing.T) {
	hidden := newRouter(t) // "here", not advertised: the others never list it
	hidden.cfg.Policy, hidden.cfg.Advertised = ConsistentHash, false
	hidden.SetNodes(replicas)
	seen := newRouter(t) // b leading: its registry holds a and c, not here
	seen.cfg.Policy, seen.cfg.Local = ConsistentHash, "b"
	seen.SetNodes([]store.NodeInfo{replicas[0], replicas[2]})
	count := map[string]int{}
	for i := range 300 {
		task := &store.Task{Name: "job", Key: fmt.Sprint("order-", i)}
		c1, _ := hidden.pick(task, nil)
		c2, _ := seen.pick(task, nil)
		if c2 == local {
			c2 = "b"
		}
		if c1 != c2 {
			t.Errorf("key %s: the leader without an endpoint routes it to %q, leader b to %q", task.Key, c1, c2)
		}
		count[c1]++
	}
	if count["a"] == 0 || count["b"] == 0 || count[local] != 0 {
		t.Errorf("keys per candidate %v: want a and b to share them, none to the leader without an endpoint", count)
	}
	// Once the key's replica is tried (busy, say), the next one the others see takes
	// it; once both are, or gone, this replica runs the task itself.
	task := &store.Task{Name: "job", Key: "order-1"}
	first, _ := hidden.pick(task, nil)
	next := map[string]string{"a": "b", "b": "a"}[first]
	if c, ok := hidden.pick(task, map[string]bool{first: true}); !ok || c != next {
		t.Errorf("%s tried: pick = %q, %v; want %s", first, c, ok, next)
	}
	if c, ok := hidden.pick(task, map[string]bool{"a": true, "b": true}); !ok || c != local {
		t.Errorf("a and b tried: pick = %q, %v; want this replica", c, ok)
	}
	hidden.SetNodes(nil)
	if c, ok := hidden.pick(task, nil); !ok || c != local {
		t.Errorf("alone: pick = %q, %v; want this replica", c, ok)
	}
}

// A request's tasks stop counting as picked for its replica when the request ends,
// whatever its outcome, once (when it is split in halves, by the halves: see
// TestTooLargeIsSplit).
func TestRequestEndUnassigns(t *testing.T) {
	signer, err := remote.NewSigner([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		token int64
	}{
		{"refused", 0},     // the client refuses to sign a zero token: an error, not unreachable
		{"unreachable", 1}, // nothing listens on port 1
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRouter(t)
			r.cfg.Policy, r.cfg.Token = LeastInFlight, tc.token
			r.cfg.Client = remote.NewClient(signer, time.Second, nil)
			r.SetNodes([]store.NodeInfo{{Name: "a", Advertise: "http://127.0.0.1:1", Handlers: []string{"job"}, Capacity: 4}})
			r.mu.Lock()
			r.nodes["a"].assigned = 5 // picked for other requests, still under way
			r.mu.Unlock()
			r.route([]store.Task{{ID: 1, Name: "job"}, {ID: 2, Name: "job"}, {ID: 3, Name: "job"}}, map[string]bool{local: true})
			r.Wait()
			r.mu.Lock()
			defer r.mu.Unlock()
			if n := r.nodes["a"]; n.assigned != 5 {
				t.Errorf("after the request of 3 tasks to a ended: %d counted as picked for it, want the other requests' 5", n.assigned)
			}
			if _, down := r.down["a"]; down != (tc.token == 1) {
				t.Errorf("a marked down: %v, want %v", down, tc.token == 1)
			}
		})
	}
}

// TestTooLargeIsSplit: a batch the executor refuses as too large (413) goes to it
// again in halves, down to requests it reads, and every task is taken once; the
// tasks stop counting as picked for it when the last request ends.
func TestTooLargeIsSplit(t *testing.T) {
	v, err := remote.NewVerifier(clusterSecret, remote.WithLogger(slog.New(slog.DiscardHandler)), remote.WithMaxBodyBytes(4096))
	if err != nil {
		t.Fatal(err)
	}
	exec := &busyFirst{taken: map[int64]int{}}
	srv := remote.NewServer("", "a", exec, v, slog.New(slog.DiscardHandler))
	var requests atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		requests.Add(1)
		srv.ServeHTTP(w, req)
	}))
	defer hs.Close()
	signer, err := remote.NewSigner(clusterSecret)
	if err != nil {
		t.Fatal(err)
	}
	r := newRouter(t)
	r.cfg.Token = 1
	r.cfg.Client = remote.NewClient(signer, 5*time.Second, nil)
	defer r.cfg.Client.Close()
	r.SetNodes([]store.NodeInfo{{Name: "a", Advertise: hs.URL, Handlers: []string{"job"}, Capacity: 100}})
	var tasks []store.Task
	for id := range int64(12) {
		tasks = append(tasks, store.Task{ID: id + 1, Name: "job", ExecutionID: fmt.Sprint("e", id), Status: store.Dispatching,
			Payload: bytes.Repeat([]byte{'x'}, 600)}) // about 800 bytes of JSON each: 12 are over 4 KiB
	}
	r.route(tasks, map[string]bool{local: true})
	r.Wait()
	exec.mu.Lock()
	defer exec.mu.Unlock()
	for _, task := range tasks {
		if exec.taken[task.ID] != 1 {
			t.Errorf("task %d taken %d times, want once", task.ID, exec.taken[task.ID])
		}
	}
	if n := requests.Load(); n < 3 || int(n) == exec.requests {
		t.Errorf("%d requests, %d of them read: want one refused as too large at least, then halves", n, exec.requests)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.nodes["a"]; n.assigned != 0 {
		t.Errorf("after the requests ended: %d tasks counted as picked for a, want 0", n.assigned)
	}
}
