package route

import (
	"fmt"
	"testing"

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
	r := newRouter(t, true)
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

// Least-in-flight takes the candidate with the fewest running per slot, counting the
// tasks sent to it since its last report; a tie goes to the first in order.
func TestPickLeastInFlight(t *testing.T) {
	r := newRouter(t, true)
	r.cfg.Policy = LeastInFlight
	r.SetNodes(replicas)
	job := &store.Task{Name: "job"}
	if c, _ := r.pick(job, nil); c != local {
		t.Errorf("pick = %q, want this replica (no task running of its 4 slots)", c)
	}
	// a runs 3 of 4, b 1 of 4: b twice (then 3 of 4 with those sent), then the tie to a.
	if got := fmt.Sprint(picks(t, r, job, map[string]bool{local: true}, 3)); got != "[b b a]" {
		t.Errorf("picks without local = %s, want [b b a]", got)
	}
	// An executor's answer replaces its load and what was sent to it since: a now
	// runs 0 of 8, so it is the least loaded until 6 more were sent to it (6/8 = b's 3/4).
	r.report("a", &remote.DispatchResponse{Running: 0, Free: 8})
	if got := fmt.Sprint(picks(t, r, job, map[string]bool{local: true}, 7)); got != "[a a a a a a a]" {
		t.Errorf("after a's answer: picks = %s, want a seven times (the seventh a tie at 6/8 = 3/4, to a)", got)
	}
	if got, _ := r.pick(job, map[string]bool{local: true}); got != "b" {
		t.Errorf("with 7 of 8 sent to a: pick = %q, want b", got)
	}
}

// Consistent hashing sends a key to the same candidate for as long as the set of
// candidates stands, spreads keys over all of them, and when a candidate leaves, moves
// only the keys that were on it. The task key, when set, is the key.
func TestPickConsistentHash(t *testing.T) {
	r := newRouter(t, true)
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
	moved := 0
	for key, was := range before {
		now, _ := r.pick(&store.Task{Name: "job", Key: key}, nil)
		switch {
		case was == "b" && now == "b":
			t.Errorf("key %s still goes to b, which left", key)
		case was == "b":
			moved++
		case now != was:
			t.Errorf("key %s moved from %q to %q though %q is still here", key, was, now, was)
		}
	}
	if moved != count["b"] {
		t.Errorf("%d keys moved, want b's %d", moved, count["b"])
	}

	// Tasks of one task key go together, whatever their business keys.
	first, _ := r.pick(&store.Task{Name: "job", Key: "x", TaskKey: "tenant-7"}, nil)
	for i := range 20 {
		if c, _ := r.pick(&store.Task{Name: "job", Key: fmt.Sprint(i), TaskKey: "tenant-7"}, nil); c != first {
			t.Fatalf("task key tenant-7: key %d went to %q, the first to %q", i, c, first)
		}
	}
}
