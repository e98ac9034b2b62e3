package ax_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store"
)

// countingStore counts the calls a scheduler makes and the rows its refills return.
type countingStore struct {
	ax.Store
	mu         sync.Mutex
	calls      map[string]int
	refillRows int
}

func (c *countingStore) count(method string, rows int) {
	c.mu.Lock()
	c.calls[method]++
	c.refillRows += rows
	c.mu.Unlock()
}

func (c *countingStore) snapshot() (map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]int, len(c.calls))
	for k, v := range c.calls {
		m[k] = v
	}
	return m, c.refillRows
}

func (c *countingStore) Refill(ctx context.Context, p store.RefillParams) (*store.RefillResult, error) {
	r, err := c.Store.Refill(ctx, p)
	if err == nil {
		c.count("Refill", len(r.Changed)+len(r.Entered))
	}
	return r, err
}

func (c *countingStore) Now(ctx context.Context) (time.Time, error) {
	c.count("Now", 0)
	return c.Store.Now(ctx)
}

func (c *countingStore) Stale(ctx context.Context, s store.Status, before time.Time, limit int) ([]store.Task, error) {
	c.count("Stale", 0)
	return c.Store.Stale(ctx, s, before, limit)
}

func (c *countingStore) Claim(ctx context.Context, cl []store.Claim) (*store.ClaimResult, error) {
	c.count("Claim", 0)
	return c.Store.Claim(ctx, cl)
}

func (c *countingStore) Get(ctx context.Context, id int64) (*store.Task, error) {
	c.count("Get", 0)
	return c.Store.Get(ctx, id)
}

// TestIdleRefillDoesNotGrowWithPendingTasks: with tasks pending an hour ahead and
// nothing due, each refill interval costs the store one small query that returns
// nothing, whether 1,000 or 100,000 tasks are pending.
func TestIdleRefillDoesNotGrowWithPendingTasks(t *testing.T) {
	t.Parallel()
	sizes := []int{1_000, 100_000}
	if testing.Short() {
		sizes = []int{1_000, 10_000}
	}
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
		cs := &countingStore{Store: st, calls: map[string]int{}}
		const interval = 20 * time.Millisecond
		s := newScheduler(t, cs, func(c *ax.Config) { c.RefillInterval = interval })
		s.HandleFunc("job", func(ctx context.Context, t *ax.Task) error { return nil })
		start(t, s)
		// Let the initial load finish, then watch a quiet stretch.
		waitFor(t, 10*time.Second, "the first refill", func() bool { m, _ := cs.snapshot(); return m["Refill"] >= 2 })
		before, rowsBefore := cs.snapshot()
		t0 := time.Now()
		waitFor(t, 10*time.Second, "50 refills", func() bool { m, _ := cs.snapshot(); return m["Refill"]-before["Refill"] >= 50 })
		elapsed := time.Since(t0)
		after, rowsAfter := cs.snapshot()

		refills := after["Refill"] - before["Refill"]
		if max := int(elapsed/interval) + 2; refills > max {
			t.Errorf("n=%d: %d refills in %v, want at most one per %v (%d)", n, refills, elapsed, interval, max)
		}
		if rows := rowsAfter - rowsBefore; rows != 0 {
			t.Errorf("n=%d: idle refills returned %d rows, want 0", n, rows)
		}
		for _, m := range []string{"Claim", "Get"} {
			if d := after[m] - before[m]; d != 0 {
				t.Errorf("n=%d: %d %s calls while idle, want 0", n, d, m)
			}
		}
		others := 0
		for m, c := range after {
			if m != "Refill" {
				others += c - before[m]
			}
		}
		perInterval[n] = float64(refills+others) / float64(refills)
		t.Logf("n=%d: %d refills and %d other calls in %v", n, refills, others, elapsed)
	}
	if a, b := perInterval[sizes[0]], perInterval[sizes[1]]; b > a+0.5 {
		t.Errorf("store calls per refill interval grew with pending tasks: %.2f at n=%d, %.2f at n=%d", a, sizes[0], b, sizes[1])
	}
}
