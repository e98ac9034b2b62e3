package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/axsched/ax"
	"github.com/axsched/ax/metrics"
	"github.com/axsched/ax/store/memory"
)

// The end-to-end test starts schedulers: each must leave no goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestEndToEnd runs a real scheduler on the in-memory store in a synctest bubble,
// whose fake clock makes every count, and every lateness, exact. The bubble starts
// at 2000-01-01T00:00:00Z (T0), a whole second: the wheel's ticks, the schedule's
// slots and every due time below fall on it, so each task is claimed and started at
// its due time exactly (lateness 0) and a handler that does not sleep runs for 0 s.
//
// The workload, from T0 (clock offset 0; StatsInterval 250ms; MaxDispatchRetries 2):
//
//	ok/0, ok/1, ok/2   Delay 0, 1s, 2s: succeed
//	ok/far             Delay 1h, Triggered at T0+0.5s: claimed, started, succeeds; manual
//	flaky              Delay 0, MaxRetry 2, backoff 1s: fails at T0 and T0+1s, succeeds at T0+2s
//	boom               Delay 0, MaxRetry 0: panics, FAILED
//	long/a, long/b     task key "k", OverlapSkip, Delay 0 and 1s; long/a sleeps 5s: long/b,
//	                   due while it runs, is SKIPPED
//	nobody             Delay 0, no handler: handed back at T0 (due +100ms), T0+100ms (due
//	                   +200ms) and T0+300ms (FAILED, dispatch retries exhausted); a local
//	                   hand back goes straight back into the wheel, so every claim is on
//	                   time
//	tick               Every(1s), sleeps 2.5s, overlap skip: slot k (T0+k s) is written at
//	                   T0+k−2s (slots 1 and 2 at T0); slots 1, 4, 7 run, 2, 3, 5, 6, 8, 9 are
//	                   skipped; by T0+9s slots 1..11 are written, 10 and 11 still SCHEDULED
//
// Stop comes at T0+9.8s, when nothing runs or comes due: tick slot 7 ended at T0+9.5s,
// the last task counts were taken at T0+9.75s, slot 10 is due at T0+10s.
func TestEndToEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memory.New()
		defer st.Close()
		reg := prometheus.NewRegistry()
		m, err := metrics.New(reg)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		s, err := ax.New(ax.Config{
			Store: st, Observer: m, Logger: slog.New(slog.DiscardHandler),
			StatsInterval: 250 * time.Millisecond, MaxDispatchRetries: 2,
		})
		if err != nil {
			t.Fatalf("ax.New: %v", err)
		}
		t0 := time.Now()

		var mu sync.Mutex
		flakyCalls := 0
		s.HandleFunc("ok", func(context.Context, *ax.Task) error { return nil })
		s.HandleFunc("flaky", func(context.Context, *ax.Task) error {
			mu.Lock()
			defer mu.Unlock()
			if flakyCalls++; flakyCalls <= 2 {
				return errors.New("flaky")
			}
			return nil
		}, ax.WithMaxRetry(2), ax.WithBackoff(func(int) time.Duration { return time.Second }))
		s.HandleFunc("boom", func(context.Context, *ax.Task) error { panic("boom") }, ax.WithMaxRetry(0))
		s.HandleFunc("long", func(context.Context, *ax.Task) error { time.Sleep(5 * time.Second); return nil })
		s.HandleFunc("tick", func(context.Context, *ax.Task) error { time.Sleep(2500 * time.Millisecond); return nil })
		if err := s.Every("tick", time.Second); err != nil {
			t.Fatalf("Every: %v", err)
		}

		if err := s.Start(ctx); err != nil {
			t.Fatalf("Start: %v", err)
		}
		// Let the first refill and the schedule's first fire settle, so that the
		// hand-backs below are read by the refill at T0+1s and T0+2s, not at T0.
		synctest.Wait()

		delay := func(name, key string, d time.Duration, opts ...ax.TaskOption) *ax.Task {
			t.Helper()
			task, err := s.Delay(ctx, name, key, d, opts...)
			if err != nil {
				t.Fatalf("Delay(%s/%s): %v", name, key, err)
			}
			return task
		}
		for i := range 3 {
			delay("ok", strconv.Itoa(i), time.Duration(i)*time.Second)
		}
		far := delay("ok", "far", time.Hour)
		flaky := delay("flaky", "f", 0)
		boom := delay("boom", "b", 0)
		skip := []ax.TaskOption{ax.WithTaskKey("k"), ax.WithOverlap(ax.OverlapSkip)}
		delay("long", "a", 0, skip...)
		longB := delay("long", "b", time.Second, skip...)
		nobody := delay("nobody", "n", 0)

		time.Sleep(500 * time.Millisecond)
		if err := s.Trigger(ctx, far.ID); err != nil {
			t.Fatalf("Trigger: %v", err)
		}
		time.Sleep(time.Until(t0.Add(9800 * time.Millisecond)))
		if err := s.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if got := time.Since(t0); got != 9800*time.Millisecond {
			t.Errorf("Stop returned at T0+%v, want T0+9.8s: nothing was running", got)
		}

		// The store, first: the workload played out as described.
		for _, c := range []struct {
			task    *ax.Task
			status  ax.Status
			attempt int
		}{
			{far, ax.Succeeded, 0}, {flaky, ax.Succeeded, 2}, {boom, ax.Failed, 0},
			{longB, ax.Skipped, 0}, {nobody, ax.Failed, 0},
		} {
			got, err := s.Get(ctx, c.task.ID)
			if err != nil {
				t.Fatalf("Get(%s/%s): %v", c.task.Name, c.task.Key, err)
			}
			if got.Status != c.status || got.Attempt != c.attempt {
				t.Errorf("%s/%s: %s attempt %d, want %s attempt %d", got.Name, got.Key, got.Status, got.Attempt, c.status, c.attempt)
			}
			if got.Name == "nobody" && got.DispatchRetries != 3 {
				t.Errorf("nobody/n: %d dispatch retries, want 3", got.DispatchRetries)
			}
		}
		for k := 1; k <= 12; k++ {
			slot := t0.Add(time.Duration(k) * time.Second).UTC().Format(time.RFC3339Nano)
			want := map[int]ax.Status{1: ax.Succeeded, 4: ax.Succeeded, 7: ax.Succeeded, 10: ax.Scheduled, 11: ax.Scheduled}[k]
			switch {
			case k == 12:
				want = "" // not written: slots are written 2s ahead
			case want == "":
				want = ax.Skipped
			}
			got, err := s.Lookup(ctx, "tick", slot)
			switch {
			case want == "" && !errors.Is(err, ax.ErrNotFound):
				t.Errorf("tick slot %d: %v, %v, want ErrNotFound", k, got, err)
			case want == "":
			case err != nil:
				t.Errorf("tick slot %d: %v", k, err)
			case got.Status != want:
				t.Errorf("tick slot %d: %s, want %s", k, got.Status, want)
			}
		}
		stats, err := st.TaskStats(ctx, time.Now())
		if err != nil {
			t.Fatalf("TaskStats: %v", err)
		}

		want := unlabelled()
		admitted(want, "ok", "flaky", "boom", "long", "nobody", "tick")
		for k, v := range map[string]string{
			// Written: ok/0..2 and ok/far; tick slots 1..11.
			`ax_tasks_submitted_total{name="ok"}`:     "4",
			`ax_tasks_submitted_total{name="flaky"}`:  "1",
			`ax_tasks_submitted_total{name="boom"}`:   "1",
			`ax_tasks_submitted_total{name="long"}`:   "2",
			`ax_tasks_submitted_total{name="nobody"}`: "1",
			`ax_tasks_submitted_total{name="tick"}`:   "11",

			// Executions. ok/far, triggered, is the fourth ok.
			`ax_task_executions_total{name="ok",outcome="succeeded"}`:            "4",
			`ax_task_executions_total{name="flaky",outcome="failed"}`:            "2",
			`ax_task_executions_total{name="flaky",outcome="succeeded"}`:         "1",
			`ax_task_executions_total{name="boom",outcome="panicked"}`:           "1",
			`ax_task_executions_total{name="long",outcome="succeeded"}`:          "1",
			`ax_task_executions_total{name="tick",outcome="succeeded"}`:          "3",
			`ax_task_duration_seconds_count{name="ok",outcome="succeeded"}`:      "4",
			`ax_task_duration_seconds_sum{name="ok",outcome="succeeded"}`:        "0",
			`ax_task_duration_seconds_buckets{name="ok",outcome="succeeded"}`:    "0.001:4",
			`ax_task_duration_seconds_count{name="flaky",outcome="failed"}`:      "2",
			`ax_task_duration_seconds_sum{name="flaky",outcome="failed"}`:        "0",
			`ax_task_duration_seconds_buckets{name="flaky",outcome="failed"}`:    "0.001:2",
			`ax_task_duration_seconds_count{name="flaky",outcome="succeeded"}`:   "1",
			`ax_task_duration_seconds_sum{name="flaky",outcome="succeeded"}`:     "0",
			`ax_task_duration_seconds_buckets{name="flaky",outcome="succeeded"}`: "0.001:1",
			`ax_task_duration_seconds_count{name="boom",outcome="panicked"}`:     "1",
			`ax_task_duration_seconds_sum{name="boom",outcome="panicked"}`:       "0",
			`ax_task_duration_seconds_buckets{name="boom",outcome="panicked"}`:   "0.001:1",
			`ax_task_duration_seconds_count{name="long",outcome="succeeded"}`:    "1",
			`ax_task_duration_seconds_sum{name="long",outcome="succeeded"}`:      "5",
			`ax_task_duration_seconds_buckets{name="long",outcome="succeeded"}`:  "5:1",
			`ax_task_duration_seconds_count{name="tick",outcome="succeeded"}`:    "3",
			`ax_task_duration_seconds_sum{name="tick",outcome="succeeded"}`:      "7.5",
			`ax_task_duration_seconds_buckets{name="tick",outcome="succeeded"}`:  "2.5:3",
			`ax_task_retries_total{name="flaky"}`:                                "2",

			// Starts: one sample per non-manual start, all on time.
			`ax_task_lateness_seconds_count{name="ok"}`:      "3",
			`ax_task_lateness_seconds_sum{name="ok"}`:        "0",
			`ax_task_lateness_seconds_buckets{name="ok"}`:    "0.001:3",
			`ax_task_lateness_seconds_count{name="flaky"}`:   "3",
			`ax_task_lateness_seconds_sum{name="flaky"}`:     "0",
			`ax_task_lateness_seconds_buckets{name="flaky"}`: "0.001:3",
			`ax_task_lateness_seconds_count{name="boom"}`:    "1",
			`ax_task_lateness_seconds_sum{name="boom"}`:      "0",
			`ax_task_lateness_seconds_buckets{name="boom"}`:  "0.001:1",
			`ax_task_lateness_seconds_count{name="long"}`:    "1",
			`ax_task_lateness_seconds_sum{name="long"}`:      "0",
			`ax_task_lateness_seconds_buckets{name="long"}`:  "0.001:1",
			`ax_task_lateness_seconds_count{name="tick"}`:    "3",
			`ax_task_lateness_seconds_sum{name="tick"}`:      "0",
			`ax_task_lateness_seconds_buckets{name="tick"}`:  "0.001:3",

			// Claims: the same, plus nobody's three, each on time.
			`ax_task_dispatch_lateness_seconds_count{name="ok"}`:       "3",
			`ax_task_dispatch_lateness_seconds_sum{name="ok"}`:         "0",
			`ax_task_dispatch_lateness_seconds_buckets{name="ok"}`:     "0.001:3",
			`ax_task_dispatch_lateness_seconds_count{name="flaky"}`:    "3",
			`ax_task_dispatch_lateness_seconds_sum{name="flaky"}`:      "0",
			`ax_task_dispatch_lateness_seconds_buckets{name="flaky"}`:  "0.001:3",
			`ax_task_dispatch_lateness_seconds_count{name="boom"}`:     "1",
			`ax_task_dispatch_lateness_seconds_sum{name="boom"}`:       "0",
			`ax_task_dispatch_lateness_seconds_buckets{name="boom"}`:   "0.001:1",
			`ax_task_dispatch_lateness_seconds_count{name="long"}`:     "1",
			`ax_task_dispatch_lateness_seconds_sum{name="long"}`:       "0",
			`ax_task_dispatch_lateness_seconds_buckets{name="long"}`:   "0.001:1",
			`ax_task_dispatch_lateness_seconds_count{name="nobody"}`:   "3",
			`ax_task_dispatch_lateness_seconds_sum{name="nobody"}`:     "0",
			`ax_task_dispatch_lateness_seconds_buckets{name="nobody"}`: "0.001:3",
			`ax_task_dispatch_lateness_seconds_count{name="tick"}`:     "3",
			`ax_task_dispatch_lateness_seconds_sum{name="tick"}`:       "0",
			`ax_task_dispatch_lateness_seconds_buckets{name="tick"}`:   "0.001:3",

			// Dispatch failures: nobody, handed back three times, the third to FAILED.
			`ax_task_dispatch_failures_total{name="nobody",reason="no_handler"}`: "3",
			`ax_tasks_unhandled_total{name="nobody"}`:                            "3",

			// Skips and the schedule.
			`ax_tasks_skipped_total{name="long"}`:                               "1",
			`ax_tasks_skipped_total{name="tick"}`:                               "6",
			`ax_schedule_fires_total{result="dispatched",schedule="tick"}`:      "11",
			`ax_schedule_fires_total{result="skipped_overlap",schedule="tick"}`: "6",
			`ax_schedule_next_fire_timestamp_seconds{schedule="tick"}`:          strconv.FormatFloat(float64(t0.Add(12*time.Second).Unix()), 'g', -1, 64),

			// Counted at T0+9.75s, as at the end: ok ×4, flaky, long/a and tick
			// slots 1, 4, 7 succeeded; boom and nobody failed; long/b and six tick
			// slots skipped; tick slots 10 and 11 wait.
			`ax_tasks{status="SCHEDULED"}`:   "2",
			`ax_tasks{status="DISPATCHING"}`: "0",
			`ax_tasks{status="RUNNING"}`:     "0",
			`ax_tasks{status="SUCCEEDED"}`:   "9",
			`ax_tasks{status="FAILED"}`:      "2",
			`ax_tasks{status="CANCELLED"}`:   "0",
			`ax_tasks{status="SKIPPED"}`:     "7",
			`ax_queue_lag_seconds{}`:         "0",
		} {
			want[k] = v
		}
		got := samples(t, reg)
		// ax_wheel_tasks is sampled at most once a second, last at T0+9s, the instant
		// slot 9 leaves the wheel and the schedule writes slot 11: the loop may see
		// {10} or {10, 11}, by the order in which two goroutines woke at one instant.
		if w := got["ax_wheel_tasks{}"]; w != "1" && w != "2" {
			t.Errorf("ax_wheel_tasks = %s, want 1 or 2 (tick slots 10 and 11, maybe not yet 11)", w)
		}
		want["ax_wheel_tasks{}"] = got["ax_wheel_tasks{}"]
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("series after the workload (-want +got):\n%s", diff)
		}
		for status, n := range stats.Counts {
			if k := fmt.Sprintf("ax_tasks{status=%q}", status); got[k] != strconv.FormatInt(n, 10) {
				t.Errorf("%s = %s, the store counts %d", k, got[k], n)
			}
		}
	})
}
