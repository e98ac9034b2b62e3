package ax_test

import (
	"context"
	"errors"
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
