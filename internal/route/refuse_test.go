package route

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/remote"
	"github.com/axsched/ax/store"
)

var (
	clusterSecret = []byte("0123456789abcdef0123456789abcdef")
	wrongSecret   = []byte("fedcba9876543210fedcba9876543210")
)

// busyFirst is an executor that answers its first busyFor requests busy for every
// task, then takes every task.
type busyFirst struct {
	mu       sync.Mutex
	busyFor  int
	requests int
	taken    map[int64]int
}

func (e *busyFirst) Take(_ int64, tasks []store.Task, _ func() error) []remote.Outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.requests++
	out := make([]remote.Outcome, len(tasks))
	for i, t := range tasks {
		if e.requests <= e.busyFor {
			out[i] = remote.Busy
			continue
		}
		e.taken[t.ID]++
		out[i] = remote.Accepted
	}
	return out
}

func (e *busyFirst) Load() (int, int) { return 0, 100 }
func (e *busyFirst) Released(_ int64) {}

func (e *busyFirst) Epoch(context.Context) (int64, error) { return 0, nil }

// endpoint serves exec as node name, verifying with secret, and counts the requests
// that reach it, verified or not.
func endpoint(t *testing.T, name string, secret []byte, exec remote.Executor) (string, *atomic.Int64) {
	t.Helper()
	v, err := remote.NewVerifier(secret, remote.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	srv := remote.NewServer("", name, exec, v, slog.New(slog.DiscardHandler))
	var n atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n.Add(1)
		srv.ServeHTTP(w, req)
	}))
	t.Cleanup(hs.Close)
	return hs.URL, &n
}

// handBacks counts the dispatch failures the router's executor reports, by reason.
type handBacks struct {
	mu       sync.Mutex
	byReason map[string]int
	q        *observe.Queue
}

func newHandBacks() *handBacks {
	h := &handBacks{byReason: map[string]int{}}
	h.q = observe.NewQueue(func(e observe.Event) {
		if e.Kind == observe.DispatchFailed {
			h.mu.Lock()
			h.byReason[e.Reason]++
			h.mu.Unlock()
		}
	})
	h.q.Start()
	return h
}

// counts delivers what is queued and returns the counts.
func (h *handBacks) counts() map[string]int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h.q.Close(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.byReason
}

// refusalRouter returns a router, without a local handler, signing with the cluster
// secret and preferring replica a to b (least in flight: a idle, b half full).
func refusalRouter(t *testing.T, h *handBacks, aURL, bURL string) *Router {
	t.Helper()
	signer, err := remote.NewSigner(clusterSecret)
	if err != nil {
		t.Fatal(err)
	}
	r := newObservedRouter(t, h.q)
	r.cfg.Policy, r.cfg.Token, r.cfg.BusyFor = LeastInFlight, 1, 10*time.Second
	r.cfg.LocalHandles = func(string) bool { return false }
	r.cfg.Client = remote.NewClient(signer, 5*time.Second, nil)
	t.Cleanup(r.cfg.Client.Close)
	r.SetNodes([]store.NodeInfo{
		{Name: "a", Advertise: aURL, Handlers: []string{"job"}, Capacity: 100},
		{Name: "b", Advertise: bURL, Handlers: []string{"job"}, Capacity: 100, InFlight: 50},
	})
	return r
}

func jobs(n int) []store.Task {
	var ts []store.Task
	for id := range int64(n) {
		ts = append(ts, store.Task{ID: id + 1, Name: "job", ExecutionID: "e", Status: store.Dispatching})
	}
	return ts
}

// checkTakenOnce fails unless the executor took each task exactly once.
func checkTakenOnce(t *testing.T, name string, e *busyFirst, tasks []store.Task) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, task := range tasks {
		if e.taken[task.ID] != 1 {
			t.Errorf("task %d taken %d times by %s, want once", task.ID, e.taken[task.ID], name)
		}
	}
}

// checkSettled fails unless no task is left waiting and none counts as picked.
func checkSettled(t *testing.T, r *Router) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.busy) != 0 || r.nodes["a"].assigned != 0 || r.nodes["b"].assigned != 0 {
		t.Errorf("after the requests ended: %d tasks waiting, %d and %d picked for a and b; want none", len(r.busy), r.nodes["a"].assigned, r.nodes["b"].assigned)
	}
}

// A replica that refuses a batch (another secret: 401) is sent it once, not in
// halves, and the batch goes on to the next candidate, which takes every task;
// nothing is handed back.
func TestRefusalGoesToTheNextCandidate(t *testing.T) {
	h := newHandBacks()
	aURL, aReqs := endpoint(t, "a", wrongSecret, &busyFirst{taken: map[int64]int{}})
	b := &busyFirst{taken: map[int64]int{}}
	bURL, bReqs := endpoint(t, "b", clusterSecret, b)
	r := refusalRouter(t, h, aURL, bURL)
	tasks := jobs(10)
	r.route(tasks, nil)
	r.Wait()
	if got := h.counts(); len(got) != 0 {
		t.Errorf("handed back: %v, want nothing", got)
	}
	if aReqs.Load() != 1 || bReqs.Load() != 1 {
		t.Errorf("requests: %d to a (refusing), %d to b; want 1 and 1", aReqs.Load(), bReqs.Load())
	}
	checkTakenOnce(t, "b", b, tasks)
	checkSettled(t, r)
}

// A task one candidate answered busy for and the next refused waits in the leader,
// as when every candidate is busy, instead of being handed back as refused: the busy
// replica takes it when it has room.
func TestBusyThenRefusedWaits(t *testing.T) {
	h := newHandBacks()
	a := &busyFirst{busyFor: 1, taken: map[int64]int{}}
	aURL, aReqs := endpoint(t, "a", clusterSecret, a)
	bURL, bReqs := endpoint(t, "b", wrongSecret, &busyFirst{taken: map[int64]int{}})
	r := refusalRouter(t, h, aURL, bURL)
	tasks := jobs(4)
	r.route(tasks, nil)
	r.Wait() // the wait's backoff and the second routing are in the router's group
	if got := h.counts(); len(got) != 0 {
		t.Errorf("handed back: %v, want nothing", got)
	}
	if aReqs.Load() != 2 || bReqs.Load() != 1 {
		t.Errorf("requests: %d to a (busy, then free), %d to b (refusing); want 2 and 1", aReqs.Load(), bReqs.Load())
	}
	checkTakenOnce(t, "a", a, tasks)
	checkSettled(t, r)
}

// When every candidate refuses, each task is handed back once, as refused.
func TestAllRefusedHandsBackOnce(t *testing.T) {
	h := newHandBacks()
	aURL, aReqs := endpoint(t, "a", wrongSecret, &busyFirst{taken: map[int64]int{}})
	bURL, bReqs := endpoint(t, "b", wrongSecret, &busyFirst{taken: map[int64]int{}})
	r := refusalRouter(t, h, aURL, bURL)
	r.route(jobs(3), nil)
	r.Wait()
	if got := h.counts(); len(got) != 1 || got[observe.Refused] != 3 {
		t.Errorf("handed back: %v, want 3 refused", got)
	}
	if aReqs.Load() != 1 || bReqs.Load() != 1 {
		t.Errorf("requests: %d to a, %d to b; want 1 each", aReqs.Load(), bReqs.Load())
	}
	checkSettled(t, r)
}

// A replica that answers 503 (busy with other requests, ErrBusy) took none of the
// batch: its tasks count as busy there, so that when the next candidate refuses them
// they wait in the leader, and the busy replica takes them in a moment, instead of
// being handed back as refused.
func TestBusyEndpointIsBusyNotRefusal(t *testing.T) {
	h := newHandBacks()
	a := &busyFirst{taken: map[int64]int{}}
	v, err := remote.NewVerifier(clusterSecret, remote.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	aSrv := remote.NewServer("", "a", a, v, slog.New(slog.DiscardHandler))
	var answered atomic.Bool
	var aReqs atomic.Int64
	busyOnce := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if answered.CompareAndSwap(false, true) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, remote.ErrBusy.Error(), http.StatusServiceUnavailable)
			return
		}
		aReqs.Add(1)
		aSrv.ServeHTTP(w, req)
	}))
	t.Cleanup(busyOnce.Close)
	bURL, bReqs := endpoint(t, "b", wrongSecret, &busyFirst{taken: map[int64]int{}})
	r := refusalRouter(t, h, busyOnce.URL, bURL)
	tasks := jobs(4)
	r.route(tasks, nil)
	r.Wait()
	if got := h.counts(); len(got) != 0 {
		t.Errorf("handed back: %v, want nothing", got)
	}
	if aReqs.Load() != 1 || bReqs.Load() != 1 {
		t.Errorf("requests: %d reached a after its 503, %d to b (refusing); want 1 and 1", aReqs.Load(), bReqs.Load())
	}
	checkTakenOnce(t, "a", a, tasks)
	checkSettled(t, r)
}

// A batch larger than an executor takes in one request goes in requests of at most
// remote.MaxDispatchTasks tasks, in order.
func TestSplitAtMaxDispatchTasks(t *testing.T) {
	tasks := jobs(2*remote.MaxDispatchTasks + 500)
	parts := split(tasks, maxBatchBytes)
	var next int64 = 1
	for i, p := range parts {
		if len(p) == 0 || len(p) > remote.MaxDispatchTasks {
			t.Errorf("part %d holds %d tasks, want 1 to %d", i, len(p), remote.MaxDispatchTasks)
		}
		for _, task := range p {
			if task.ID != next {
				t.Fatalf("part %d: task %d, want %d", i, task.ID, next)
			}
			next++
		}
	}
	if next != int64(len(tasks))+1 || len(parts) != 3 {
		t.Fatalf("%d parts covering %d tasks, want 3 covering %d", len(parts), next-1, len(tasks))
	}
}
