package ax_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax"
)

// TestHammer races the scheduler's own claims and completions against many
// goroutines cancelling and triggering the same tasks. Every outcome must be legal:
// an execution id runs at most once, a task never runs twice at the same time, a
// SUCCEEDED task ran exactly once and never again (a cancel that reached it while it
// ran is recorded, and its handler, which ignores its context, succeeded anyway), a
// CANCELLED task never ran its handler (a cancel that reached its claim, or its
// prefetched start, left at most one execution record, CANCELLED), and every
// refusal is the typed error for the state the task was in.
func TestHammer(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	s := newScheduler(t, st, func(c *ax.Config) { c.Concurrency = 16 })
	const n = 300
	var (
		mu       sync.Mutex
		byExec   = map[string]int{}
		byKey    = map[string]int{}
		inFlight = map[string]bool{}
		overlap  atomic.Int32
	)
	s.HandleFunc("job", func(ctx context.Context, task *ax.Task) error {
		mu.Lock()
		byExec[task.ExecutionID]++
		byKey[task.Key]++
		if inFlight[task.Key] {
			overlap.Add(1)
		}
		inFlight[task.Key] = true
		mu.Unlock()
		time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
		mu.Lock()
		inFlight[task.Key] = false
		mu.Unlock()
		return nil
	})
	start(t, s)
	ctx := context.Background()
	ids := make([]int64, n)
	for i := range n {
		task, err := s.Delay(ctx, "job", fmt.Sprint(i), time.Duration(rand.IntN(300))*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = task.ID
	}
	var cancelled sync.Map // key → true when Cancel succeeded
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 42))
			for range 150 {
				i := r.IntN(n)
				key := fmt.Sprint(i)
				if r.IntN(3) > 0 {
					switch err := s.Cancel(ctx, "job", key); {
					case err == nil:
						cancelled.Store(key, true)
					case !errors.Is(err, ax.ErrNotCancellable):
						t.Errorf("Cancel(%s): %v", key, err)
					}
				} else if err := s.Trigger(ctx, ids[i]); err != nil && !errors.Is(err, ax.ErrNotTriggerable) {
					t.Errorf("Trigger(%d): %v", ids[i], err)
				}
			}
		}()
	}
	wg.Wait()
	for i, id := range ids {
		waitFor(t, 20*time.Second, fmt.Sprintf("task %d to finish", i), func() bool {
			got, err := s.Get(ctx, id)
			return err == nil && (got.Status == ax.Succeeded || got.Status == ax.Cancelled)
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if o := overlap.Load(); o != 0 {
		t.Errorf("%d times a task ran while it was already running", o)
	}
	for exec, runs := range byExec {
		if runs != 1 {
			t.Errorf("execution %s ran %d times", exec, runs)
		}
	}
	succeeded := 0
	for i, id := range ids {
		key := fmt.Sprint(i)
		got, _ := s.Get(ctx, id)
		execs, _ := s.Executions(ctx, id)
		_, wasCancelled := cancelled.Load(key)
		switch got.Status {
		case ax.Succeeded:
			succeeded++
			if byKey[key] != 1 || len(execs) != 1 || execs[0].Status != ax.Succeeded || (got.CancelledBy != "") != wasCancelled {
				t.Errorf("SUCCEEDED task %s: %d runs, executions %+v, cancelled %v by %q; want one run, one execution, and the cancel recorded if it succeeded",
					key, byKey[key], execs, wasCancelled, got.CancelledBy)
			}
		case ax.Cancelled:
			if byKey[key] != 0 || len(execs) > 1 || len(execs) == 1 && execs[0].Status != ax.Cancelled || !wasCancelled {
				t.Errorf("CANCELLED task %s: %d runs, executions %+v, Cancel succeeded %v; want no run, one CANCELLED record at most, and true",
					key, byKey[key], execs, wasCancelled)
			}
		}
	}
	t.Logf("%d tasks: %d succeeded, %d cancelled", n, succeeded, n-succeeded)
}
