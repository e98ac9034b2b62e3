package ax_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store/memory"
)

// Reschedule moves a waiting task's due time in place, later or earlier, and the
// running scheduler follows: the task runs once, at its new time, never before it.
// The refusals hold the task as it is.
func TestReschedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		s := newScheduler(t, st, nil)
		rec := newRecorder()
		s.Handle("order.close.timeout", rec)
		start(t, s)
		defer s.Stop(context.Background())
		ctx := context.Background()
		t0 := time.Now()
		later, err := s.Delay(ctx, "order.close.timeout", "later", 30*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Delay(ctx, "order.close.timeout", "sooner", 30*time.Minute); err != nil {
			t.Fatal(err)
		}
		moved, err := s.Reschedule(ctx, "order.close.timeout", "later", t0.Add(40*time.Minute))
		if err != nil || moved.ID != later.ID || !moved.DueAt.Equal(t0.Add(40*time.Minute)) {
			t.Fatalf("Reschedule(later) = %+v, %v; want task %d due at +40m", moved, err, later.ID)
		}
		if _, err := s.Reschedule(ctx, "order.close.timeout", "sooner", t0.Add(10*time.Minute)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(35 * time.Minute)
		synctest.Wait()
		if runs := rec.runs("later"); len(runs) != 0 {
			t.Fatalf("the task moved to +40m ran at %v", runs)
		}
		if runs := rec.runs("sooner"); len(runs) != 1 || runs[0].Before(t0.Add(10*time.Minute)) || runs[0].After(t0.Add(10*time.Minute+time.Second)) {
			t.Fatalf("the task moved to +10m ran at %v, want once, just after +10m", runs)
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if runs := rec.runs("later"); len(runs) != 1 || runs[0].Before(t0.Add(40*time.Minute)) {
			t.Fatalf("the task moved to +40m ran at %v, want once, at or after +40m", runs)
		}
		_, err = s.Reschedule(ctx, "order.close.timeout", "later", t0.Add(time.Hour))
		var tse *ax.TaskStateError
		if !errors.Is(err, ax.ErrNotReschedulable) || !errors.As(err, &tse) || tse.Task.Status != ax.Succeeded {
			t.Errorf("Reschedule of a finished task: %v, want ErrNotReschedulable holding it", err)
		}
		if _, err := s.Reschedule(ctx, "order.close.timeout", "none", t0.Add(time.Hour)); !errors.Is(err, ax.ErrNotFound) {
			t.Errorf("Reschedule of a missing task: %v, want ErrNotFound", err)
		}
		if _, err := s.Reschedule(ctx, "order.close.timeout", "later", time.Time{}); !errors.Is(err, ax.ErrInvalid) {
			t.Errorf("Reschedule to the zero time: %v, want ErrInvalid", err)
		}
	})
}

// Retry gives a FAILED task a fresh retry budget and runs it at once; its failed
// execution stays on record.
func TestRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		s := newScheduler(t, st, nil)
		rec := newRecorder()
		var fail atomic.Bool
		fail.Store(true)
		rec.err = func(*ax.Task) error {
			if fail.Load() {
				return errors.New("the payment service is down")
			}
			return nil
		}
		s.Handle("charge", rec, ax.WithMaxRetry(1), ax.WithBackoff(func(int) time.Duration { return time.Second }))
		start(t, s)
		defer s.Stop(context.Background())
		ctx := context.Background()
		task, err := s.Delay(ctx, "charge", "order-7", 0)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		failed := mustGet(t, s, task.ID)
		if failed.Status != ax.Failed || failed.Attempt != 1 {
			t.Fatalf("after two failed runs: %s, attempt %d; want FAILED, attempt 1", failed.Status, failed.Attempt)
		}
		if _, err := s.Retry(ctx, task.ID+1); !errors.Is(err, ax.ErrNotFound) {
			t.Errorf("Retry of a missing task: %v, want ErrNotFound", err)
		}
		fail.Store(false)
		retried, err := s.Retry(ctx, task.ID)
		if err != nil || retried.Status != ax.Scheduled || retried.Attempt != 0 || retried.ID != task.ID {
			t.Fatalf("Retry = %+v, %v; want task %d SCHEDULED, attempt 0", retried, err, task.ID)
		}
		at := time.Now()
		time.Sleep(time.Second)
		synctest.Wait()
		done := mustGet(t, s, task.ID)
		execs, err := s.Executions(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if runs := rec.runs("order-7"); done.Status != ax.Succeeded || len(execs) != 3 || len(runs) != 3 || runs[2].Sub(at) > 50*time.Millisecond {
			t.Errorf("after Retry: %s, %d executions, runs %v; want SUCCEEDED, 3 executions, the third run at once", done.Status, len(execs), runs)
		}
		_, err = s.Retry(ctx, task.ID)
		var tse *ax.TaskStateError
		if !errors.Is(err, ax.ErrNotRetryable) || !errors.As(err, &tse) || tse.Task.Status != ax.Succeeded {
			t.Errorf("Retry of a SUCCEEDED task: %v, want ErrNotRetryable holding it", err)
		}
	})
}

// Reschedule and Retry made through one scheduler reach another on the same
// database within its refill interval: the moved task runs at its new time, the
// retried one at once, each once.
func TestActionsReachOtherSchedulers(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"sqlite", "postgres/pgx.Tx", "mysql"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, _ := txStores[name](t)
			runner := newScheduler(t, st, func(c *ax.Config) { c.RefillInterval = 200 * time.Millisecond })
			rec := newRecorder()
			var failed atomic.Bool
			rec.err = func(task *ax.Task) error {
				if task.Key == "retried" && !failed.Swap(true) {
					return errors.New("down")
				}
				return nil
			}
			runner.Handle("job", rec, ax.WithMaxRetry(0))
			start(t, runner)
			operator := newScheduler(t, st, nil) // not started: it only writes
			ctx := context.Background()
			retried, err := operator.Delay(ctx, "job", "retried", 0, ax.WithMaxRetry(0)) // the operator has no handler: its defaults are not the runner's
			if err != nil {
				t.Fatal(err)
			}
			waitStatus(t, runner, retried.ID, ax.Failed, 10*time.Second)
			moved, err := operator.Delay(ctx, "job", "moved", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			at := time.Now().Add(500 * time.Millisecond)
			if moved, err = operator.Reschedule(ctx, "job", "moved", at); err != nil {
				t.Fatal(err)
			}
			if _, err := operator.Retry(ctx, retried.ID); err != nil {
				t.Fatal(err)
			}
			waitStatus(t, runner, retried.ID, ax.Succeeded, 10*time.Second)
			waitStatus(t, runner, moved.ID, ax.Succeeded, 10*time.Second)
			if runs := rec.runs("moved"); len(runs) != 1 || runs[0].Before(moved.DueAt) {
				t.Errorf("the rescheduled task ran at %v, want once, at or after %v", runs, moved.DueAt)
			}
			if runs := rec.runs("retried"); len(runs) != 2 {
				t.Errorf("the retried task ran %d times, want twice (failed, then retried)", len(runs))
			}
		})
	}
}

// TriggerSchedule fires a schedule once, now, as an ordinary occurrence marked
// manual, under the schedule's overlap policy; its slots are left alone.
func TestTriggerSchedule(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, openSQLite(t), nil)
	release := make(chan struct{})
	var runs atomic.Int32
	s.HandleFunc("report", func(ctx context.Context, task *ax.Task) error {
		runs.Add(1)
		<-release
		return nil
	}, ax.WithMaxRetry(0))
	if err := s.Every("report", time.Hour, ax.WithPayload([]byte("daily"))); err != nil {
		t.Fatal(err)
	}
	start(t, s)
	ctx := context.Background()
	before, err := s.Schedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.TriggerSchedule(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.Key, "manual/") || first.TaskKey != "report" || first.Overlap != ax.OverlapSkip ||
		string(first.Payload) != "daily" || first.TriggeredAt.IsZero() || first.KeyHold != ax.HoldForever {
		t.Fatalf("the manual occurrence = %+v; want key manual/…, task key report, skip, the payload, TriggeredAt, held forever", first)
	}
	waitStatus(t, s, first.ID, ax.Running, 10*time.Second)
	// While it runs, a second one is skipped: the schedule's overlap policy.
	second, err := s.TriggerSchedule(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	if got := waitStatus(t, s, second.ID, ax.Skipped, 10*time.Second); !strings.Contains(got.LastError, "report") {
		t.Errorf("the second manual occurrence: %+v, want SKIPPED naming the key", got)
	}
	close(release)
	waitStatus(t, s, first.ID, ax.Succeeded, 10*time.Second)
	after, err := s.Schedules(ctx)
	if err != nil || !after[0].NextFireAt.Equal(before[0].NextFireAt) {
		t.Errorf("the schedule's next slot moved: %v → %v (%v)", before[0].NextFireAt, after[0].NextFireAt, err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want once", n)
	}
	if _, err := s.TriggerSchedule(ctx, "nightly"); !errors.Is(err, ax.ErrNotFound) {
		t.Errorf("TriggerSchedule of an unknown schedule: %v, want ErrNotFound", err)
	}
}
