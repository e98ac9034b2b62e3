package ax_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/axsched/ax"
)

func TestDefaultBackoff(t *testing.T) {
	t.Parallel()
	want := []time.Duration{5 * time.Second, 25 * time.Second, 125 * time.Second, 625 * time.Second, 3125 * time.Second}
	for i, w := range want {
		if got := ax.DefaultBackoff(i + 1); got != w {
			t.Errorf("DefaultBackoff(%d) = %v, want %v", i+1, got, w)
		}
	}
	if got := ax.DefaultBackoff(50); got != 24*time.Hour {
		t.Errorf("DefaultBackoff(50) = %v, want the 24h cap", got)
	}
}

func fastRetry(int) time.Duration { return 10 * time.Millisecond }

func TestRetriesUntilFailed(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	s := newScheduler(t, st, nil)
	rec := newRecorder()
	rec.err = func(t *ax.Task) error { return errors.New("boom " + t.ExecutionID) }
	s.Handle("flaky", rec, ax.WithMaxRetry(3), ax.WithBackoff(fastRetry))
	start(t, s)
	ctx := context.Background()
	task, err := s.Delay(ctx, "flaky", "k", 0)
	if err != nil {
		t.Fatal(err)
	}
	if task.MaxRetry != 3 {
		t.Fatalf("MaxRetry = %d, want the handler's 3", task.MaxRetry)
	}
	got := waitStatus(t, s, task.ID, ax.Failed, 10*time.Second)
	if got.Attempt != 3 || got.DispatchRetries != 0 {
		t.Errorf("Attempt, DispatchRetries = %d, %d, want 3, 0", got.Attempt, got.DispatchRetries)
	}
	if want := "boom " + got.ExecutionID; got.LastError != want {
		t.Errorf("LastError = %q, want %q", got.LastError, want)
	}
	execs, err := s.Executions(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(execs) != 4 {
		t.Fatalf("%d executions, want 4", len(execs))
	}
	seen := map[string]bool{}
	for i, e := range execs {
		id, err := uuid.Parse(e.ID)
		if err != nil || id.Version() != 7 {
			t.Errorf("execution %d id %q is not a UUIDv7 (%v)", i, e.ID, err)
		}
		if seen[e.ID] {
			t.Errorf("execution id %s used twice", e.ID)
		}
		seen[e.ID] = true
		if e.Attempt != i || e.Status != ax.Failed || e.Error != "boom "+e.ID || e.FinishedAt.IsZero() || e.TaskID != task.ID {
			t.Errorf("execution %d = %+v, want attempt %d, FAILED with its own error", i, e, i)
		}
	}
	if n := rec.count(); n != 4 {
		t.Errorf("handler ran %d times, want 4", n)
	}
}

func TestRetrySucceedsAndPerTaskOptionsWin(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	s := newScheduler(t, st, nil)
	rec := newRecorder()
	rec.err = func(t *ax.Task) error {
		if t.Attempt < 2 {
			return errors.New("transient")
		}
		return nil
	}
	s.Handle("job", rec, ax.WithMaxRetry(0)) // the handler's default would fail at once
	start(t, s)
	task, err := s.Delay(context.Background(), "job", "k", 0, ax.WithMaxRetry(4), ax.WithBackoff(fastRetry))
	if err != nil {
		t.Fatal(err)
	}
	if len(task.Backoff) != 4 || task.Backoff[0] != 10*time.Millisecond {
		t.Errorf("stored Backoff = %v, want four 10ms delays", task.Backoff)
	}
	got := waitStatus(t, s, task.ID, ax.Succeeded, 10*time.Second)
	if got.Attempt != 2 || got.LastError != "transient" {
		t.Errorf("Attempt, LastError = %d, %q, want 2, %q", got.Attempt, got.LastError, "transient")
	}
}

func TestPanicIsABusinessFailureWithStack(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	s := newScheduler(t, st, nil)
	s.HandleFunc("panicky", func(ctx context.Context, t *ax.Task) error { panic("kaboom") }, ax.WithMaxRetry(0))
	start(t, s)
	task, err := s.Delay(context.Background(), "panicky", "k", 0)
	if err != nil {
		t.Fatal(err)
	}
	got := waitStatus(t, s, task.ID, ax.Failed, 10*time.Second)
	if !strings.HasPrefix(got.LastError, "panic: kaboom") || !strings.Contains(got.LastError, "retry_test.go") {
		t.Errorf("LastError = %q, want the panic value and a stack through the handler", got.LastError)
	}
}

func TestTimeoutIsABusinessFailureEvenIfTheHandlerHangs(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	s := newScheduler(t, st, nil)
	release := make(chan struct{})
	s.HandleFunc("stuck", func(ctx context.Context, t *ax.Task) error {
		<-release // ignores its context
		return nil
	}, ax.WithMaxRetry(0), ax.WithTimeout(50*time.Millisecond))
	start(t, s)
	t.Cleanup(func() { close(release) }) // before Stop, which waits for the handler
	task, err := s.Delay(context.Background(), "stuck", "k", 0)
	if err != nil {
		t.Fatal(err)
	}
	got := waitStatus(t, s, task.ID, ax.Failed, 10*time.Second)
	if !strings.Contains(got.LastError, "timeout") {
		t.Errorf("LastError = %q, want a timeout", got.LastError)
	}
}

func TestUnknownHandlerIsADispatchFailure(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	s := newScheduler(t, st, func(c *ax.Config) { c.MaxDispatchRetries = 2 })
	start(t, s)
	task, err := s.Delay(context.Background(), "nobody.handles.this", "k", 0)
	if err != nil {
		t.Fatal(err)
	}
	got := waitStatus(t, s, task.ID, ax.Failed, 10*time.Second)
	if got.Attempt != 0 || got.DispatchRetries != 3 || !strings.Contains(got.LastError, "no executor has a handler") {
		t.Errorf("task = attempt %d, dispatch retries %d, error %q; want 0, 3, no handler", got.Attempt, got.DispatchRetries, got.LastError)
	}
	if execs, _ := s.Executions(context.Background(), task.ID); len(execs) != 0 {
		t.Errorf("%d executions recorded, want none", len(execs))
	}
}
