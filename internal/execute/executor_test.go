package execute

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/axsched/ax/internal/clock"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/sqlite"
)

func openSQLite(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "ax.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

// A second delivery of the same execution id must not run the handler again.
func TestDuplicateDeliveryRunsOnce(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	ctx := context.Background()
	ins, err := st.Insert(ctx, []store.NewTask{{Name: "job", Key: "k", DueAt: time.Now().Add(time.Hour), MaxRetry: 5}})
	if err != nil {
		t.Fatal(err)
	}
	task := ins[0].Task
	var runs atomic.Int32
	const concurrency = 4
	ex := New(Config{
		Store: st, Clock: clock.New(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Node: "test", Concurrency: concurrency, HeartbeatInterval: time.Second, MaxDispatchRetries: 3,
		Handler: func(name string) *Handler {
			return &Handler{Run: func(context.Context, *store.Task) error { runs.Add(1); return nil }, Timeout: time.Minute}
		},
	})
	ex.Start()
	defer ex.Stop(ctx)
	claimed, err := st.Trigger(ctx, task.ID, "01900000-0000-7000-8000-000000000001")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // the same execution delivered three times, as a retrying sender would
		ex.Dispatch(nil, []store.Task{*claimed})
	}
	waitFor(t, 10*time.Second, "the task to succeed", func() bool {
		got, err := st.Get(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.Status == store.Succeeded
	})
	// Let the duplicates reach the store: they are answered from the record.
	waitFor(t, 5*time.Second, "the duplicate deliveries to be answered", func() bool {
		ex.mu.Lock()
		defer ex.mu.Unlock()
		return len(ex.pending) == 0 && ex.free == concurrency
	})
	if n := runs.Load(); n != 1 {
		t.Errorf("handler ran %d times for one execution id, want 1", n)
	}
	execs, _ := st.Executions(ctx, task.ID)
	if len(execs) != 1 {
		t.Errorf("%d execution records, want 1", len(execs))
	}
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// lostAnswerStore commits the first Finish and then reports it failed, as a network
// store does when the connection drops during COMMIT.
type lostAnswerStore struct {
	store.Store
	lost atomic.Bool
}

func (s *lostAnswerStore) Finish(ctx context.Context, fence store.Fence, r []store.Finish) ([]bool, error) {
	applied, err := s.Store.Finish(ctx, fence, r)
	if err == nil && s.lost.CompareAndSwap(false, true) {
		return nil, errors.New("connection reset during commit")
	}
	return applied, err
}

// A result whose first write committed unanswered is recognised on the retry as this
// execution's own: the task's key is freed and the loop is told it finished, instead
// of the result being taken for superseded.
func TestFinishAnswerLost(t *testing.T) {
	t.Parallel()
	st := &lostAnswerStore{Store: openSQLite(t)}
	ctx := context.Background()
	ins, err := st.Insert(ctx, []store.NewTask{{Name: "job", Key: "k", DueAt: time.Now().Add(time.Hour), MaxRetry: 5, TaskKey: "account-1", Overlap: store.OverlapQueue}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	freed := make(chan []string, 1)
	var logs bytes.Buffer
	var logMu sync.Mutex
	ex := New(Config{
		Store: st, Clock: clock.New(), Log: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil)),
		Node: "test", Concurrency: 1, HeartbeatInterval: time.Second, MaxDispatchRetries: 3,
		Handler: func(string) *Handler {
			return &Handler{Run: func(context.Context, *store.Task) error { return nil }, Timeout: time.Minute}
		},
		OnFree: func(keys, _ []string) { freed <- keys },
	})
	ex.Start()
	defer ex.Stop(ctx)
	claimed, err := st.Trigger(ctx, ins[0].Task.ID, "01900000-0000-7000-8000-000000000002")
	if err != nil {
		t.Fatal(err)
	}
	ex.Dispatch(&Source{Done: func(n int) { done <- n }}, []store.Task{*claimed})
	select {
	case n := <-done:
		if n != 1 {
			t.Errorf("Source.Done(%d), want 1", n)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the loop was never told the task finished")
	}
	select {
	case keys := <-freed:
		if len(keys) != 1 || keys[0] != "account-1" {
			t.Errorf("keys freed %v, want [account-1]", keys)
		}
	case <-time.After(5 * time.Second):
		t.Error("the task's key was never freed: the committed result was taken for superseded")
	}
	logMu.Lock()
	defer logMu.Unlock()
	if strings.Contains(logs.String(), "superseded") {
		t.Errorf("the lost answer was taken for a superseded result:\n%s", logs.String())
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestFencedStartHandsBack: tasks a leader claimed reach the executor after a newer
// leader recorded itself in the store. The source still says valid (its check came
// before a pause, say), but Start carries the claim's fence and the store refuses it:
// the handler never runs, no execution is recorded, and the task goes back to
// SCHEDULED as a dispatch failure, for the new leader to run.
func TestFencedStartHandsBack(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	ctx := context.Background()
	old, err := st.RaiseFence(ctx, "default", "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	ins, err := st.Insert(ctx, []store.NewTask{{Name: "job", Key: "k", DueAt: time.Now().Add(-time.Second), MaxRetry: 5}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Claim(ctx, old, []store.Claim{{ID: ins[0].Task.ID, ExecutionID: "01900000-0000-7000-8000-000000000003"}})
	if err != nil || len(res.Claimed) != 1 {
		t.Fatalf("Claim = %+v, %v", res, err)
	}
	if _, err := st.RaiseFence(ctx, "default", "b", 1); err != nil {
		t.Fatal(err)
	}
	ex, runs := countingExecutor(t, st)
	ex.Dispatch(&Source{Fence: old}, res.Claimed)
	var got *store.Task
	waitFor(t, 10*time.Second, "the task to be handed back", func() bool {
		got, err = st.Get(ctx, ins[0].Task.ID)
		return err == nil && got.Status == store.Scheduled
	})
	if got.DispatchRetries != 1 || got.Attempt != 0 {
		t.Errorf("handed back with dispatch retries %d, attempt %d; want 1, 0", got.DispatchRetries, got.Attempt)
	}
	if execs, _ := st.Executions(ctx, got.ID); len(execs) != 0 || runs.Load() != 0 {
		t.Errorf("%d executions recorded, handler ran %d times; want none", len(execs), runs.Load())
	}
}

// raiseAfterStart commits the first Start, calls after (a newer leader records itself,
// say), and then reports the Start failed, as when the connection drops during COMMIT.
type raiseAfterStart struct {
	store.Store
	once  atomic.Bool
	calls atomic.Int32
	after func(ctx context.Context, st store.Store, f store.Fence) error
}

func (s *raiseAfterStart) Start(ctx context.Context, f store.Fence, p []store.StartParams) ([]store.StartResult, error) {
	s.calls.Add(1)
	res, err := s.Store.Start(ctx, f, p)
	if err == nil && s.once.CompareAndSwap(false, true) {
		if err := s.after(ctx, s.Store, f); err != nil {
			return nil, err
		}
		return nil, errors.New("connection reset during commit")
	}
	return res, err
}

// TestFencedRetryKeepsEarlierStart: a Start commits unanswered, a newer leader records
// itself, and the retry is refused as fenced. The execution the first attempt recorded
// is this executor's own, started before the raise: its handler runs (once), rather
// than the task being left RUNNING with no handler until it is taken for an orphan.
func TestFencedRetryKeepsEarlierStart(t *testing.T) {
	t.Parallel()
	testRetryKeepsEarlierStart(t, 2, func(*atomic.Bool) func(context.Context, store.Store, store.Fence) error {
		return func(ctx context.Context, st store.Store, f store.Fence) error {
			_, err := st.RaiseFence(ctx, f.Namespace, "newer", f.Token+1)
			return err
		}
	})
}

// TestLeaseEndedRetryKeepsEarlierStart: as above, but what the executor learns before
// its retry is that the lease ended. The execution the unanswered attempt recorded
// still runs here, rather than being handed back (a no-op: it is RUNNING) and left to
// orphan recovery.
func TestLeaseEndedRetryKeepsEarlierStart(t *testing.T) {
	t.Parallel()
	testRetryKeepsEarlierStart(t, 1, func(ended *atomic.Bool) func(context.Context, store.Store, store.Fence) error {
		return func(context.Context, store.Store, store.Fence) error { ended.Store(true); return nil }
	})
}

// TestUnconfirmedEarlierStartDoesNotRun: as TestFencedRetryKeepsEarlierStart, but the
// store refuses every write after the raise, as a demoted primary does: the execution
// the unanswered attempt recorded is read back as this executor's, but no write
// confirms it, so its handler does not run; the task is left RUNNING to orphan
// recovery, which the store's real primary decides.
func TestUnconfirmedEarlierStartDoesNotRun(t *testing.T) {
	t.Parallel()
	inner := openSQLite(t)
	raise := &raiseAfterStart{Store: inner, after: func(ctx context.Context, st store.Store, f store.Fence) error {
		_, err := st.RaiseFence(ctx, f.Namespace, "newer", f.Token+1)
		return err
	}}
	st := &refusingBeats{Store: raise, refuse: 1 << 30}
	ctx := context.Background()
	fence, id, claimed := claimOne(t, st, "01900000-0000-7000-8000-000000000005")
	ex, runs := startCounting(st)
	ex.Dispatch(&Source{Fence: fence}, claimed)
	waitFor(t, 10*time.Second, "the retried start to ask for a confirmation", func() bool { return raise.calls.Load() == 2 && st.calls.Load() > 0 })
	ex.Stop(ctx) // the starter has ended: what it launched is running or done
	if n := runs.Load(); n != 0 {
		t.Errorf("handler ran %d times, want none", n)
	}
	if got, err := inner.Get(ctx, id); err != nil || got.Status != store.Running {
		t.Errorf("the task is %v (%v), want RUNNING, left to orphan recovery", got.Status, err)
	}
}

// claimOne records "a" as the leader of epoch 1 in st, inserts a task due, and claims
// it with execution id exec under that fence: it returns the fence, the task's id and
// the claimed task.
func claimOne(t *testing.T, st store.Store, exec string) (store.Fence, int64, []store.Task) {
	t.Helper()
	ctx := context.Background()
	fence, err := st.RaiseFence(ctx, "default", "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	ins, err := st.Insert(ctx, []store.NewTask{{Name: "job", Key: "k", DueAt: time.Now().Add(-time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Claim(ctx, fence, []store.Claim{{ID: ins[0].Task.ID, ExecutionID: exec}})
	if err != nil || len(res.Claimed) != 1 {
		t.Fatalf("Claim = %+v, %v", res, err)
	}
	return fence, ins[0].Task.ID, res.Claimed
}

// testRetryKeepsEarlierStart runs one task whose first Start commits unanswered and is
// followed by what after(ended) does; ended, once set, makes the task's source invalid.
// starts is how many Start calls the executor makes: the unanswered one, then a
// retry refused as fenced (2), or none once the lease is seen ended (1).
func testRetryKeepsEarlierStart(t *testing.T, starts int32, after func(ended *atomic.Bool) func(context.Context, store.Store, store.Fence) error) {
	inner := openSQLite(t)
	var ended atomic.Bool
	st := &raiseAfterStart{Store: inner, after: after(&ended)}
	ctx := context.Background()
	fence, id, claimed := claimOne(t, st, "01900000-0000-7000-8000-000000000004")
	ex, runs := countingExecutor(t, st)
	valid := func() error {
		if ended.Load() {
			return errors.New("lease ended")
		}
		return nil
	}
	ex.Dispatch(&Source{Fence: fence, Valid: valid}, claimed)
	waitFor(t, 10*time.Second, "the task to succeed", func() bool {
		got, err := st.Get(ctx, id)
		return err == nil && got.Status == store.Succeeded
	})
	if n := runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want once", n)
	}
	if n := st.calls.Load(); !st.once.Load() || n != starts {
		t.Errorf("%d Start calls (the first answered as failed: %v), want %d", n, st.once.Load(), starts)
	}
}

// countingExecutor starts an executor of two slots on st whose handler counts its runs;
// it stops when the test ends.
func countingExecutor(t *testing.T, st store.Store) (*Executor, *atomic.Int32) {
	ex, runs := startCounting(st)
	t.Cleanup(func() { ex.Stop(context.Background()) })
	return ex, runs
}

// startCounting is countingExecutor, stopped by the caller.
func startCounting(st store.Store) (*Executor, *atomic.Int32) {
	runs := new(atomic.Int32)
	ex := New(Config{
		Store: st, Clock: clock.New(), Log: slog.New(slog.DiscardHandler),
		Node: "test", Concurrency: 2, HeartbeatInterval: time.Second, MaxDispatchRetries: 3,
		Handler: func(string) *Handler {
			return &Handler{Run: func(context.Context, *store.Task) error { runs.Add(1); return nil }, Timeout: time.Minute}
		},
	})
	ex.Start()
	return ex, runs
}
