package ax_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax"
)

func TestStopWaitsForRunningHandlers(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	s := newScheduler(t, st, nil)
	started := make(chan struct{})
	s.HandleFunc("slow", func(ctx context.Context, task *ax.Task) error {
		close(started)
		time.Sleep(300 * time.Millisecond) // work that ignores shutdown, within Stop's patience
		return nil
	})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	task, _ := s.Delay(ctx, "slow", "k", 0)
	later, _ := s.Delay(ctx, "slow", "later", 500*time.Millisecond)
	<-started
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Stop(stopCtx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if got, _ := s.Get(ctx, task.ID); got.Status != ax.Succeeded {
		t.Errorf("after Stop the running task is %s, want SUCCEEDED", got.Status)
	}
	if err := s.Start(ctx); !errors.Is(err, ax.ErrNotRunning) || !strings.Contains(err.Error(), "create a new one") {
		t.Errorf("Start after Stop: %v, want ErrNotRunning saying to create a new scheduler", err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Errorf("Stop twice: %v, want nil", err)
	}

	// A new scheduler on the same store resumes the rest.
	s2 := newScheduler(t, st, nil)
	rec := newRecorder()
	s2.Handle("slow", rec)
	start(t, s2)
	waitStatus(t, s2, later.ID, ax.Succeeded, 10*time.Second)
	if runs := rec.runs("later"); len(runs) != 1 || runs[0].Before(later.DueAt) {
		t.Errorf("resumed task runs = %v, want one, not before %v", runs, later.DueAt)
	}
}

func TestStopReleasesHandlersThatOutliveItsContext(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	s := newScheduler(t, st, nil)
	started := make(chan struct{})
	s.HandleFunc("long", func(ctx context.Context, task *ax.Task) error {
		close(started)
		<-ctx.Done() // a well-behaved long handler
		return ctx.Err()
	})
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	task, _ := s.Delay(ctx, "long", "k", 0)
	<-started
	stopCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := s.Stop(stopCtx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop: %v, want DeadlineExceeded", err)
	}
	got := waitStatus(t, s, task.ID, ax.Scheduled, 10*time.Second) // written right after Stop returns
	if got.Status != ax.Scheduled || got.Attempt != 0 || !strings.HasPrefix(got.LastError, "released") {
		t.Fatalf("released task = %s attempt %d error %q; want SCHEDULED, attempt 0, released", got.Status, got.Attempt, got.LastError)
	}

	s2 := newScheduler(t, st, nil)
	s2.HandleFunc("long", func(ctx context.Context, task *ax.Task) error { return nil })
	start(t, s2)
	got = waitStatus(t, s2, task.ID, ax.Succeeded, 10*time.Second)
	execs, _ := s2.Executions(ctx, task.ID)
	if got.Attempt != 0 || len(execs) != 2 {
		t.Errorf("after restart: attempt %d, %d executions; want 0 and 2", got.Attempt, len(execs))
	}
}

func TestHeartbeatsWhileRunning(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, openSQLite(t), func(c *ax.Config) {
		c.HeartbeatInterval = 20 * time.Millisecond
		c.OrphanAfter = time.Second
	})
	release := make(chan struct{})
	s.HandleFunc("long", func(ctx context.Context, task *ax.Task) error { <-release; return nil })
	start(t, s)
	ctx := context.Background()
	task, _ := s.Delay(ctx, "long", "k", 0)
	first := waitStatus(t, s, task.ID, ax.Running, 10*time.Second)
	seen := map[time.Time]bool{first.HeartbeatAt: true}
	waitFor(t, 10*time.Second, "three distinct heartbeats", func() bool {
		got, _ := s.Get(ctx, task.ID)
		seen[got.HeartbeatAt] = true
		return len(seen) >= 3
	})
	close(release)
	got := waitStatus(t, s, task.ID, ax.Succeeded, 10*time.Second)
	execs, _ := s.Executions(ctx, task.ID)
	if len(execs) != 1 || !execs[0].HeartbeatAt.After(execs[0].StartedAt) || got.Attempt != 0 {
		t.Errorf("execution %+v: want one, heartbeat after its start, never orphaned", execs)
	}
}
