package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/axsched/ax/internal/bench"
	"github.com/axsched/ax/store/sqlite"
)

// runBench is `ax bench`.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	workload := fs.String("workload", "precision", "`W`: precision (tasks spread over a span) or burst (all due at one instant)")
	tasks := fs.Int("tasks", 0, "number of tasks `N` (default 5000 for precision, 10000 for burst)")
	runs := fs.Int("runs", 1, "repeat the workload `N` times, each on an empty database")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: ax bench [flags]

Runs an end-to-end workload with the scheduler's defaults on embedded SQLite, each run
on a new database file, and prints a line per run and one JSON line per run.
  precision: tasks due uniformly over [now+5s, now+25s], no-op handler: lateness of
             handler starts (start minus DueAt) p50/p90/p99/max, and early starts.
  burst:     tasks all due at the same instant 2s ahead: the max lateness is the time
             to start them all.

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *workload != "precision" && *workload != "burst" {
		fmt.Fprintf(stderr, "ax bench: --workload %q: want precision or burst\n", *workload)
		return exitUsage
	}
	if *tasks < 0 || *runs < 1 {
		fmt.Fprintf(stderr, "ax bench: --tasks and --runs must be positive\n")
		return exitUsage
	}
	for range *runs {
		dir, err := os.MkdirTemp("", "ax-bench-")
		if err != nil {
			fmt.Fprintf(stderr, "ax bench: %v\n", err)
			return exitFail
		}
		r, err := benchOnce(ctx, filepath.Join(dir, "ax.db"), *workload, *tasks)
		os.RemoveAll(dir)
		if err != nil {
			fmt.Fprintf(stderr, "ax bench: %v\n", err)
			return exitFail
		}
		fmt.Fprintln(stdout, "sqlite", r)
		line, _ := json.Marshal(struct {
			Store string `json:"store"`
			bench.Result
		}{"sqlite", r})
		fmt.Fprintln(stdout, string(line))
	}
	return exitOK
}

func benchOnce(ctx context.Context, path, workload string, n int) (bench.Result, error) {
	st, err := sqlite.Open(path)
	if err != nil {
		return bench.Result{}, err
	}
	defer st.Close()
	if workload == "burst" {
		return bench.Burst(ctx, st, orDefault(n, 10_000), 2*time.Second)
	}
	return bench.Precision(ctx, st, orDefault(n, 5_000), 5*time.Second, 25*time.Second)
}

// orDefault returns n, or def when n is zero.
func orDefault(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}
