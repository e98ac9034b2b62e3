// Command peers runs the workloads of `ax bench` against ax and two peers, River
// (PostgreSQL) and asynq (Redis), on the local services, and prints one table of
// medians over interleaved runs. It is a separate module so that ax takes no
// dependency on its peers. Run it with `go run . [flags]` in bench/peers.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command line's.
type options struct {
	runs      int
	workloads []workload
	backends  []backend
	scale     float64
	cfg       config
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func names[T any](xs []T, name func(T) string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = name(x)
	}
	return strings.Join(s, ",")
}

func wname(w workload) string { return w.name }
func bname(b backend) string  { return b.name }

// parse reads the flags.
func parse(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	runs := fs.Int("runs", 3, "interleaved runs `N` of every workload on every backend")
	ws := fs.String("workloads", names(workloads, wname), "comma-separated `LIST` of workloads")
	bs := fs.String("backends", names(backends, bname), "comma-separated `LIST` of backends")
	scale := fs.Float64("scale", 1, "factor `F` (0 < F <= 1) applied to every workload's task count, for a quick check")
	pg := fs.String("pg", envOr("AX_TEST_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL `DSN`; each run creates and drops a schema ax_peers_<random> in it")
	rd := fs.String("redis", envOr("AX_TEST_REDIS_ADDR", "127.0.0.1:6379"), "Redis `ADDR`")
	db := fs.Int("redis-db", 13, "the Redis database `NUMBER` asynq owns: emptied with FLUSHDB before and after each run (never FLUSHALL)")
	fs.DurationVar(&idleWindow, "idle", idleWindow, "the idle workload's measuring `window`")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: go run . [flags]\n\nworkloads (tasks at -scale 1):\n")
		for _, w := range workloads {
			fmt.Fprintf(stderr, "  %-19s %7d  %s\n", w.name, w.tasks, w.about)
		}
		fmt.Fprintf(stderr, "backends: %s\n\nflags:\n", names(backends, bname))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o := options{runs: *runs, scale: *scale, cfg: config{PG: *pg, Redis: *rd, RedisDB: *db}}
	if o.runs < 1 || o.scale <= 0 || o.scale > 1 || *db < 0 || idleWindow <= 0 {
		return options{}, fmt.Errorf("want -runs >= 1, 0 < -scale <= 1, -redis-db >= 0, -idle > 0")
	}
	var err error
	if o.workloads, err = pick(*ws, workloads, wname); err != nil {
		return options{}, fmt.Errorf("-workloads: %w", err)
	}
	if o.backends, err = pick(*bs, backends, bname); err != nil {
		return options{}, fmt.Errorf("-backends: %w", err)
	}
	return o, nil
}

// pick selects the named entries of all, in the order of all.
func pick[T any](list string, all []T, name func(T) string) ([]T, error) {
	want := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = true
		}
	}
	var out []T
	for _, x := range all {
		if want[name(x)] {
			out = append(out, x)
			delete(want, name(x))
		}
	}
	if len(want) > 0 {
		var bad []string
		for n := range want {
			bad = append(bad, n)
		}
		slices.Sort(bad)
		return nil, fmt.Errorf("unknown %q; want some of %s", bad, names(all, name))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty list")
	}
	return out, nil
}

// run is the command: it returns the exit status (1 on any error or violation).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if err == flag.ErrHelp {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "peers: %v\n", err)
		return 2
	}
	rdb := redis.NewClient(&redis.Options{Addr: o.cfg.Redis, DB: o.cfg.RedisDB})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		fmt.Fprintf(stderr, "peers: redis %s: %v\n", o.cfg.Redis, err)
		return 1
	}
	t := newTable()
	var problems []string
	for r := 1; r <= o.runs; r++ {
		for _, w := range o.workloads {
			n := max(1, int(float64(w.tasks)*o.scale))
			for i := range o.backends {
				b := o.backends[(i+r-1)%len(o.backends)] // each run starts one backend later
				res, ran, err := runOne(ctx, o.cfg, runEnv{rdb: rdb, pg: o.cfg.PG}, w, b, n)
				if ctx.Err() != nil {
					fmt.Fprintf(stderr, "peers: interrupted\n")
					return 1
				}
				if !ran {
					continue
				}
				label := b.name
				if w.label != nil {
					label = w.label(b.name)
				}
				line := fmt.Sprintf("run %d/%d %-18s %-34s", r, o.runs, w.name, label)
				tag := strings.TrimSpace(line)
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s: error: %v", tag, err))
					fmt.Fprintf(stderr, "%s ERROR %v\n", line, err)
					continue
				}
				for _, v := range res.Violations {
					problems = append(problems, fmt.Sprintf("%s: VIOLATION: %s", tag, v))
				}
				t.add(w, label, b.name, res.Metrics)
				fmt.Fprintf(stderr, "%s %s\n", line, formatMetrics(res.Metrics))
				for _, v := range res.Violations {
					fmt.Fprintf(stderr, "%s VIOLATION %s\n", line, v)
				}
			}
		}
	}
	fmt.Fprintf(stdout, "$ %s\n", commandLine(args))
	fmt.Fprintf(stdout, "runs=%d scale=%g pg=%s redis=%s db=%d; %s\n\n", o.runs, o.scale, redactDSN(o.cfg.PG), o.cfg.Redis, o.cfg.RedisDB, machine())
	t.print(stdout)
	if len(problems) > 0 {
		fmt.Fprintf(stdout, "\n%d problems:\n", len(problems))
		for _, p := range problems {
			fmt.Fprintf(stdout, "  %s\n", p)
		}
		return 1
	}
	fmt.Fprintf(stdout, "\ncheck: every task ran exactly once, none early, and the store's record agrees, in every run.\n")
	return 0
}

// runOne opens an empty instance of b, runs w on it with n tasks, and closes it.
// ran is false when w does not apply to b.
func runOne(ctx context.Context, cfg config, env runEnv, w workload, b backend, n int) (res result, ran bool, err error) {
	in, err := b.open(ctx, cfg)
	if err != nil {
		return result{}, true, err
	}
	defer func() {
		if cerr := in.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if w.supports != nil && !w.supports(in) {
		return result{}, false, nil
	}
	res, err = w.run(ctx, env, in, n)
	return res, true, err
}

// commandLine is how this program was run, for the table's first line.
func commandLine(args []string) string {
	q := make([]string, 0, len(args)+3)
	if exe := os.Args[0]; strings.Contains(exe, "go-build") { // go run's temporary binary
		q = append(q, "go", "run", ".")
	} else {
		q = append(q, exe)
	}
	for _, a := range args {
		if strings.ContainsAny(a, " \t'\"$&|;<>()*?") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q = append(q, a)
	}
	return strings.Join(q, " ")
}

// machine describes where the run happened.
func machine() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("host %s, %d CPUs, %s", host, numCPU(), time.Now().UTC().Format(time.RFC3339))
}

func splitLines(s string) []string { return strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n") }
