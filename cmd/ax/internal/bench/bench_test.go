package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

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
