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
// fencing (a causal write of the ax_leader row: the fenced writes of a namespace run one
// at a time) and without it (the shared lock alone, which is not safe on Galera). One
// op is one drain of 1,000 tasks; tasks/s is the figure.
func BenchmarkGaleraFence(b *testing.B) {
	c := galeracluster.Start(b)
	for _, galera := range []bool{false, true} {
		for _, workers := range []int{1, 8} {
			b.Run(fmt.Sprintf("galera=%v/workers=%d", galera, workers), func(b *testing.B) {
				s := openDSN(b, c.DSN(0, c.FreshDatabase(b)))
				mysql.SetGalera(s, galera)
				fence, err := s.RaiseFence(b.Context(), store.DefaultNamespace, "bench", 1)
				if err != nil {
					b.Fatal(err)
				}
				var total time.Duration
				const n = 1000
				for b.Loop() {
					total += drain(b, s, fence, workers, n)
				}
				b.ReportMetric(float64(n*b.N)/total.Seconds(), "tasks/s")
			})
		}
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
