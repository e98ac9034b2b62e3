package ax_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store/memory"
)

// In a synctest bubble with the in-memory store, the default retry schedule plays out
// on the fake clock: attempts at due, due+5s, then +25s after that, then FAILED.
func TestDefaultRetryScheduleOnTheFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		s, err := ax.New(ax.Config{Store: st, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var starts []time.Time
		s.HandleFunc("job", func(ctx context.Context, task *ax.Task) error {
			mu.Lock()
			starts = append(starts, time.Now())
			mu.Unlock()
			return errors.New("always fails")
		}, ax.WithMaxRetry(2))
		ctx := context.Background()
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		task, err := s.Delay(ctx, "job", "k", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute + 5*time.Second + 25*time.Second + time.Second)
		synctest.Wait()
		got, err := s.Get(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != ax.Failed || got.Attempt != 2 {
			t.Errorf("task = %s attempt %d, want FAILED after attempt 2", got.Status, got.Attempt)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(starts) != 3 {
			t.Fatalf("%d attempts, want 3", len(starts))
		}
		want := []time.Duration{time.Minute, time.Minute + 5*time.Second, time.Minute + 30*time.Second}
		for i, st := range starts {
			late := st.Sub(t0) - want[i]
			if late < 0 || late > ax.DefaultTick+20*time.Millisecond {
				t.Errorf("attempt %d started at +%v, want +%v (up to a tick late, never early)", i, st.Sub(t0), want[i])
			}
		}
		if err := s.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// A task starts at its due, not at the end of the wheel's tick (Config.Tick): one due
// now as soon as its submit returns, a retry due at once as soon as its failure is
// written, one triggered as soon as Trigger returns, one due between two ticks at
// that instant, and ones due in the first tick of a higher level's slot (which
// cascades at that tick's start) at theirs. The in-memory store's calls take no fake time, so in a synctest
// bubble each handler starts at the very instant it is due.
func TestTasksStartAtTheirDueNotAtATick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		s, err := ax.New(ax.Config{Store: st, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		type start struct {
			key     string
			attempt int
			at      time.Time
		}
		starts := make(chan start, 8)
		s.HandleFunc("job", func(ctx context.Context, task *ax.Task) error {
			starts <- start{task.Key, task.Attempt, time.Now()}
			if task.Key == "retried" && task.Attempt == 0 {
				return errors.New("fails once")
			}
			return nil
		}, ax.WithMaxRetry(1), ax.WithBackoff(func(int) time.Duration { return 0 }))
		ctx := context.Background()
		origin := time.Now() // the wheel's: its ticks end at origin + k·Tick
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer s.Stop(ctx)
		synctest.Wait()
		time.Sleep(ax.DefaultTick * 37 / 10) // between two ticks, where rounding up would show
		next := func(what, key string, want time.Time) {
			t.Helper()
			synctest.Wait()
			select {
			case got := <-starts:
				if got.key != key {
					t.Errorf("%s: %s (attempt %d) started instead, %v after %v", what, got.key, got.attempt, got.at.Sub(want), want)
				} else if !got.at.Equal(want) {
					t.Errorf("%s (%s, attempt %d) started %v after it was due, want at once", what, got.key, got.attempt, got.at.Sub(want))
				}
			default:
				t.Errorf("%s has not started at its due (the fake clock has not moved)", what)
			}
		}

		if _, err := s.Delay(ctx, "job", "now", 0); err != nil {
			t.Fatal(err)
		}
		next("a task due now", "now", time.Now())

		if _, err := s.Delay(ctx, "job", "retried", 0); err != nil {
			t.Fatal(err)
		}
		next("a task due now", "retried", time.Now())
		next("its retry, due at once", "retried", time.Now())

		task, err := s.Delay(ctx, "job", "triggered", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := s.Trigger(ctx, task.ID); err != nil {
			t.Fatal(err)
		}
		next("a triggered task", "triggered", time.Now())

		task, err = s.Delay(ctx, "job", "between", ax.DefaultTick*37/10)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(task.DueAt))
		next("a task due between two ticks", "between", task.DueAt)

		// Due 5 ms before the ends of ticks 60 and 3,600: the first tick of a slot of the
		// wheel's second and third levels, where it cascades.
		for _, ticks := range []int{60, 3600} {
			due := origin.Add(time.Duration(ticks)*ax.DefaultTick - 5*time.Millisecond)
			key := fmt.Sprint("tick-", ticks)
			if _, err := s.Delay(ctx, "job", key, time.Until(due)); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			time.Sleep(time.Until(due))
			next(fmt.Sprintf("a task due in the first tick of tick %d's slot", ticks), key, due)
		}
	})
}
