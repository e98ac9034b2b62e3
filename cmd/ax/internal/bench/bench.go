// Package bench holds the end-to-end workloads behind `ax bench`: each runs a real
// scheduler against a real store, from an empty schema, and measures what a user
// would see. They are measurements, not tests: the numbers go to BENCHMARKS.md with
// the command that produced them.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/elect"
	"github.com/axsched/ax/internal/cputime"
	"github.com/axsched/ax/internal/storecount"
	"github.com/axsched/ax/store"
)

// Result is one workload's measurement. Fields that a workload does not measure are
// zero.
type Result struct {
	Workload    string        `json:"workload"`
	Store       string        `json:"store"`
	Tasks       int           `json:"tasks"`
	Concurrency int           `json:"concurrency,omitempty"`
	Elapsed     time.Duration `json:"elapsed_ns"`
	PerSec      float64       `json:"tasks_per_sec,omitempty"`
	P50         time.Duration `json:"lateness_p50_ns,omitempty"`
	P90         time.Duration `json:"lateness_p90_ns,omitempty"`
	P99         time.Duration `json:"lateness_p99_ns,omitempty"`
	Max         time.Duration `json:"lateness_max_ns,omitempty"`
	Early       int           `json:"early"`                              // handler starts before DueAt
	CallsPerSec float64       `json:"store_calls_per_sec,omitempty"`      // idle: scheduler → store calls
	StmtsPerSec float64       `json:"store_statements_per_sec,omitempty"` // idle: statements the database ran
	DBCPU       time.Duration `json:"db_cpu_ns,omitempty"`                // idle: CPU the database used
	ProcCPU     time.Duration `json:"proc_cpu_ns,omitempty"`              // idle: CPU this process used
	// The other workloads: the scheduler's store calls (each one statement or one
	// transaction), the statements the database executed for them (see
	// Env.Statements; BEGIN and COMMIT count) and the database's CPU, per task,
	// over the measured span. The CPU is the server's processes' (PostgreSQL,
	// MariaDB), or this process's for SQLite, which runs in it with the scheduler and
	// the workload.
	CallsPerTask float64       `json:"store_calls_per_task,omitempty"`
	StmtsPerTask float64       `json:"store_statements_per_task,omitempty"`
	CPUPerTask   time.Duration `json:"db_cpu_per_task_ns,omitempty"`
	// CPUPerRoundTrip is the database server's CPU per trivial query (SELECT 1, one
	// round trip on one connection), measured just before the run: the machine's
	// unit for CPUPerTask, which moves with it from day to day.
	CPUPerRoundTrip time.Duration `json:"db_cpu_per_roundtrip_ns,omitempty"`
	// The limited workload: the name's concurrency limit, the most handlers seen
	// running at once (never above it), and the share of the limit's slots busy with
	// a handler over the run (1: every slot always busy).
	Limit       int     `json:"limit,omitempty"`
	MostAtOnce  int     `json:"most_at_once,omitempty"`
	Utilisation float64 `json:"utilisation,omitempty"`
	// The rated workload: the name's rate (Rate per RatePer), the most claims seen in
	// any window of RatePer by the store's stamps (never above Rate), and the rate
	// achieved over the run as a share of the limit's (1: every window full).
	Rate         int           `json:"rate,omitempty"`
	RatePer      time.Duration `json:"rate_per_ns,omitempty"`
	MostInWindow int           `json:"most_in_window,omitempty"`
	RateShare    float64       `json:"rate_share,omitempty"`
	// The pickup workload: where its tasks were submitted (here, or other: a second
	// process), the pace asked for (tasks/s: PerSec is the pace achieved), and per
	// task its handler's start − the moment its Submit returned (the commit
	// acknowledged), by percentile. SubmitP50 is the median Submit call, from its
	// start to its return: the time already spent when the pickup clock starts.
	From       string        `json:"from,omitempty"`
	SubmitRate int           `json:"submit_rate,omitempty"`
	PickupP50  time.Duration `json:"pickup_p50_ns,omitempty"`
	PickupP95  time.Duration `json:"pickup_p95_ns,omitempty"`
	PickupP99  time.Duration `json:"pickup_p99_ns,omitempty"`
	PickupMax  time.Duration `json:"pickup_max_ns,omitempty"`
	SubmitP50  time.Duration `json:"submit_p50_ns,omitempty"`
}

// String formats the result as one line of a table.
func (r Result) String() string {
	s := fmt.Sprintf("%-8s %-15s tasks=%-6d", r.Store, r.Workload, r.Tasks)
	if r.Concurrency > 0 {
		s += fmt.Sprintf(" conc=%-3d", r.Concurrency)
	}
	s += fmt.Sprintf(" elapsed=%-8v", r.Elapsed.Round(time.Millisecond))
	if r.PerSec > 0 {
		s += fmt.Sprintf(" rate=%7.0f/s", r.PerSec)
	}
	if r.Max > 0 {
		ms := func(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }
		s += fmt.Sprintf(" lateness p50=%s p90=%s p99=%s max=%s early=%d", ms(r.P50), ms(r.P90), ms(r.P99), ms(r.Max), r.Early)
	}
	if r.Workload == "pickup" {
		ms := func(d time.Duration) string { return d.Round(10 * time.Microsecond).String() }
		s += fmt.Sprintf(" from=%s at=%d/s pickup p50=%s p95=%s p99=%s max=%s submit p50=%s early=%d",
			r.From, r.SubmitRate, ms(r.PickupP50), ms(r.PickupP95), ms(r.PickupP99), ms(r.PickupMax), ms(r.SubmitP50), r.Early)
	}
	if r.Workload == "idle" {
		s += fmt.Sprintf(" store-calls=%.2f/s", r.CallsPerSec)
		if r.StmtsPerSec > 0 {
			s += fmt.Sprintf(" statements=%.2f/s", r.StmtsPerSec)
		}
		s += fmt.Sprintf(" db-cpu=%v process-cpu=%v", r.DBCPU.Round(time.Millisecond), r.ProcCPU.Round(time.Millisecond))
	}
	if r.Limit > 0 {
		s += fmt.Sprintf(" limit=%d most=%d utilisation=%.3f", r.Limit, r.MostAtOnce, r.Utilisation)
	}
	if r.Rate > 0 {
		s += fmt.Sprintf(" rate=%d/%v most-in-window=%d share=%.3f", r.Rate, r.RatePer, r.MostInWindow, r.RateShare)
	}
	if r.CallsPerTask > 0 {
		s += fmt.Sprintf(" store-calls/task=%.3f", r.CallsPerTask)
	}
	if r.StmtsPerTask > 0 {
		s += fmt.Sprintf(" statements/task=%.3f", r.StmtsPerTask)
	}
	if r.CPUPerTask > 0 {
		s += fmt.Sprintf(" db-cpu/task=%v", r.CPUPerTask.Round(100*time.Nanosecond))
	}
	if r.CPUPerRoundTrip > 0 {
		s += fmt.Sprintf(" db-cpu/roundtrip=%v", r.CPUPerRoundTrip.Round(100*time.Nanosecond))
	}
	return s
}

// meter counts a scheduler's store calls, the database's statements and its CPU
// over a span.
type meter struct {
	env Env
	cs  *storecount.Store
	at  reading // at the span's start
}

// reading is what a meter counts, so far or over a span. stmts and cpu stay 0
// where the Env cannot tell.
type reading struct {
	calls int
	stmts int64
	cpu   time.Duration
}

// newMeter wraps env's store to count the calls made through the returned Env.
func newMeter(env Env) (*meter, Env) {
	m := &meter{env: env, cs: storecount.New(env.Store)}
	env.Store = m.cs.WithOptionalInterfaces() // what the scheduler sees is unchanged
	return m, env
}

// read returns the counts so far.
func (m *meter) read() (reading, error) {
	r := reading{calls: m.cs.Snapshot().Total()}
	var err error
	if m.env.Statements != nil {
		if r.stmts, err = m.env.Statements(); err != nil {
			return reading{}, err
		}
	}
	if m.env.DBCPU != nil {
		if r.cpu, err = m.env.DBCPU(); err != nil {
			return reading{}, err
		}
	}
	return r, nil
}

// start begins the span.
func (m *meter) start() (err error) {
	m.at, err = m.read()
	return err
}

// since returns the counts since the span began.
func (m *meter) since() (reading, error) {
	r, err := m.read()
	return reading{calls: r.calls - m.at.calls, stmts: r.stmts - m.at.stmts, cpu: r.cpu - m.at.cpu}, err
}

// stop ends the span and sets r's per-task figures.
func (m *meter) stop(r *Result) error {
	if r.Tasks == 0 {
		return nil
	}
	d, err := m.since()
	if err != nil {
		return err
	}
	n := float64(r.Tasks)
	r.CallsPerTask = float64(d.calls) / n
	r.StmtsPerTask = float64(d.stmts) / n
	r.CPUPerTask = d.cpu / time.Duration(r.Tasks)
	return nil
}

// Env is what a workload runs against.
type Env struct {
	Store ax.Store
	Name  string // the store's name in results: sqlite, postgres, mysql
	// DBCPU, when set, returns the CPU time the database server has used so far.
	DBCPU func() (time.Duration, error)
	// Statements, when set, returns how many statements the database has executed
	// for the store so far (BEGIN and COMMIT included), counted where the store
	// exposes it: by the connections of a PostgreSQL store's pool (all but the COPY
	// of a SubmitMany of 1,000 tasks or more, which the store runs on the wire
	// connection), by a MariaDB server's Questions.
	Statements func() (int64, error)
	// Observer, when set, receives the scheduler's events (ax bench --metrics), so
	// that a run measures their cost.
	Observer ax.Observer
	// Elector, when set, elects the scheduler (ax bench --elect): its writes are
	// fenced, and the run measures what that costs.
	Elector elect.Elector
	// DSN is where Store lives (a SQLite file, a PostgreSQL schema's or a MariaDB
	// database's DSN), for the pickup workload's second process to open.
	DSN string
	// Submitter, when set, returns the command of the pickup workload's second
	// process: this program, or a test binary, re-executed to run
	// RunSubmitterFromEnv.
	Submitter func() (*exec.Cmd, error)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newScheduler(env Env, concurrency int) (*ax.Scheduler, error) {
	return ax.New(ax.Config{Store: env.Store, Logger: quiet(), OwnerService: "ax-bench", Concurrency: concurrency,
		Observer: env.Observer, Elector: env.Elector})
}

// insertAll writes tasks straight to the store in batches of 1,000, so that
// submitting is not what a scheduling workload measures.
func insertAll(ctx context.Context, st ax.Store, name string, dues []time.Time) error {
	for i := 0; i < len(dues); i += 1000 {
		batch := make([]store.NewTask, 0, 1000)
		for j := i; j < min(len(dues), i+1000); j++ {
			batch = append(batch, store.NewTask{Name: name, Key: fmt.Sprint(j), DueAt: dues[j].UTC(), MaxRetry: ax.DefaultMaxRetry})
		}
		if _, err := st.Insert(ctx, batch); err != nil {
			return fmt.Errorf("bench: insert: %w", err)
		}
	}
	return nil
}

// EnqueueSingle submits n tasks due in an hour, one Delay each, from 8 goroutines.
func EnqueueSingle(ctx context.Context, env Env, n int) (Result, error) {
	m, env := newMeter(env)
	s, err := newScheduler(env, 0)
	if err != nil {
		return Result{}, err
	}
	if err := m.start(); err != nil {
		return Result{}, err
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, 8)
	start := time.Now()
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				if _, err := s.Delay(ctx, "bench.noop", fmt.Sprint(i), time.Hour); err != nil {
					errs[g] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return Result{}, err
	}
	r := Result{Workload: "enqueue-single", Store: env.Name, Tasks: n, Elapsed: elapsed, PerSec: float64(n) / elapsed.Seconds()}
	return r, m.stop(&r)
}

// EnqueueBatch submits n tasks due in an hour through SubmitMany, 1,000 at a time.
func EnqueueBatch(ctx context.Context, env Env, n int) (Result, error) {
	m, env := newMeter(env)
	s, err := newScheduler(env, 0)
	if err != nil {
		return Result{}, err
	}
	if err := m.start(); err != nil {
		return Result{}, err
	}
	due := time.Now().Add(time.Hour)
	start := time.Now()
	for i := 0; i < n; i += 1000 {
		specs := make([]ax.TaskSpec, 0, 1000)
		for j := i; j < min(n, i+1000); j++ {
			specs = append(specs, ax.TaskSpec{Name: "bench.noop", Key: fmt.Sprint(j), DueAt: due})
		}
		if _, err := s.SubmitMany(ctx, specs); err != nil {
			return Result{}, err
		}
	}
	elapsed := time.Since(start)
	r := Result{Workload: "enqueue-batch", Store: env.Name, Tasks: n, Elapsed: elapsed, PerSec: float64(n) / elapsed.Seconds()}
	return r, m.stop(&r)
}

// Drain writes n tasks due now, starts a scheduler with the given concurrency and a
// no-op handler, and measures from Start to the last completion; then it checks
// every task is SUCCEEDED in the store.
func Drain(ctx context.Context, env Env, n, concurrency int) (Result, error) {
	now := time.Now()
	dues := make([]time.Time, n)
	for i := range dues {
		dues[i] = now
	}
	if err := insertAll(ctx, env.Store, "bench.noop", dues); err != nil {
		return Result{}, err
	}
	r, err := runLateness(ctx, env, "drain", concurrency, dues, func() time.Time { return time.Now() })
	if err != nil {
		return Result{}, err
	}
	if err := checkSucceeded(ctx, env.Store, n); err != nil {
		return Result{}, err
	}
	r.Concurrency = concurrency
	return r, nil
}

// Limited writes n tasks due now under a name limited to limit at once
// (ax.WithConcurrency), whose handler holds its slot for hold, and runs them with
// concurrency workers: the throughput, the most seen at once, and the share of the
// limit's slots kept busy (the ideal rate is limit/hold).
func Limited(ctx context.Context, env Env, n, concurrency, limit int, hold time.Duration) (Result, error) {
	now := time.Now()
	dues := make([]time.Time, n)
	for i := range dues {
		dues[i] = now
	}
	if err := insertAll(ctx, env.Store, "bench.noop", dues); err != nil {
		return Result{}, err
	}
	m, env := newMeter(env)
	s, err := newScheduler(env, concurrency)
	if err != nil {
		return Result{}, err
	}
	var (
		mu            sync.Mutex
		running, most int
		busy          time.Duration
		finished      int
		done          = make(chan struct{})
	)
	s.HandleFunc("bench.noop", func(ctx context.Context, t *ax.Task) error {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		start := time.Now()
		time.Sleep(hold)
		mu.Lock()
		defer mu.Unlock()
		running--
		busy += time.Since(start)
		if finished++; finished == n {
			close(done)
		}
		return nil
	}, ax.WithConcurrency(limit))
	if err := m.start(); err != nil {
		return Result{}, err
	}
	if err := s.Start(ctx); err != nil {
		return Result{}, err
	}
	t0 := time.Now()
	select {
	case <-done:
	case <-ctx.Done():
		s.Stop(context.WithoutCancel(ctx))
		return Result{}, ctx.Err()
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := s.Stop(stopCtx); err != nil {
		return Result{}, err
	}
	elapsed := time.Since(t0)
	if err := checkSucceeded(ctx, env.Store, n); err != nil {
		return Result{}, err
	}
	mu.Lock()
	defer mu.Unlock()
	if most > limit {
		return Result{}, fmt.Errorf("bench: %d handlers ran at once under a limit of %d", most, limit)
	}
	r := Result{
		Workload: "limited", Store: env.Name, Tasks: n, Concurrency: concurrency, Elapsed: elapsed, PerSec: float64(n) / elapsed.Seconds(),
		Limit: limit, MostAtOnce: most, Utilisation: busy.Seconds() / (float64(limit) * elapsed.Seconds()),
	}
	return r, m.stop(&r)
}

// Rated writes n tasks due now under a name limited to rate starts per per
// (ax.WithRate), runs them with a no-op handler, and reads back every execution's
// claim stamp: the most in any window of per (never above rate), and the rate
// achieved as a share of the limit's over the span from the first claim to the
// last.
func Rated(ctx context.Context, env Env, n, rate int, per time.Duration) (Result, error) {
	now := time.Now()
	dues := make([]time.Time, n)
	for i := range dues {
		dues[i] = now
	}
	if err := insertAll(ctx, env.Store, "bench.noop", dues); err != nil {
		return Result{}, err
	}
	m, env := newMeter(env)
	s, err := newScheduler(env, 0)
	if err != nil {
		return Result{}, err
	}
	var finished atomic.Int64
	done := make(chan struct{})
	s.HandleFunc("bench.noop", func(ctx context.Context, t *ax.Task) error {
		if finished.Add(1) == int64(n) {
			close(done)
		}
		return nil
	}, ax.WithRate(rate, per))
	if err := m.start(); err != nil {
		return Result{}, err
	}
	if err := s.Start(ctx); err != nil {
		return Result{}, err
	}
	t0 := time.Now()
	select {
	case <-done:
	case <-ctx.Done():
		s.Stop(context.WithoutCancel(ctx))
		return Result{}, ctx.Err()
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := s.Stop(stopCtx); err != nil {
		return Result{}, err
	}
	elapsed := time.Since(t0)
	if err := checkSucceeded(ctx, env.Store, n); err != nil {
		return Result{}, err
	}
	claims := make([]time.Time, 0, n)
	for i := range n {
		t, err := env.Store.Lookup(ctx, "bench.noop", fmt.Sprint(i))
		if err != nil {
			return Result{}, fmt.Errorf("bench: %w", err)
		}
		claims = append(claims, t.DispatchedAt)
	}
	slices.SortFunc(claims, func(a, b time.Time) int { return a.Compare(b) })
	most := 0
	for i := range claims {
		j, _ := slices.BinarySearchFunc(claims, claims[i].Add(per+1), func(a, b time.Time) int { return a.Compare(b) })
		most = max(most, j-i)
	}
	if most > rate {
		return Result{}, fmt.Errorf("bench: %d claims in a window of %v under a rate of %d", most, per, rate)
	}
	r := Result{
		Workload: "rated", Store: env.Name, Tasks: n, Elapsed: elapsed, PerSec: float64(n) / elapsed.Seconds(),
		Rate: rate, RatePer: per, MostInWindow: most,
	}
	if span := claims[n-1].Sub(claims[0]); span > 0 && n > rate {
		// n claims need (n − rate)/rate whole windows after the first: the limit's
		// pace over the span the claims took.
		r.RateShare = float64(n-rate) / float64(rate) * per.Seconds() / span.Seconds()
	}
	return r, m.stop(&r)
}

// Precision writes n tasks due uniformly over [now+from, now+to] and measures how
// late each handler starts after its DueAt, with the scheduler's defaults.
func Precision(ctx context.Context, env Env, n int, from, to time.Duration) (Result, error) {
	now := time.Now()
	dues := make([]time.Time, n)
	for i := range dues {
		dues[i] = now.Add(from + time.Duration(int64(to-from)*int64(i)/int64(max(n-1, 1))))
	}
	if err := insertAll(ctx, env.Store, "bench.noop", dues); err != nil {
		return Result{}, err
	}
	return runLateness(ctx, env, "precision", 0, dues, func() time.Time { return dues[0] })
}

// Burst writes n tasks all due at the same instant, lead from now, and measures how
// late each handler starts: the maximum is the time to start them all.
func Burst(ctx context.Context, env Env, n int, lead time.Duration) (Result, error) {
	due := time.Now().Add(lead)
	dues := make([]time.Time, n)
	for i := range dues {
		dues[i] = due
	}
	if err := insertAll(ctx, env.Store, "bench.noop", dues); err != nil {
		return Result{}, err
	}
	return runLateness(ctx, env, "burst", 0, dues, func() time.Time { return due })
}

// runLateness starts a scheduler whose no-op handler records each start's lateness,
// and waits until all len(dues) tasks started. Elapsed runs from from() (evaluated
// after Start) to the last start.
func runLateness(ctx context.Context, env Env, workload string, concurrency int, dues []time.Time, from func() time.Time) (Result, error) {
	n := len(dues)
	var mu sync.Mutex
	lateness := make([]time.Duration, 0, n)
	early := 0
	done := make(chan struct{})
	m, env := newMeter(env)
	s, err := newScheduler(env, concurrency)
	if err != nil {
		return Result{}, err
	}
	s.HandleFunc("bench.noop", func(ctx context.Context, t *ax.Task) error {
		late := time.Now().Sub(t.DueAt)
		mu.Lock()
		defer mu.Unlock()
		lateness = append(lateness, late)
		if late < 0 {
			early++
		}
		if len(lateness) == n {
			close(done)
		}
		return nil
	})
	if err := m.start(); err != nil {
		return Result{}, err
	}
	if err := s.Start(ctx); err != nil {
		return Result{}, err
	}
	t0 := from()
	select {
	case <-done:
	case <-ctx.Done():
		s.Stop(context.WithoutCancel(ctx))
		return Result{}, ctx.Err()
	}
	last := time.Now()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := s.Stop(stopCtx); err != nil { // waits for the last results to be written
		return Result{}, err
	}
	elapsed := last.Sub(t0)
	if workload == "drain" {
		elapsed = time.Since(t0) // to the last completion written
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lateness)
	pct := func(p float64) time.Duration { return lateness[min(int(p*float64(n)), n-1)] }
	r := Result{
		Workload: workload, Store: env.Name, Tasks: n, Elapsed: elapsed, PerSec: float64(n) / elapsed.Seconds(),
		P50: pct(0.50), P90: pct(0.90), P99: pct(0.99), Max: lateness[n-1], Early: early,
	}
	return r, m.stop(&r)
}

// checkSucceeded reads every task back (keys 0..n-1) and fails unless all are
// SUCCEEDED.
func checkSucceeded(ctx context.Context, st ax.Store, n int) error {
	var bad atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				t, err := st.Lookup(ctx, "bench.noop", fmt.Sprint(i))
				if err != nil || t.Status != ax.Succeeded {
					bad.Add(1)
					first.CompareAndSwap(nil, fmt.Sprintf("task %d: %v %v", i, err, t))
				}
			}
		}()
	}
	wg.Wait()
	if b := bad.Load(); b > 0 {
		return fmt.Errorf("bench: %d of %d tasks not SUCCEEDED in the store (first: %v)", b, n, first.Load())
	}
	return nil
}

// Idle writes n tasks due in an hour, runs a scheduler with nothing due for d, and
// counts the calls it makes to the store and the CPU the database used meanwhile
// (the first second, the initial load, is not counted).
func Idle(ctx context.Context, env Env, n int, d time.Duration) (Result, error) {
	due := time.Now().Add(time.Hour)
	dues := make([]time.Time, n)
	for i := range dues {
		dues[i] = due.Add(time.Duration(i) * time.Millisecond)
	}
	if err := insertAll(ctx, env.Store, "bench.noop", dues); err != nil {
		return Result{}, err
	}
	// The meter keeps the scheduler's view of the store (PostgreSQL's
	// notifications): the idle cost measured is the one a user sees.
	m, env := newMeter(env)
	s, err := ax.New(ax.Config{Store: env.Store, Logger: quiet(), OwnerService: "ax-bench"})
	if err != nil {
		return Result{}, err
	}
	s.HandleFunc("bench.noop", func(context.Context, *ax.Task) error { return nil })
	if err := s.Start(ctx); err != nil {
		return Result{}, err
	}
	defer s.Stop(context.WithoutCancel(ctx))
	select { // let the initial load pass
	case <-time.After(time.Second):
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	if err := m.start(); err != nil {
		return Result{}, err
	}
	start := time.Now()
	cpu0, cpuErr := cputime.Self() // none where the system does not say: ProcCPU stays 0
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	elapsed := time.Since(start)
	var cpu time.Duration
	if cpu1, err := cputime.Self(); cpuErr == nil && err == nil {
		cpu = cpu1 - cpu0
	}
	c, err := m.since()
	if err != nil {
		return Result{}, err
	}
	r := Result{Workload: "idle", Store: env.Name, Tasks: n, Elapsed: elapsed, DBCPU: c.cpu, ProcCPU: cpu,
		CallsPerSec: float64(c.calls) / elapsed.Seconds(), StmtsPerSec: float64(c.stmts) / elapsed.Seconds()}
	return r, nil
}
