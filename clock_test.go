package ax

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/internal/clock"
	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store/memory"
	"github.com/axsched/ax/store/mysql"
	"github.com/axsched/ax/store/postgres"
	"github.com/axsched/ax/store/sqlite"
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
					s.clock = clock.NewSkewed(localSkew)
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

// TestClockSkewRealStores is TestClockSkew on the real databases, in real time. A
// database server's clock cannot be moved from a test, so the process clocks are:
// one scheduler's host runs 30s ahead of the database, the other 30s behind — the
// same relative skew. Each writes a task due in 2s: the
// DueAt values agree with the database's clock, nothing starts before its DueAt by
// that clock (StartedAt is stamped by the database), and nothing starts late beyond
// the lateness target.
func TestClockSkewRealStores(t *testing.T) {
	t.Parallel()
	for name, open := range realStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := open(t)
			ctx := context.Background()
			const delay = 2 * time.Second
			var tasks []*Task
			var scheds []*Scheduler
			for i, skew := range []time.Duration{30 * time.Second, -30 * time.Second} {
				s, err := New(Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				if err != nil {
					t.Fatal(err)
				}
				s.clock = clock.NewSkewed(skew)
				s.HandleFunc("job", func(context.Context, *Task) error { return nil })
				if err := s.Start(ctx); err != nil {
					t.Fatal(err)
				}
				scheds = append(scheds, s)
				before, err := st.Now(ctx)
				if err != nil {
					t.Fatal(err)
				}
				task, err := s.Delay(ctx, "job", fmt.Sprintf("skew-%d", i), delay)
				if err != nil {
					t.Fatal(err)
				}
				after, err := st.Now(ctx)
				if err != nil {
					t.Fatal(err)
				}
				// The database's time when the task was written, by the scheduler's
				// corrected clock: within the bracket, up to the measurement error.
				const tolerance = 20 * time.Millisecond
				if at := task.DueAt.Add(-delay); at.Before(before.Add(-tolerance)) || at.After(after.Add(tolerance)) {
					t.Errorf("host %+v: DueAt - delay = %v, want the database's time, between %v and %v", skew, at, before, after)
				}
				tasks = append(tasks, task)
			}
			for _, task := range tasks {
				got := waitFor(t, st, task.ID, Succeeded, 10*time.Second)
				late := got.StartedAt.Sub(got.DueAt)
				// The target is tens of milliseconds; the bound leaves room for a busy
				// CI machine while still failing a scheduler that kept a 30s error.
				if late < 0 || late > time.Second {
					t.Errorf("task %s started %v after its DueAt by the database clock, want within [0, 1s]", task.Key, late)
				}
			}
			for _, s := range scheds {
				if err := s.Stop(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// waitFor polls the task until it reaches status or the deadline passes.
func waitFor(t *testing.T, st Store, id int64, status Status, limit time.Duration) *Task {
	t.Helper()
	end := time.Now().Add(limit)
	for {
		got, err := st.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == status {
			return taskOf(got)
		}
		if time.Now().After(end) {
			t.Fatalf("task %d is %s after %v, want %s", id, got.Status, limit, status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// realStores opens an isolated store on each real database.
var realStores = map[string]func(t *testing.T) Store{
	"sqlite": func(t *testing.T) Store {
		st, err := sqlite.Open(filepath.Join(t.TempDir(), "ax.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	},
	"postgres": func(t *testing.T) Store {
		st, err := postgres.Open(context.Background(), servicetest.PostgresDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	},
	"mysql": func(t *testing.T) Store {
		st, err := mysql.Open(servicetest.MySQLDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	},
}
