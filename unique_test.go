package ax_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store/memory"
)

// A business key is free again once its task has finished, by default when it
// SUCCEEDED or was CANCELLED, not when it FAILED; WithUnique on the handler or on the
// task keeps it longer (UniqueForever, a UniqueFor window) or frees it on FAILED too
// (UniqueActive). The task that gave its key up stays on record, Superseded.
func TestUnique(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		s := newScheduler(t, st, nil)
		rec := newRecorder()
		rec.err = func(task *ax.Task) error {
			if strings.HasPrefix(task.Key, "fail") {
				return errors.New("declined")
			}
			return nil
		}
		s.Handle("order.close", rec, ax.WithMaxRetry(0))
		s.Handle("welcome", rec, ax.WithUnique(ax.UniqueForever))
		s.Handle("charge", rec, ax.WithMaxRetry(0), ax.WithUnique(ax.UniqueActive))
		start(t, s)
		defer s.Stop(context.Background())
		ctx := context.Background()

		run := func(name, key string, opts ...ax.TaskOption) *ax.Task {
			t.Helper()
			task, err := s.Delay(ctx, name, key, 0, opts...)
			if err != nil {
				t.Fatalf("Delay(%s, %s): %v", name, key, err)
			}
			time.Sleep(time.Second)
			synctest.Wait()
			return mustGet(t, s, task.ID)
		}
		again := func(old *ax.Task) (*ax.Task, error) {
			t.Helper()
			return s.Delay(ctx, old.Name, old.Key, time.Hour)
		}
		reused := func(what string, old *ax.Task) *ax.Task {
			t.Helper()
			got, err := again(old)
			if err != nil || got.ID == old.ID || got.Status != ax.Scheduled {
				t.Fatalf("%s: submit of the key of a %s task = %+v, %v; want a new task", what, old.Status, got, err)
			}
			if prev := mustGet(t, s, old.ID); !prev.Superseded || prev.Status != old.Status {
				t.Errorf("%s: the old task is %s, superseded %t; want %s, superseded", what, prev.Status, prev.Superseded, old.Status)
			}
			if looked, err := s.Lookup(ctx, old.Name, old.Key); err != nil || looked.ID != got.ID {
				t.Errorf("%s: Lookup = %+v, %v; want the new task %d", what, looked, err, got.ID)
			}
			return got
		}
		held := func(what string, old *ax.Task) {
			t.Helper()
			got, err := again(old)
			if !errors.Is(err, ax.ErrDuplicate) || got == nil || got.ID != old.ID {
				t.Errorf("%s: submit of the key of a %s task = %+v, %v; want it, with ErrDuplicate", what, old.Status, got, err)
			}
		}

		// The default.
		done := run("order.close", "o-1")
		if done.Status != ax.Succeeded || done.KeyHold != ax.HoldLive {
			t.Fatalf("o-1: %s, hold %q; want SUCCEEDED, live", done.Status, done.KeyHold)
		}
		reused("succeeded", done)
		waiting, err := s.Delay(ctx, "order.close", "o-2", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Cancel(ctx, "order.close", "o-2"); err != nil {
			t.Fatal(err)
		}
		reused("cancelled", mustGet(t, s, waiting.ID))
		held("failed", run("order.close", "fail-1"))

		// The handler's hold, and a task's over it.
		welcomed := run("welcome", "user-1")
		if welcomed.KeyHold != ax.HoldForever {
			t.Errorf("welcome: hold %q, want the handler's forever", welcomed.KeyHold)
		}
		held("forever", welcomed)
		reused("live over the handler's forever", run("welcome", "user-2", ax.WithUnique(ax.UniqueLive)))

		// A window: held for an hour after the submit, then free.
		t0 := time.Now()
		windowed := run("order.close", "o-3", ax.WithUnique(ax.UniqueFor(time.Hour)))
		if d := windowed.KeyUntil.Sub(t0.Add(time.Hour)); d < 0 || d > time.Millisecond {
			t.Errorf("o-3: KeyUntil %v, want %v", windowed.KeyUntil, t0.Add(time.Hour).UTC())
		}
		held("within its window", windowed)
		time.Sleep(time.Hour)
		reused("after its window", windowed)

		// UniqueActive frees a FAILED task's key; the old task can no longer be retried.
		declined := run("charge", "fail-2")
		if declined.Status != ax.Failed {
			t.Fatalf("charge: %s, want FAILED", declined.Status)
		}
		reused("failed, active", declined)
		_, err = s.Retry(ctx, declined.ID)
		var tse *ax.TaskStateError
		if !errors.Is(err, ax.ErrNotRetryable) || !errors.As(err, &tse) || !tse.Task.Superseded {
			t.Errorf("Retry of a superseded task: %v, want ErrNotRetryable holding it", err)
		}

		// Bad values change nothing.
		for _, u := range []ax.Unique{ax.UniqueFor(0), ax.UniqueFor(-time.Second), ax.Unique(-7)} {
			if _, err := s.Delay(ctx, "order.close", "bad", time.Hour, ax.WithUnique(u)); !errors.Is(err, ax.ErrInvalid) {
				t.Errorf("WithUnique(%d): %v, want ErrInvalid", u, err)
			}
		}
		if _, err := s.Lookup(ctx, "order.close", "bad"); !errors.Is(err, ax.ErrNotFound) {
			t.Errorf("an invalid WithUnique wrote its task: %v", err)
		}
	})
}

// A schedule's occurrences keep their keys for good, whatever their handler says: an
// occurrence runs once.
func TestOccurrencesHoldTheirKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		s := newScheduler(t, st, nil)
		rec := newRecorder()
		s.Handle("report", rec, ax.WithUnique(ax.UniqueActive))
		if err := s.Every("report", time.Minute); err != nil {
			t.Fatal(err)
		}
		start(t, s)
		defer s.Stop(context.Background())
		time.Sleep(150 * time.Second)
		synctest.Wait()
		page, err := s.Tasks(context.Background(), ax.TaskQuery{Name: "report"})
		if err != nil || len(page.Tasks) < 2 {
			t.Fatalf("Tasks(report) = %+v, %v; want two occurrences or more", page, err)
		}
		for _, task := range page.Tasks {
			if task.KeyHold != ax.HoldForever {
				t.Errorf("occurrence %s: hold %q, want forever", task.Key, task.KeyHold)
			}
		}
	})
}
