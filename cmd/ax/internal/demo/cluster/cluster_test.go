package cluster

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/cmd/ax/internal/demo"
	"github.com/axsched/ax/internal/childproc"
	"github.com/axsched/ax/store/sqlite"
)

// syncBuffer is a bytes.Buffer safe for the replicas' concurrent stderr copiers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testClusterConfig is Fast with fewer orders, a kept database in the test's
// temp dir, and this test binary as the replicas (TestMain runs RunNode under
// nodeEnv).
func testClusterConfig(t *testing.T, stderr *syncBuffer) Config {
	t.Helper()
	cc := Fast()
	cc.Orders, cc.Paid, cc.Flaky, cc.Seed = 14, 4, 2, 3
	cc.DB = filepath.Join(t.TempDir(), "ax.db")
	cc.Wait = 30 * time.Second
	cc.NodeCommand = func() *exec.Cmd {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), nodeEnv+"=1")
		return cmd
	}
	cc.NodeStderr = stderr
	return cc
}

// TestRunCluster runs `ax demo --nodes 3` end to end — three replica processes, the
// leader killed with SIGKILL, a replacement — and checks the summary's claims, then
// checks them again from the kept SQLite file, independently of Run.
func TestRunCluster(t *testing.T) {
	t.Parallel()
	var stderr syncBuffer
	cc := testClusterConfig(t, &stderr)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	sum, err := Run(ctx, cc, &out)
	for _, report := range childproc.Failures(stderr.String()) {
		t.Errorf("a replica reported:\n%s\nits stderr:\n%s", report, stderr.String())
	}
	if err != nil {
		t.Fatalf("Run: %v\noutput:\n%s\nreplicas' stderr:\n%s", err, out.String(), stderr.String())
	}
	t.Logf("output:\n%s", out.String())

	// Exactly once, never early.
	if sum.Orders != cc.Orders || sum.Cancelled != 1 {
		t.Errorf("Orders %d, Cancelled %d; want %d, 1", sum.Orders, sum.Cancelled, cc.Orders)
	}
	if sum.ClosedOnce != cc.Orders-1 || sum.Duplicates != 0 {
		t.Errorf("ClosedOnce %d, Duplicates %d; want %d, 0", sum.ClosedOnce, sum.Duplicates, cc.Orders-1)
	}
	if sum.Closed+sum.AlreadyPaid != cc.Orders-1 || sum.AlreadyPaid != sum.Paid || sum.Paid != cc.Paid {
		t.Errorf("Closed %d + AlreadyPaid %d, Paid %d; want %d, and %d paid", sum.Closed, sum.AlreadyPaid, sum.Paid, cc.Orders-1, cc.Paid)
	}
	if sum.Early != 0 {
		t.Errorf("Early = %d, want 0", sum.Early)
	}
	if sum.LatenessP99 < 0 || sum.LatenessP50 > sum.LatenessP99 || sum.LatenessP99 > sum.LatenessMax {
		t.Errorf("lateness p50 %v p99 %v max %v: want 0 <= p50 <= p99 <= max", sum.LatenessP50, sum.LatenessP99, sum.LatenessMax)
	}
	// A failover, to another replica with a higher epoch.
	if sum.Killed == "" || sum.NewLeader == "" || sum.NewLeader == sum.Killed || sum.NewEpoch <= sum.KilledEpoch {
		t.Errorf("killed %s (epoch %d), new leader %s (epoch %d): want a kill and another replica leading with a higher epoch",
			sum.Killed, sum.KilledEpoch, sum.NewLeader, sum.NewEpoch)
	}
	if sum.Failover <= 0 || sum.Failover > 10*cc.LeaseTTL {
		t.Errorf("Failover = %v, want in (0, %v]", sum.Failover, 10*cc.LeaseTTL)
	}
	if len(sum.Leaders) < 2 {
		t.Errorf("Leaders = %v, want at least two terms", sum.Leaders)
	}
	// Spread, and a replacement.
	if len(sum.RunsByNode) < 2 {
		t.Errorf("RunsByNode = %v, want executions on several replicas", sum.RunsByNode)
	}
	if len(sum.Replicas) != DefaultNodes+1 || sum.Replacement != sum.Replicas[DefaultNodes] {
		t.Errorf("Replicas %v, Replacement %q: want %d replicas, the last the replacement", sum.Replicas, sum.Replacement, DefaultNodes+1)
	}
	// The reconciliation: no slot lost or doubled, never two at once.
	if sum.ReconcileSlots == 0 || sum.ReconcileRuns+sum.ReconcileSkipped != sum.ReconcileSlots ||
		sum.ReconcileLost != 0 || sum.ReconcileDoubled != 0 || sum.ReconcileMaxConcurrent != 1 {
		t.Errorf("reconcile: slots %d, runs %d, skipped %d, lost %d, doubled %d, max concurrent %d; want every slot run once or skipped, none lost or doubled, 1 at once",
			sum.ReconcileSlots, sum.ReconcileRuns, sum.ReconcileSkipped, sum.ReconcileLost, sum.ReconcileDoubled, sum.ReconcileMaxConcurrent)
	}
	for _, want := range []string{"LEADS (epoch 1)", "kill -9 " + sum.Killed, fmt.Sprintf("LEADS (epoch %d), ", sum.NewEpoch), "after the kill", "lease TTL 1.0s",
		"starting " + sum.Replacement, "verify: OK", "duplicates 0", "lost 0, doubled 0", "early = 0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}

	checkClusterFile(t, cc, sum)
}

// checkClusterFile reads the kept file on its own: every order's timeout reached an
// outcome in exactly one execution, every execution started at or after its due
// time, and the executions ran on several replicas.
func checkClusterFile(t *testing.T, cc Config, sum Summary) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(cc.DB)
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	defer st.Close()
	view, err := st.InNamespace(sum.Namespace)
	if err != nil {
		t.Fatalf("InNamespace: %v", err)
	}
	db, err := sql.Open("sqlite", "file:"+url.PathEscape(cc.DB)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	defer db.Close()

	rows, err := db.QueryContext(ctx, `SELECT id, status FROM demo_orders WHERE namespace = ?`, sum.Namespace)
	if err != nil {
		t.Fatalf("read demo_orders: %v", err)
	}
	statuses := map[string]string{}
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			t.Fatal(err)
		}
		statuses[id] = status
	}
	rows.Close()
	if len(statuses) != cc.Orders {
		t.Fatalf("demo_orders holds %d orders, want %d", len(statuses), cc.Orders)
	}
	succeeded, cancelled := 0, 0
	for id, status := range statuses {
		if status != string(demo.Closed) && status != string(demo.Paid) {
			t.Errorf("order %s is %s, want closed or paid", id, status)
		}
		task, err := view.Lookup(ctx, demo.TaskName, id)
		if err != nil {
			t.Fatalf("Lookup(%s): %v", id, err)
		}
		var outcomes int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM demo_runs WHERE namespace = ? AND name = ? AND key = ?
			AND outcome IN ('closed', 'already-paid', 'already-closed')`, sum.Namespace, demo.TaskName, id).Scan(&outcomes); err != nil {
			t.Fatal(err)
		}
		switch task.Status {
		case ax.Succeeded:
			succeeded++
			if outcomes != 1 {
				t.Errorf("order %s: %d executions reached an outcome, want exactly 1", id, outcomes)
			}
		case ax.Cancelled:
			cancelled++
			if outcomes != 0 {
				t.Errorf("cancelled order %s: %d executions reached an outcome, want none", id, outcomes)
			}
		default:
			t.Errorf("task of order %s is %s", id, task.Status)
		}
	}
	if succeeded != cc.Orders-1 || cancelled != 1 {
		t.Errorf("%d tasks SUCCEEDED, %d CANCELLED; want %d, 1", succeeded, cancelled, cc.Orders-1)
	}
	var early, nodes, doubled int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM demo_runs WHERE namespace = ? AND started_us < due_us`, sum.Namespace).Scan(&early); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(DISTINCT node) FROM demo_runs WHERE namespace = ?`, sum.Namespace).Scan(&nodes); err != nil {
		t.Fatal(err)
	}
	// A run the killed leader completed before the kill, whose result it had not
	// written yet, is run again (at least once): it is a redelivery, not a double, as
	// Run's own check counts it.
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT key FROM demo_runs WHERE namespace = ? AND name = ? AND outcome = 'reconciled'
		AND NOT (node = ? AND started_us < ?) GROUP BY key HAVING count(*) > 1)`,
		sum.Namespace, demo.ReconcileName, sum.Killed, sum.KilledAt.UnixMicro()).Scan(&doubled); err != nil {
		t.Fatal(err)
	}
	if early != 0 || nodes < 2 || doubled != 0 {
		t.Errorf("demo_runs: %d early, on %d replicas, %d reconciliation slots run twice; want 0, several, 0", early, nodes, doubled)
	}
	// The kill left the lease to the new leader, with a higher epoch.
	info, err := st.Lease(ctx, sum.Namespace)
	if err != nil {
		t.Fatalf("Lease: %v", err)
	}
	if info.Epoch < sum.NewEpoch {
		t.Errorf("ax_leader epoch %d, want at least the new leader's %d", info.Epoch, sum.NewEpoch)
	}
}

func TestRunClusterInvalidConfig(t *testing.T) {
	t.Parallel()
	ok := func() Config {
		cc := Fast()
		cc.NodeCommand = func() *exec.Cmd { return exec.Command("false") }
		return cc
	}
	for _, c := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"one node", func(cc *Config) { cc.Nodes = 1 }, "Nodes 1"},
		{"too many nodes", func(cc *Config) { cc.Nodes = MaxNodes + 1 }, "Nodes 8"},
		{"short lease", func(cc *Config) { cc.LeaseTTL = 100 * time.Millisecond }, "LeaseTTL"},
		{"kill too late", func(cc *Config) { cc.KillAfter = cc.MaxTimeout }, "KillAfter"},
		{"no command", func(cc *Config) { cc.NodeCommand = nil }, "NodeCommand"},
		{"metrics", func(cc *Config) { cc.Metrics = "127.0.0.1:0" }, "Metrics"},
		{"log level", func(cc *Config) { cc.NodeLogLevel = "loud" }, "NodeLogLevel"},
		{"orders", func(cc *Config) { cc.Orders = 2 }, "Orders 2"},
	} {
		cc := ok()
		c.mod(&cc)
		var out bytes.Buffer
		_, err := Run(context.Background(), cc, &out)
		if !errors.Is(err, demo.ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Run = %v, want ErrConfig naming %q", c.name, err, c.want)
		}
		if out.Len() > 0 {
			t.Errorf("%s: Run wrote %q, want nothing", c.name, out.String())
		}
	}
}

func TestMaxConcurrent(t *testing.T) {
	t.Parallel()
	at := func(s float64) time.Time { return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))) }
	run := func(node string, from, to float64) bizRun {
		r := bizRun{Node: node, Key: "1970-01-01T00:16:40Z", Started: at(from)}
		if to >= 0 {
			r.Ended = at(to)
		}
		return r
	}
	for _, c := range []struct {
		name   string
		runs   []bizRun
		killed time.Time
		want   int
	}{
		{"none", nil, time.Time{}, 0},
		{"back to back", []bizRun{run("a", 0, 1), run("b", 1, 2), run("a", 2, 3)}, time.Time{}, 1},
		{"overlap on two replicas", []bizRun{run("a", 0, 2), run("b", 1, 3)}, time.Time{}, 2},
		{"cut by the kill, then re-run", []bizRun{run("a", 0, -1), run("b", 5, 6)}, at(4), 1},
		{"cut by the kill, overlapped before it", []bizRun{run("a", 0, -1), run("b", 3, 6)}, at(4), 2},
	} {
		if got, _ := maxConcurrent(c.runs, c.killed, at(100)); got != c.want {
			t.Errorf("%s: maxConcurrent = %d, want %d", c.name, got, c.want)
		}
	}
}
