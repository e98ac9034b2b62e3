package mysql_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/internal/galeracluster"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/mysql"
)

// BenchmarkGaleraFence measures what the Galera fencing costs (see fence.go): tasks
// drained through Claim, Start and Finish, each fenced, by workers that each take
// batches of 10 due tasks, all through node0 of a three-node cluster, with the Galera
// fencing (the fenced write writes the ax_leader row: the fenced writes of a namespace
// run one at a time) and without it (the shared lock alone, which is not safe on
// Galera). One op is a drain of 1,000 tasks in each way, one after the other, so that
// both see the same machine; the figures are tasks/s each way and their ratio.
func BenchmarkGaleraFence(b *testing.B) {
	c := galeracluster.Start(b)
	for _, workers := range []int{1, 8} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			var stores [2]*mysql.Store
			var fences [2]store.Fence
			for i, galera := range []bool{false, true} {
				stores[i] = openDSN(b, c.DSN(0, c.FreshDatabase(b)))
				mysql.SetGalera(stores[i], galera)
				f, err := stores[i].RaiseFence(b.Context(), store.DefaultNamespace, "bench", 1)
				if err != nil {
					b.Fatal(err)
				}
				fences[i] = f
			}
			var took [2]time.Duration
			const n = 1000
			for b.Loop() {
				for i := range stores {
					took[i] += drain(b, stores[i], fences[i], workers, n)
				}
			}
			b.ReportMetric(float64(n*b.N)/took[0].Seconds(), "tasks/s-shared-lock")
			b.ReportMetric(float64(n*b.N)/took[1].Seconds(), "tasks/s-galera")
			b.ReportMetric(took[0].Seconds()/took[1].Seconds(), "galera/shared")
		})
	}
}

// drain inserts n due tasks and has workers claim, start and finish them, fenced, in
// batches of 10, and returns how long the workers took.
func drain(b *testing.B, s *mysql.Store, fence store.Fence, workers, n int) time.Duration {
	ctx := b.Context()
	now, err := s.Now(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var ids []int64
	for lo := 0; lo < n; lo += store.MaxBatch {
		var nts []store.NewTask
		for i := lo; i < min(n, lo+store.MaxBatch); i++ {
			nts = append(nts, newTask(fmt.Sprintf("drain-%d-%d", now.UnixNano(), i), now.Add(-time.Second)))
		}
		res, err := s.Insert(ctx, nts)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			ids = append(ids, r.Task.ID)
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	began := time.Now()
	for w := range workers {
		wg.Go(func() {
			for {
				lo := int(next.Add(10)) - 10
				if lo >= len(ids) {
					return
				}
				var claims []store.Claim
				for k, id := range ids[lo:min(len(ids), lo+10)] {
					claims = append(claims, store.Claim{ID: id, ExecutionID: fmt.Sprintf("e-%d-%d-%d", w, lo, k)})
				}
				res, err := s.Claim(ctx, fence, claims)
				if err != nil {
					b.Error(err)
					return
				}
				var starts []store.StartParams
				var fins []store.Finish
				for _, t := range res.Claimed {
					starts = append(starts, store.StartParams{TaskID: t.ID, ExecutionID: t.ExecutionID, Name: t.Name, Node: "bench"})
					fins = append(fins, store.Finish{TaskID: t.ID, ExecutionID: t.ExecutionID, Status: store.Succeeded})
				}
				if _, err := s.Start(ctx, fence, starts); err != nil {
					b.Error(err)
					return
				}
				if _, err := s.Finish(ctx, fence, fins); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(began)
}
