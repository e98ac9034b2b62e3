package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"

	"github.com/axsched/ax/cmd/ax/internal/bench"
	axredis "github.com/axsched/ax/elect/redis"
	"github.com/axsched/ax/internal/childproc"
	"github.com/axsched/ax/internal/freshdb"
	"github.com/axsched/ax/metrics"
)

// workloadArgs are the flags a workload reads.
type workloadArgs struct {
	tasks, concurrency int
	rate               int    // pickup: tasks submitted per second
	from               string // pickup: bench.FromHere or bench.FromOther
}

// workloads are the values of `ax bench --workload`, with their default task counts.
var workloads = []struct {
	name  string
	tasks int
	run   func(ctx context.Context, env bench.Env, a workloadArgs) (bench.Result, error)
	about string
}{
	{"enqueue-single", 20_000, func(ctx context.Context, env bench.Env, a workloadArgs) (bench.Result, error) {
		return bench.EnqueueSingle(ctx, env, a.tasks)
	}, "tasks due in 1h, one Delay each from 8 goroutines: tasks/s"},
	{"enqueue-batch", 100_000, func(ctx context.Context, env bench.Env, a workloadArgs) (bench.Result, error) {
		return bench.EnqueueBatch(ctx, env, a.tasks)
	}, "tasks due in 1h via SubmitMany, 1,000 per call: tasks/s"},
	{"drain", 50_000, func(ctx context.Context, env bench.Env, a workloadArgs) (bench.Result, error) {
		return bench.Drain(ctx, env, a.tasks, a.concurrency)
	}, "tasks due now, no-op handler, --concurrency workers: tasks/s to the last completion"},
	{"limited", 2_000, func(ctx context.Context, env bench.Env, a workloadArgs) (bench.Result, error) {
		return bench.Limited(ctx, env, a.tasks, a.concurrency, 10, 20*time.Millisecond)
	}, "tasks due now, one name limited to 10 at once (WithConcurrency), 20ms handlers, --concurrency workers: tasks/s, slots busy"},
	{"rated", 1_000, func(ctx context.Context, env bench.Env, a workloadArgs) (bench.Result, error) {
		return bench.Rated(ctx, env, a.tasks, 100, time.Second)
	}, "tasks due now, one name limited to 100 starts a second (WithRate), no-op handler: the most in a window, the share of the rate reached"},
	{"precision", 5_000, func(ctx context.Context, env bench.Env, a workloadArgs) (bench.Result, error) {
		return bench.Precision(ctx, env, a.tasks, 5*time.Second, 25*time.Second)
	}, "tasks due uniformly over [now+5s, now+25s]: lateness p50/p90/p99/max, early starts"},
	{"burst", 10_000, func(ctx context.Context, env bench.Env, a workloadArgs) (bench.Result, error) {
		return bench.Burst(ctx, env, a.tasks, 2*time.Second)
	}, "tasks all due at one instant 2s ahead: time until the last one started"},
	{"pickup", 400, func(ctx context.Context, env bench.Env, a workloadArgs) (bench.Result, error) {
		return bench.Pickup(ctx, env, a.tasks, a.rate, a.from)
	}, "tasks due now, one Delay at a time, --rate a second (default 20), from --from here|other: handler start − Submit's return p50/p95/p99/max"},
	{"idle", 100_000, func(ctx context.Context, env bench.Env, a workloadArgs) (bench.Result, error) {
		return bench.Idle(ctx, env, a.tasks, 30*time.Second)
	}, "tasks due in 1h, nothing due, 30s: store calls/s and database CPU"},
}

// runBench is `ax bench`.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (strings.HasPrefix(args[0], "--child-node=") || strings.HasPrefix(args[0], "-child-node=")) {
		// A node of `ax bench --nodes N`, started by it (hidden: not in the usage).
		_, node, _ := strings.Cut(args[0], "=")
		if err := bench.RunChildFromEnv(ctx, node); err != nil {
			childproc.NewWriter(stdout).Error(err)
			fmt.Fprintf(stderr, "ax bench: %v\n", err)
			return exitFail
		}
		return exitOK
	}
	if len(args) > 0 && (args[0] == "--child-submitter" || args[0] == "-child-submitter") {
		// The second process of `ax bench --workload pickup --from other` (hidden).
		if err := bench.RunSubmitterFromEnv(ctx, openSubmitterStore); err != nil {
			childproc.NewWriter(stdout).Error(err)
			fmt.Fprintf(stderr, "ax bench: %v\n", err)
			return exitFail
		}
		return exitOK
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	storeName := fs.String("store", "sqlite", "store `KIND`: "+storeNames())
	dsn := fs.String("dsn", "", "base `DSN`: each run creates a fresh schema/database in it (sqlite: a directory for the files, default the temp dir)")
	workload := fs.String("workload", "precision", "`W`, see above")
	tasks := fs.Int("tasks", 0, "number of tasks `N` (default: the workload's; with --nodes, the drain's: 20000)")
	concurrency := fs.Int("concurrency", 100, "drain: handlers running at once (`C`); with --nodes, each node's")
	runs := fs.Int("runs", 1, "repeat the workload `N` times, each on an empty schema")
	withMetrics := fs.Bool("metrics", false, "feed the scheduler's events to Prometheus metrics (package metrics), to measure their cost")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of each run's workload to `FILE` (FILE.2, FILE.3… for --runs above 1), for go tool pprof")
	from := fs.String("from", bench.FromHere, "pickup: where the tasks are submitted, `here|other`: by the scheduler that runs them, or by a second process (this binary re-executed) that only submits")
	withElector := fs.Bool("elect", false, "one process: run the scheduler under a Redis elector (elect/redis on --redis and --redis-db, a fresh key prefix each run), its writes fenced, to measure what that costs")
	var cl clusterFlags
	cl.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: ax bench [flags]\n\nRuns an end-to-end workload against a store, from an empty schema each run, and\nprints a line and a JSON line per run. Workloads:\n")
		for _, w := range workloads {
			fmt.Fprintf(fs.Output(), "  %-15s %d %s\n", w.name, w.tasks, w.about)
		}
		fmt.Fprint(fs.Output(), clusterUsage)
		fmt.Fprint(fs.Output(), "\nflags:\n")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if cl.nodes != 1 {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		return runCluster(ctx, args, set, *storeName, *dsn, *tasks, *concurrency, cl, stdout, stderr)
	}
	name, kind, d, err := storeFor(fs, *storeName, *dsn)
	if err != nil {
		fmt.Fprintf(stderr, "ax bench: %v\n", err)
		return exitUsage
	}
	*storeName, *dsn = name, d
	w := -1
	for i := range workloads {
		if workloads[i].name == *workload {
			w = i
		}
	}
	if cl.rate == 0 {
		cl.rate = 20 // pickup's
	}
	if w < 0 || *tasks < 0 || *runs < 1 || *concurrency < 1 || cl.rate < 1 || (*from != bench.FromHere && *from != bench.FromOther) {
		fmt.Fprintf(stderr, "ax bench: bad --workload, --tasks, --runs, --concurrency, --rate or --from\n")
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
	for run := range *runs {
		perTrip, err := roundTripCPU(ctx, kind, base)
		if err != nil {
			fmt.Fprintf(stderr, "ax bench: %v\n", err)
			return exitFail
		}
		st, err := kind.fresh(ctx, base)
		if err != nil {
			fmt.Fprintf(stderr, "ax bench: %v\n", err)
			return exitFail
		}
		drop := st.drop
		env := bench.Env{Store: st.Store, Name: *storeName, DBCPU: kind.dbCPU, Statements: st.statements,
			DSN: st.dsn, Submitter: bench.SubmitterCommand("bench", "--child-submitter")}
		var rc *goredis.Client
		var prefix string
		if *withElector {
			rc = goredis.NewClient(&goredis.Options{Addr: cl.redis, DB: cl.redisDB})
			b := make([]byte, 8)
			rand.Read(b)
			prefix = "ax-bench-" + hex.EncodeToString(b) + ":"
			env.Elector = axredis.New(rc, axredis.WithKeyPrefix(prefix))
		}
		if *withMetrics {
			m, err := metrics.New(prometheus.NewRegistry())
			if err != nil {
				drop()
				fmt.Fprintf(stderr, "ax bench: %v\n", err)
				return exitFail
			}
			env.Observer = m
		}
		stopProfile, err := startProfile(*cpuProfile, run)
		if err != nil {
			drop()
			fmt.Fprintf(stderr, "ax bench: %v\n", err)
			return exitFail
		}
		r, err := workloads[w].run(ctx, env, workloadArgs{tasks: n, concurrency: *concurrency, rate: cl.rate, from: *from})
		stopProfile()
		drop()
		if rc != nil { // the run's keys only, found by SCAN: the Redis may be shared
			bg := context.WithoutCancel(ctx)
			for it := rc.Scan(bg, 0, prefix+"*", 100).Iterator(); it.Next(bg); {
				rc.Del(bg, it.Val())
			}
			rc.Close()
		}
		if err != nil {
			fmt.Fprintf(stderr, "ax bench: %v\n", err)
			return exitFail
		}
		r.CPUPerRoundTrip = perTrip
		fmt.Fprintln(stdout, r)
		line, _ := json.Marshal(r)
		fmt.Fprintln(stdout, string(line))
	}
	return exitOK
}

// startProfile starts a CPU profile of run (from 0) into path, or path.N for run
// N−1 above the first, and returns what stops it; with no path, nothing.
func startProfile(path string, run int) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	if run > 0 {
		path += "." + strconv.Itoa(run+1)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// roundTripCPU is the CPU the database server of base uses per trivial query on this
// machine (0 where kind cannot tell): measured before each run, over 2,000 queries, it
// is the unit to read db-cpu/task against, since a VM's CPU per system call and
// wake-up, and with it a server's CPU per statement, varies twofold from day to day.
func roundTripCPU(ctx context.Context, kind storeKind, base string) (time.Duration, error) {
	if kind.roundTrip == nil {
		return 0, nil
	}
	d, err := kind.roundTrip(ctx, base, 2000)
	if err != nil {
		return 0, fmt.Errorf("--dsn: CPU per round trip: %w", err)
	}
	return d, nil
}

// clusterUsage describes `ax bench --nodes N` in the usage.
const clusterUsage = `
With --nodes N (N ≥ 2), runs N ax processes (this binary, re-executed) on one fresh
PostgreSQL schema, elected by Redis under a fresh key prefix (or, with --elector
sqllease, by a SQL lease on the schema), every one executing (the leader in-process
and over signed HTTP to the others), and prints one report:
  1. drain: --tasks (default 20000) tasks due at one instant: tasks/s, spread over
     the nodes, dispatch failures, the leader's executor requests by result;
  2. lateness: a stream of --rate tasks/s for --steady, each due --delay after it
     was written: start − due p50/p90/p99/max;
  3. failover: kill -9 of the leader --failovers times under such a stream, a
     replacement started each time: kill → next EventLeadership, and the lateness
     of the tasks due during the gaps;
  4. handover: SIGTERM of the leader --handovers times: SIGTERM → next leader;
  5. a check that every task ran exactly once and none early (exit status 1 if not).
--concurrency is then each node's; --store must be postgres (the default then).
`

// clusterFlags are the flags of `ax bench --nodes N`.
type clusterFlags struct {
	nodes, failovers, handovers, rate, redisDB int
	ttl, steady, delay, settle                 time.Duration
	heartbeat, orphanAfter, dispatchTimeout    time.Duration
	redis, elector                             string
	analyze                                    bool
}

func (c *clusterFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&c.nodes, "nodes", 1, "`N` processes: 1 runs --workload in this process; 2 or more runs the cluster bench (see above)")
	fs.DurationVar(&c.ttl, "ttl", 10*time.Second, "--nodes: the lease's TTL")
	fs.IntVar(&c.failovers, "failovers", 10, "--nodes: leader kills (kill -9)")
	fs.IntVar(&c.handovers, "handovers", 3, "--nodes: graceful leader stops (SIGTERM)")
	fs.IntVar(&c.rate, "rate", 0, "tasks per second: of pickup's submits (default 20); with --nodes, of the steady streams (default 200)")
	fs.DurationVar(&c.steady, "steady", 20*time.Second, "--nodes: how long the lateness stream runs")
	fs.DurationVar(&c.delay, "delay", time.Second, "--nodes: each stream task is due this long after it is written")
	fs.DurationVar(&c.settle, "settle", 2*time.Second, "--nodes: steady leadership before each kill (plus a random part of --ttl/3, to sample the renew cycle) or stop")
	fs.DurationVar(&c.heartbeat, "heartbeat", time.Second, "--nodes: each node's HeartbeatInterval")
	fs.DurationVar(&c.orphanAfter, "orphan-after", 5*time.Second, "--nodes: each node's OrphanAfter (a killed node's running tasks rerun after it)")
	fs.DurationVar(&c.dispatchTimeout, "dispatch-timeout", 5*time.Second, "--nodes: each node's DispatchTimeout (a killed leader's unstarted claims are handed back after it)")
	fs.StringVar(&c.redis, "redis", "127.0.0.1:6379", "--nodes: the Redis `ADDR` of the election")
	fs.IntVar(&c.redisDB, "redis-db", 0, "--nodes: the Redis database")
	fs.StringVar(&c.elector, "elector", "redis", "--nodes: the election, `redis|sqllease` (a SQL lease on the bench's PostgreSQL schema)")
	fs.BoolVar(&c.analyze, "analyze", false, "--nodes: ANALYZE ax_tasks once the drain's backlog is written (as autovacuum would, if it runs, within a minute)")
}

// runCluster is `ax bench --nodes N`: args are the command line's (for the report's
// first line), set the flags given on it.
func runCluster(ctx context.Context, args []string, set map[string]bool, storeName, dsn string, tasks, concurrency int,
	cl clusterFlags, stdout, stderr io.Writer) int {
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ax bench: "+format+"\n", a...)
		return exitUsage
	}
	if !set["rate"] {
		cl.rate = 200
	}
	switch {
	case cl.nodes < 2:
		return bad("--nodes %d: want 1 (one process) or at least 2", cl.nodes)
	case set["store"] && storeName != "postgres":
		return bad("--nodes: --store must be postgres, not %q", storeName)
	case set["workload"] || set["runs"] || set["metrics"] || set["from"]:
		return bad("--nodes runs its own workloads: --workload, --runs, --metrics and --from do not apply")
	case tasks < 0 || concurrency < 1 || cl.failovers < 0 || cl.handovers < 0 || cl.rate < 1 || cl.steady <= 0 || cl.delay < 0 || cl.settle < 0:
		return bad("bad --tasks, --concurrency, --failovers, --handovers, --rate, --steady, --delay or --settle")
	case cl.elector != "redis" && cl.elector != "sqllease":
		return bad("--elector %q: redis or sqllease", cl.elector)
	case cl.ttl < 100*time.Millisecond:
		return bad("--ttl %v: at least 100ms", cl.ttl)
	case cl.heartbeat <= 0 || cl.orphanAfter <= cl.heartbeat || cl.dispatchTimeout <= 0:
		return bad("--heartbeat, --orphan-after, --dispatch-timeout: positive, and --orphan-after above --heartbeat")
	}
	if tasks == 0 {
		tasks = 20_000
	}
	if dsn == "" {
		dsn = freshdb.DefaultPostgresDSN
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "ax bench: %v\n", err)
		return exitFail
	}
	var b [6]byte
	rand.Read(b[:])
	name := "ax_bench_" + hex.EncodeToString(b[:])
	schemaDSN, drop, err := freshdb.CreatePostgresSchema(ctx, dsn, name)
	if err != nil {
		fmt.Fprintf(stderr, "ax bench: --dsn: %v\n", err)
		return exitFail
	}
	defer drop(context.WithoutCancel(ctx))
	dir, err := os.MkdirTemp("", "ax-bench-nodes-")
	if err != nil {
		fmt.Fprintf(stderr, "ax bench: %v\n", err)
		return exitFail
	}
	rep, err := bench.RunCluster(ctx, bench.ClusterConfig{
		Nodes: cl.nodes, DSN: schemaDSN, Schema: name, RedisAddr: cl.redis, RedisDB: cl.redisDB, RedisPrefix: name + ":",
		SQLLease: cl.elector == "sqllease", TTL: cl.ttl, HeartbeatInterval: cl.heartbeat, OrphanAfter: cl.orphanAfter, DispatchTimeout: cl.dispatchTimeout,
		Concurrency: concurrency, Drain: tasks, Rate: cl.rate, Steady: cl.steady, Delay: cl.delay,
		Failovers: cl.failovers, Handovers: cl.handovers, Settle: cl.settle, Analyze: cl.analyze, Dir: dir, Progress: stderr,
		Command: func(node string) (*exec.Cmd, error) {
			return exec.Command(exe, "bench", "--child-node="+node), nil
		},
	})
	if err != nil {
		fmt.Fprintf(stderr, "ax bench: %v\nax bench: the nodes' logs are in %s\n", err, dir)
		return exitFail
	}
	rep.Write(stdout, commandLine(args))
	line, _ := json.Marshal(rep)
	fmt.Fprintln(stdout, string(line))
	if rep.Check.Violations > 0 {
		fmt.Fprintf(stderr, "ax bench: %d violations of exactly-once or never-early; the nodes' logs are in %s\n", rep.Check.Violations, dir)
		return exitFail
	}
	os.RemoveAll(dir)
	return exitOK
}

// commandLine rebuilds `ax bench ARGS` for the report, quoting what a shell would
// split.
func commandLine(args []string) string {
	parts := []string{"ax", "bench"}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~") {
			a = strconv.Quote(a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}
