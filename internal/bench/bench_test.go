package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/axsched/ax/store/sqlite"
)

// The workloads at a small size: every task runs, none early. Lateness figures are
// for BENCHMARKS.md, not asserted here.
func TestWorkloads(t *testing.T) {
	t.Parallel()
	for name, w := range map[string]func(ctx context.Context, st *sqlite.Store) (Result, error){
		"precision": func(ctx context.Context, st *sqlite.Store) (Result, error) {
			return Precision(ctx, st, 300, 200*time.Millisecond, 1200*time.Millisecond)
		},
		"burst": func(ctx context.Context, st *sqlite.Store) (Result, error) {
			return Burst(ctx, st, 1000, 300*time.Millisecond)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, err := sqlite.Open(filepath.Join(t.TempDir(), "ax.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r, err := w(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(r)
			if r.Early != 0 {
				t.Errorf("%d tasks started before their due time", r.Early)
			}
			if r.P50 < 0 || r.P50 > r.P99 || r.P99 > r.Max {
				t.Errorf("inconsistent percentiles: %v", r)
			}
		})
	}
}
