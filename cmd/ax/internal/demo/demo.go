// Package demo is the scenario behind `ax demo`: two cases, an unpaid order closed
// after its timeout and a payment reconciliation every 2 seconds, run end to end at
// the same time on one scheduler and an embedded SQLite store.
//
// An order that is not paid within its timeout (30 minutes in a real shop, scaled down
// to seconds) is closed. Each order's close is a delayed task,
//
//	s.Delay(ctx, "order.close.timeout", orderID, timeout, ax.WithPayload(…))
//
// keyed by the order id, whose handler checks, then changes: it loads the order, does
// nothing if it was paid meanwhile, and otherwise closes it with a conditional write
// (UPDATE orders SET status='closed' WHERE id=? AND status='unpaid'). Along the way some
// users pay before their timeout, one user cancels their order (its task is cancelled
// with s.Cancel and must never fire), and a few handlers fail transiently on their
// first attempt and are retried. At the end the store is checked: every task ended
// SUCCEEDED (or CANCELLED) and every order is closed or paid.
//
// Meanwhile a payment reconciliation runs every 2 seconds, a periodic task,
//
//	s.Every("payment.reconcile", 2*time.Second)
//
// whose slots are the instants 1970-01-01T00:00:00Z + k×2s. A run usually takes
// 0.1s, but roughly every 4th one takes 5s. ax must never run two at once: with the
// default overlap policy (ax.OverlapSkip) an occurrence that comes due while a run
// still holds the schedule's task key becomes SKIPPED, and the first occurrence
// after the slow run finished runs on time:
//
//	slot     0s    2s    4s    6s    8s
//	run      [fast]
//	               [---- slow: 5s ----]
//	                     SKIP  SKIP  [run, on time]
//
// The demo watches each slot's task (s.Lookup) until it is terminal, then checks
// that each slot SUCCEEDED or was SKIPPED, that the handler never saw two runs at
// once, that a slow run made ax skip, and that the first slot after each slow run
// started within 200ms of its slot. When the slots it observes are settled it
// pauses the schedule (s.PauseSchedule); a later run on a kept database resumes it.
//
// The business data is an in-memory table; only the scheduler's state is in SQLite.
//
// Package demo/cluster (`ax demo --nodes 3`) runs the same two cases on several
// replica processes that share one SQLite file, with the plan, script, printer and
// formats exported here.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store/sqlite"
)

// TaskName is the handler name of the order close timeout.
const TaskName = "order.close.timeout"

// OwnerService is the owner_service recorded on the demo's tasks.
const OwnerService = "order-service"

// Defaults for the zero fields of Config: the scale of `ax demo`.
const (
	DefaultOrders       = 40
	DefaultMinTimeout   = 3 * time.Second
	DefaultMaxTimeout   = 12 * time.Second
	DefaultRetryBackoff = time.Second
	DefaultProgress     = time.Second
	DefaultStopTimeout  = 10 * time.Second
)

// ErrConfig is returned (wrapped) by Run for an invalid Config; nothing was run.
var ErrConfig = errors.New("invalid config")

// Config scales the scenario. Zero fields take the documented defaults; Fast returns
// a Config for tests and quick runs.
type Config struct {
	// Orders is how many orders are created, at least 3. Defaults to DefaultOrders (40).
	Orders int
	// MinTimeout and MaxTimeout bound each order's payment timeout (30 minutes in a
	// real shop); timeouts are spread uniformly between them. Default DefaultMinTimeout
	// (3s) and DefaultMaxTimeout (12s).
	MinTimeout, MaxTimeout time.Duration
	// Paid is how many users pay before their timeout. Defaults to 40% of Orders;
	// negative means none. At most Orders-2: one order is cancelled, one must time out.
	Paid int
	// Flaky is how many handlers fail on their first attempt, to be retried. Defaults
	// to 3 (Orders-1 when that is fewer); negative means none.
	Flaky int
	// RetryBackoff is the delay before a retry (ax.WithBackoff on the handler).
	// Defaults to DefaultRetryBackoff (1s).
	RetryBackoff time.Duration
	// Progress is the interval between progress lines. Defaults to DefaultProgress
	// (1s); negative disables them.
	Progress time.Duration
	// Wait bounds the whole run after the orders are created. Defaults to MaxTimeout
	// + 5×RetryBackoff + 15s.
	Wait time.Duration
	// DB is the SQLite file. Empty means a temporary file, removed at the end; a given
	// file is kept (and may already hold tasks of earlier runs).
	DB string
	// Seed makes the scenario (timeouts, who pays, who fails) reproducible.
	Seed uint64
	// Logger receives the scheduler's logs. Defaults to discarding them.
	Logger *slog.Logger
	// Metrics, when set, is an address, HOST:PORT (port 0 picks a free one), on
	// which the scheduler's Prometheus metrics (package metrics) are served at
	// /metrics while the demo runs. Empty: no metrics.
	Metrics string
	// Console, when set, is an address, HOST:PORT (port 0 picks a free one), on which
	// the web console (package console) of the demo's scheduler is served, with the
	// admin API under /api/, behind a token generated at random whose sign-in link is
	// printed. The demo then keeps serving after its summary, the scheduler running,
	// until ctx ends (Ctrl-C), so that one can look around. ConsoleReady, when set, is
	// called with the sign-in link once the summary is printed.
	Console      string
	ConsoleReady func(link string)

	// ReconcileEvery is the interval of the payment reconciliation (s.Every), run
	// alongside the orders for about as long as they take: at least 1s, a whole
	// number of milliseconds. Defaults to DefaultReconcileEvery (2s); negative
	// disables the reconciliation.
	ReconcileEvery time.Duration
	// ReconcileSlowTook is how long a slow reconciliation run takes (a run usually
	// takes 0.1s); longer than ReconcileEvery, so that slots come due while it runs.
	// Which runs are slow follows from Seed: roughly every 4th, at least one.
	// Defaults to 2.5×ReconcileEvery (5s).
	ReconcileSlowTook time.Duration

	// buggyHandler makes the handler report the first order it should close as
	// closed without closing it, for the tests of the verification.
	buggyHandler bool
	// reconcileOverlap, when set, replaces the reconciliation's overlap policy, for
	// the tests of the verification.
	reconcileOverlap ax.OverlapPolicy
	// reconcileOnTime bounds the lateness of the first reconciliation run after a
	// slow one. Defaults to defaultReconcileOnTime (200ms); the tests, run with
	// -race on busy machines, loosen it.
	reconcileOnTime time.Duration
	// beforeMetricsClose, when set, is called with the /metrics URL once the
	// scheduler has stopped (every event recorded), before the server stops: the
	// tests scrape it there.
	beforeMetricsClose func(url string)
}

// Fast returns a Config that runs in about five seconds: timeouts of 0.3–1.2s,
// retries after 200ms, a progress line every 250ms, and a reconciliation every
// second whose slow runs take 2.2s. As it serves tests, run with -race on busy
// machines, the first reconciliation after a slow one may start 500ms late rather
// than 200ms.
func Fast() Config {
	return Config{
		MinTimeout:        300 * time.Millisecond,
		MaxTimeout:        1200 * time.Millisecond,
		RetryBackoff:      200 * time.Millisecond,
		Progress:          250 * time.Millisecond,
		ReconcileEvery:    time.Second,
		ReconcileSlowTook: 2200 * time.Millisecond,
		reconcileOnTime:   500 * time.Millisecond,
	}
}

// Reconciles reports whether the reconciliation runs (after withDefaults).
func (c Config) Reconciles() bool { return c.ReconcileEvery > 0 }

// WithDefaults returns c with its zero fields set to their documented defaults.
func (c Config) WithDefaults() Config {
	if c.Orders == 0 {
		c.Orders = DefaultOrders
	}
	if c.MinTimeout == 0 {
		c.MinTimeout = DefaultMinTimeout
	}
	if c.MaxTimeout == 0 {
		c.MaxTimeout = max(DefaultMaxTimeout, c.MinTimeout)
	}
	switch {
	case c.Paid == 0:
		c.Paid = c.Orders * 2 / 5
	case c.Paid < 0:
		c.Paid = 0
	}
	switch {
	case c.Flaky == 0:
		c.Flaky = min(3, c.Orders-1)
	case c.Flaky < 0:
		c.Flaky = 0
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = DefaultRetryBackoff
	}
	if c.Progress == 0 {
		c.Progress = DefaultProgress
	}
	if c.ReconcileEvery == 0 {
		c.ReconcileEvery = DefaultReconcileEvery
	}
	if c.ReconcileSlowTook == 0 && c.Reconciles() {
		c.ReconcileSlowTook = c.ReconcileEvery * 5 / 2
	}
	if c.reconcileOnTime == 0 {
		c.reconcileOnTime = defaultReconcileOnTime
	}
	if c.Wait == 0 {
		c.Wait = c.MaxTimeout + 5*c.RetryBackoff + 15*time.Second
		if c.Reconciles() && c.ReconcileEvery >= time.Second {
			c.Wait = max(c.Wait, reconcileSpan(c)+15*time.Second)
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

// Validate reports every bad field of c, each wrapping ErrConfig.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("demo: config: %s: %w", fmt.Sprintf(format, args...), ErrConfig))
	}
	if c.Orders < 3 {
		bad("Orders %d: need at least 3 (one paid, one cancelled, one timing out)", c.Orders)
	}
	if c.MinTimeout <= 0 {
		bad("MinTimeout %v must be positive", c.MinTimeout)
	}
	if c.MaxTimeout < c.MinTimeout {
		bad("MaxTimeout %v is below MinTimeout %v", c.MaxTimeout, c.MinTimeout)
	}
	if c.Orders >= 3 && c.Paid > c.Orders-2 {
		bad("Paid %d: at most Orders-2 (%d)", c.Paid, c.Orders-2)
	}
	if c.Orders >= 3 && c.Flaky > c.Orders-1 {
		bad("Flaky %d: at most Orders-1 (%d)", c.Flaky, c.Orders-1)
	}
	if c.RetryBackoff < 0 {
		bad("RetryBackoff %v is negative", c.RetryBackoff)
	}
	if c.Wait < 0 {
		bad("Wait %v is negative", c.Wait)
	}
	if c.Metrics != "" {
		if _, _, err := net.SplitHostPort(c.Metrics); err != nil {
			bad("Metrics %q: want HOST:PORT, e.g. 127.0.0.1:9090 (%v)", c.Metrics, err)
		}
	}
	if c.Reconciles() {
		switch {
		case c.ReconcileEvery < time.Second:
			bad("ReconcileEvery %v: at least 1s (s.Every)", c.ReconcileEvery)
		case c.ReconcileEvery%time.Millisecond != 0:
			bad("ReconcileEvery %v: not a whole number of milliseconds (s.Every)", c.ReconcileEvery)
		}
		if c.ReconcileSlowTook <= c.ReconcileEvery {
			bad("ReconcileSlowTook %v must exceed ReconcileEvery %v, or no slot comes due during a slow run", c.ReconcileSlowTook, c.ReconcileEvery)
		}
	}
	return errors.Join(errs...)
}

// Summary is what a run did. Counts are of this run's orders only.
type Summary struct {
	Orders int // orders created
	Paid   int // orders the user paid before their timeout

	Fired         int // handler executions: first attempts and retries
	Closed        int // orders the handler closed (the timeout won)
	AlreadyPaid   int // the handler found the order paid and did nothing
	AlreadyClosed int // the handler found the order closed already (0 in a healthy run)
	Failed        int // injected transient failures; each is retried
	Retried       int // executions with Attempt > 0
	Cancelled     int // timeouts cancelled with Scheduler.Cancel

	// CancelledOrder is the order whose user cancelled it; its task must stay
	// CANCELLED with no execution.
	CancelledOrder string

	// CancelledFired counts executions of a cancelled task: must be 0.
	CancelledFired int
	// Early counts executions that started before the task's DueAt: must be 0.
	Early int
	// Stale counts executions for orders this run did not create, and
	// reconciliation runs of occurrences written before it started (tasks left in
	// a kept database by an earlier, interrupted run); they are ignored.
	Stale int

	// Lateness of every execution: the handler's time.Now() minus the task's DueAt.
	LatenessP50, LatenessP99, LatenessMax time.Duration

	// The payment reconciliation; all zero when it is disabled.
	ReconcileFrom    time.Time // the first slot observed: the first after Start
	ReconcileSlots   int       // slots observed, from ReconcileFrom: each SUCCEEDED or SKIPPED
	ReconcileRuns    int       // reconciliation runs in those slots
	ReconcileSlow    int       // of which slow, longer than the interval
	ReconcileSkipped int       // occurrences ax SKIPPED because a run held the task key
	// ReconcileMaxConcurrent is the most reconciliation runs the handler saw at
	// once: must be 1.
	ReconcileMaxConcurrent int
	// Lateness of every reconciliation run: its start minus its slot.
	ReconcileLatenessP99, ReconcileLatenessMax time.Duration
	// ReconcileAfterSlowLate is the largest lateness of the first run after a slow
	// one: at most 200ms.
	ReconcileAfterSlowLate time.Duration

	Elapsed time.Duration // from the first order to the last task (or reconciliation slot) settled
	DB      string        // the SQLite file
	KeptDB  bool          // false: DB was a temporary file, removed
}

// Plan is the scripted scenario: who pays, who cancels, whose handler fails once.
type Plan struct {
	IDs       []string                 // the orders, in creation order
	Timeout   map[string]time.Duration // each order's close timeout
	Amount    map[string]int64         // in cents
	PayAt     map[string]float64       // fraction of the timeout at which the user pays
	Cancelled string                   // the order its user cancels
	Flaky     map[string]bool          // the orders whose handler fails once
}

// NewPlan draws the plan of cfg's scenario from cfg.Seed; tag makes the order ids
// unique to the run.
func NewPlan(cfg Config, tag string) *Plan {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6178)) // "ax"
	p := &Plan{
		Timeout: make(map[string]time.Duration), Amount: make(map[string]int64),
		PayAt: make(map[string]float64), Flaky: make(map[string]bool),
	}
	width := len(strconv.Itoa(cfg.Orders))
	span := cfg.MaxTimeout - cfg.MinTimeout
	for i := range cfg.Orders {
		id := fmt.Sprintf("ord-%s-%0*d", tag, width, i+1)
		p.IDs = append(p.IDs, id)
		d := cfg.MinTimeout
		if span > 0 {
			d += time.Duration(rng.Int64N(int64(span) + 1))
		}
		p.Timeout[id] = d.Round(time.Millisecond)
		p.Amount[id] = 100 + rng.Int64N(99_900)
	}
	perm := rng.Perm(cfg.Orders)
	p.Cancelled = p.IDs[perm[0]]
	for _, i := range perm[1 : 1+cfg.Paid] {
		p.PayAt[p.IDs[i]] = 0.2 + 0.4*rng.Float64()
	}
	rest := slices.Clone(perm[1:])
	rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	for _, i := range rest[:cfg.Flaky] {
		p.Flaky[p.IDs[i]] = true
	}
	return p
}

// payload is the task's payload: what the service would need to close the order.
type payload struct {
	OrderID     string    `json:"order_id"`
	AmountCents int64     `json:"amount_cents"`
	CreatedAt   time.Time `json:"created_at"`
}

// run is one execution of the scenario.
type run struct {
	cfg     Config
	s       *ax.Scheduler
	orders  *orders
	plan    *Plan
	tally   *tally
	out     *Printer
	due     map[string]time.Time // each task's due time, as returned by Delay
	script  *script
	rec     *reconciler // nil when the reconciliation is disabled
	metrics string      // the /metrics URL; empty without Config.Metrics
	console string      // the console's sign-in link; empty without Config.Console
	bugOnce atomic.Bool // buggyHandler struck
}

// Run runs the scenario and reports what happened to out: a line per notable event,
// a progress line every cfg.Progress, the verification and the summary. It returns an
// error when the scenario could not run, did not finish within cfg.Wait, or ended in a
// state it must not (a task not SUCCEEDED/CANCELLED, an order neither closed nor
// paid, an early or cancelled execution, two reconciliation runs at once, a
// reconciliation slot neither SUCCEEDED nor SKIPPED, a late run after a slow one);
// the Summary is filled as far as the run got.
func Run(ctx context.Context, cfg Config, out io.Writer) (sum Summary, err error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return sum, err
	}

	var obs ax.Observer // nil without cfg.Metrics
	metricsURL := ""
	if cfg.Metrics != "" {
		ms, merr := serveMetrics(cfg.Metrics) // not err: the deferred close sets Run's
		if merr != nil {
			return sum, fmt.Errorf("demo: %w", merr)
		}
		// Registered first, so run last: after the scheduler stopped, when every
		// event is recorded.
		defer func() {
			if cfg.beforeMetricsClose != nil {
				cfg.beforeMetricsClose(ms.url)
			}
			if cerr := ms.close(); cerr != nil && err == nil {
				err = fmt.Errorf("demo: %w", cerr)
			}
		}()
		obs, metricsURL = ms.obs, ms.url
	}

	sum.DB, sum.KeptDB = cfg.DB, cfg.DB != ""
	if cfg.DB == "" {
		dir, err := os.MkdirTemp("", "ax-demo-")
		if err != nil {
			return sum, fmt.Errorf("demo: temporary database: %w", err)
		}
		defer os.RemoveAll(dir)
		sum.DB = filepath.Join(dir, "ax.db")
	}
	st, err := sqlite.Open(sum.DB)
	if err != nil {
		return sum, fmt.Errorf("demo: %w", err)
	}
	defer st.Close()

	axCfg := ax.Config{Store: st, OwnerService: OwnerService, Logger: cfg.Logger}
	if obs != nil {
		// The run lasts seconds: count the tasks per status (ax_tasks) every second,
		// not every ax.DefaultStatsInterval.
		axCfg.Observer, axCfg.StatsInterval = obs, metricsStatsInterval
	}
	if cfg.Console != "" {
		// The console's overview charts the per-minute statistics: write them every
		// second, the run lasting seconds, not every ax.DefaultExecutionStatsInterval.
		axCfg.ExecutionStatsInterval = time.Second
	}
	s, err := ax.New(axCfg)
	if err != nil {
		return sum, fmt.Errorf("demo: %w", err)
	}
	var cons *consoleServer
	if cfg.Console != "" {
		if cons, err = serveConsole(s, cfg.Console, cfg.Logger); err != nil {
			return sum, fmt.Errorf("demo: %w", err)
		}
		defer func() { // after the scheduler stopped: deferred before it
			if cerr := cons.close(); cerr != nil && err == nil {
				err = fmt.Errorf("demo: %w", cerr)
			}
		}()
	}
	tag := strconv.FormatInt(time.Now().UnixMilli(), 36)
	r := &run{
		cfg: cfg, s: s, orders: newOrders(), plan: NewPlan(cfg, tag[max(len(tag)-6, 0):]),
		tally: &tally{done: make(chan struct{})},
		out:   NewPrinter(out),
		due:   make(map[string]time.Time),

		metrics: metricsURL,
	}
	if cons != nil {
		r.console = cons.url
	}
	defer r.out.Close()
	r.tally.expected = cfg.Orders
	backoff := cfg.RetryBackoff
	s.HandleFunc(TaskName, r.closeOrder, ax.WithBackoff(func(int) time.Duration { return backoff }))
	if cfg.Reconciles() {
		r.rec = newReconciler(r, newReconcilePlan(cfg))
		if err := r.rec.register(); err != nil {
			return sum, fmt.Errorf("demo: %w", err)
		}
	}

	if err := s.Start(ctx); err != nil {
		return sum, fmt.Errorf("demo: %w", err)
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		if r.rec != nil {
			r.rec.end(ctx)
		}
		return StopScheduler(ctx, s)
	}
	defer func() {
		if serr := stop(); serr != nil && err == nil {
			err = fmt.Errorf("demo: %w", serr)
		}
	}()

	if r.rec != nil {
		if err := r.rec.begin(ctx); err != nil {
			return sum, fmt.Errorf("demo: %w", err)
		}
	}
	r.header(sum)
	start := r.out.start
	if r.rec != nil {
		r.rec.start(ctx)
		defer r.rec.stop()
	}
	if err := r.createOrders(ctx); err != nil {
		return sum, err
	}
	defer r.script.Stop()
	if err := r.wait(ctx); err != nil {
		r.fill(&sum, time.Since(start))
		return sum, err
	}
	r.fill(&sum, time.Since(start))
	if err := r.verify(ctx, sum); err != nil {
		return sum, err
	}
	if cons != nil {
		r.summary(sum)
		r.out.Plain("")
		r.out.Plain("console: still serving at %s/, the scheduler running; sign in with the link above. Ctrl-C ends the demo.", cons.base)
		r.out.Plain("  the CLI: ax tasks list --server %s/api --token TOKEN (the link's token; the same for ax schedules)", cons.base)
		if cfg.ConsoleReady != nil {
			cfg.ConsoleReady(cons.url)
		}
		<-ctx.Done()
		if err := stop(); err != nil {
			return sum, fmt.Errorf("demo: %w", err)
		}
		return sum, nil
	}
	if err := stop(); err != nil {
		return sum, fmt.Errorf("demo: %w", err)
	}
	r.summary(sum)
	return sum, nil
}

// StopScheduler stops s gracefully, waiting DefaultStopTimeout for running handlers.
// Stop bounds only that wait with its context, so StopScheduler also gives up
// (leaving the scheduler's goroutines behind) a few seconds later: a demo that cannot
// stop must fail, not hang.
func StopScheduler(ctx context.Context, s *ax.Scheduler) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultStopTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Stop(sctx) }()
	giveUp := time.NewTimer(DefaultStopTimeout + 5*time.Second)
	defer giveUp.Stop()
	select {
	case err := <-done:
		return err
	case <-giveUp.C:
		return fmt.Errorf("scheduler did not stop within %v", DefaultStopTimeout+5*time.Second)
	}
}

func (r *run) header(sum Summary) {
	cfg := r.cfg
	where := "temporary file, removed at the end"
	if sum.KeptDB {
		where = "kept"
	}
	title := "ax demo — order timeout"
	if r.rec != nil {
		title += " and payment reconciliation"
	}
	r.out.Plain("%s", title)
	r.out.Plain("  store:    sqlite %s (%s)", sum.DB, where)
	if r.metrics != "" {
		r.out.Plain("  metrics:  Prometheus metrics at %s while the demo runs", r.metrics)
	}
	if r.console != "" {
		r.out.Plain("  console:  %s (sign-in link: its token follows #token=; it serves after the summary until Ctrl-C)", r.console)
	}
	r.out.Plain("  orders:   %d, each closed if unpaid after %s–%s (30 minutes in a shop, scaled down)",
		cfg.Orders, Secs(cfg.MinTimeout), Secs(cfg.MaxTimeout))
	r.out.Plain("  task:     s.Delay(ctx, %q, orderID, timeout, ax.WithPayload(order))", TaskName)
	r.out.Plain("  script:   %d users pay in time, 1 cancels the order (s.Cancel), %d handlers fail once and retry after %s",
		len(r.plan.PayAt), len(r.plan.Flaky), Secs(cfg.RetryBackoff))
	if r.rec != nil {
		r.rec.header()
	}
	r.out.Plain("")
}

// createOrders inserts the orders and submits their close timeouts, then starts the
// users' script (payments and the cancellation) on its own goroutine.
func (r *run) createOrders(ctx context.Context) error {
	created := make(map[string]time.Time, len(r.plan.IDs))
	for _, id := range r.plan.IDs {
		r.orders.insert(id, r.plan.Amount[id])
		now := time.Now()
		created[id] = now
		b, err := json.Marshal(payload{OrderID: id, AmountCents: r.plan.Amount[id], CreatedAt: now.UTC()})
		if err != nil {
			return fmt.Errorf("demo: order %s: %w", id, err)
		}
		t, err := r.s.Delay(ctx, TaskName, id, r.plan.Timeout[id], ax.WithPayload(b))
		if err != nil {
			return fmt.Errorf("demo: schedule the close of order %s: %w", id, err)
		}
		r.due[id] = t.DueAt
	}
	r.out.Line("created %d orders; their close timeouts are scheduled in ax", len(r.plan.IDs))
	r.script = newScript(r, created)
	r.script.start(ctx)
	return nil
}

// wait waits until every task settled and the script ended, printing progress.
func (r *run) wait(ctx context.Context) error {
	deadline := time.NewTimer(r.cfg.Wait)
	defer deadline.Stop()
	var tick <-chan time.Time
	if r.cfg.Progress > 0 {
		t := time.NewTicker(r.cfg.Progress)
		defer t.Stop()
		tick = t.C
	}
	done, scriptDone := r.tally.done, r.script.Done
	var recDone chan struct{}
	if r.rec != nil {
		recDone = r.rec.done
	}
	for done != nil || scriptDone != nil || recDone != nil {
		select {
		case <-done:
			done = nil
		case <-scriptDone:
			scriptDone = nil
			if err := r.script.Err; err != nil {
				return err
			}
		case <-recDone:
			recDone = nil
			if err := r.rec.err; err != nil {
				return err
			}
		case <-tick:
			r.out.Line("%s", r.progressLine())
		case <-ctx.Done():
			return fmt.Errorf("demo: interrupted: %w", ctx.Err())
		case <-deadline.C:
			return fmt.Errorf("demo: not finished after %v: %s", r.cfg.Wait, r.pendingReport(ctx))
		}
	}
	if tick != nil {
		r.out.Line("%s", r.progressLine())
	}
	return nil
}

// progressLine is the tally's progress line, with the reconciliation's counts.
func (r *run) progressLine() string {
	line := r.tally.snapshot().progressLine()
	if r.rec != nil {
		runs, skipped := r.rec.counts()
		line += fmt.Sprintf(" | reconcile runs %d skipped %d", runs, skipped)
	}
	return line
}

// pendingReport names the orders whose task has not settled, with its stored state.
func (r *run) pendingReport(ctx context.Context) string {
	var pending []string
	for _, id := range r.plan.IDs {
		if id == r.plan.Cancelled {
			continue
		}
		t, err := r.s.Lookup(ctx, TaskName, id)
		switch {
		case err != nil:
			pending = append(pending, fmt.Sprintf("%s (lookup: %v)", id, err))
		case t.Status != ax.Succeeded:
			pending = append(pending, fmt.Sprintf("%s (task %s, attempt %d, last error %q)", id, t.Status, t.Attempt, t.LastError))
		}
	}
	report := fmt.Sprintf("%d orders pending: %s", len(pending), Clip(pending, 10))
	if r.rec != nil {
		if p := r.rec.pending(); len(p) > 0 {
			report += fmt.Sprintf("; %d reconciliation slots pending: %s", len(p), Clip(p, 10))
		}
	}
	return report
}

// closeOrder is the handler of TaskName: check, then change.
func (r *run) closeOrder(ctx context.Context, t *ax.Task) error {
	started := time.Now()
	id := t.Key
	if _, ok := r.orders.get(id); !ok {
		r.tally.update(func(tl *tally) { tl.stale++ })
		r.out.Line("task for order %s: not an order of this run (left by an earlier run?), ignored", id)
		return nil
	}
	late := started.Sub(t.DueAt)
	r.tally.update(func(tl *tally) {
		tl.fired++
		tl.lateness = append(tl.lateness, late)
		if late < 0 {
			tl.early++
		}
		if t.Attempt > 0 {
			tl.retried++
		}
		if id == r.plan.Cancelled {
			tl.cancelledFired++
		}
	})
	if late < 0 {
		r.out.Line("order %s: EARLY: the handler started %v before the task's DueAt", id, -late)
	}
	if id == r.plan.Cancelled {
		r.out.Line("order %s: BUG: the cancelled timeout fired (execution %s)", id, t.ExecutionID)
	}

	var p payload
	if err := json.Unmarshal(t.Payload, &p); err != nil || p.OrderID != id {
		return fmt.Errorf("order %s: bad payload %q: %v", id, t.Payload, err)
	}
	if r.plan.Flaky[id] && t.Attempt == 0 {
		r.tally.update(func(tl *tally) { tl.failed++ })
		r.out.Line("order %s: close failed on attempt %d: order database timed out (injected); ax retries in %s",
			id, t.Attempt+1, Secs(r.cfg.RetryBackoff))
		return errors.New("load order: order database timed out (injected transient failure)")
	}

	// Check: a timeout always arrives late relative to what the user did meanwhile.
	o, _ := r.orders.get(id)
	outcome := ""
	switch o.Status {
	case Paid:
		outcome = "already paid, nothing to do"
		r.tally.settle(func(tl *tally) { tl.alreadyPaid++ })
	case Closed:
		outcome = "already closed (" + o.Reason + "), nothing to do"
		r.tally.settle(func(tl *tally) { tl.alreadyClosed++ })
	default:
		// Change, conditionally: UPDATE orders SET status='closed' WHERE id=? AND status='unpaid'.
		if r.cfg.buggyHandler && r.bugOnce.CompareAndSwap(false, true) {
			r.tally.settle(func(tl *tally) { tl.closed++ })
			break
		}
		if r.orders.transition(id, Unpaid, Closed, "timeout") {
			outcome = "closed: unpaid after " + Secs(r.plan.Timeout[id])
			r.tally.settle(func(tl *tally) { tl.closed++ })
			break
		}
		// The user paid (or cancelled) between the check and the change.
		if o, _ = r.orders.get(id); o.Status == Paid {
			outcome = "already paid (just now), nothing to do"
			r.tally.settle(func(tl *tally) { tl.alreadyPaid++ })
		} else {
			outcome = "already closed (" + o.Reason + "), nothing to do"
			r.tally.settle(func(tl *tally) { tl.alreadyClosed++ })
		}
	}
	if t.Attempt > 0 {
		r.out.Line("order %s: retry %d succeeded: %s", id, t.Attempt, outcome)
	}
	return nil
}

// fill copies the counters into sum.
func (r *run) fill(sum *Summary, elapsed time.Duration) {
	sn := r.tally.snapshot()
	sum.Orders, sum.CancelledOrder = len(r.plan.IDs), r.plan.Cancelled
	sum.Paid, sum.Fired, sum.Closed, sum.AlreadyPaid, sum.AlreadyClosed = sn.paid, sn.fired, sn.closed, sn.alreadyPaid, sn.alreadyClosed
	sum.Failed, sum.Retried, sum.Cancelled, sum.CancelledFired = sn.failed, sn.retried, sn.cancelled, sn.cancelledFired
	sum.Early, sum.Stale = sn.early, sn.stale
	lat := r.tally.latenessCopy()
	slices.Sort(lat)
	sum.LatenessP50, sum.LatenessP99 = Percentile(lat, 0.50), Percentile(lat, 0.99)
	if len(lat) > 0 {
		sum.LatenessMax = lat[len(lat)-1]
	}
	sum.Elapsed = elapsed
	if r.rec != nil {
		r.rec.fill(sum)
	}
}

// verify checks the store and the orders table: every task SUCCEEDED (CANCELLED for
// the cancelled order) after the expected number of attempts, every order closed or
// paid, and the counters consistent. Results are written after handlers return, so
// it first waits briefly for the tasks to leave RUNNING.
func (r *run) verify(ctx context.Context, sum Summary) error {
	tasks := make(map[string]*ax.Task, len(r.plan.IDs))
	deadline := time.Now().Add(5 * time.Second)
	for {
		settled := true
		for _, id := range r.plan.IDs {
			if t := tasks[id]; t != nil && t.Status.Terminal() {
				continue
			}
			t, err := r.s.Lookup(ctx, TaskName, id)
			if err != nil {
				return fmt.Errorf("demo: verify: %w", err)
			}
			tasks[id] = t
			settled = settled && t.Status.Terminal()
		}
		if settled || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("demo: verify: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}

	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	succeeded, cancelled, closedOrders, paidOrders := 0, 0, 0, 0
	for _, id := range r.plan.IDs {
		t := tasks[id]
		want, attempts := ax.Succeeded, 0
		if id == r.plan.Cancelled {
			want = ax.Cancelled
		} else if r.plan.Flaky[id] {
			attempts = 1
		}
		switch {
		case t.Status != want:
			bad("task of order %s is %s, want %s (last error %q)", id, t.Status, want, t.LastError)
		case t.Attempt != attempts:
			bad("task of order %s ended at attempt %d, want %d", id, t.Attempt, attempts)
		case want == ax.Succeeded:
			succeeded++
		default:
			cancelled++
		}
		o, _ := r.orders.get(id)
		switch o.Status {
		case Closed:
			closedOrders++
		case Paid:
			paidOrders++
		default:
			bad("order %s is %s, want closed or paid", id, o.Status)
		}
		if id == r.plan.Cancelled && (o.Status != Closed || o.Reason != "cancelled by user") {
			bad("order %s: cancelled by its user, but it is %s (%s)", id, o.Status, o.Reason)
		}
	}
	if sum.Early != 0 {
		bad("%d executions started before their DueAt", sum.Early)
	}
	if sum.CancelledFired != 0 {
		bad("the cancelled order's timeout fired %d times", sum.CancelledFired)
	}
	if got, want := sum.Closed+sum.AlreadyPaid+sum.AlreadyClosed+sum.Cancelled, sum.Orders; got != want {
		bad("closed %d + already-paid %d + already-closed %d + cancelled %d = %d, want %d orders",
			sum.Closed, sum.AlreadyPaid, sum.AlreadyClosed, sum.Cancelled, got, want)
	}
	if got, want := sum.Fired, sum.Closed+sum.AlreadyPaid+sum.AlreadyClosed+sum.Failed; got != want {
		bad("fired %d, want closed + already-paid + already-closed + failed = %d", got, want)
	}
	if sum.Retried != sum.Failed {
		bad("retried %d, want one retry per transient failure (%d)", sum.Retried, sum.Failed)
	}
	if sum.AlreadyPaid != sum.Paid {
		bad("already-paid %d, want the %d orders paid in time", sum.AlreadyPaid, sum.Paid)
	}
	recOK := ""
	if r.rec != nil {
		var recProblems []string
		recProblems, recOK = r.rec.verify(sum)
		problems = append(problems, recProblems...)
	}
	if len(problems) > 0 {
		r.out.Plain("")
		r.out.Plain("verify: FAILED")
		for _, p := range problems {
			r.out.Plain("  - %s", p)
		}
		return fmt.Errorf("demo: verify failed: %s", Clip(problems, 5))
	}
	r.out.Plain("")
	r.out.Plain("verify: OK: %d order timeouts in the store as expected (%d SUCCEEDED, %d CANCELLED); %d orders closed, %d paid",
		len(r.plan.IDs), succeeded, cancelled, closedOrders, paidOrders)
	if recOK != "" {
		r.out.Plain("verify: OK: %s", recOK)
	}
	return nil
}

func (r *run) summary(sum Summary) {
	r.out.Plain("summary: fired %d | closed %d | already-paid %d | retried %d | cancelled %d | lateness p50 %s p99 %s max %s | early = %d",
		sum.Fired, sum.Closed, sum.AlreadyPaid, sum.Retried, sum.Cancelled,
		Ms(sum.LatenessP50), Ms(sum.LatenessP99), Ms(sum.LatenessMax), sum.Early)
	what := fmt.Sprintf("%d orders", sum.Orders)
	if r.rec != nil {
		what += fmt.Sprintf(" and %d reconciliation slots", sum.ReconcileSlots)
	}
	r.out.Plain("  %s in %s; lateness is the handler's start minus the task's DueAt over %d executions (target: p99 within 200ms)",
		what, Secs(sum.Elapsed), sum.Fired)
	if r.rec != nil {
		r.rec.summary(sum)
	}
	if sum.KeptDB {
		r.out.Plain("  the tasks stay in %s", sum.DB)
	}
}

// Clip joins the first n items, saying how many more there are.
func Clip(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, "; ")
	}
	return strings.Join(items[:n], "; ") + fmt.Sprintf("; and %d more", len(items)-n)
}
