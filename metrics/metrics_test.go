package metrics_test

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/axsched/ax"
	"github.com/axsched/ax/metrics"
)

// setup returns an Observer on a fresh registry.
func setup(t testing.TB, opts ...metrics.Option) (*metrics.Observer, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m, reg
}

// samples gathers reg into one line per series, `metric{label="v",…}` → value. A
// histogram gives name_count, name_sum and, under name_buckets, the non-cumulative
// count of every non-empty bucket as "le:count …".
func samples(t *testing.T, reg *prometheus.Registry) map[string]string {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	got := make(map[string]string)
	num := func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			labels := "{" + strings.Join(ls, ",") + "}"
			switch {
			case m.GetCounter() != nil:
				got[f.GetName()+labels] = num(m.GetCounter().GetValue())
			case m.GetGauge() != nil:
				got[f.GetName()+labels] = num(m.GetGauge().GetValue())
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				got[f.GetName()+"_count"+labels] = strconv.FormatUint(h.GetSampleCount(), 10)
				got[f.GetName()+"_sum"+labels] = num(h.GetSampleSum())
				var bs []string
				prev := uint64(0)
				for _, b := range h.GetBucket() {
					if n := b.GetCumulativeCount() - prev; n > 0 {
						bs = append(bs, num(b.GetUpperBound())+":"+strconv.FormatUint(n, 10))
					}
					prev = b.GetCumulativeCount()
				}
				if n := h.GetSampleCount() - prev; n > 0 {
					bs = append(bs, "+Inf:"+strconv.FormatUint(n, 10))
				}
				got[f.GetName()+"_buckets"+labels] = strings.Join(bs, " ")
			default:
				t.Fatalf("%s: unexpected metric type %v", f.GetName(), f.GetType())
			}
		}
	}
	return got
}

// unlabelled are the series exported from New on, before any event.
func unlabelled() map[string]string {
	return map[string]string{
		"ax_queue_lag_seconds{}":              "0",
		"ax_clock_offset_seconds{}":           "0",
		"ax_wheel_tasks{}":                    "0",
		"ax_orphans_recovered_total{}":        "0",
		"ax_stuck_claims_total{}":             "0",
		"ax_early_starts_total{}":             "0",
		"ax_observer_events_dropped_total{}":  "0",
		"ax_leader_is_leader{}":               "0",
		"ax_leader_epoch{}":                   "0",
		"ax_leader_transitions_total{}":       "0",
		"ax_leader_lease_remaining_seconds{}": "0",

		"ax_executor_request_duration_seconds_buckets{}": "",
		"ax_executor_request_duration_seconds_count{}":   "0",
		"ax_executor_request_duration_seconds_sum{}":     "0",
	}
}

// admitted adds to want the ax_task_executions_total series every admitted name has
// from its first event, at 0.
func admitted(want map[string]string, names ...string) {
	for _, n := range names {
		for _, o := range []ax.Outcome{ax.OutcomeSucceeded, ax.OutcomeFailed, ax.OutcomePanicked, ax.OutcomeTimedOut, ax.OutcomeReleased, ax.OutcomeOrphaned} {
			want[fmt.Sprintf("ax_task_executions_total{name=%q,outcome=%q}", n, o)] = "0"
		}
	}
}

func TestNewExportsUnlabelledAtZero(t *testing.T) {
	t.Parallel()
	_, reg := setup(t)
	if diff := cmp.Diff(unlabelled(), samples(t, reg)); diff != "" {
		t.Errorf("series before any event (-want +got):\n%s", diff)
	}
	if n, err := testutil.GatherAndCount(reg, "ax_early_starts_total"); err != nil || n != 1 {
		t.Errorf("GatherAndCount(ax_early_starts_total) = %d, %v, want 1, nil", n, err)
	}
}

// events is a known series, each event's expected effect noted.
func events() []ax.Event {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	return []ax.Event{
		{Kind: ax.EventSubmitted, Name: "a", Count: 3},
		{Kind: ax.EventSubmitted, Name: "b", Count: 2},
		{Kind: ax.EventSubmitted, Name: "b", Count: 0},                                                      // nothing
		{Kind: ax.EventClaimed, Name: "a", Lateness: 3 * time.Millisecond},                                  // le 0.005
		{Kind: ax.EventClaimed, Name: "a", Lateness: 5 * time.Millisecond},                                  // le 0.005: bounds are inclusive
		{Kind: ax.EventStarted, Name: "a", Lateness: 7 * time.Millisecond},                                  // le 0.01
		{Kind: ax.EventStarted, Name: "a", Lateness: -time.Millisecond, Early: true},                        // recorded as 0: le 0.001; one early start
		{Kind: ax.EventStarted, Name: "b", Lateness: 2 * time.Hour},                                         // le 3600
		{Kind: ax.EventClaimed, Name: "a", Manual: true},                                                    // a Trigger: no lateness
		{Kind: ax.EventStarted, Name: "a", Manual: true, Lateness: -time.Hour, Early: true},                 // nor an early start
		{Kind: ax.EventFinished, Name: "a", Outcome: ax.OutcomeSucceeded, Duration: 200 * time.Millisecond}, // le 0.25
		{Kind: ax.EventFinished, Name: "a", Outcome: ax.OutcomeFailed, Duration: time.Second},               // le 1
		{Kind: ax.EventFinished, Name: "a", Outcome: ax.OutcomeFailed, Duration: 4000 * time.Second},        // +Inf
		{Kind: ax.EventFinished, Name: "a", Outcome: ax.OutcomeOrphaned},                                    // counted, no duration
		{Kind: ax.EventRetryScheduled, Name: "a", Due: at},
		{Kind: ax.EventRetryScheduled, Name: "a", Due: at},
		{Kind: ax.EventDispatchFailed, Name: "b", Reason: string(ax.DispatchStuck)},
		{Kind: ax.EventDispatchFailed, Name: "b", Reason: string(ax.DispatchNoHandler), Dropped: 2},
		{Kind: ax.EventOrphanRecovered, Name: "a"},
		{Kind: ax.EventStuckClaimHandedBack, Name: "b"},
		{Kind: ax.EventSkipped, Name: "a"},
		{Kind: ax.EventSkipped, Name: "nightly", Schedule: "nightly"},
		{Kind: ax.EventScheduleFired, Schedule: "nightly", Result: ax.ScheduleDispatched, Count: 1, Due: at.Add(1500 * time.Millisecond)},
		{Kind: ax.EventScheduleFired, Schedule: "nightly", Result: ax.ScheduleMisfired, Count: 3, Due: at.Add(2250 * time.Millisecond)},
		{Kind: ax.EventUnhandled, Name: "c"},
		{Kind: ax.EventLeadership, Leader: true, Epoch: 7},
		{Kind: ax.EventLease, Epoch: 7, LeaseRemaining: 9 * time.Second},
		{Kind: ax.EventFenceRejected, Reason: "claim"},
		{Kind: ax.EventLeadership, Leader: false, Epoch: 7, Reason: "fenced"},
		{Kind: ax.EventLeadership, Leader: true, Epoch: 9},
		{Kind: ax.EventLease, Epoch: 9, LeaseRemaining: 8500 * time.Millisecond},
		{Kind: ax.EventClockOffset, Offset: -1500 * time.Millisecond},
		{Kind: ax.EventWheelSize, Count: 42},
		{Kind: ax.EventTaskCounts, Counts: map[ax.Status]int64{ax.Scheduled: 5, ax.Running: 1}, Lag: 2500 * time.Millisecond, Dropped: 1},
		{Kind: ax.EventExecutorRequest, Reason: "ok", Duration: 3 * time.Millisecond},
		{Kind: ax.EventExecutorRequest, Reason: "unreachable", Duration: 5 * time.Second},
		{Kind: ax.EventPruned, Count: 1000, Reason: "succeeded"},
		{Kind: ax.EventPruned, Count: 250, Reason: "succeeded"},
		{Kind: ax.EventLimited, Name: "a", Reason: "concurrency", Count: 3, Limit: 5},
		{Kind: ax.EventLimited, Name: "a", Reason: "concurrency", Count: 2, Limit: 5},
		{Kind: ax.EventNameSlots, Name: "a", Limit: 5, InUse: 4, Count: 7},
		{Kind: ax.EventKind(999), Dropped: 4}, // an unknown kind: only its Dropped counts
	}
}

func TestObserveSeries(t *testing.T) {
	t.Parallel()
	m, reg := setup(t)
	for _, e := range events() {
		m.Observe(e)
	}
	due := float64(time.Date(2026, 11, 29, 10, 0, 2, 250e6, time.UTC).Unix()) + 0.25

	want := unlabelled()
	admitted(want, "a", "b", "nightly", "c")
	for k, v := range map[string]string{
		`ax_tasks_submitted_total{name="a"}`: "3",
		`ax_tasks_submitted_total{name="b"}`: "2",

		`ax_task_dispatch_lateness_seconds_count{name="a"}`:   "2",
		`ax_task_dispatch_lateness_seconds_sum{name="a"}`:     "0.008",
		`ax_task_dispatch_lateness_seconds_buckets{name="a"}`: "0.005:2",

		`ax_task_lateness_seconds_count{name="a"}`:   "2",
		`ax_task_lateness_seconds_sum{name="a"}`:     "0.007",
		`ax_task_lateness_seconds_buckets{name="a"}`: "0.001:1 0.01:1",
		`ax_task_lateness_seconds_count{name="b"}`:   "1",
		`ax_task_lateness_seconds_sum{name="b"}`:     "7200",
		`ax_task_lateness_seconds_buckets{name="b"}`: "+Inf:1",
		`ax_early_starts_total{}`:                    "1",

		`ax_task_executions_total{name="a",outcome="succeeded"}`:         "1",
		`ax_task_executions_total{name="a",outcome="failed"}`:            "2",
		`ax_task_executions_total{name="a",outcome="orphaned"}`:          "1",
		`ax_task_duration_seconds_count{name="a",outcome="succeeded"}`:   "1",
		`ax_task_duration_seconds_sum{name="a",outcome="succeeded"}`:     "0.2",
		`ax_task_duration_seconds_buckets{name="a",outcome="succeeded"}`: "0.25:1",
		`ax_task_duration_seconds_count{name="a",outcome="failed"}`:      "2",
		`ax_task_duration_seconds_sum{name="a",outcome="failed"}`:        "4001",
		`ax_task_duration_seconds_buckets{name="a",outcome="failed"}`:    "1:1 +Inf:1",

		`ax_task_retries_total{name="a"}`:                               "2",
		`ax_task_dispatch_failures_total{name="b",reason="stuck"}`:      "1",
		`ax_task_dispatch_failures_total{name="b",reason="no_handler"}`: "1",
		`ax_orphans_recovered_total{}`:                                  "1",
		`ax_stuck_claims_total{}`:                                       "1",

		`ax_tasks_skipped_total{name="a"}`:                                     "1",
		`ax_tasks_skipped_total{name="nightly"}`:                               "1",
		`ax_schedule_fires_total{result="skipped_overlap",schedule="nightly"}`: "1",
		`ax_schedule_fires_total{result="dispatched",schedule="nightly"}`:      "1",
		`ax_schedule_fires_total{result="misfired",schedule="nightly"}`:        "3",
		`ax_schedule_next_fire_timestamp_seconds{schedule="nightly"}`:          strconv.FormatFloat(due, 'g', -1, 64),
		`ax_tasks_unhandled_total{name="c"}`:                                   "1",
		`ax_tasks_pruned_total{status="succeeded"}`:                            "1250",

		`ax_clock_offset_seconds{}`:      "-1.5",
		`ax_wheel_tasks{}`:               "42",
		`ax_queue_lag_seconds{}`:         "2.5",
		`ax_tasks{status="SCHEDULED"}`:   "5",
		`ax_tasks{status="DISPATCHING"}`: "0",
		`ax_tasks{status="RUNNING"}`:     "1",
		`ax_tasks{status="SUCCEEDED"}`:   "0",
		`ax_tasks{status="FAILED"}`:      "0",
		`ax_tasks{status="CANCELLED"}`:   "0",
		`ax_tasks{status="SKIPPED"}`:     "0",

		`ax_observer_events_dropped_total{}`: "7",

		`ax_leader_is_leader{}`:                            "1",
		`ax_leader_epoch{}`:                                "9",
		`ax_leader_transitions_total{}`:                    "3",
		`ax_leader_lease_remaining_seconds{}`:              "8.5",
		`ax_fence_rejections_total{component="claim"}`:     "1",
		`ax_executor_requests_total{result="ok"}`:          "1",
		`ax_executor_requests_total{result="unreachable"}`: "1",
		`ax_executor_request_duration_seconds_count{}`:     "2",
		`ax_executor_request_duration_seconds_sum{}`:       "5.003",
		`ax_executor_request_duration_seconds_buckets{}`:   "0.005:1 5:1",

		`ax_tasks_limited_total{name="a",reason="concurrency"}`: "5",
		`ax_name_concurrency_limit{name="a"}`:                   "5",
		`ax_name_slots_in_use{name="a"}`:                        "4",
		`ax_name_tasks_waiting{name="a"}`:                       "7",
	} {
		want[k] = v
	}
	if diff := cmp.Diff(want, samples(t, reg)); diff != "" {
		t.Errorf("series after the events (-want +got):\n%s", diff)
	}
}

// A manual Trigger's claim and start admit the name but feed no lateness histogram
// and no early start; an orphaned execution counts but has no duration sample.
func TestManualAndOrphanedEvents(t *testing.T) {
	t.Parallel()
	m, reg := setup(t)
	for _, e := range []ax.Event{
		{Kind: ax.EventClaimed, Name: "m", Manual: true},
		{Kind: ax.EventStarted, Name: "m", Manual: true},
		{Kind: ax.EventStarted, Name: "m", Manual: true, Lateness: -time.Minute, Early: true},
		{Kind: ax.EventFinished, Name: "m", Outcome: ax.OutcomeSucceeded, Duration: 20 * time.Millisecond},
		{Kind: ax.EventFinished, Name: "o", Outcome: ax.OutcomeOrphaned},
		{Kind: ax.EventFinished, Name: "o", Outcome: ax.OutcomeOrphaned},
	} {
		m.Observe(e)
	}
	want := unlabelled()
	admitted(want, "m", "o")
	for k, v := range map[string]string{
		`ax_task_executions_total{name="m",outcome="succeeded"}`:         "1",
		`ax_task_duration_seconds_count{name="m",outcome="succeeded"}`:   "1",
		`ax_task_duration_seconds_sum{name="m",outcome="succeeded"}`:     "0.02",
		`ax_task_duration_seconds_buckets{name="m",outcome="succeeded"}`: "0.025:1",
		`ax_task_executions_total{name="o",outcome="orphaned"}`:          "2",
	} {
		want[k] = v
	}
	if diff := cmp.Diff(want, samples(t, reg)); diff != "" {
		t.Errorf("series after manual and orphaned events (-want +got):\n%s", diff)
	}
}

func TestEveryMetricHasHelpAndAllowedLabels(t *testing.T) {
	t.Parallel()
	m, reg := setup(t)
	for _, e := range events() {
		m.Observe(e)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	allowed := map[string]bool{"name": true, "outcome": true, "reason": true, "status": true, "schedule": true, "result": true, "component": true}
	var names []string
	for _, f := range fams {
		names = append(names, f.GetName())
		if h := f.GetHelp(); len(h) < 20 || !strings.HasSuffix(h, ".") {
			t.Errorf("%s: help %q, want a sentence saying what it measures", f.GetName(), h)
		}
		if strings.HasSuffix(f.GetName(), "_seconds") && !strings.Contains(strings.ToLower(f.GetHelp()), "seconds") {
			t.Errorf("%s: help %q does not state the unit", f.GetName(), f.GetHelp())
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if !allowed[l.GetName()] {
					t.Errorf("%s: label %q, want only name, outcome, reason, status, schedule, result", f.GetName(), l.GetName())
				}
			}
		}
	}
	want := []string{
		"ax_clock_offset_seconds", "ax_early_starts_total", "ax_executor_request_duration_seconds",
		"ax_executor_requests_total", "ax_fence_rejections_total",
		"ax_leader_epoch", "ax_leader_is_leader", "ax_leader_lease_remaining_seconds", "ax_leader_transitions_total",
		"ax_name_concurrency_limit", "ax_name_slots_in_use", "ax_name_tasks_waiting",
		"ax_observer_events_dropped_total",
		"ax_orphans_recovered_total", "ax_queue_lag_seconds", "ax_schedule_fires_total",
		"ax_schedule_next_fire_timestamp_seconds", "ax_stuck_claims_total", "ax_task_dispatch_failures_total",
		"ax_task_dispatch_lateness_seconds", "ax_task_duration_seconds", "ax_task_executions_total",
		"ax_task_lateness_seconds", "ax_task_retries_total", "ax_tasks", "ax_tasks_limited_total", "ax_tasks_pruned_total", "ax_tasks_skipped_total",
		"ax_tasks_submitted_total", "ax_tasks_unhandled_total", "ax_wheel_tasks",
	}
	sort.Strings(names)
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("metric families (-want +got):\n%s", diff)
	}
}

func TestLatenessBuckets(t *testing.T) {
	t.Parallel()
	m, reg := setup(t)
	m.Observe(ax.Event{Kind: ax.EventStarted, Name: "a"})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var got []float64
	for _, f := range fams {
		if f.GetName() == "ax_task_lateness_seconds" {
			for _, b := range f.GetMetric()[0].GetHistogram().GetBucket() {
				got = append(got, b.GetUpperBound())
			}
		}
	}
	want := []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ax_task_lateness_seconds buckets (-want +got):\n%s", diff)
	}
}

func TestMaxNames(t *testing.T) {
	t.Parallel()
	m, reg := setup(t, metrics.WithMaxNames(2))
	for _, n := range []string{"a", "b", "c", "a", "d"} {
		m.Observe(ax.Event{Kind: ax.EventSubmitted, Name: n, Count: 1})
	}
	for _, s := range []string{"s1", "s2", "s3"} {
		m.Observe(ax.Event{Kind: ax.EventScheduleFired, Schedule: s, Result: ax.ScheduleDispatched, Count: 1})
	}
	got := samples(t, reg)
	want := unlabelled()
	admitted(want, "a", "b", metrics.OtherName)
	for k, v := range map[string]string{
		`ax_tasks_submitted_total{name="a"}`:                             "2",
		`ax_tasks_submitted_total{name="b"}`:                             "1",
		`ax_tasks_submitted_total{name="_other"}`:                        "2", // c and d
		`ax_schedule_fires_total{result="dispatched",schedule="s1"}`:     "1", // schedules have their own cap
		`ax_schedule_fires_total{result="dispatched",schedule="s2"}`:     "1",
		`ax_schedule_fires_total{result="dispatched",schedule="_other"}`: "1",
	} {
		want[k] = v
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("series with WithMaxNames(2) (-want +got):\n%s", diff)
	}
}

func TestMaxNamesZero(t *testing.T) {
	t.Parallel()
	m, reg := setup(t, metrics.WithMaxNames(0))
	m.Observe(ax.Event{Kind: ax.EventRetryScheduled, Name: "a"})
	m.Observe(ax.Event{Kind: ax.EventRetryScheduled, Name: "b"})
	if got := samples(t, reg)[`ax_task_retries_total{name="_other"}`]; got != "2" {
		t.Errorf(`ax_task_retries_total{name="_other"} = %q, want "2"`, got)
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	if _, err := metrics.New(nil); err == nil || !strings.HasPrefix(err.Error(), "ax: metrics: ") {
		t.Errorf("New(nil) = %v, want an ax: metrics: error", err)
	}
	if _, err := metrics.New(prometheus.NewRegistry(), metrics.WithMaxNames(-1)); err == nil || !strings.HasPrefix(err.Error(), "ax: metrics: ") {
		t.Errorf("New(WithMaxNames(-1)) = %v, want an ax: metrics: error", err)
	}
}

func TestNewTwiceOnOneRegistry(t *testing.T) {
	t.Parallel()
	_, reg := setup(t)
	before := samples(t, reg)
	_, err := metrics.New(reg)
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		t.Fatalf("second New = %v, want an error wrapping prometheus.AlreadyRegisteredError", err)
	}
	if !strings.HasPrefix(err.Error(), "ax: metrics: ") {
		t.Errorf("second New = %q, want the prefix %q", err, "ax: metrics: ")
	}
	if diff := cmp.Diff(before, samples(t, reg)); diff != "" {
		t.Errorf("registry changed by the failed New (-before +after):\n%s", diff)
	}
}

func TestNewLeavesRegistryAsItWas(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	// A metric of the same name but another help conflicts with the 15th collector.
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "ax_wheel_tasks", Help: "someone else's"}))
	if _, err := metrics.New(reg); err == nil || !strings.Contains(err.Error(), "ax_wheel_tasks") {
		t.Fatalf("New = %v, want an error naming ax_wheel_tasks", err)
	}
	want := map[string]string{"ax_wheel_tasks{}": "0"}
	if diff := cmp.Diff(want, samples(t, reg)); diff != "" {
		t.Errorf("registry after the failed New (-want +got):\n%s", diff)
	}
	// Everything New had registered before the conflict was unregistered: New works
	// once the conflict is gone.
	reg = prometheus.NewRegistry()
	if _, err := metrics.New(reg); err != nil {
		t.Fatalf("New: %v", err)
	}
}

func TestTaskCountsZeroAbsentStatuses(t *testing.T) {
	t.Parallel()
	m, reg := setup(t)
	m.Observe(ax.Event{Kind: ax.EventTaskCounts, Counts: map[ax.Status]int64{ax.Running: 3, "PAUSED": 2}})
	m.Observe(ax.Event{Kind: ax.EventTaskCounts, Counts: map[ax.Status]int64{ax.Scheduled: 1}})
	got := samples(t, reg)
	for st, want := range map[string]string{"SCHEDULED": "1", "RUNNING": "0", "PAUSED": "0", "FAILED": "0"} {
		if g := got[fmt.Sprintf("ax_tasks{status=%q}", st)]; g != want {
			t.Errorf("ax_tasks{status=%q} = %q, want %q", st, g, want)
		}
	}
}

func TestUnknownLabelValues(t *testing.T) {
	t.Parallel()
	m, reg := setup(t)
	m.Observe(ax.Event{Kind: ax.EventFinished, Name: "a", Outcome: "vanished", Duration: time.Millisecond})
	m.Observe(ax.Event{Kind: ax.EventDispatchFailed, Name: "a", Reason: "gone"})
	m.Observe(ax.Event{Kind: ax.EventScheduleFired, Schedule: "s", Result: "late", Count: 2})
	got := samples(t, reg)
	for k, want := range map[string]string{
		`ax_task_executions_total{name="a",outcome="vanished"}`:       "1",
		`ax_task_duration_seconds_count{name="a",outcome="vanished"}`: "1",
		`ax_task_dispatch_failures_total{name="a",reason="gone"}`:     "1",
		`ax_schedule_fires_total{result="late",schedule="s"}`:         "2",
	} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
}

func TestObserveConcurrently(t *testing.T) {
	t.Parallel()
	m, reg := setup(t, metrics.WithMaxNames(10))
	const goroutines, perGoroutine = 8, 500
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perGoroutine {
				name := "n" + strconv.Itoa((g*perGoroutine+i)%20)
				m.Observe(ax.Event{Kind: ax.EventSubmitted, Name: name, Count: 1})
				m.Observe(ax.Event{Kind: ax.EventFinished, Name: name, Outcome: ax.OutcomeSucceeded, Duration: time.Millisecond})
				m.Observe(ax.Event{Kind: ax.EventScheduleFired, Schedule: name, Result: ax.ScheduleDispatched, Count: 1, Due: time.Now()})
			}
		})
	}
	wg.Wait()
	var submitted, executions, fires, names float64
	for k, v := range samples(t, reg) {
		f, _ := strconv.ParseFloat(v, 64)
		switch {
		case strings.HasPrefix(k, "ax_tasks_submitted_total"):
			submitted += f
			names++
		case strings.HasPrefix(k, "ax_task_executions_total") && strings.Contains(k, `outcome="succeeded"`):
			executions += f
		case strings.HasPrefix(k, "ax_schedule_fires_total"):
			fires += f
		}
	}
	const total = goroutines * perGoroutine
	if submitted != total || executions != total || fires != total {
		t.Errorf("submitted, executions, fires = %v, %v, %v, want %d each", submitted, executions, fires, total)
	}
	if names != 11 {
		t.Errorf("ax_tasks_submitted_total has %v series, want 11 (10 names and _other)", names)
	}
}

// TestObserveAdmittedNameAllocatesNothing pins the package doc's claim: once a name is
// admitted and its series exist, Observe allocates nothing.
// Not parallel: AllocsPerRun counts every goroutine's allocations.
func TestObserveAdmittedNameAllocatesNothing(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for _, e := range []ax.Event{
		{Kind: ax.EventSubmitted, Name: "order.close", Count: 1},
		{Kind: ax.EventClaimed, Name: "order.close", Lateness: 3 * time.Millisecond},
		{Kind: ax.EventStarted, Name: "order.close", Lateness: 3 * time.Millisecond},
		{Kind: ax.EventFinished, Name: "order.close", Outcome: ax.OutcomeSucceeded, Duration: 20 * time.Millisecond},
		{Kind: ax.EventFinished, Name: "order.close", Outcome: ax.OutcomeOrphaned},
		{Kind: ax.EventDispatchFailed, Name: "order.close", Reason: string(ax.DispatchStuck)},
		{Kind: ax.EventRetryScheduled, Name: "order.close", Due: at},
		{Kind: ax.EventSkipped, Name: "order.close"},
		{Kind: ax.EventUnhandled, Name: "order.close"},
		{Kind: ax.EventScheduleFired, Schedule: "nightly", Result: ax.ScheduleDispatched, Count: 1, Due: at},
	} {
		m, _ := setup(t, metrics.WithMaxNames(1))
		m.Observe(e) // admits the name and creates its series
		if n := testing.AllocsPerRun(100, func() { m.Observe(e) }); n != 0 {
			t.Errorf("Observe(%+v) of an admitted name: %v allocations per call, want 0", e, n)
		}
	}
}

func BenchmarkObserve(b *testing.B) {
	cases := []struct {
		name string
		e    ax.Event
	}{
		{"event=started", ax.Event{Kind: ax.EventStarted, Name: "order.close.timeout", Lateness: 3 * time.Millisecond}},
		{"event=finished", ax.Event{Kind: ax.EventFinished, Name: "order.close.timeout", Outcome: ax.OutcomeSucceeded, Duration: 20 * time.Millisecond}},
		{"event=submitted", ax.Event{Kind: ax.EventSubmitted, Name: "order.close.timeout", Count: 1}},
		{"event=schedule_fired", ax.Event{Kind: ax.EventScheduleFired, Schedule: "nightly", Result: ax.ScheduleDispatched, Count: 1, Due: time.Now()}},
		{"event=started/name=_other", ax.Event{Kind: ax.EventStarted, Name: "beyond.the.cap", Lateness: 3 * time.Millisecond}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			m, _ := setup(b, metrics.WithMaxNames(1))
			m.Observe(ax.Event{Kind: ax.EventSubmitted, Name: "order.close.timeout", Count: 1}) // fills the cap
			m.Observe(c.e)
			b.ReportAllocs()
			for b.Loop() {
				m.Observe(c.e)
			}
		})
	}
}

// TestStepDownZeroesTaskCounts: the task counts are the leader's; once a term ends the
// replica exports zeros, so that summing across replicas counts each task once.
func TestStepDownZeroesTaskCounts(t *testing.T) {
	t.Parallel()
	m, reg := setup(t)
	m.Observe(ax.Event{Kind: ax.EventLeadership, Leader: true, Epoch: 3})
	m.Observe(ax.Event{Kind: ax.EventTaskCounts, Counts: map[ax.Status]int64{ax.Scheduled: 5}, Lag: time.Second})
	m.Observe(ax.Event{Kind: ax.EventLeadership, Leader: false, Epoch: 3, Reason: "lost"})
	got := samples(t, reg)
	for _, k := range []string{`ax_tasks{status="SCHEDULED"}`, "ax_queue_lag_seconds{}", "ax_leader_is_leader{}"} {
		if got[k] != "0" {
			t.Errorf("%s = %s after the term ended, want 0", k, got[k])
		}
	}
}
