package ax_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/remote"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/memory"
)

// endpointSecret is the cluster secret of the endpoint tests.
var endpointSecret = []byte("endpoint-test-secret-0123456789abcdef")

// probed is a started scheduler whose executor endpoint a test posts to directly:
// node "exec" of the default namespace, with a handler for "a" only, which records
// the names of the tasks it ran.
type probed struct {
	s      *ax.Scheduler
	st     *memory.Store
	h      http.Handler
	signer *remote.Signer

	mu  sync.Mutex
	ran []string // the stored names of the tasks handler "a" ran
}

func newProbed(t testing.TB) *probed {
	t.Helper()
	p := &probed{st: memory.New()}
	t.Cleanup(func() { p.st.Close() })
	no := false
	p.s = newScheduler(t, p.st, func(c *ax.Config) {
		c.Node = "exec"
		c.CanLead = &no // it runs only what it is handed
		c.Cluster.Secret = endpointSecret
	})
	p.s.HandleFunc("a", func(ctx context.Context, task *ax.Task) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.ran = append(p.ran, task.Name)
		return nil
	})
	if err := p.s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.s.Stop(context.Background()) })
	p.h = p.s.ExecutorHandler()
	var err error
	if p.signer, err = remote.NewSigner(endpointSecret); err != nil {
		t.Fatal(err)
	}
	return p
}

// claimed inserts a task named name and claims it, as a leader would, under a new
// execution id: it is DISPATCHING, waiting for an executor to start it.
func (p *probed) claimed(t testing.TB, name, key string) store.Task {
	t.Helper()
	ctx := context.Background()
	ins, err := p.st.Insert(ctx, []store.NewTask{{Name: name, Key: key, DueAt: time.Now(), MaxRetry: 1}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.st.Claim(ctx, store.Fence{}, []store.Claim{{ID: ins[0].Task.ID, ExecutionID: "exec-" + key}})
	if err != nil || len(res.Claimed) != 1 {
		t.Fatalf("Claim = %+v, %v", res, err)
	}
	return res.Claimed[0]
}

// post sends body to path, signed under token, and returns the answer.
func (p *probed) post(t testing.TB, path string, token int64, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	if err := p.signer.Sign(req, body, token, time.Now()); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, req)
	return rec
}

// dispatch posts a well-formed dispatch of tasks under token 1.
func (p *probed) dispatch(t testing.TB, tasks ...store.Task) *httptest.ResponseRecorder {
	t.Helper()
	body, err := json.Marshal(remote.DispatchRequest{Namespace: ax.DefaultNamespace, Node: "exec", Token: 1, Tasks: tasks})
	if err != nil {
		t.Fatal(err)
	}
	return p.post(t, remote.DispatchPath, 1, body)
}

// serving checks that the endpoint still answers and that a well-formed dispatch of
// a new task still runs it.
func (p *probed) serving(t testing.TB, key string) {
	t.Helper()
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, remote.HealthPath, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("health: %d %s", rec.Code, rec.Body)
	}
	task := p.claimed(t, "a", key)
	if rec := p.dispatch(t, task); rec.Code != http.StatusOK {
		t.Fatalf("a well-formed dispatch: %d %s", rec.Code, rec.Body)
	}
	waitFor(t, 10*time.Second, "the dispatched task to succeed", func() bool {
		got, err := p.st.Get(context.Background(), task.ID)
		return err == nil && got.Status == store.Succeeded
	})
}

// TestDispatchNamingAnotherHandler: a signed dispatch whose task names a handler this
// replica has ("a") while the stored task is another ("b", no handler here) is refused
// for that task: it is not started, and the process goes on. Before, the executor
// started it, looked up the stored name's handler, found none and panicked in a bare
// goroutine, killing the process.
func TestDispatchNamingAnotherHandler(t *testing.T) {
	t.Parallel()
	p := newProbed(t)
	b := p.claimed(t, "b", "forged")
	forged := b
	forged.Name = "a"
	rec := p.dispatch(t, forged)
	if rec.Code != http.StatusOK {
		t.Fatalf("dispatch: %d %s", rec.Code, rec.Body)
	}
	p.serving(t, "after") // the forged task's start was decided before this one's
	got, err := p.st.Get(context.Background(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	execs, err := p.st.Executions(context.Background(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.Dispatching || got.ExecutionID != b.ExecutionID || len(execs) != 0 {
		t.Fatalf("task b after a dispatch naming handler a: %s with execution %q, %d executions recorded; want DISPATCHING as claimed, none recorded",
			got.Status, got.ExecutionID, len(execs))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, name := range p.ran {
		if name != "a" {
			t.Errorf("handler a ran task %q", name)
		}
	}
}

// TestDispatchOfAnotherNamespacesTask: a replica of the default namespace, handed the id
// and execution id of a task of namespace "b" (with its own cluster secret), never
// starts it: the start checks the task's namespace in the store.
func TestDispatchOfAnotherNamespacesTask(t *testing.T) {
	t.Parallel()
	p := newProbed(t)
	view, err := p.st.InNamespace("b")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ins, err := view.Insert(ctx, []store.NewTask{{Name: "a", Key: "other", DueAt: time.Now(), MaxRetry: 1}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := view.Claim(ctx, store.Fence{Namespace: "b"}, []store.Claim{{ID: ins[0].Task.ID, ExecutionID: "exec-of-b"}})
	if err != nil || len(res.Claimed) != 1 {
		t.Fatalf("Claim in namespace b = %+v, %v", res, err)
	}
	if rec := p.dispatch(t, res.Claimed[0]); rec.Code != http.StatusOK {
		t.Fatalf("dispatch: %d %s", rec.Code, rec.Body)
	}
	p.serving(t, "after") // the other task's start was decided before this one's
	got, err := view.Get(ctx, ins[0].Task.ID)
	if err != nil {
		t.Fatal(err)
	}
	execs, err := view.Executions(ctx, got.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.Dispatching || len(execs) != 0 {
		t.Fatalf("namespace b's task after a dispatch to the default namespace's replica: %s, %d executions; want DISPATCHING, none", got.Status, len(execs))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ran) != 1 {
		t.Fatalf("handler a ran %d tasks, want 1 (the one of its own namespace)", len(p.ran))
	}
}

// TestEndpointSurvivesMutatedDispatches drives the dispatch endpoint of a running
// scheduler with signed, well-formed dispatches whose tasks are mutated (names, ids,
// execution ids, timeouts, retries), then checks that the process still serves, that
// handler "a" ran no task of another name, and that no task claimed for another name
// was started. FuzzExecutorEndpoint explores malformed bodies too, from raw bytes.
func TestEndpointSurvivesMutatedDispatches(t *testing.T) {
	t.Parallel()
	p := newProbed(t)
	rng := rand.New(rand.NewPCG(1, 2))
	var claimedB []store.Task
	taken := 0
	for i := range 300 {
		a := p.claimed(t, "a", fmt.Sprint("a", i))
		b := p.claimed(t, "b", fmt.Sprint("b", i))
		claimedB = append(claimedB, b)
		if p.dispatch(t, mutatedTasks(rng, a, b)...).Code == http.StatusOK {
			taken++
		}
	}
	if taken < 100 {
		t.Fatalf("%d of 300 mutated dispatches reached the executor, want at least 100: the test tries the JSON reader, not the start", taken)
	}
	p.serving(t, "after")
	p.mu.Lock()
	for _, name := range p.ran {
		if name != "a" {
			t.Errorf("handler a ran task %q", name)
		}
	}
	p.mu.Unlock()
	for _, b := range claimedB {
		execs, err := p.st.Executions(context.Background(), b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(execs) != 0 {
			t.Errorf("task %d, named b, has executions %+v: started here, where no handler has its name", b.ID, execs)
		}
	}
}

// mutatedTasks returns a and b (DISPATCHING tasks named "a" and "b"), each changed in
// one of many wrong ways, or left as it is.
func mutatedTasks(rng *rand.Rand, a, b store.Task) []store.Task {
	pick := func(vs ...string) string { return vs[rng.IntN(len(vs))] }
	tasks := []store.Task{a, b}
	for i := range tasks {
		switch rng.IntN(6) {
		case 0:
			tasks[i].Name = pick("a", "b", "", "c", "a\x00", strings.Repeat("a", 300))
		case 1:
			tasks[i].ExecutionID = pick(a.ExecutionID, b.ExecutionID, "", "x", "\x00", strings.Repeat("e", 200))
		case 2:
			tasks[i].ID = []int64{0, -1, a.ID, b.ID, 1 << 62}[rng.IntN(5)]
		case 3:
			tasks[i].Timeout = time.Duration(rng.Int64()) - time.Duration(rng.Int64())
			tasks[i].Attempt, tasks[i].MaxRetry = -rng.IntN(5), rng.IntN(3)-1
		case 4:
			tasks[i].Backoff = []time.Duration{-1, 1 << 62}
			tasks[i].DispatchRetries = rng.IntN(1 << 20)
		}
	}
	return tasks
}

// mutatedDispatch returns a dispatch body of mutatedTasks, its envelope and its bytes
// changed too, in one of many wrong ways: seeds for FuzzExecutorEndpoint.
func mutatedDispatch(rng *rand.Rand, a, b store.Task) []byte {
	pick := func(vs ...string) string { return vs[rng.IntN(len(vs))] }
	dr := remote.DispatchRequest{Namespace: pick(ax.DefaultNamespace, ax.DefaultNamespace, "other", ""),
		Node: pick("exec", "exec", "exec", "other"), Token: []int64{1, 1, 2, 0, -1}[rng.IntN(5)], Tasks: mutatedTasks(rng, a, b)}
	body, _ := json.Marshal(dr)
	switch rng.IntN(8) {
	case 0: // a byte flipped
		body[rng.IntN(len(body))] ^= byte(1 + rng.IntN(255))
	case 1: // cut short
		body = body[:rng.IntN(len(body))]
	case 2: // a member given twice, or in another case
		body = bytes.Replace(body, []byte(`"Name":`), []byte(pick(`"Name":"a","Name":`, `"name":`, `"NAME":`)), 1)
	case 3: // trailing data, or another shape
		body = append(body, pick(`{}`, ` x`, `[]`)...)
	case 4:
		body = []byte(pick(`null`, `[]`, `{"tasks":null}`, `{"tasks":[null]}`, `{"tasks":[{"ID":"1"}]}`, `"x"`, ``))
	}
	return body
}

// FuzzExecutorEndpoint posts each input, signed with the cluster secret, to the dispatch
// and release endpoints of one running scheduler: none may take the process down, and
// it must still serve afterwards.
func FuzzExecutorEndpoint(f *testing.F) {
	p := newProbed(f)
	seedA, seedB := p.claimed(f, "a", "seed-a"), p.claimed(f, "b", "seed-b")
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		f.Add(mutatedDispatch(rng, seedA, seedB), false)
	}
	f.Add([]byte(`{"namespace":"default","node":"exec","token":1}`), true)
	n := 0
	f.Fuzz(func(t *testing.T, body []byte, released bool) {
		path := remote.DispatchPath
		if released {
			path = remote.ReleasedPath
		}
		p.post(t, path, 1, body)
		if n++; n%500 == 0 {
			p.serving(t, fmt.Sprint("serving-", n))
		}
	})
}
