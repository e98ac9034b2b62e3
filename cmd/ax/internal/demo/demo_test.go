package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/internal/browsertest"
	"github.com/axsched/ax/store/sqlite"
)

// testConfig is a scenario that runs in about three seconds against a file in the
// test's temp dir: the orders settle within two seconds, and the reconciliation
// observes 4 slots a second apart, the first with a slow run of 1.5s. The run after
// it may start 500ms late rather than 200ms: the tests run with -race, in parallel,
// on machines busy with other tests.
func testConfig(t *testing.T) Config {
	t.Helper()
	return Config{
		Orders:            8,
		MinTimeout:        500 * time.Millisecond,
		MaxTimeout:        1500 * time.Millisecond,
		Paid:              3,
		Flaky:             2,
		RetryBackoff:      100 * time.Millisecond,
		Progress:          100 * time.Millisecond,
		Wait:              20 * time.Second,
		DB:                filepath.Join(t.TempDir(), "ax.db"),
		Seed:              7,
		ReconcileEvery:    time.Second,
		ReconcileSlowTook: 1500 * time.Millisecond,
		reconcileOnTime:   500 * time.Millisecond,
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

	// The reconciliation: a slow run, the slots inside it skipped, never two runs.
	recChecks := []struct {
		what      string
		got, want int
	}{
		{"ReconcileSlots", sum.ReconcileSlots, newReconcilePlan(cfg.WithDefaults()).slots},
		{"ReconcileRuns+ReconcileSkipped", sum.ReconcileRuns + sum.ReconcileSkipped, sum.ReconcileSlots},
		{"ReconcileMaxConcurrent", sum.ReconcileMaxConcurrent, 1},
	}
	for _, c := range recChecks {
		if c.got != c.want {
			t.Errorf("Run(...).%s = %d, want %d", c.what, c.got, c.want)
		}
	}
	if sum.ReconcileSlow == 0 || sum.ReconcileSkipped == 0 || sum.ReconcileRuns <= sum.ReconcileSlow {
		t.Errorf("Run(...): reconcile runs %d, slow %d, skipped %d; want a slow run, a skip and a run after it",
			sum.ReconcileRuns, sum.ReconcileSlow, sum.ReconcileSkipped)
	}
	if sum.ReconcileLatenessP99 < 0 || sum.ReconcileLatenessP99 > sum.ReconcileLatenessMax || sum.ReconcileAfterSlowLate > cfg.reconcileOnTime {
		t.Errorf("reconcile lateness p99 %v, max %v, after a slow run %v: want 0 <= p99 <= max, after a slow run <= %v",
			sum.ReconcileLatenessP99, sum.ReconcileLatenessMax, sum.ReconcileAfterSlowLate, cfg.reconcileOnTime)
	}
	for _, want := range []string{"a SLOW run", "SKIPPED by ax (task key \"payment.reconcile\" held by task", "the first run after the slow one",
		"s.PauseSchedule", "verify: OK: reconciliation", "max concurrent 1, no overlap"} {
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

	// Each observed slot is a task keyed by its slot, SUCCEEDED or SKIPPED; the
	// schedule is paused.
	skipped := 0
	for i := range sum.ReconcileSlots {
		slot := sum.ReconcileFrom.Add(time.Duration(i) * cfg.ReconcileEvery)
		task, err := st.Lookup(ctx, ReconcileName, slot.UTC().Format(time.RFC3339Nano))
		if err != nil {
			t.Fatalf("Lookup(reconcile slot %v): %v", slot, err)
		}
		switch task.Status {
		case ax.Skipped:
			skipped++
			if !strings.Contains(task.LastError, `task key "payment.reconcile" held by task`) {
				t.Errorf("reconcile slot %v: SKIPPED with LastError %q, want the key and its holder", slot, task.LastError)
			}
		case ax.Succeeded:
		default:
			t.Errorf("reconcile slot %v: task is %s, want SUCCEEDED or SKIPPED", slot, task.Status)
		}
		if !task.DueAt.Equal(slot) || task.TaskKey != ReconcileName {
			t.Errorf("reconcile slot %v: task DueAt %v, TaskKey %q; want the slot and %q", slot, task.DueAt, task.TaskKey, ReconcileName)
		}
	}
	if skipped != sum.ReconcileSkipped {
		t.Errorf("reconcile: %d slots SKIPPED in the store, Run(...).ReconcileSkipped = %d", skipped, sum.ReconcileSkipped)
	}
	scheds, err := st.Schedules(ctx)
	if err != nil || len(scheds) != 1 || scheds[0].Name != ReconcileName || !scheds[0].Paused {
		t.Errorf("Schedules = %+v, %v; want %q, paused", scheds, err, ReconcileName)
	}
}

func TestRunTemporaryDB(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.DB = ""
	cfg.Progress = -1
	cfg.ReconcileEvery = -1 // disabled
	var out bytes.Buffer
	sum, err := Run(context.Background(), cfg, &out)
	if err != nil {
		t.Fatalf("Run: %v\noutput:\n%s", err, out.String())
	}
	if sum.ReconcileSlots != 0 || sum.ReconcileRuns != 0 || strings.Contains(out.String(), "reconcil") {
		t.Errorf("Run(ReconcileEvery < 0): %d slots, %d runs; want no reconciliation:\n%s", sum.ReconcileSlots, sum.ReconcileRuns, out.String())
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
	cfg.ReconcileEvery = -1 // TestRunInterruptedDuringSlowRun interrupts it
	// Interrupt the first run as soon as its orders exist.
	runCancelledAt(t, cfg, "orders; their close timeouts are scheduled")

	var out bytes.Buffer
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

// A run interrupted during a slow reconciliation returns without waiting for it, and
// leaves the schedule paused; the next run on the same file resumes it and verifies.
func TestRunInterruptedDuringSlowRun(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.ReconcileSlowTook = 20 * time.Second
	runCancelledAt(t, cfg, "a SLOW run")

	st, err := sqlite.Open(cfg.DB)
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	scheds, err := st.Schedules(context.Background())
	st.Close()
	if err != nil || len(scheds) != 1 || !scheds[0].Paused {
		t.Errorf("after the interrupted run: Schedules = %+v, %v; want %q, paused", scheds, err, ReconcileName)
	}

	var out bytes.Buffer
	cfg.ReconcileSlowTook = testConfig(t).ReconcileSlowTook
	sum, err := Run(context.Background(), cfg, &out)
	if err != nil {
		t.Fatalf("second Run on the same file: %v\noutput:\n%s", err, out.String())
	}
	if sum.ReconcileSkipped == 0 || sum.ReconcileMaxConcurrent != 1 {
		t.Errorf("second Run: reconcile skipped %d, max concurrent %d; want > 0 and 1", sum.ReconcileSkipped, sum.ReconcileMaxConcurrent)
	}
}

// The verification catches two reconciliation runs at once: with OverlapAllow, the
// slots during the slow run are not skipped.
func TestRunReconcileOverlapFails(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.ReconcileSlowTook = 2100 * time.Millisecond // slots 1 and 2 come due while it runs
	cfg.MinTimeout, cfg.MaxTimeout = 2*time.Second, 3*time.Second
	cfg.reconcileOverlap = ax.OverlapAllow
	var out bytes.Buffer
	sum, err := Run(context.Background(), cfg, &out)
	if err == nil || !strings.Contains(err.Error(), "reconciliation runs overlapped") {
		t.Fatalf("Run(OverlapAllow) = %v, want a verify error about overlapping runs\noutput:\n%s", err, out.String())
	}
	if sum.ReconcileMaxConcurrent < 2 || sum.ReconcileSkipped != 0 {
		t.Errorf("Run(OverlapAllow): max concurrent %d, skipped %d; want >= 2 and 0", sum.ReconcileMaxConcurrent, sum.ReconcileSkipped)
	}
	for _, want := range []string{"verify: FAILED", "slow reconciliation runs and no slot skipped"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("Run(OverlapAllow): output lacks %q:\n%s", want, out.String())
		}
	}
}

// The verification catches a handler that reports an order closed without closing it.
func TestRunVerifyFails(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.ReconcileEvery = -1 // TestRunReconcileOverlapFails breaks it
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

// With Metrics, the scheduler's metrics are served while the demo runs: scraped once
// the scheduler stopped, they count every execution; after Run, nothing listens.
func TestRunServesMetrics(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.ReconcileEvery = -1 // the orders alone: shorter
	cfg.Metrics = "127.0.0.1:0"
	var url, scraped string
	var scrapeErr error
	cfg.beforeMetricsClose = func(u string) {
		url = u
		scraped, scrapeErr = scrape(u)
	}
	var out bytes.Buffer
	if _, err := Run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("Run: %v\noutput:\n%s", err, out.String())
	}
	if url == "" || scrapeErr != nil {
		t.Fatalf("scrape %q during the run: %v", url, scrapeErr)
	}
	if want := "  metrics:  Prometheus metrics at " + url + " while the demo runs\n"; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
	// Every order but the cancelled one succeeds once; the flaky ones fail once first.
	for _, want := range []string{
		fmt.Sprintf("ax_task_executions_total{name=%q,outcome=\"succeeded\"} %d\n", TaskName, cfg.Orders-1),
		fmt.Sprintf("ax_task_executions_total{name=%q,outcome=\"failed\"} %d\n", TaskName, cfg.Flaky),
		fmt.Sprintf("ax_tasks_submitted_total{name=%q} %d\n", TaskName, cfg.Orders),
		"ax_early_starts_total 0\n",
	} {
		if !strings.Contains(scraped, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, scraped)
		}
	}
	if _, err := scrape(url); err == nil {
		t.Errorf("scrape %s after Run: served, want the server stopped", url)
	}
}

// scrape GETs url and returns the body of a 200 answer.
func scrape(url string) (string, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), nil
}

// With Config.Console the demo serves the console: its printed link fills the
// sign-in form in (the token after "#token="), a click signs the browser in, the overview charts the run's executions
// and the schedule page accounts for the reconciliation's slots, every page answers,
// and it serves until ctx ends.
func TestRunServesConsole(t *testing.T) {
	t.Parallel()
	b := browsertest.New(t)
	cfg := testConfig(t)
	cfg.Console = "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var link string
	cfg.ConsoleReady = func(l string) {
		defer cancel()
		link = l
		base, _, _ := strings.Cut(l, "/signin#token=")
		tab := b.Tab(t)
		tab.Navigate(l) // the page's script fills the token in; the newcomer clicks
		var filled string
		tab.Eval(`document.getElementById("token").value`, &filled)
		if _, token, _ := strings.Cut(l, "#token="); filled != token {
			t.Errorf("the sign-in form was not filled from the link")
		}
		tab.Click("#signin button")
		deadline := time.Now().Add(10 * time.Second)
		if !strings.HasSuffix(tab.Location(), base+"/") {
			t.Errorf("the sign-in link left the browser at %s, want the overview", tab.Location())
			return
		}
		// The statistics are written every second: wait for the run's executions.
		for {
			tab.Navigate(base + "/")
			if n := tab.Text(".charts + p, #flow-h + ul .n"); n != "0" && n != "" || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if got := tab.Text("#flow-h + ul li:first-child .n"); got == "0" {
			t.Errorf("the overview counts no execution of the run")
		}
		if got := tab.Text("#flow-h + ul li:nth-child(3) .n"); got != "0" {
			t.Errorf("the overview counts %s early starts", got)
		}
		browsertest.AssertNoSeriousAxe(t, tab)
		tab.Screenshot("demo-overview")
		tab.Navigate(base + "/schedules/" + ReconcileName)
		var states []string
		tab.Eval(`Array.from(document.querySelectorAll(".strip .slot")).map(e => e.className)`, &states)
		if len(states) == 0 || slices.ContainsFunc(states, func(s string) bool { return strings.Contains(s, "sl-unknown") }) {
			t.Errorf("the reconciliation's slots: %q, want some and none unknown", states)
		}
		if !slices.ContainsFunc(states, func(s string) bool { return strings.Contains(s, "sl-skipped") }) {
			t.Errorf("the reconciliation's slots: %q, want the slots skipped during the slow run", states)
		}
		browsertest.AssertNoSeriousAxe(t, tab)
		tab.Screenshot("demo-schedule")
		for _, p := range []string{"/tasks", "/cluster", "/audit"} {
			tab.Navigate(base + p)
			if !strings.Contains(tab.Text("header"), "demo") {
				t.Errorf("%s: not signed in as demo", p)
			}
		}
	}
	var out bytes.Buffer
	if _, err := Run(ctx, cfg, &out); err != nil {
		t.Fatalf("Run: %v\noutput:\n%s", err, out.String())
	}
	if link == "" || !strings.Contains(out.String(), "  console:  "+link) || !strings.Contains(out.String(), "console: still serving at") {
		t.Errorf("the output does not print the sign-in link %q:\n%s", link, out.String())
	}
	if _, err := scrape(strings.Replace(link, "#token=", "?", 1)); err == nil {
		t.Errorf("the console still serves after Run")
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
		{ReconcileEvery: 500 * time.Millisecond},
		{ReconcileEvery: time.Second + time.Microsecond},
		{ReconcileEvery: 2 * time.Second, ReconcileSlowTook: 2 * time.Second},
		{ReconcileSlowTook: -time.Second},
		{Metrics: "9090"},
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
	cfg := Config{Seed: 42}.WithDefaults()
	a, b := NewPlan(cfg, "x"), NewPlan(cfg, "x")
	if a.Cancelled != b.Cancelled || len(a.PayAt) != cfg.Paid || len(a.Flaky) != cfg.Flaky {
		t.Fatalf("newPlan: cancelled %q/%q, paid %d, flaky %d; want equal plans with %d paid, %d flaky",
			a.Cancelled, b.Cancelled, len(a.PayAt), len(a.Flaky), cfg.Paid, cfg.Flaky)
	}
	if _, ok := a.PayAt[a.Cancelled]; ok || a.Flaky[a.Cancelled] {
		t.Errorf("newPlan: the cancelled order %s is also paid or flaky", a.Cancelled)
	}
	for _, id := range a.IDs {
		if a.Timeout[id] != b.Timeout[id] || a.Flaky[id] != b.Flaky[id] || a.PayAt[id] != b.PayAt[id] {
			t.Errorf("newPlan: order %s differs between two plans with the same seed", id)
		}
		if d := a.Timeout[id]; d < cfg.MinTimeout || d > cfg.MaxTimeout {
			t.Errorf("newPlan: order %s timeout %v outside [%v, %v]", id, d, cfg.MinTimeout, cfg.MaxTimeout)
		}
	}
}

func TestReconcilePlan(t *testing.T) {
	t.Parallel()
	if got := newReconcilePlan(Config{}.WithDefaults()).slots; got != 7 {
		t.Errorf("newReconcilePlan(defaults).slots = %d, want 7: 2s apart over the orders' 13s", got)
	}
	for _, base := range []Config{{}, Fast(), testConfig(t)} {
		for seed := range uint64(20) {
			cfg := base
			cfg.Seed = seed
			cfg = cfg.WithDefaults()
			p, again := newReconcilePlan(cfg), newReconcilePlan(cfg)
			if !slices.Equal(p.slow, again.slow) {
				t.Errorf("newReconcilePlan(every %v, seed %d): slow %v, then %v; want equal plans", cfg.ReconcileEvery, seed, p.slow, again.slow)
			}
			if !slices.Contains(p.slow, true) {
				t.Errorf("newReconcilePlan(every %v, seed %d): no slow run", cfg.ReconcileEvery, seed)
			}
			for i, slow := range p.slow {
				if slow && i+freedAfter(p.slowTook, p.every, p.onTime) >= p.slots {
					t.Errorf("newReconcilePlan(every %v, seed %d): slot %d is slow, but the slot after it is not among the %d observed",
						cfg.ReconcileEvery, seed, i, p.slots)
				}
			}
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
		if got := Percentile(c.sorted, c.p); got != c.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", c.sorted, c.p, got, c.want)
		}
	}
}

// runCancelledAt runs cfg and cancels its context as soon as the output contains
// marker; Run must then return context.Canceled, and promptly.
func runCancelledAt(t *testing.T, cfg Config, marker string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	var cancelled time.Time
	w := writerFunc(func(p []byte) (int, error) {
		if cancelled.IsZero() && bytes.Contains(p, []byte(marker)) {
			cancelled = time.Now()
			cancel()
		}
		return out.Write(p)
	})
	_, err := Run(ctx, cfg, w)
	if !errors.Is(err, context.Canceled) || cancelled.IsZero() {
		t.Fatalf("Run(cancelled at %q) = %v, want context.Canceled after that line\noutput:\n%s", marker, err, out.String())
	}
	if d := time.Since(cancelled); d > 3*time.Second {
		t.Errorf("Run(cancelled at %q) returned %v after the cancel, want it to return promptly", marker, d)
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
