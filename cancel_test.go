package ax_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store/memory"
)

// Cancelling a RUNNING task stops its handler — at once on the scheduler running it,
// within a heartbeat from another — with ErrCancelled as the context's cause; the
// task ends CANCELLED, not retried, and its execution record says who cancelled it.
func TestCancelRunningTask(t *testing.T) {
	for _, from := range []string{"this scheduler", "another scheduler"} {
		t.Run(from, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := memory.New()
				defer st.Close()
				events := &eventLog{}
				const beat = 2 * time.Second
				s := newScheduler(t, st, func(c *ax.Config) { c.Observer, c.HeartbeatInterval = events, beat })
				started := make(chan struct{})
				stopped := make(chan error, 1)
				s.HandleFunc("export", func(ctx context.Context, task *ax.Task) error {
					close(started)
					<-ctx.Done()
					stopped <- context.Cause(ctx)
					return ctx.Err()
				}, ax.WithMaxRetry(5))
				ctx := context.Background()
				if err := s.Start(ctx); err != nil {
					t.Fatal(err)
				}
				defer s.Stop(ctx)
				task, err := s.Delay(ctx, "export", "customer-7", 0)
				if err != nil {
					t.Fatal(err)
				}
				<-started
				canceller := s
				if from == "another scheduler" {
					canceller = newScheduler(t, st, nil) // not started: an operations node
				}
				asked := time.Now()
				if err := canceller.Cancel(ctx, "export", "customer-7", ax.WithActor("alice")); err != nil {
					t.Fatalf("Cancel of a running task: %v", err)
				}
				if got, err := s.Get(ctx, task.ID); err != nil || got.CancelledBy != "alice" || got.CancelRequestedAt.IsZero() {
					t.Fatalf("after Cancel: %+v, %v; want the request recorded", got, err)
				}
				cause := <-stopped
				took := time.Since(asked)
				if !errors.Is(cause, ax.ErrCancelled) {
					t.Errorf("the handler's context cause = %v, want ErrCancelled", cause)
				}
				if limit := map[string]time.Duration{"this scheduler": 0, "another scheduler": beat}[from]; took > limit {
					t.Errorf("the handler was stopped %v after the cancel, want within %v", took, limit)
				}
				time.Sleep(time.Hour) // long past any retry's backoff
				synctest.Wait()
				got, err := s.Get(ctx, task.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.Status != ax.Cancelled || got.Attempt != 0 {
					t.Errorf("task = %s attempt %d, want CANCELLED and not retried", got.Status, got.Attempt)
				}
				execs, err := s.Executions(ctx, task.ID)
				if err != nil || len(execs) != 1 {
					t.Fatalf("executions = %+v, %v; want one", execs, err)
				}
				if x := execs[0]; x.Status != ax.Cancelled || x.Error != "cancelled by alice: context canceled" {
					t.Errorf("execution = %s %q, want CANCELLED %q", x.Status, x.Error, "cancelled by alice: context canceled")
				}
				if n := events.outcomes(ax.OutcomeCancelled, "export"); n != 1 {
					t.Errorf("%d OutcomeCancelled events, want 1", n)
				}
			})
		})
	}
}

// A handler that ignores its context and succeeds has its success recorded; a
// second Cancel changes nothing; a finished task is not cancellable.
func TestCancelRunningTaskThatSucceeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		s := newScheduler(t, st, nil)
		release := make(chan struct{})
		started := make(chan struct{})
		s.HandleFunc("send", func(ctx context.Context, task *ax.Task) error {
			close(started)
			<-release // deaf to its context
			return nil
		})
		ctx := context.Background()
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer s.Stop(ctx)
		task, err := s.Delay(ctx, "send", "k", 0)
		if err != nil {
			t.Fatal(err)
		}
		<-started
		for _, who := range []string{"alice", "bob"} {
			if err := s.Cancel(ctx, "send", "k", ax.WithActor(who)); err != nil {
				t.Fatalf("Cancel by %s: %v", who, err)
			}
		}
		close(release)
		time.Sleep(time.Second)
		synctest.Wait()
		got, err := s.Get(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != ax.Succeeded || got.CancelledBy != "alice" {
			t.Errorf("task = %s cancelled by %q, want SUCCEEDED, the first request (alice) kept", got.Status, got.CancelledBy)
		}
		err = s.Cancel(ctx, "send", "k")
		var se *ax.TaskStateError
		if !errors.Is(err, ax.ErrNotCancellable) || !errors.As(err, &se) || se.Task.Status != ax.Succeeded {
			t.Errorf("Cancel of a finished task = %v, want ErrNotCancellable holding it", err)
		}
		if err := s.Cancel(ctx, "send", "k", ax.WithActor("")); !errors.Is(err, ax.ErrInvalid) {
			t.Errorf("Cancel with an empty actor = %v, want ErrInvalid", err)
		}
	})
}
