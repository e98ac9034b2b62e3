package sqlite_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/sqlite"
)

// BenchmarkLifecycle runs batches of tasks through Insert, ClaimStart and Finish —
// the writes a drain makes per task on one scheduler — one call of each per batch,
// as the scheduler coalesces them. 100 is a drain's batch at 100 handlers, padded
// to its statements' bucket of 128.
func BenchmarkLifecycle(b *testing.B) {
	for _, size := range []int{1, 100, store.MaxBatch} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			st, err := sqlite.Open(filepath.Join(b.TempDir(), "ax.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			ctx := b.Context()
			on := store.StartOn{Node: "n", Handlers: []string{"bench"}}
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				nts := make([]store.NewTask, size)
				for i := range nts {
					n++
					nts[i] = store.NewTask{Name: "bench", Key: fmt.Sprint(n), DueAt: time.Now().Add(-time.Second), Payload: []byte("x")}
				}
				res, err := st.Insert(ctx, nts)
				if err != nil {
					b.Fatal(err)
				}
				claims := make([]store.Claim, size)
				fins := make([]store.Finish, size)
				for i, r := range res {
					eid := fmt.Sprintf("0190a0a0-0000-7000-8000-%012d", n*1000+i)
					claims[i] = store.Claim{ID: r.Task.ID, ExecutionID: eid, Start: true}
					fins[i] = store.Finish{TaskID: r.Task.ID, ExecutionID: eid, Status: store.Succeeded}
				}
				if c, err := st.ClaimStart(ctx, store.Fence{}, on, claims); err != nil || len(c.Started) != size {
					b.Fatalf("ClaimStart: %d started, %v", len(c.Started), err)
				}
				if ok, err := st.Finish(ctx, store.Fence{}, fins); err != nil || !ok[size-1] {
					b.Fatalf("Finish: %v, %v", ok, err)
				}
			}
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}
