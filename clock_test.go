package ax

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/store/memory"
)

// TestClockSkew runs two schedulers "on" hosts whose clocks are off by different
// amounts against a database whose clock is ±30s off real time. Both measure their
// offset to the database clock, so the DueAt they write for the same delay agree,
// and no task starts before its DueAt by the database clock or later than the
// kernel's lateness target.
func TestClockSkew(t *testing.T) {
	for _, dbSkew := range []time.Duration{30 * time.Second, -30 * time.Second} {
		t.Run(dbSkew.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := memory.New(memory.WithClockSkew(dbSkew))
				defer st.Close()
				dbNow := func() time.Time { return time.Now().Add(dbSkew) }
				var mu sync.Mutex
				lateness := map[string]time.Duration{}
				newHost := func(localSkew time.Duration) *Scheduler {
					s, err := New(Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
					if err != nil {
						t.Fatal(err)
					}
					s.clock = newClockSkewed(localSkew)
					s.HandleFunc("job", func(ctx context.Context, task *Task) error {
						mu.Lock()
						lateness[task.Key] = dbNow().Sub(task.DueAt)
						mu.Unlock()
						return nil
					})
					return s
				}
				ctx := context.Background()
				a, b := newHost(0), newHost(-7*time.Second)
				for _, s := range []*Scheduler{a, b} {
					if err := s.Start(ctx); err != nil {
						t.Fatal(err)
					}
				}
				ta, err := a.Delay(ctx, "job", "a", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				tb, err := b.Delay(ctx, "job", "b", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				if !ta.DueAt.Equal(tb.DueAt) {
					t.Errorf("DueAt of the same delay written by two hosts: %v and %v, want equal", ta.DueAt, tb.DueAt)
				}
				if want := dbNow().Add(time.Minute); !ta.DueAt.Equal(want) {
					t.Errorf("DueAt = %v, want the database clock plus a minute, %v", ta.DueAt, want)
				}
				time.Sleep(2 * time.Minute)
				synctest.Wait()
				mu.Lock()
				for key, late := range lateness {
					if late < 0 || late > DefaultTick+20*time.Millisecond {
						t.Errorf("task %s started %v after its DueAt by the database clock, want within [0, %v]", key, late, DefaultTick+20*time.Millisecond)
					}
				}
				if len(lateness) != 2 {
					t.Errorf("%d tasks ran, want 2", len(lateness))
				}
				mu.Unlock()
				for _, s := range []*Scheduler{a, b} {
					if err := s.Stop(ctx); err != nil {
						t.Fatal(err)
					}
				}
			})
		})
	}
}
