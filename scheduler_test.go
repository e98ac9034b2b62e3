package ax_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/internal/teststores"
	"github.com/axsched/ax/store/sqlite"
)

// openSQLite returns a fresh SQLite store in the test's temp dir.
func openSQLite(t testing.TB) *sqlite.Store { return teststores.SQLite(t) }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newScheduler returns an unstarted scheduler on st with test-friendly defaults.
func newScheduler(t testing.TB, st ax.Store, mod func(*ax.Config)) *ax.Scheduler {
	t.Helper()
	cfg := ax.Config{Store: st, Logger: quietLogger(), OwnerService: "test"}
	if mod != nil {
		mod(&cfg)
	}
	s, err := ax.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// mustGet returns the task, failing the test if it cannot be read.
func mustGet(t testing.TB, s *ax.Scheduler, id int64) *ax.Task {
	t.Helper()
	got, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%d): %v", id, err)
	}
	return got
}

func start(t testing.TB, s *ax.Scheduler) {
	t.Helper()
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil && !errors.Is(err, ax.ErrNotRunning) {
			t.Errorf("Stop: %v", err)
		}
	})
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitStatus waits until the task reaches want.
func waitStatus(t testing.TB, s *ax.Scheduler, id int64, want ax.Status, timeout time.Duration) *ax.Task {
	t.Helper()
	var last *ax.Task
	waitFor(t, timeout, fmt.Sprintf("task %d to be %s", id, want), func() bool {
		var err error
		last, err = s.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("Get(%d): %v", id, err)
		}
		return last.Status == want
	})
	return last
}

// recorder is a handler that records when each task started.
type recorder struct {
	mu      sync.Mutex
	started map[string][]time.Time // by key
	execs   map[string]int         // by execution id
	err     func(t *ax.Task) error
}

func newRecorder() *recorder {
	return &recorder{started: map[string][]time.Time{}, execs: map[string]int{}}
}

func (r *recorder) Handle(ctx context.Context, t *ax.Task) error {
	now := time.Now()
	r.mu.Lock()
	r.started[t.Key] = append(r.started[t.Key], now)
	r.execs[t.ExecutionID]++
	f := r.err
	r.mu.Unlock()
	if f != nil {
		return f(t)
	}
	return nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, v := range r.started {
		n += len(v)
	}
	return n
}

func (r *recorder) runs(key string) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.started[key]...)
}

func TestDelayRunsOnTimeNeverEarly(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	s := newScheduler(t, st, nil)
	rec := newRecorder()
	s.Handle("job", rec)
	start(t, s)
	ctx := context.Background()
	const n = 200
	tasks := make([]*ax.Task, n)
	for i := range n {
		var err error
		tasks[i], err = s.Delay(ctx, "job", fmt.Sprint(i), time.Duration(i)*5*time.Millisecond, ax.WithPayload([]byte("p")))
		if err != nil {
			t.Fatalf("Delay: %v", err)
		}
	}
	waitFor(t, 10*time.Second, "all tasks to run", func() bool { return rec.count() == n })
	for i, task := range tasks {
		runs := rec.runs(fmt.Sprint(i))
		if len(runs) != 1 {
			t.Fatalf("task %d ran %d times, want 1", i, len(runs))
		}
		if runs[0].Before(task.DueAt) {
			t.Errorf("task %d started %v early", i, task.DueAt.Sub(runs[0]))
		}
		got := waitStatus(t, s, task.ID, ax.Succeeded, 5*time.Second)
		if got.StartedAt.Before(got.DueAt) || got.FinishedAt.IsZero() || got.Attempt != 0 {
			t.Errorf("task %d = %+v: want started after due, finished, attempt 0", i, got)
		}
	}
}
