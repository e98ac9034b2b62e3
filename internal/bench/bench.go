// Package bench holds the end-to-end workloads behind `ax bench`: each runs a real
// scheduler against a real store and measures what a user would see (lateness of
// handler starts, time to drain a burst). They are measurements, not tests: the
// numbers go to BENCHMARKS.md with the command that produced them.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store"
)

// Result is one workload's measurement.
type Result struct {
	Workload string        `json:"workload"`
	Tasks    int           `json:"tasks"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	PerSec   float64       `json:"tasks_per_sec,omitempty"`
	P50      time.Duration `json:"lateness_p50_ns"`
	P90      time.Duration `json:"lateness_p90_ns"`
	P99      time.Duration `json:"lateness_p99_ns"`
	Max      time.Duration `json:"lateness_max_ns"`
	Early    int           `json:"early"` // handler starts before DueAt
}

// String formats the result as one line of a table.
func (r Result) String() string {
	return fmt.Sprintf("%-10s tasks=%-6d elapsed=%-8v rate=%7.0f/s lateness p50=%v p90=%v p99=%v max=%v early=%d",
		r.Workload, r.Tasks, r.Elapsed.Round(time.Millisecond), r.PerSec,
		r.P50.Round(100*time.Microsecond), r.P90.Round(100*time.Microsecond), r.P99.Round(100*time.Microsecond), r.Max.Round(100*time.Microsecond), r.Early)
}

// Precision submits n tasks due uniformly over [now+from, now+to] and measures how
// late each handler starts after its DueAt, with the scheduler's defaults.
func Precision(ctx context.Context, st ax.Store, n int, from, to time.Duration) (Result, error) {
	now := time.Now()
	dues := make([]time.Time, n)
	for i := range dues {
		dues[i] = now.Add(from + time.Duration(int64(to-from)*int64(i)/int64(max(n-1, 1))))
	}
	return run(ctx, "precision", st, dues)
}

// Burst submits n tasks all due at the same instant, lead from now, and measures
// how late each handler starts: the maximum is the time to start them all.
func Burst(ctx context.Context, st ax.Store, n int, lead time.Duration) (Result, error) {
	due := time.Now().Add(lead)
	dues := make([]time.Time, n)
	for i := range dues {
		dues[i] = due
	}
	return run(ctx, "burst", st, dues)
}

func run(ctx context.Context, workload string, st ax.Store, dues []time.Time) (Result, error) {
	n := len(dues)
	var mu sync.Mutex
	lateness := make([]time.Duration, 0, n)
	early := 0
	done := make(chan struct{})
	s, err := ax.New(ax.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), OwnerService: "ax-bench"})
	if err != nil {
		return Result{}, err
	}
	s.HandleFunc("bench.noop", func(ctx context.Context, t *ax.Task) error {
		late := time.Now().Sub(t.DueAt)
		mu.Lock()
		defer mu.Unlock()
		lateness = append(lateness, late)
		if late < 0 {
			early++
		}
		if len(lateness) == n {
			close(done)
		}
		return nil
	})
	// Submit straight to the store in batches, so that submitting is not what is
	// measured; the scheduler loads them as it starts.
	runID := time.Now().UnixNano()
	for i := 0; i < n; i += 1000 {
		batch := make([]store.NewTask, 0, 1000)
		for j := i; j < min(n, i+1000); j++ {
			batch = append(batch, store.NewTask{Name: "bench.noop", Key: fmt.Sprintf("%d-%d", runID, j), DueAt: dues[j].UTC(), MaxRetry: ax.DefaultMaxRetry})
		}
		if _, err := st.Insert(ctx, batch); err != nil {
			return Result{}, fmt.Errorf("bench: insert: %w", err)
		}
	}
	first := slices.MinFunc(dues, time.Time.Compare)
	if err := s.Start(ctx); err != nil {
		return Result{}, err
	}
	defer s.Stop(context.WithoutCancel(ctx))
	select {
	case <-done:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	elapsed := time.Since(first)
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lateness)
	pct := func(p float64) time.Duration { return lateness[min(int(p*float64(n)), n-1)] }
	return Result{
		Workload: workload, Tasks: n, Elapsed: elapsed, PerSec: float64(n) / elapsed.Seconds(),
		P50: pct(0.50), P90: pct(0.90), P99: pct(0.99), Max: lateness[n-1], Early: early,
	}, nil
}
