package mysql_test

import (
	"fmt"
	"testing"

	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/mysql"
)

// BenchmarkLifecycle runs batches of 200 tasks through Insert, Claim, Start, Heartbeat
// and Finish: one op is one batched call.
func BenchmarkLifecycle(b *testing.B) {
	s, err := mysql.Open(servicetest.MySQLDSN(b))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := b.Context()
	n := 0
	batch := func() []store.NewTask {
		now, _ := s.Now(ctx)
		nts := make([]store.NewTask, store.MaxBatch)
		for i := range nts {
			n++
			nts[i] = newTask(fmt.Sprintf("bench-%d", n), now)
		}
		return nts
	}
	var claims []store.Claim
	var starts []store.StartParams
	var refs []store.ExecRef
	var results []store.Finish
	b.Run("Insert", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Insert(ctx, batch()); err != nil {
				b.Fatal(err)
			}
		}
	})
	prepare := func() {
		res, err := s.Insert(ctx, batch())
		if err != nil {
			b.Fatal(err)
		}
		claims, starts, refs, results = nil, nil, nil, nil
		for i, r := range res {
			exec := fmt.Sprintf("exec-%d-%d", n, i)
			claims = append(claims, store.Claim{ID: r.Task.ID, ExecutionID: exec})
			starts = append(starts, store.StartParams{TaskID: r.Task.ID, ExecutionID: exec, Name: r.Task.Name, Node: "bench"})
			refs = append(refs, store.ExecRef{TaskID: r.Task.ID, ExecutionID: exec})
			results = append(results, store.Finish{TaskID: r.Task.ID, ExecutionID: exec, Status: store.Succeeded})
		}
	}
	b.Run("Claim+Start+Heartbeat+Finish", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			prepare()
			b.StartTimer()
			if _, err := s.Claim(ctx, store.Fence{}, claims); err != nil {
				b.Fatal(err)
			}
			if _, err := s.Start(ctx, store.Fence{}, starts); err != nil {
				b.Fatal(err)
			}
			if _, err := s.Heartbeat(ctx, refs); err != nil {
				b.Fatal(err)
			}
			if _, err := s.Finish(ctx, store.Fence{}, results); err != nil {
				b.Fatal(err)
			}
		}
	})
}
