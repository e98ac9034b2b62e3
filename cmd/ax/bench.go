package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/axsched/ax/cmd/ax/internal/bench"
	"github.com/axsched/ax/metrics"
)

// workloads are the values of `ax bench --workload`, with their default task counts.
var workloads = []struct {
	name  string
	tasks int
	run   func(ctx context.Context, env bench.Env, n, concurrency int) (bench.Result, error)
	about string
}{
	{"enqueue-single", 20_000, func(ctx context.Context, env bench.Env, n, _ int) (bench.Result, error) {
		return bench.EnqueueSingle(ctx, env, n)
	}, "tasks due in 1h, one Delay each from 8 goroutines: tasks/s"},
	{"enqueue-batch", 100_000, func(ctx context.Context, env bench.Env, n, _ int) (bench.Result, error) {
		return bench.EnqueueBatch(ctx, env, n)
	}, "tasks due in 1h via SubmitMany, 1,000 per call: tasks/s"},
	{"drain", 50_000, func(ctx context.Context, env bench.Env, n, c int) (bench.Result, error) {
		return bench.Drain(ctx, env, n, c)
	}, "tasks due now, no-op handler, --concurrency workers: tasks/s to the last completion"},
	{"precision", 5_000, func(ctx context.Context, env bench.Env, n, _ int) (bench.Result, error) {
		return bench.Precision(ctx, env, n, 5*time.Second, 25*time.Second)
	}, "tasks due uniformly over [now+5s, now+25s]: lateness p50/p90/p99/max, early starts"},
	{"burst", 10_000, func(ctx context.Context, env bench.Env, n, _ int) (bench.Result, error) {
		return bench.Burst(ctx, env, n, 2*time.Second)
	}, "tasks all due at one instant 2s ahead: time until the last one started"},
	{"idle", 100_000, func(ctx context.Context, env bench.Env, n, _ int) (bench.Result, error) {
		return bench.Idle(ctx, env, n, 30*time.Second)
	}, "tasks due in 1h, nothing due, 30s: store calls/s and database CPU"},
}

// runBench is `ax bench`.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	storeName := fs.String("store", "sqlite", "store `KIND`: "+storeNames())
	dsn := fs.String("dsn", "", "base `DSN`: each run creates a fresh schema/database in it (sqlite: a directory for the files, default the temp dir)")
	workload := fs.String("workload", "precision", "`W`, see above")
	tasks := fs.Int("tasks", 0, "number of tasks `N` (default: the workload's)")
	concurrency := fs.Int("concurrency", 100, "drain: handlers running at once (`C`)")
	runs := fs.Int("runs", 1, "repeat the workload `N` times, each on an empty schema")
	withMetrics := fs.Bool("metrics", false, "feed the scheduler's events to Prometheus metrics (package metrics), to measure their cost")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: ax bench [flags]\n\nRuns an end-to-end workload against a store, from an empty schema each run, and\nprints a line and a JSON line per run. Workloads:\n")
		for _, w := range workloads {
			fmt.Fprintf(stderr, "  %-15s %d %s\n", w.name, w.tasks, w.about)
		}
		fmt.Fprint(stderr, "\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	kind, err := lookupStore(*storeName)
	if err != nil {
		fmt.Fprintf(stderr, "ax bench: %v\n", err)
		return exitUsage
	}
	w := -1
	for i := range workloads {
		if workloads[i].name == *workload {
			w = i
		}
	}
	if w < 0 || *tasks < 0 || *runs < 1 || *concurrency < 1 {
		fmt.Fprintf(stderr, "ax bench: bad --workload, --tasks, --runs or --concurrency\n")
		fs.Usage()
		return exitUsage
	}
	n := *tasks
	if n == 0 {
		n = workloads[w].tasks
	}
	base := *dsn
	if base == "" {
		base = kind.defaultDSN
	}
	for range *runs {
		st, drop, err := kind.fresh(ctx, base)
		if err != nil {
			fmt.Fprintf(stderr, "ax bench: %v\n", err)
			return exitFail
		}
		env := bench.Env{Store: st, Name: *storeName, DBCPU: kind.dbCPU}
		if *withMetrics {
			m, err := metrics.New(prometheus.NewRegistry())
			if err != nil {
				drop()
				fmt.Fprintf(stderr, "ax bench: %v\n", err)
				return exitFail
			}
			env.Observer = m
		}
		r, err := workloads[w].run(ctx, env, n, *concurrency)
		drop()
		if err != nil {
			fmt.Fprintf(stderr, "ax bench: %v\n", err)
			return exitFail
		}
		fmt.Fprintln(stdout, r)
		line, _ := json.Marshal(r)
		fmt.Fprintln(stdout, string(line))
	}
	return exitOK
}
