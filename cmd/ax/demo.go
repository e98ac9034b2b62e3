package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"

	"github.com/axsched/ax/cmd/ax/internal/demo"
	"github.com/axsched/ax/cmd/ax/internal/demo/cluster"
)

// demoScales are the values of `ax demo --scale`.
var demoScales = map[string]func() demo.Config{
	"normal": func() demo.Config { return demo.Config{} },
	"fast":   demo.Fast,
}

// clusterScales are the values of `ax demo --scale` with --nodes.
var clusterScales = map[string]func() cluster.Config{
	"normal": func() cluster.Config { return cluster.Config{} },
	"fast":   cluster.Fast,
}

// replicaFlag is the hidden flag with which `ax demo --nodes N` re-executes this
// program as one of its replicas: `ax demo --internal-replica` reads its
// configuration on stdin and reports on stdout (cluster.RunNode). It is not a flag of
// the flag set, so that the usage does not list it.
const replicaFlag = "--internal-replica"

// runDemo is `ax demo`.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == replicaFlag || args[0] == replicaFlag[1:]) {
		if err := cluster.RunNode(ctx, os.Stdin, stdout, stderr); err != nil {
			fmt.Fprintf(stderr, "ax: %v\n", err)
			return exitFail
		}
		return exitOK
	}
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	orders := fs.Int("orders", demo.DefaultOrders, "create `N` orders (at least 3)")
	scale := fs.String("scale", "normal", "time scale, `normal|fast`: timeouts of 3–12s and a reconciliation every 2s (about 15s in all), or 0.3–1.2s and every 1s (about 5s); with --nodes, a lease TTL of 2s (about 15s), or timeouts of 1–5s and a lease TTL of 1s (about 8s)")
	db := fs.String("db", "", "keep the scheduler's tasks in the SQLite file `PATH` (default: a temporary file, removed at the end)")
	seed := fs.Uint64("seed", 1, "seed `N` of the scenario: the timeouts, who pays, whose handler fails once, which reconciliations are slow")
	metricsAddr := fs.String("metrics", "", "serve the scheduler's Prometheus metrics at /metrics on `ADDR` (HOST:PORT, e.g. 127.0.0.1:9090) while the demo runs (default: off; not with --nodes)")
	consoleAddr := fs.String("console", "", "serve the web console on `ADDR` (HOST:PORT, e.g. 127.0.0.1:8080), print a sign-in link with a token generated at random, and keep serving after the summary until interrupted (default: off; not with --nodes)")
	nodes := fs.Int("nodes", 1, "run `N` replica processes (2–7) sharing the SQLite file, elected by elect/sqllease, and kill -9 the leader partway through; 1: one scheduler in this process")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: ax demo [flags]

Runs two cases at the same time on one scheduler and embedded SQLite.
Order timeout: orders are created with a close timeout (s.Delay) and closed if
still unpaid when it fires; some are paid in time, one is cancelled (s.Cancel), a
few handlers fail once and are retried. Payment reconciliation: a periodic task
(s.Every) every 2s whose runs sometimes take 5s; ax never runs two at once, skips
the slots that come due during a slow run (SKIPPED), and runs the next slot after
it on time. Then the store is checked and a summary printed. Scheduler warnings go
to stderr. Exit status 1 if a check fails.

With --nodes N (N >= 2) the same workload runs on N replicas of the service, each a
process of its own (this program, re-executed) with an ax scheduler on the one
SQLite file, nothing else to install. They elect a leader with elect/sqllease on
that file (lease TTL 2s, 1s with --scale fast: short so that the demo takes well
under a minute; a service would keep the default 10s); the leader hands each due
task, round robin, to itself or over HTTP, signed with a random secret, to another
replica's Scheduler.ExecutorHandler() on the loopback port it advertises. Partway
through, the leader is killed with SIGKILL (kill -9): its lease expires, another
replica takes over with a higher epoch and runs what came due meanwhile, late but
never early; then a replacement replica joins. The summary, read back from the
file, shows every order closed exactly once, no reconciliation slot lost or run
twice, the lateness p99 and the failover time. About 15s (8s with --scale fast).
--orders, --seed and --db apply; a kept --db file gets the run's tasks under a
namespace of its own, demo-<id>, and the order tables demo_orders and demo_runs.

flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if *nodes < 1 || *nodes > cluster.MaxNodes {
		fmt.Fprintf(stderr, "ax demo: --nodes %d: want 1 (one process) or 2 to %d replicas\n", *nodes, cluster.MaxNodes)
		return exitUsage
	}
	if *nodes > 1 {
		if *metricsAddr != "" || *consoleAddr != "" {
			fmt.Fprintf(stderr, "ax demo: --metrics and --console are not served with --nodes: the schedulers run in the replicas' processes\n")
			return exitUsage
		}
		return runClusterDemo(ctx, *nodes, *scale, *orders, *db, *seed, stdout, stderr)
	}
	mk, ok := demoScales[*scale]
	if !ok {
		fmt.Fprintf(stderr, "ax demo: --scale %q: want normal or fast\n", *scale)
		return exitUsage
	}
	cfg := mk()
	cfg.Orders, cfg.DB, cfg.Seed, cfg.Metrics, cfg.Console = *orders, *db, *seed, *metricsAddr, *consoleAddr
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

// runClusterDemo is `ax demo --nodes N`: its replicas are this program, re-executed
// with the hidden replicaFlag.
func runClusterDemo(ctx context.Context, nodes int, scale string, orders int, db string, seed uint64, stdout, stderr io.Writer) int {
	mk, ok := clusterScales[scale]
	if !ok {
		fmt.Fprintf(stderr, "ax demo: --scale %q: want normal or fast\n", scale)
		return exitUsage
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "ax: demo: find this program, to start its replicas: %v\n", err)
		return exitFail
	}
	cc := mk()
	cc.Nodes, cc.Orders, cc.DB, cc.Seed = nodes, orders, db, seed
	cc.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cc.NodeCommand = func() *exec.Cmd { return exec.Command(exe, "demo", replicaFlag) }
	cc.NodeStderr = stderr
	if _, err := cluster.Run(ctx, cc, stdout); err != nil {
		fmt.Fprintf(stderr, "ax: %v\n", err)
		if errors.Is(err, demo.ErrConfig) {
			return exitUsage
		}
		return exitFail
	}
	return exitOK
}
