package ax

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/internal/periodic"
	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store/postgres"
)

// TestSchedulersRaceOnPostgres runs two schedulers, as two processes would, on one
// PostgreSQL database through an hour of simulated time, with a schedule every 10s,
// and restarts one of them half-way: every occurrence is created once and runs once,
// and none is missed.
//
// The hour passes on a synctest bubble's fake clock; the schedulers trust it
// (localClock) instead of measuring PostgreSQL's clock, which stays real and so
// years ahead: every slot of the bubble is long due for the database.
func TestSchedulersRaceOnPostgres(t *testing.T) {
	t.Parallel()
	dsn := servicetest.PostgresDSN(t)
	ctx := context.Background()
	st0, err := postgres.Open(ctx, dsn) // migrate outside the bubble
	if err != nil {
		t.Fatal(err)
	}
	st0.Close()
	const every = 10 * time.Second
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		var mu sync.Mutex
		runs := map[string]int{}              // occurrence key → executions
		ranBy := map[string]map[string]bool{} // node → keys
		active, maxActive := 0, 0
		var stores []*postgres.Store
		start := func(node string) *Scheduler {
			st, err := postgres.Open(ctx, dsn) // a pool per scheduler, as per process
			if err != nil {
				t.Fatal(err)
			}
			stores = append(stores, st)
			s, err := New(Config{Store: st, Node: node, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			s.hooks.localClock, s.hooks.noNotify = true, true
			s.HandleFunc("tick", func(ctx context.Context, task *Task) error {
				mu.Lock()
				runs[task.Key]++
				if ranBy[node] == nil {
					ranBy[node] = map[string]bool{}
				}
				ranBy[node][task.Key] = true
				active++
				maxActive = max(maxActive, active)
				mu.Unlock()
				time.Sleep(time.Second)
				mu.Lock()
				active--
				mu.Unlock()
				return nil
			})
			if err := s.Every("tick", every); err != nil {
				t.Fatal(err)
			}
			if err := s.Start(ctx); err != nil {
				t.Fatal(err)
			}
			return s
		}
		stopIt := func(s *Scheduler) {
			sctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			if err := s.Stop(sctx); err != nil {
				t.Fatal(err)
			}
		}
		a, b := start("a"), start("b")
		time.Sleep(30 * time.Minute)
		stopIt(b)
		b = start("b-restarted")
		time.Sleep(30*time.Minute + 3*time.Second)
		stopIt(a)
		stopIt(b)
		end := time.Now()
		for _, st := range stores {
			st.Close()
		}

		mu.Lock()
		defer mu.Unlock()
		slots := 0
		for slot := t0.Add(every); slot.Before(end.Add(-2 * time.Second)); slot = slot.Add(every) {
			slots++
			if n := runs[periodic.OccurrenceKey(slot)]; n != 1 {
				t.Errorf("occurrence at +%v ran %d times, want once", slot.Sub(t0), n)
			}
		}
		if len(runs) != slots {
			t.Errorf("%d occurrences ran, want %d (one per slot)", len(runs), slots)
		}
		if maxActive != 1 {
			t.Errorf("up to %d occurrences ran at once, want 1", maxActive)
		}
		for node, keys := range ranBy {
			t.Logf("node %s ran %d occurrences", node, len(keys))
		}
		if len(ranBy) < 2 {
			t.Errorf("only %d scheduler(s) ran occurrences: the race was not run", len(ranBy))
		}
	})
}

// TestOverlapAcrossSchedulers: two schedulers (as two processes) on each real
// database share an every-second schedule whose runs take 2.5s. With OverlapSkip no
// two runs ever overlap, on either scheduler, and the slots inside a run are SKIPPED;
// the store's claim is the only thing the two schedulers share.
func TestOverlapAcrossSchedulers(t *testing.T) {
	t.Parallel()
	for name, open := range realStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := open(t)
			ctx := context.Background()
			var mu sync.Mutex
			active, maxActive, ran := 0, 0, 0
			var scheds []*Scheduler
			for _, node := range []string{"a", "b"} {
				s, err := New(Config{Store: st, Node: node, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				if err != nil {
					t.Fatal(err)
				}
				s.HandleFunc("reconcile", func(ctx context.Context, task *Task) error {
					mu.Lock()
					active++
					ran++
					maxActive = max(maxActive, active)
					mu.Unlock()
					time.Sleep(2500 * time.Millisecond)
					mu.Lock()
					active--
					mu.Unlock()
					return nil
				})
				if err := s.Every("reconcile", time.Second); err != nil {
					t.Fatal(err)
				}
				if err := s.Start(ctx); err != nil {
					t.Fatal(err)
				}
				scheds = append(scheds, s)
			}
			// Watch five slots from the first one surely after the start, until each
			// has run or been skipped.
			first := time.Now().Truncate(time.Second).Add(2 * time.Second)
			slots := make([]*Task, 5)
			end := time.Now().Add(30 * time.Second)
			for i := 0; i < len(slots); {
				task, err := st.Lookup(ctx, "reconcile", periodic.OccurrenceKey(first.Add(time.Duration(i)*time.Second)))
				switch {
				case err == nil && task.Status.Terminal():
					slots[i] = taskOf(task)
					i++
					continue
				case err != nil && !errors.Is(err, ErrNotFound):
					t.Fatal(err)
				case time.Now().After(end):
					t.Fatalf("slot %d (+%ds) not settled after 30s: %v, %v", i, i, task, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			for _, s := range scheds {
				if err := s.Stop(ctx); err != nil {
					t.Fatal(err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if maxActive != 1 {
				t.Errorf("up to %d runs at once across the two schedulers, want 1", maxActive)
			}
			skipped := 0
			for _, task := range slots {
				if task.Status == Skipped {
					skipped++
				}
			}
			if skipped < 2 || ran < 2 {
				t.Errorf("%d runs and %d skipped slots in 5s of 2.5s runs every second, want at least 2 of each", ran, skipped)
			}
		})
	}
}
