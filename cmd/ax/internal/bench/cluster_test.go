package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/axsched/ax/internal/childproc"
	"github.com/axsched/ax/internal/servicetest"
)

// TestChild is a node of TestCluster's: it runs RunChildFromEnv when started by it,
// and skips otherwise.
func TestChild(t *testing.T) {
	if os.Getenv(ChildEnv) == "" {
		t.Skip("a node of the cluster bench: started by TestCluster only")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	err := RunChildFromEnv(ctx, "")
	stop()
	if err != nil {
		childproc.NewWriter(os.Stdout).Error(err)
		os.Exit(1)
	}
	os.Exit(0) // no test output: the parent reads stdout
}

// redisDB is the Redis database the tests elect in, under a fresh key prefix each.
const redisDB = 14

// TestCluster runs the cluster bench end to end at a tiny size — three nodes, a 1s
// lease (Redis, and a SQL lease), two kills and one graceful stop — on the real services, and checks that the
// report is whole and consistent: every task ran exactly once (or again only after
// the kill of its node), none early, every figure present. The figures themselves are
// not asserted.
func TestCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, sqlLease := range []bool{false, true} {
		t.Run(electorName(sqlLease), func(t *testing.T) {
			t.Parallel()
			testCluster(t, sqlLease)
		})
	}
}

func testCluster(t *testing.T, sqlLease bool) {
	dsn := servicetest.PostgresDSN(t)
	addr, prefix := servicetest.RedisAddr(t)
	var progress bytes.Buffer
	cfg := ClusterConfig{
		Nodes: 3, DSN: dsn, Schema: "test", RedisAddr: addr, RedisDB: redisDB, RedisPrefix: prefix, SQLLease: sqlLease,
		TTL: time.Second, HeartbeatInterval: 250 * time.Millisecond, OrphanAfter: 2 * time.Second, DispatchTimeout: 2 * time.Second,
		Concurrency: 20, Drain: 400, Rate: 100, Steady: 2 * time.Second, Delay: 300 * time.Millisecond,
		Failovers: 2, Handovers: 1, Settle: 500 * time.Millisecond, Dir: t.TempDir(), Progress: &syncWriter{b: &progress},
		Command: func(node string) (*exec.Cmd, error) { return childproc.TestCommand("TestChild"), nil },
	}
	t.Cleanup(func() { // the nodes' data races and panics (a -race build reports them on stderr)
		logs, _ := filepath.Glob(filepath.Join(cfg.Dir, "*.stderr"))
		for _, name := range logs {
			b, _ := os.ReadFile(name)
			for _, report := range childproc.Failures(string(b)) {
				t.Errorf("%s reported:\n%s", filepath.Base(name), report)
			}
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	start := time.Now()
	rep, err := RunCluster(ctx, cfg)
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		t.Fatalf("RunCluster: %v", err)
	}
	var out bytes.Buffer
	rep.Write(&out, "ax bench --nodes 3 (TestCluster)")
	t.Logf("RunCluster took %v; report:\n%s", time.Since(start).Round(time.Millisecond), out.String())
	if first, _, _ := strings.Cut(out.String(), "\n"); first != "$ ax bench --nodes 3 (TestCluster)" {
		t.Errorf("the report's first line is %q, want the command line", first)
	}

	c := rep.Check
	if c.Violations != 0 || c.Early != 0 {
		t.Errorf("%d violations, %d early: %v", c.Violations, c.Early, c.Examples)
	}
	want := rep.Drain.Tasks + rep.Steady.Tasks + rep.FailoverStream.Tasks
	if c.Tasks != want || c.Succeeded != want || c.ExactlyOnce+c.RerunAfterKill+c.Released != want {
		t.Errorf("check: %+v; want %d tasks, all SUCCEEDED, each once or again after a kill", c, want)
	}
	if c.Executions < want || c.HandlerCalls < c.Succeeded {
		t.Errorf("check: %d executions and %d handler calls for %d tasks", c.Executions, c.HandlerCalls, want)
	}

	phases := map[string]PhaseReport{"drain": rep.Drain, "steady": rep.Steady, "failover": rep.FailoverStream}
	for name, ph := range phases {
		spread := 0
		for _, n := range ph.Spread {
			spread += n.Tasks
		}
		switch {
		case ph.Tasks == 0 || ph.Elapsed <= 0 || ph.PerSec <= 0:
			t.Errorf("%s: %d tasks, elapsed %v, %.0f/s: figures missing", name, ph.Tasks, ph.Elapsed, ph.PerSec)
		case spread != ph.Tasks:
			t.Errorf("%s: the spread %v adds up to %d, not %d", name, ph.Spread, spread, ph.Tasks)
		case ph.Lateness.N != ph.Tasks:
			t.Errorf("%s: lateness of %d tasks, want %d", name, ph.Lateness.N, ph.Tasks)
		case !ordered(ph.Lateness):
			t.Errorf("%s: lateness %v out of order", name, ph.Lateness)
		case ph.Early != 0:
			t.Errorf("%s: %d early", name, ph.Early)
		}
	}
	if rep.Drain.Tasks != cfg.Drain || rep.Drain.LastStart <= 0 || rep.Drain.LastStart > rep.Drain.Elapsed {
		t.Errorf("drain: %d tasks, last start %v, elapsed %v", rep.Drain.Tasks, rep.Drain.LastStart, rep.Drain.Elapsed)
	}
	if rep.Elector != electorName(sqlLease) {
		t.Errorf("the report's elector is %q, want %q", rep.Elector, electorName(sqlLease))
	}
	if len(rep.Drain.Spread) != cfg.Nodes {
		t.Errorf("drain: ran on %v, want all %d nodes", rep.Drain.Spread, cfg.Nodes)
	}
	if n := rep.Drain.Nodes.Requests["ok"].Tasks; n == 0 {
		t.Errorf("drain: the leader sent no task over HTTP: %+v", rep.Drain.Nodes)
	}

	if len(rep.Failovers) != cfg.Failovers || rep.FailoverTimes.N != cfg.Failovers || !ordered(rep.FailoverTimes) {
		t.Errorf("failovers %+v, times %v: want %d", rep.Failovers, rep.FailoverTimes, cfg.Failovers)
	}
	epoch := int64(0)
	for i, f := range rep.Failovers {
		if f.Next == f.Victim || f.NextEpoch <= f.Epoch || f.Epoch <= epoch || f.Took <= 0 || f.Replacement == "" {
			t.Errorf("failover %d: %+v", i+1, f)
		}
		epoch = f.Epoch
	}
	if len(rep.Handovers) != cfg.Handovers || rep.HandoverTimes.N != cfg.Handovers {
		t.Errorf("handovers %+v: want %d", rep.Handovers, cfg.Handovers)
	}
	for i, h := range rep.Handovers {
		if h.Next == h.Stopped || h.NextEpoch <= h.Epoch || h.Took <= 0 || h.StopTook <= 0 {
			t.Errorf("handover %d: %+v", i+1, h)
		}
	}
	if rep.GapLateness.N > 0 && !ordered(rep.GapLateness) {
		t.Errorf("gap lateness %v out of order", rep.GapLateness)
	}
	gapTasks := 0
	for _, f := range rep.Failovers {
		gapTasks += f.GapTasks
	}
	if gapTasks != rep.GapLateness.N {
		t.Errorf("%d tasks due in the gaps by failover, %d in the distribution", gapTasks, rep.GapLateness.N)
	}
}

func ordered(d Dist) bool {
	return d.N > 0 && d.Min <= d.P50 && d.P50 <= d.P90 && d.P90 <= d.P99 && d.P99 <= d.Max
}

// syncWriter serialises writes to b.
type syncWriter struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
