package ax_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/memory"
)

// Stats sums the nodes' rows per minute and over the window; a percentile is the upper
// edge of its bucket, capped at the largest lateness.
func TestStatsSummary(t *testing.T) {
	t.Parallel()
	st := memory.New()
	defer st.Close()
	ctx := context.Background()
	m0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	m1 := m0.Add(time.Minute)
	a := store.MinuteStats{Node: "a", Minute: m0, Succeeded: 90, Failed: 5, Retried: 3, MaxLateness: 40 * time.Millisecond,
		Failures: []store.NameCount{{Name: "charge", Count: 4}, {Name: "mail", Count: 1}}}
	a.Lateness[0], a.Lateness[5] = 90, 5 // 1ms and 50ms
	b := store.MinuteStats{Node: "b", Minute: m0, Succeeded: 4, Orphaned: 1, Early: 1, MaxLateness: 3 * time.Millisecond,
		Failures: []store.NameCount{{Name: "mail", Count: 1}}}
	b.Lateness[0], b.Lateness[2] = 4, 1 // 1ms and 5ms
	c := store.MinuteStats{Node: "a", Minute: m1, Succeeded: 1, MaxLateness: 2 * time.Hour}
	c.Lateness[store.LatenessBuckets-1] = 1 // over an hour
	d := store.MinuteStats{Node: "a", Minute: m1.Add(time.Minute), Succeeded: 2, MaxLateness: 300 * time.Microsecond}
	d.Lateness[0] = 2
	if err := st.WriteStats(ctx, []store.MinuteStats{a, b, c, d}); err != nil {
		t.Fatal(err)
	}
	s := newScheduler(t, st, nil)
	got, err := s.Stats(ctx, m0.Add(30*time.Second)) // the minute holding since is in
	if err != nil {
		t.Fatal(err)
	}
	want := &ax.StatsSummary{
		Minutes: []ax.MinuteStats{
			// 100 on schedule: the 50th in the 1ms bucket, the 99th in the 50ms one, capped at 40ms.
			{Minute: m0, Nodes: 2, Executions: ax.ExecutionCounts{Succeeded: 94, Failed: 5, Orphaned: 1, Retried: 3}, Scheduled: 100,
				LatenessP50: time.Millisecond, LatenessP99: 40 * time.Millisecond, LatenessMax: 40 * time.Millisecond, Early: 1,
				Failing: []ax.NameCount{{Name: "charge", Count: 4}, {Name: "mail", Count: 2}}},
			// Above an hour: the largest.
			{Minute: m1, Nodes: 1, Executions: ax.ExecutionCounts{Succeeded: 1}, Scheduled: 1,
				LatenessP50: 2 * time.Hour, LatenessP99: 2 * time.Hour, LatenessMax: 2 * time.Hour, Failing: []ax.NameCount{}},
			// Below the first edge: the largest, not 1ms.
			{Minute: m1.Add(time.Minute), Nodes: 1, Executions: ax.ExecutionCounts{Succeeded: 2}, Scheduled: 2,
				LatenessP50: 300 * time.Microsecond, LatenessP99: 300 * time.Microsecond, LatenessMax: 300 * time.Microsecond, Failing: []ax.NameCount{}},
		},
		Executions: ax.ExecutionCounts{Succeeded: 97, Failed: 5, Orphaned: 1, Retried: 3},
		Early:      1,
		TopFailing: []ax.NameCount{{Name: "charge", Count: 4}, {Name: "mail", Count: 2}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Stats mismatch (-want +got):\n%s", d)
	}
	if n := got.Executions.Total(); n != 103 {
		t.Errorf("Executions.Total() = %d, want 103", n)
	}
	if got, err := s.Stats(ctx, m1.Add(2*time.Minute)); err != nil || len(got.Minutes) != 0 {
		t.Errorf("Stats of a window without executions = %+v, %v; want no minutes", got, err)
	}
	if _, err := s.Stats(ctx, time.Time{}); !errors.Is(err, ax.ErrInvalid) {
		t.Errorf("Stats(zero since) error = %v, want ErrInvalid", err)
	}
}

// A running scheduler writes its executions' minutes every ExecutionStatsInterval, and
// once more at Stop; what it wrote is what Stats reads, early starts 0.
func TestStatsOfRunningSchedulers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		ctx := context.Background()
		s := newScheduler(t, st, func(c *ax.Config) { c.Node = "node-1" })
		rec := newRecorder()
		rec.err = func(task *ax.Task) error {
			if task.Name == "charge" {
				return errors.New("declined")
			}
			return nil
		}
		s.Handle("order.close", rec)
		s.Handle("charge", rec, ax.WithMaxRetry(0))
		start(t, s)
		since := time.Now()
		for _, k := range []string{"o-1", "o-2", "o-3"} {
			if _, err := s.Delay(ctx, "order.close", k, time.Second); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Delay(ctx, "charge", "c-1", time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if sum, err := s.Stats(ctx, since); err != nil || len(sum.Minutes) != 0 {
			t.Fatalf("Stats before an interval = %+v, %v; want nothing written yet", sum, err)
		}
		time.Sleep(ax.DefaultExecutionStatsInterval)
		synctest.Wait()
		sum, err := s.Stats(ctx, since)
		if err != nil {
			t.Fatal(err)
		}
		if len(sum.Minutes) != 1 || sum.Minutes[0].Nodes != 1 || sum.Minutes[0].Scheduled != 4 ||
			sum.Executions != (ax.ExecutionCounts{Succeeded: 3, Failed: 1}) || sum.Early != 0 ||
			!cmp.Equal(sum.TopFailing, []ax.NameCount{{Name: "charge", Count: 1}}) {
			t.Errorf("Stats after an interval = %+v, want one minute of 3 succeeded and charge failed once", sum)
		}

		if _, err := s.Delay(ctx, "order.close", "o-4", 0); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := s.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		sum, err = s.Stats(ctx, since)
		if err != nil || sum.Executions.Succeeded != 4 {
			t.Errorf("Stats after Stop = %+v, %v; want the 4th success written at Stop", sum, err)
		}
	})
}
