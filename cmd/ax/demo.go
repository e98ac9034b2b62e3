package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/axsched/ax/cmd/ax/internal/demo"
)

// demoScales are the values of `ax demo --scale`.
var demoScales = map[string]func() demo.Config{
	"normal": func() demo.Config { return demo.Config{} },
	"fast":   demo.Fast,
}

// runDemo is `ax demo`.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	orders := fs.Int("orders", demo.DefaultOrders, "create `N` orders (at least 3)")
	scale := fs.String("scale", "normal", "time scale, `normal|fast`: timeouts of 3–12s and a reconciliation every 2s (about 15s in all), or 0.3–1.2s and every 1s (about 5s)")
	db := fs.String("db", "", "keep the scheduler's tasks in the SQLite file `PATH` (default: a temporary file, removed at the end)")
	seed := fs.Uint64("seed", 1, "seed `N` of the scenario: the timeouts, who pays, whose handler fails once, which reconciliations are slow")
	metricsAddr := fs.String("metrics", "", "serve the scheduler's Prometheus metrics at /metrics on `ADDR` (HOST:PORT, e.g. 127.0.0.1:9090) while the demo runs (default: off)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: ax demo [flags]

Runs two cases at the same time on one scheduler and embedded SQLite.
Order timeout: orders are created with a close timeout (s.Delay) and closed if
still unpaid when it fires; some are paid in time, one is cancelled (s.Cancel), a
few handlers fail once and are retried. Payment reconciliation: a periodic task
(s.Every) every 2s whose runs sometimes take 5s; ax never runs two at once, skips
the slots that come due during a slow run (SKIPPED), and runs the next slot after
it on time. Then the store is checked and a summary printed. Scheduler warnings go
to stderr. Exit status 1 if a check fails.

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitUsage // the flag package printed the error and the usage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ax demo: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return exitUsage
	}
	mk, ok := demoScales[*scale]
	if !ok {
		fmt.Fprintf(stderr, "ax demo: --scale %q: want normal or fast\n", *scale)
		return exitUsage
	}
	cfg := mk()
	cfg.Orders, cfg.DB, cfg.Seed, cfg.Metrics = *orders, *db, *seed, *metricsAddr
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if _, err := demo.Run(ctx, cfg, stdout); err != nil {
		fmt.Fprintf(stderr, "ax: %v\n", err)
		if errors.Is(err, demo.ErrConfig) {
			return exitUsage
		}
		return exitFail
	}
	return exitOK
}
