package ax_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/internal/storecount"
	"github.com/axsched/ax/internal/teststores"
)

func TestSubmitMany(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, openSQLite(t), nil)
	rec := newRecorder()
	s.Handle("job", rec)
	start(t, s)
	ctx := context.Background()
	now := time.Now()
	specs := make([]ax.TaskSpec, 1000)
	for i := range specs {
		specs[i] = ax.TaskSpec{Name: "job", Key: fmt.Sprint(i), DueAt: now.Add(time.Duration(i%50) * 10 * time.Millisecond), Payload: []byte{byte(i)}}
	}
	specs[7].Options = []ax.TaskOption{ax.WithMaxRetry(9), ax.WithOwner("billing")}
	tasks, err := s.SubmitMany(ctx, specs, ax.WithOwner("orders"))
	if err != nil {
		t.Fatalf("SubmitMany: %v", err)
	}
	if len(tasks) != len(specs) {
		t.Fatalf("%d tasks, want %d", len(tasks), len(specs))
	}
	for i, task := range tasks {
		if task.Key != fmt.Sprint(i) || task.Payload[0] != byte(i) {
			t.Fatalf("task %d = %+v, want spec %d in order", i, task, i)
		}
	}
	if tasks[7].MaxRetry != 9 || tasks[7].OwnerService != "billing" || tasks[8].OwnerService != "orders" {
		t.Errorf("options: spec 7 = %d/%s, spec 8 owner %s; want per-spec options over common ones", tasks[7].MaxRetry, tasks[7].OwnerService, tasks[8].OwnerService)
	}
	waitFor(t, 20*time.Second, "all tasks to run", func() bool { return rec.count() == len(specs) })

	// A finished task's key is free again: a new task.
	more := []ax.TaskSpec{{Name: "job", Key: "0", DueAt: now.Add(time.Hour)}, {Name: "job", Key: "new", DueAt: now.Add(time.Hour)}}
	got, err := s.SubmitMany(ctx, more)
	if err != nil || got[0].ID == tasks[0].ID || got[0].Status != ax.Scheduled || got[1].Key != "new" {
		t.Fatalf("SubmitMany of a finished task's key = %v, %v; want two new tasks", got, err)
	}
	// Duplicates of live tasks: the others are written, the error says so.
	again, err := s.SubmitMany(ctx, []ax.TaskSpec{{Name: "job", Key: "0", DueAt: now}, {Name: "job", Key: "newer", DueAt: now.Add(time.Hour)}})
	if !errors.Is(err, ax.ErrDuplicate) || again[0].ID != got[0].ID || again[1].Key != "newer" {
		t.Errorf("SubmitMany with a duplicate = %v, %v; want the existing task, the new one, and ErrDuplicate", again, err)
	}
	// An invalid spec: nothing is written.
	bad := []ax.TaskSpec{{Name: "job", Key: "fine", DueAt: now}, {Name: "job", Key: "", DueAt: now}}
	if _, err := s.SubmitMany(ctx, bad); !errors.Is(err, ax.ErrInvalid) {
		t.Errorf("SubmitMany with an empty key: %v, want ErrInvalid", err)
	}
	if _, err := s.Lookup(ctx, "job", "fine"); !errors.Is(err, ax.ErrNotFound) {
		t.Errorf("an invalid batch wrote its valid spec: %v", err)
	}
	if _, err := s.SubmitMany(ctx, []ax.TaskSpec{{Name: "job", Key: "nodue"}}); !errors.Is(err, ax.ErrInvalid) {
		t.Errorf("SubmitMany without DueAt: %v, want ErrInvalid", err)
	}
}

// Under load, concurrent Delay calls share multi-row inserts, and claims, starts and
// results are written for many tasks per call: the store calls per task fall well
// below one per step.
func TestWritesAreBatchedUnderLoad(t *testing.T) {
	t.Parallel()
	for name, open := range teststores.Durable {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testWritesAreBatched(t, open(t))
		})
	}
}

func testWritesAreBatched(t *testing.T, inner ax.Store) {
	// Insert takes a network database's round trip. The scheduler sees a plain store
	// (storecount.New hides store.Notifier): on PostgreSQL too it refills on its
	// interval.
	st := storecount.New(inner)
	st.Before = func(ctx context.Context, method string) error {
		if method == "Insert" {
			time.Sleep(2 * time.Millisecond)
		}
		return nil
	}
	s := newScheduler(t, st, nil)
	var mu sync.Mutex
	ran := 0
	s.HandleFunc("job", func(ctx context.Context, t *ax.Task) error {
		mu.Lock()
		ran++
		mu.Unlock()
		return nil
	})
	ctx := context.Background()
	const goroutines, each = 32, 40
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := s.Delay(ctx, "job", fmt.Sprintf("%d-%d", g, i), 0); err != nil {
					t.Errorf("Delay: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	n := goroutines * each
	start(t, s) // all due: one burst
	waitFor(t, 20*time.Second, "all tasks to run", func() bool { mu.Lock(); defer mu.Unlock(); return ran == n })
	ids := make([]int64, 0, n)
	for g := range goroutines {
		for i := range each {
			task, err := s.Lookup(ctx, "job", fmt.Sprintf("%d-%d", g, i))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, task.ID)
		}
	}
	for _, id := range ids {
		waitStatus(t, s, id, ax.Succeeded, 10*time.Second)
	}
	calls := st.Snapshot().Calls
	t.Logf("%d tasks: %v", n, calls)
	if c := calls["Insert"]; c > n/4 {
		t.Errorf("%d Insert calls for %d concurrent Delays, want them coalesced (≤ %d)", c, n, n/4)
	}
	// The scheduler claims with ClaimStart (claim and start in one write); Claim and
	// Start are left for tasks it could not start in the claim.
	if calls["ClaimStart"] == 0 {
		t.Errorf("no ClaimStart calls for %d tasks (calls %v): the claims went elsewhere", n, calls)
	}
	for _, m := range []string{"ClaimStart", "Claim", "Start", "Finish"} {
		if c := calls[m]; c > n/4 { // one call per task without batching
			t.Errorf("%d %s calls for %d tasks, want batches (≤ %d)", c, m, n, n/4)
		}
	}
}
