package ax_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store/memory"
)

// The facade's own cost of SubmitMany, without a database: 1,000 tasks a call on the
// memory store. (Before TaskSpec, the type was ax.Spec.)
func BenchmarkSubmitManyMemory(b *testing.B) {
	st := memory.New()
	defer st.Close()
	s, _ := ax.New(ax.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx := context.Background()
	due := time.Now().Add(time.Hour)
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		specs := make([]ax.TaskSpec, 1000)
		for j := range specs {
			specs[j] = ax.TaskSpec{Name: "bench.noop", Key: fmt.Sprint(n), DueAt: due}
			n++
		}
		if _, err := s.SubmitMany(ctx, specs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDrainMemory is a drain on the memory store: 20,000 tasks due now, no-op
// handlers, 100 at once, from Start to the last handler — the scheduler's own cost of
// a drain, without a database, to compare with a build before a change (test binaries
// alternated).
func BenchmarkDrainMemory(b *testing.B) {
	const n = 20000
	for b.Loop() {
		b.StopTimer()
		st := memory.New()
		s, _ := ax.New(ax.Config{Store: st, Concurrency: 100, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		var done atomic.Int64
		fin := make(chan struct{})
		s.HandleFunc("bench.noop", func(context.Context, *ax.Task) error {
			if done.Add(1) == n {
				close(fin)
			}
			return nil
		})
		ctx := context.Background()
		specs := make([]ax.TaskSpec, 1000)
		for i := 0; i < n; i += 1000 {
			for j := range specs {
				specs[j] = ax.TaskSpec{Name: "bench.noop", Key: fmt.Sprint(i + j), DueAt: time.Now()}
			}
			if _, err := s.SubmitMany(ctx, specs); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		if err := s.Start(ctx); err != nil {
			b.Fatal(err)
		}
		<-fin
		b.StopTimer()
		s.Stop(ctx)
		st.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tasks/s")
}
