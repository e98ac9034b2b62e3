package ax_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax"
	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/internal/storecount"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/postgres"
)

// TestIdleRefillDoesNotGrowWithPendingTasks: with tasks pending an hour ahead and
// nothing due, each refill interval costs the store one small query that returns
// nothing, whether 1,000 or 10,000 tasks are pending.
func TestIdleRefillDoesNotGrowWithPendingTasks(t *testing.T) {
	t.Parallel()
	// 1,000 and 10,000 pending tasks: ten times more rows, the same idle cost. (At
	// 30,000 the inserts alone took 15 s of CI's two cores under -race, for no more
	// evidence.)
	sizes := []int{1_000, 10_000}
	perInterval := map[int]float64{}
	for _, n := range sizes {
		st := openSQLite(t)
		ctx := context.Background()
		due := time.Now().Add(time.Hour)
		for i := 0; i < n; i += 5_000 {
			batch := make([]store.NewTask, 0, 5_000)
			for j := i; j < min(n, i+5_000); j++ {
				batch = append(batch, store.NewTask{Name: "job", Key: fmt.Sprint(j), DueAt: due.Add(time.Duration(j) * time.Millisecond), MaxRetry: 5})
			}
			if _, err := st.Insert(ctx, batch); err != nil {
				t.Fatal(err)
			}
		}
		cs := storecount.New(st)
		const interval = 20 * time.Millisecond
		s := newScheduler(t, cs, func(c *ax.Config) { c.RefillInterval = interval })
		s.HandleFunc("job", func(ctx context.Context, t *ax.Task) error { return nil })
		start(t, s)
		// Let the initial load finish, then watch a quiet stretch.
		waitFor(t, 10*time.Second, "the first refill", func() bool { return cs.Snapshot().Calls["Refill"] >= 2 })
		before := cs.Snapshot()
		t0 := time.Now()
		waitFor(t, 10*time.Second, "50 refills", func() bool { return cs.Snapshot().Calls["Refill"]-before.Calls["Refill"] >= 50 })
		elapsed := time.Since(t0)
		after := cs.Snapshot()

		refills := after.Calls["Refill"] - before.Calls["Refill"]
		if max := int(elapsed/interval) + 2; refills > max {
			t.Errorf("n=%d: %d refills in %v, want at most one per %v (%d)", n, refills, elapsed, interval, max)
		}
		if rows := after.RefillRows - before.RefillRows; rows != 0 {
			t.Errorf("n=%d: idle refills returned %d rows, want 0", n, rows)
		}
		for _, m := range []string{"ClaimStart", "Claim", "Get"} {
			if d := after.Calls[m] - before.Calls[m]; d != 0 {
				t.Errorf("n=%d: %d %s calls while idle, want 0", n, d, m)
			}
		}
		others := 0
		for m, c := range after.Calls {
			if m != "Refill" {
				others += c - before.Calls[m]
			}
		}
		perInterval[n] = float64(refills+others) / float64(refills)
		t.Logf("n=%d: %d refills and %d other calls in %v", n, refills, others, elapsed)
	}
	if a, b := perInterval[sizes[0]], perInterval[sizes[1]]; b > a+0.5 {
		t.Errorf("store calls per refill interval grew with pending tasks: %.2f at n=%d, %.2f at n=%d", a, sizes[0], b, sizes[1])
	}
}

// TestOwnSubmitsNeedNoRefill: on PostgreSQL a running scheduler's own submits, which
// it puts in its wheel as it writes them, wake no refill of it; a submit through
// another scheduler sharing the store — and its pool — does, and runs at once.
func TestOwnSubmitsNeedNoRefill(t *testing.T) {
	t.Parallel()
	dsn := servicetest.PostgresDSN(t)
	st, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cs := storecount.New(st)
	shared := cs.WithOptionalInterfaces()
	slow := func(c *ax.Config) { c.RefillInterval = 10 * time.Minute } // only signals refill
	worker := newScheduler(t, shared, slow)
	ran := make(chan string, 64)
	worker.HandleFunc("job", func(ctx context.Context, task *ax.Task) error { ran <- task.Key; return nil })
	start(t, worker)
	waitFor(t, 10*time.Second, "the first refill", func() bool { return cs.Snapshot().Calls["Refill"] >= 1 })
	ctx := context.Background()
	await := func(key string) {
		t.Helper()
		select {
		case got := <-ran:
			if got != key {
				t.Fatalf("ran %q, want %q", got, key)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("task %q not run within 10s", key)
		}
	}

	before := cs.Snapshot().Calls["Refill"]
	for i := range 10 {
		key := fmt.Sprint("own-", i)
		if _, err := worker.Delay(ctx, "job", key, 0); err != nil {
			t.Fatal(err)
		}
		await(key)
	}
	if _, err := worker.SubmitMany(ctx, []ax.TaskSpec{{Name: "job", Key: "own-many", DueAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	await("own-many")
	if n := cs.Snapshot().Calls["Refill"] - before; n != 0 {
		t.Errorf("%d refills for 11 of the scheduler's own submits, want 0", n)
	}

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	listen := "LISTEN " + pgx.Identifier{st.Channel()}.Sanitize()
	waitFor(t, 10*time.Second, "the worker's LISTEN", func() bool {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query = $1`, listen).Scan(&n)
		return err == nil && n == 1
	})
	client := newScheduler(t, shared, slow) // never started: it only submits
	if _, err := client.Delay(ctx, "job", "other", 0); err != nil {
		t.Fatal(err)
	}
	await("other")
	if n := cs.Snapshot().Calls["Refill"] - before; n == 0 {
		t.Errorf("another scheduler's submit ran with no refill: want it found by one")
	}
}
