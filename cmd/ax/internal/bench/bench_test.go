package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/axsched/ax/internal/childproc"
	"github.com/axsched/ax/store/sqlite"
)

// The workloads at a small size on SQLite: each completes, every task runs, none
// early. Their figures are for BENCHMARKS.md, not asserted here.
func TestWorkloads(t *testing.T) {
	t.Parallel()
	workloads := map[string]func(ctx context.Context, env Env) (Result, error){
		"precision": func(ctx context.Context, env Env) (Result, error) {
			return Precision(ctx, env, 300, 200*time.Millisecond, 1200*time.Millisecond)
		},
		"burst":          func(ctx context.Context, env Env) (Result, error) { return Burst(ctx, env, 1000, 300*time.Millisecond) },
		"drain":          func(ctx context.Context, env Env) (Result, error) { return Drain(ctx, env, 1000, 20) },
		"enqueue-single": func(ctx context.Context, env Env) (Result, error) { return EnqueueSingle(ctx, env, 500) },
		"enqueue-batch":  func(ctx context.Context, env Env) (Result, error) { return EnqueueBatch(ctx, env, 2500) },
		"idle":           func(ctx context.Context, env Env) (Result, error) { return Idle(ctx, env, 2000, 2*time.Second) },
	}
	for name, w := range workloads {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, err := sqlite.Open(filepath.Join(t.TempDir(), "ax.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r, err := w(ctx, Env{Store: st, Name: "sqlite"})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(r)
			if r.Workload != name || r.Tasks == 0 || r.Elapsed <= 0 {
				t.Errorf("result %+v does not describe the %s run", r, name)
			}
			if r.Early != 0 {
				t.Errorf("%d tasks started before their due time", r.Early)
			}
			if r.Max > 0 && (r.P50 < 0 || r.P50 > r.P99 || r.P99 > r.Max) {
				t.Errorf("inconsistent percentiles: %v", r)
			}
			if name == "idle" && (r.CallsPerSec <= 0 || r.CallsPerSec > 3) {
				t.Errorf("idle: %.2f store calls/s, want a few per second at most", r.CallsPerSec)
			}
		})
	}
}

// TestSubmitter is the second process of TestPickup's runs from another process: it
// runs RunSubmitterFromEnv when started by one, and skips otherwise.
func TestSubmitter(t *testing.T) {
	if os.Getenv(SubmitterEnv) == "" {
		t.Skip("the pickup workload's second process: started by TestPickup only")
	}
	err := RunSubmitterFromEnv(context.Background(), func(_ context.Context, kind, dsn string) (SubmitterStore, error) {
		if kind != "sqlite" {
			return SubmitterStore{}, fmt.Errorf("store %q: the test opens sqlite only", kind)
		}
		st, err := sqlite.Open(dsn)
		if err != nil {
			return SubmitterStore{}, err
		}
		return SubmitterStore{Store: st, Close: func() { st.Close() }}, nil
	})
	if err != nil {
		childproc.NewWriter(os.Stdout).Error(err)
		os.Exit(1)
	}
	os.Exit(0) // no test output: the parent reads stdout
}

// The pickup workload at a small size on SQLite, from this process and from another:
// every task runs once, none early, and every figure is there. The figures themselves
// are for BENCHMARKS.md.
func TestPickup(t *testing.T) {
	t.Parallel()
	for _, from := range []string{FromHere, FromOther} {
		t.Run(from, func(t *testing.T) {
			t.Parallel()
			if from == FromOther && testing.Short() {
				t.Skip("spawns a process")
			}
			path := filepath.Join(t.TempDir(), "ax.db")
			st, err := sqlite.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			env := Env{Store: st, Name: "sqlite", DSN: path,
				Submitter: func() (*exec.Cmd, error) { return childproc.TestCommand("TestSubmitter"), nil }}
			const n, rate = 60, 100
			r, err := Pickup(ctx, env, n, rate, from) // fails unless every task ran once and SUCCEEDED
			if err != nil {
				t.Fatal(err)
			}
			t.Log(r)
			if r.Workload != "pickup" || r.From != from || r.Tasks != n || r.SubmitRate != rate || r.Elapsed <= 0 || r.PerSec <= 0 {
				t.Errorf("result %+v does not describe the run from %s", r, from)
			}
			if r.Early != 0 {
				t.Errorf("%d tasks started before their due time", r.Early)
			}
			if r.PickupP50 < 0 || r.PickupP50 > r.PickupP95 || r.PickupP95 > r.PickupP99 || r.PickupP99 > r.PickupMax || r.PickupMax <= 0 {
				t.Errorf("pickup p50 %v, p95 %v, p99 %v, max %v: want 0 ≤ p50 ≤ p95 ≤ p99 ≤ max, max above 0",
					r.PickupP50, r.PickupP95, r.PickupP99, r.PickupMax)
			}
			if r.SubmitP50 <= 0 {
				t.Errorf("submit p50 %v, want above 0", r.SubmitP50)
			}
			// Each task: its submit, and its share of the scheduler's claims and finishes.
			if r.CallsPerTask < 1 {
				t.Errorf("%.3f store calls per task, want at least the submit's 1", r.CallsPerTask)
			}
		})
	}
}
