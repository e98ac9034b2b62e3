package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/axsched/ax/internal/cputime"
)

// metric is one number a workload measures.
type metric struct {
	Name   string
	Unit   string
	Value  float64
	Higher bool // higher is better
}

// result is one run of one workload on one backend.
type result struct {
	Metrics    []metric
	Violations []string
}

// workload is one measurement, with its default task count (before -scale).
type workload struct {
	name  string
	tasks int
	about string
	// label, when set, names the backend's row (the workload has one backend only).
	label func(backend string) string
	// supports reports whether the workload runs on the instance; nil: all.
	supports func(instance) bool
	run      func(ctx context.Context, env runEnv, in instance, n int) (result, error)
}

// runEnv is what a workload needs besides its instance.
type runEnv struct {
	rdb *redis.Client // for INFO: server-wide counters, any database
	pg  string        // the base PostgreSQL DSN
}

// workloads are the measurements, with the definitions and sizes of ax bench
// (cmd/ax/internal/bench).
var workloads = []workload{
	{name: "enqueue-single", tasks: 20_000, about: "tasks due in 1h, one insert each from 8 goroutines: tasks/s", run: enqueueSingle},
	{name: "enqueue-batch", tasks: 100_000, about: "tasks due in 1h in batches of 1,000 (asynq: 8 concurrent Enqueue, no batch API): tasks/s", run: func(ctx context.Context, _ runEnv, in instance, n int) (result, error) {
		return enqueueBatch(ctx, in, n, in.EnqueueBatch)
	}},
	{name: "enqueue-batch-copy", tasks: 100_000, about: "as enqueue-batch, River's InsertManyFast (COPY)",
		label:    func(b string) string { return b + " InsertManyFast/COPY" },
		supports: func(in instance) bool { _, ok := in.(fastBatcher); return ok },
		run: func(ctx context.Context, _ runEnv, in instance, n int) (result, error) {
			return enqueueBatch(ctx, in, n, in.(fastBatcher).EnqueueBatchFast)
		}},
	{name: "drain-100", tasks: 50_000, about: "tasks due now, written before the workers start, no-op handler, 100 workers: tasks/s to the last completion", run: func(ctx context.Context, _ runEnv, in instance, n int) (result, error) {
		return drain(ctx, in, n, 100)
	}},
	{name: "drain-20", tasks: 50_000, about: "as drain-100 with 20 workers", run: func(ctx context.Context, _ runEnv, in instance, n int) (result, error) {
		return drain(ctx, in, n, 20)
	}},
	{name: "precision", tasks: 5_000, about: "tasks due uniformly over [now+5s, now+25s], 64 workers: lateness = handler start - due (local clock) p50/p99/max, early starts", run: precision},
	{name: "idle", tasks: 100_000, about: "tasks due in 1h (then VACUUM ANALYZE, CHECKPOINT, wait for PostgreSQL to be quiet), nothing due, 64 workers, 30s: PostgreSQL and Redis server CPU, Redis commands", run: idle},
}

// workerConcurrency is the workers of precision and idle: ax's default, given to
// every backend alike (River needs one, asynq's default is the number of CPUs).
const workerConcurrency = 64

// tally records handler calls per key, safe for concurrent use.
type tally struct {
	calls  []atomic.Int32
	starts []atomic.Int64 // first start, Unix ns
	stray  atomic.Int64   // keys out of range
	seen   atomic.Int64   // distinct keys started
	done   chan struct{}  // closed when every key started once
	once   sync.Once
}

func newTally(n int) *tally {
	return &tally{calls: make([]atomic.Int32, n), starts: make([]atomic.Int64, n), done: make(chan struct{})}
}

// record is the handler of every backend.
func (t *tally) record(key int) {
	now := time.Now().UnixNano()
	if key < 0 || key >= len(t.calls) {
		t.stray.Add(1)
		return
	}
	if t.calls[key].Add(1) == 1 {
		t.starts[key].Store(now)
		if t.seen.Add(1) == int64(len(t.calls)) {
			t.once.Do(func() { close(t.done) })
		}
	}
}

// check lists the violations of "every task ran exactly once, none early".
func (t *tally) check(dues []time.Time) []string {
	var missing, twice, early []int
	for k := range t.calls {
		switch c := t.calls[k].Load(); {
		case c == 0:
			missing = append(missing, k)
		case c > 1:
			twice = append(twice, k)
		}
		if dues != nil && t.calls[k].Load() > 0 && t.starts[k].Load() < dues[k].UnixNano() {
			early = append(early, k)
		}
	}
	var v []string
	add := func(what string, keys []int) {
		if len(keys) > 0 {
			v = append(v, fmt.Sprintf("%d tasks %s (first keys %v)", len(keys), what, keys[:min(5, len(keys))]))
		}
	}
	add("never ran", missing)
	add("ran more than once", twice)
	add("started before their due time", early)
	if s := t.stray.Load(); s > 0 {
		v = append(v, fmt.Sprintf("%d handler calls with an unknown key", s))
	}
	return v
}

// checkStore compares the store's record with what a workload expects.
func checkStore(ctx context.Context, in instance, want storeCounts, asynqLike bool) ([]string, error) {
	got, err := in.Counts(ctx)
	if err != nil {
		return nil, err
	}
	if asynqLike { // asynq deletes what completed: it holds only what waits
		want.Total = want.Waiting
	}
	if got != want {
		return []string{fmt.Sprintf("store record %+v, want %+v", got, want)}, nil
	}
	return nil, nil
}

func isAsynq(in instance) bool { _, ok := in.(*asynqInstance); return ok }

func enqueueSingle(ctx context.Context, _ runEnv, in instance, n int) (result, error) {
	due := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, 8)
	start := time.Now()
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				if err := in.EnqueueOne(ctx, int(i), due); err != nil {
					errs[g] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return result{}, err
	}
	v, err := checkStore(ctx, in, storeCounts{Waiting: n, Total: n}, isAsynq(in))
	return result{Metrics: []metric{{"throughput", "tasks/s", float64(n) / elapsed.Seconds(), true}}, Violations: v}, err
}

func enqueueBatch(ctx context.Context, in instance, n int, batch func(context.Context, []int, []time.Time) error) (result, error) {
	due := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	start := time.Now()
	for i := 0; i < n; i += 1000 {
		end := min(n, i+1000)
		keys := make([]int, 0, end-i)
		dues := make([]time.Time, 0, end-i)
		for j := i; j < end; j++ {
			keys = append(keys, j)
			dues = append(dues, due)
		}
		if err := batch(ctx, keys, dues); err != nil {
			return result{}, err
		}
	}
	elapsed := time.Since(start)
	v, err := checkStore(ctx, in, storeCounts{Waiting: n, Total: n}, isAsynq(in))
	return result{Metrics: []metric{{"throughput", "tasks/s", float64(n) / elapsed.Seconds(), true}}, Violations: v}, err
}

// waitTimeout bounds how long a workload waits for its tasks to run.
const waitTimeout = 5 * time.Minute

// drained is what runAll measured: the time from Start to the store's record of the
// last completion, and the CPU the PostgreSQL and Redis servers used in that time.
type drained struct {
	elapsed       time.Duration
	pgCPU, rdsCPU time.Duration
	tally         *tally
}

// runAll starts workers on the preloaded tasks, waits for every key to start and for
// the store to record n completions, and returns the time from Start to that record
// (polled every 5ms once every handler has started), the servers' CPU over it and
// the violations.
func runAll(ctx context.Context, in instance, n, concurrency int, dues []time.Time) (drained, []string, error) {
	t := newTally(n)
	cpu0, err := serverCPU()
	if err != nil {
		return drained{}, nil, err
	}
	start := time.Now()
	if err := in.Start(ctx, concurrency, t.record); err != nil {
		return drained{}, nil, err
	}
	defer in.Stop(context.WithoutCancel(ctx))
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	var v []string
	select {
	case <-t.done:
	case <-deadline.C:
		v = append(v, fmt.Sprintf("timed out after %v: %d of %d tasks started", waitTimeout, t.seen.Load(), n))
	case <-ctx.Done():
		return drained{}, nil, ctx.Err()
	}
	r := drained{tally: t}
	for v == nil {
		c, err := in.Counts(ctx)
		if err != nil {
			return drained{}, nil, err
		}
		if c.Completed >= n {
			r.elapsed = time.Since(start)
			cpu1, err := serverCPU()
			if err != nil {
				return drained{}, nil, err
			}
			r.pgCPU, r.rdsCPU = cpu1[0]-cpu0[0], cpu1[1]-cpu0[1]
			break
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-deadline.C:
			v = append(v, fmt.Sprintf("timed out after %v: the store records %d of %d completed", waitTimeout, c.Completed, n))
		}
	}
	if err := in.Stop(ctx); err != nil {
		return drained{}, nil, err
	}
	time.Sleep(100 * time.Millisecond) // let a late duplicate show
	v = append(v, t.check(dues)...)
	sv, err := checkStore(ctx, in, storeCounts{Completed: n, Total: n}, isAsynq(in))
	return r, append(v, sv...), err
}

// serverCPU is the CPU the PostgreSQL and the Redis server processes have used so far.
func serverCPU() ([2]time.Duration, error) {
	pg, err := cputime.Of("postgres")
	if err != nil {
		return [2]time.Duration{}, err
	}
	rds, err := cputime.Of("redis-server")
	return [2]time.Duration{pg, rds}, err
}

func drain(ctx context.Context, in instance, n, concurrency int) (result, error) {
	dues := make([]time.Time, n) // zero: due now
	if err := in.Preload(ctx, dues); err != nil {
		return result{}, err
	}
	r, v, err := runAll(ctx, in, n, concurrency, nil)
	if err != nil {
		return result{}, err
	}
	cpu := r.pgCPU // the store's server: PostgreSQL, or Redis for asynq
	if isAsynq(in) {
		cpu = r.rdsCPU
	}
	return result{Metrics: []metric{
		{"throughput", "tasks/s", float64(n) / r.elapsed.Seconds(), true},
		{"store server cpu", "µs/task", float64(cpu) / float64(time.Microsecond) / float64(n), false},
	}, Violations: v}, nil
}

func precision(ctx context.Context, _ runEnv, in instance, n int) (result, error) {
	now := time.Now()
	from, to := precisionFrom, precisionTo
	dues := make([]time.Time, n)
	for i := range dues {
		dues[i] = now.Add(from + time.Duration(int64(to-from)*int64(i)/int64(max(n-1, 1)))).Truncate(time.Microsecond)
	}
	if err := in.Preload(ctx, dues); err != nil {
		return result{}, err
	}
	r, v, err := runAll(ctx, in, n, workerConcurrency, dues)
	if err != nil {
		return result{}, err
	}
	t := r.tally
	late := make([]time.Duration, 0, n)
	early := 0
	for k := range n {
		if s := t.starts[k].Load(); s != 0 {
			d := time.Duration(s - dues[k].UnixNano())
			late = append(late, d)
			if d < 0 {
				early++
			}
		}
	}
	if len(late) == 0 {
		return result{Violations: v}, nil
	}
	slices.Sort(late)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	pct := func(p float64) time.Duration { return late[min(int(p*float64(len(late))), len(late)-1)] }
	return result{Metrics: []metric{
		{"lateness p50", "ms", ms(pct(0.50)), false},
		{"lateness p99", "ms", ms(pct(0.99)), false},
		{"lateness max", "ms", ms(late[len(late)-1]), false},
		{"early starts", "tasks", float64(early), false},
	}, Violations: v}, nil
}

// precisionFrom and precisionTo bound the precision workload's due times, from now.
var precisionFrom, precisionTo = 5 * time.Second, 25 * time.Second

// idleWindow is how long idle measures.
var idleWindow = 30 * time.Second

func idle(ctx context.Context, env runEnv, in instance, n int) (result, error) {
	due := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	dues := make([]time.Time, n)
	for i := range dues {
		dues[i] = due.Add(time.Duration(i) * time.Millisecond)
	}
	if err := in.Preload(ctx, dues); err != nil {
		return result{}, err
	}
	var v []string
	if s, ok := in.(settler); ok {
		if err := s.Settle(ctx); err != nil {
			return result{}, err
		}
	}
	if quiet, err := quiesce(ctx, env.pg, 30*time.Second); err != nil {
		return result{}, err
	} else if !quiet {
		fmt.Fprintf(os.Stderr, "peers: idle: PostgreSQL did not get quiet (<= 20ms CPU/s) within 30s; measuring anyway\n")
	}
	t := newTally(n)
	if err := in.Start(ctx, workerConcurrency, t.record); err != nil {
		return result{}, err
	}
	defer in.Stop(context.WithoutCancel(ctx))
	select { // let the initial load pass
	case <-time.After(time.Second):
	case <-ctx.Done():
		return result{}, ctx.Err()
	}
	pg0, err := cputime.Of("postgres")
	if err != nil {
		return result{}, err
	}
	rd0, err := cputime.Of("redis-server")
	if err != nil {
		return result{}, err
	}
	cmd0, err := redisCommands(ctx, env.rdb)
	if err != nil {
		return result{}, err
	}
	start := time.Now()
	select {
	case <-time.After(idleWindow):
	case <-ctx.Done():
		return result{}, ctx.Err()
	}
	secs := time.Since(start).Seconds()
	pg1, err := cputime.Of("postgres")
	if err != nil {
		return result{}, err
	}
	rd1, err := cputime.Of("redis-server")
	if err != nil {
		return result{}, err
	}
	cmd1, err := redisCommands(ctx, env.rdb)
	if err != nil {
		return result{}, err
	}
	if err := in.Stop(ctx); err != nil {
		return result{}, err
	}
	if c := t.seen.Load() + t.stray.Load(); c > 0 {
		v = append(v, fmt.Sprintf("%d handler calls while nothing was due", c))
	}
	sv, err := checkStore(ctx, in, storeCounts{Waiting: n, Total: n}, isAsynq(in))
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / secs }
	return result{Metrics: []metric{
		{"postgres cpu", "ms/s", ms(pg1 - pg0), false},
		{"redis cpu", "ms/s", ms(rd1 - rd0), false},
		{"redis commands", "cmd/s", float64(cmd1-cmd0-1) / secs, false}, // -1: our INFO
	}, Violations: append(v, sv...)}, err
}

// redisCommands is the server's total_commands_processed (server-wide).
func redisCommands(ctx context.Context, rdb *redis.Client) (int64, error) {
	s, err := rdb.Info(ctx, "stats").Result()
	if err != nil {
		return 0, fmt.Errorf("redis INFO stats: %w", err)
	}
	var n int64
	for _, line := range splitLines(s) {
		if _, err := fmt.Sscanf(line, "total_commands_processed:%d", &n); err == nil {
			return n, nil
		}
	}
	return 0, errors.New("redis INFO stats: no total_commands_processed")
}
