package demo

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store/sqlite"
)

// testConfig is a scenario that runs in about a second against a file in the test's
// temp dir.
func testConfig(t *testing.T) Config {
	t.Helper()
	return Config{
		Orders:       8,
		MinTimeout:   200 * time.Millisecond,
		MaxTimeout:   600 * time.Millisecond,
		Paid:         3,
		Flaky:        2,
		RetryBackoff: 100 * time.Millisecond,
		Progress:     100 * time.Millisecond,
		Wait:         20 * time.Second,
		DB:           filepath.Join(t.TempDir(), "ax.db"),
		Seed:         7,
	}
}

func TestRun(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	var out bytes.Buffer
	sum, err := Run(context.Background(), cfg, &out)
	if err != nil {
		t.Fatalf("Run: %v\noutput:\n%s", err, out.String())
	}

	checks := []struct {
		what      string
		got, want int
	}{
		{"Orders", sum.Orders, cfg.Orders},
		{"Paid", sum.Paid, cfg.Paid},
		{"AlreadyPaid", sum.AlreadyPaid, cfg.Paid},
		{"Cancelled", sum.Cancelled, 1},
		{"Closed", sum.Closed, cfg.Orders - cfg.Paid - 1},
		{"AlreadyClosed", sum.AlreadyClosed, 0},
		{"Failed", sum.Failed, cfg.Flaky},
		{"Retried", sum.Retried, cfg.Flaky},
		{"Fired", sum.Fired, cfg.Orders - 1 + cfg.Flaky},
		{"Closed+AlreadyPaid+Cancelled", sum.Closed + sum.AlreadyPaid + sum.Cancelled, cfg.Orders},
		{"Early", sum.Early, 0},
		{"CancelledFired", sum.CancelledFired, 0},
		{"Stale", sum.Stale, 0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("Run(...).%s = %d, want %d", c.what, c.got, c.want)
		}
	}
	if sum.Retried == 0 {
		t.Errorf("Run(...).Retried = 0, want > 0")
	}
	if sum.LatenessP50 < 0 || sum.LatenessP50 > sum.LatenessP99 || sum.LatenessP99 > sum.LatenessMax {
		t.Errorf("lateness p50 %v, p99 %v, max %v: want 0 <= p50 <= p99 <= max", sum.LatenessP50, sum.LatenessP99, sum.LatenessMax)
	}
	if !sum.KeptDB || sum.DB != cfg.DB {
		t.Errorf("Run(...) DB = %q, kept %v; want %q, kept", sum.DB, sum.KeptDB, cfg.DB)
	}
	for _, want := range []string{"verify: OK", "summary: fired ", "early = 0", "did not fire: task is CANCELLED", "retry 1 succeeded"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	// The kept database says the same, read independently of Run.
	st, err := sqlite.Open(cfg.DB)
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	defer st.Close()
	ctx := context.Background()
	task, err := st.Lookup(ctx, TaskName, sum.CancelledOrder)
	if err != nil {
		t.Fatalf("Lookup(cancelled order %q): %v", sum.CancelledOrder, err)
	}
	if task.Status != ax.Cancelled {
		t.Errorf("cancelled order's task is %s, want %s", task.Status, ax.Cancelled)
	}
	if execs, err := st.Executions(ctx, task.ID); err != nil || len(execs) != 0 {
		t.Errorf("cancelled order's task: Executions = %d, %v; want none", len(execs), err)
	}
	if task.OwnerService != OwnerService {
		t.Errorf("task OwnerService = %q, want %q", task.OwnerService, OwnerService)
	}
}

func TestRunTemporaryDB(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.DB = ""
	cfg.Progress = -1
	var out bytes.Buffer
	sum, err := Run(context.Background(), cfg, &out)
	if err != nil {
		t.Fatalf("Run: %v\noutput:\n%s", err, out.String())
	}
	if sum.KeptDB || sum.DB == "" {
		t.Fatalf("Run(...) DB = %q, kept %v; want a temporary file", sum.DB, sum.KeptDB)
	}
	if _, err := os.Stat(filepath.Dir(sum.DB)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary database dir %s: Stat = %v, want it removed", filepath.Dir(sum.DB), err)
	}
	if strings.Contains(out.String(), "pending") {
		t.Errorf("progress lines printed with Progress < 0:\n%s", out.String())
	}
}

// An interrupted run leaves its tasks in a kept database; the next run on the same
// file ignores them (they are not its orders) and still verifies.
func TestRunInterruptedThenKeptDB(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	// Interrupt the first run as soon as its orders exist.
	w := writerFunc(func(p []byte) (int, error) {
		if bytes.Contains(p, []byte("orders; their close timeouts are scheduled")) {
			cancel()
		}
		return out.Write(p)
	})
	start := time.Now()
	_, err := Run(ctx, cfg, w)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run(cancelled ctx) = %v, want context.Canceled\noutput:\n%s", err, out.String())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run(cancelled ctx) took %v, want it to return promptly", d)
	}

	out.Reset()
	sum, err := Run(context.Background(), cfg, &out)
	if err != nil {
		t.Fatalf("second Run on the same file: %v\noutput:\n%s", err, out.String())
	}
	if sum.Stale == 0 {
		t.Errorf("second Run: Stale = 0, want the first run's tasks to fire and be ignored")
	}
	if sum.Closed+sum.AlreadyPaid+sum.Cancelled != cfg.Orders {
		t.Errorf("second Run: closed %d + already-paid %d + cancelled %d, want %d orders", sum.Closed, sum.AlreadyPaid, sum.Cancelled, cfg.Orders)
	}
}

// The verification catches a handler that reports an order closed without closing it.
func TestRunVerifyFails(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.buggyHandler = true
	var out bytes.Buffer
	_, err := Run(context.Background(), cfg, &out)
	if err == nil || !strings.Contains(err.Error(), "is unpaid, want closed or paid") {
		t.Fatalf("Run(buggy handler) = %v, want a verify error naming the unpaid order\noutput:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "verify: FAILED") || strings.Contains(out.String(), "summary:") {
		t.Errorf("Run(buggy handler): want verify: FAILED and no summary in the output:\n%s", out.String())
	}
}

func TestRunInvalidConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{Orders: 2},
		{Orders: 5, Paid: 4},
		{Orders: 5, Flaky: 5},
		{MinTimeout: -time.Second},
		{MinTimeout: 2 * time.Second, MaxTimeout: time.Second},
		{RetryBackoff: -time.Second},
	} {
		var out bytes.Buffer
		if _, err := Run(context.Background(), cfg, &out); !errors.Is(err, ErrConfig) {
			t.Errorf("Run(%+v) = %v, want ErrConfig", cfg, err)
		}
		if out.Len() > 0 {
			t.Errorf("Run(%+v) wrote %q, want nothing", cfg, out.String())
		}
	}
}

func TestPlanIsReproducible(t *testing.T) {
	t.Parallel()
	cfg := Config{Seed: 42}.withDefaults()
	a, b := newPlan(cfg, "x"), newPlan(cfg, "x")
	if a.cancelled != b.cancelled || len(a.payAt) != cfg.Paid || len(a.flaky) != cfg.Flaky {
		t.Fatalf("newPlan: cancelled %q/%q, paid %d, flaky %d; want equal plans with %d paid, %d flaky",
			a.cancelled, b.cancelled, len(a.payAt), len(a.flaky), cfg.Paid, cfg.Flaky)
	}
	if _, ok := a.payAt[a.cancelled]; ok || a.flaky[a.cancelled] {
		t.Errorf("newPlan: the cancelled order %s is also paid or flaky", a.cancelled)
	}
	for _, id := range a.ids {
		if a.timeout[id] != b.timeout[id] || a.flaky[id] != b.flaky[id] || a.payAt[id] != b.payAt[id] {
			t.Errorf("newPlan: order %s differs between two plans with the same seed", id)
		}
		if d := a.timeout[id]; d < cfg.MinTimeout || d > cfg.MaxTimeout {
			t.Errorf("newPlan: order %s timeout %v outside [%v, %v]", id, d, cfg.MinTimeout, cfg.MaxTimeout)
		}
	}
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	ms := func(n ...int) []time.Duration {
		var ds []time.Duration
		for _, v := range n {
			ds = append(ds, time.Duration(v)*time.Millisecond)
		}
		return ds
	}
	for _, c := range []struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{nil, 0.5, 0},
		{ms(7), 0.99, 7 * time.Millisecond},
		{ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.99, 10 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.5, 5 * time.Millisecond},
	} {
		if got := percentile(c.sorted, c.p); got != c.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", c.sorted, c.p, got, c.want)
		}
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
