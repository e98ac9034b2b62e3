package metrics

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/axsched/ax"
)

// DefaultMaxNames is the default cap on distinct values of the name label, and,
// separately, of the schedule label (see WithMaxNames).
const DefaultMaxNames = 1000

// OtherName is the label value that stands for every task name, or schedule, beyond
// the cap of WithMaxNames.
const OtherName = "_other"

// buckets are the upper bounds, in seconds, of every histogram: from 1 ms to an hour.
var buckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

// Option configures New.
type Option func(*options)

type options struct {
	maxNames int
}

// WithMaxNames caps the distinct values of the name label at n, and separately those
// of the schedule label: the first n names seen are admitted, for the life of the
// Observer; later ones are reported as "_other" (OtherName). Zero reports every name
// as "_other". Defaults to DefaultMaxNames (1000); a negative n makes New fail.
func WithMaxNames(n int) Option {
	return func(o *options) { o.maxNames = n }
}

// Observer turns ax's events into Prometheus metrics: it implements ax.Observer, to
// be set as ax.Config.Observer. It is safe for concurrent use, but its gauges
// (ax_wheel_tasks, ax_clock_offset_seconds, ax_tasks, …) describe one scheduler:
// give each scheduler of a process its own Observer, on its own Registerer (see
// prometheus.WrapRegistererWith). It starts no goroutines.
type Observer struct {
	names     nameSet[nameSeries]
	schedules nameSet[scheduleSeries]

	lateness         *prometheus.HistogramVec
	dispatchLateness *prometheus.HistogramVec
	duration         *prometheus.HistogramVec
	executions       *prometheus.CounterVec
	dispatchFailures *prometheus.CounterVec
	retries          *prometheus.CounterVec
	skipped          *prometheus.CounterVec
	submitted        *prometheus.CounterVec
	unhandled        *prometheus.CounterVec
	scheduleFires    *prometheus.CounterVec
	nextFire         *prometheus.GaugeVec
	tasks            *prometheus.GaugeVec

	queueLag    prometheus.Gauge
	clockOffset prometheus.Gauge
	wheelTasks  prometheus.Gauge
	orphans     prometheus.Counter
	stuck       prometheus.Counter
	earlyStarts prometheus.Counter
	dropped     prometheus.Counter

	isLeader       prometheus.Gauge
	epoch          prometheus.Gauge
	transitions    prometheus.Counter
	leaseRemaining prometheus.Gauge
	fenced         *prometheus.CounterVec
	pruned         *prometheus.CounterVec
	requests       *prometheus.CounterVec
	requestTime    prometheus.Histogram

	limited     *prometheus.CounterVec
	nameLimit   *prometheus.GaugeVec
	nameInUse   *prometheus.GaugeVec
	nameWaiting *prometheus.GaugeVec

	statusMu sync.Mutex
	statuses []ax.Status // the statuses ax_tasks has series for
}

var _ ax.Observer = (*Observer)(nil)

// New returns an Observer whose collectors are registered on reg. It fails, and
// leaves reg as it was, if reg is nil, an option is invalid, or a collector cannot be
// registered: registering twice on one registry returns an error wrapping
// prometheus.AlreadyRegisteredError.
func New(reg prometheus.Registerer, opts ...Option) (*Observer, error) {
	if reg == nil {
		return nil, errors.New("ax: metrics: nil Registerer")
	}
	cfg := options{maxNames: DefaultMaxNames}
	for _, opt := range opts {
		opt(&cfg)
	}
	if cfg.maxNames < 0 {
		return nil, fmt.Errorf("ax: metrics: WithMaxNames(%d): must not be negative", cfg.maxNames)
	}

	histogram := func(name, help string, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	}
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	o := &Observer{
		lateness: histogram("ax_task_lateness_seconds",
			"Seconds from a task's due time to its handler's start (store stamps), per task name.", "name"),
		dispatchLateness: histogram("ax_task_dispatch_lateness_seconds",
			"Seconds from a task's due time to its claim for dispatch (store stamps), per task name.", "name"),
		duration: histogram("ax_task_duration_seconds",
			"Seconds a handler ran, per task name and outcome of the execution.", "name", "outcome"),
		executions: counterVec("ax_task_executions_total",
			"Executions that ended, per task name and outcome (succeeded, failed, panicked, timed_out, released, orphaned, snoozed).", "name", "outcome"),
		dispatchFailures: counterVec("ax_task_dispatch_failures_total",
			"Claimed tasks that could not be started and were handed back, per task name and reason (no_handler, stopping, stuck, lease_ended, busy, unreachable, fenced, refused).", "name", "reason"),
		retries: counterVec("ax_task_retries_total",
			"Failed executions that will be retried (business retries), per task name.", "name"),
		skipped: counterVec("ax_tasks_skipped_total",
			"Tasks set SKIPPED because their task key was held, per task name.", "name"),
		submitted: counterVec("ax_tasks_submitted_total",
			"Tasks written (submitted, or materialised by a schedule), per task name.", "name"),
		unhandled: counterVec("ax_tasks_unhandled_total",
			"Tasks that came due under a name no handler is registered for in this scheduler, per task name.", "name"),
		scheduleFires: counterVec("ax_schedule_fires_total",
			"Slots of a schedule, per schedule and result (dispatched, misfired, caught_up, skipped_overlap).", "schedule", "result"),
		nextFire: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ax_schedule_next_fire_timestamp_seconds",
			Help: "Unix time, in seconds, of a schedule's next slot, per schedule."}, []string{"schedule"}),
		tasks: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ax_tasks",
			Help: "Tasks in the store per status (SCHEDULED, RUNNING, …), counted every Config.StatsInterval."}, []string{"status"}),
		queueLag: gauge("ax_queue_lag_seconds",
			"Age in seconds of the oldest due task not yet claimed (0 when none waits), measured every Config.StatsInterval."),
		clockOffset: gauge("ax_clock_offset_seconds",
			"Measured offset in seconds of the store's clock from the local clock (store minus local)."),
		wheelTasks: gauge("ax_wheel_tasks",
			"Tasks held in the scheduler's timing wheel."),
		orphans: counter("ax_orphans_recovered_total",
			"RUNNING tasks whose executor stopped heartbeating, recovered as failed attempts."),
		stuck: counter("ax_stuck_claims_total",
			"Tasks claimed but not started within Config.DispatchTimeout, handed back."),
		earlyStarts: counter("ax_early_starts_total",
			"Handlers started before their task's due time: a broken guarantee, must stay 0."),
		dropped: counter("ax_observer_events_dropped_total",
			"Scheduler events dropped because the Observer's queue was full."),
		isLeader: gauge("ax_leader_is_leader",
			"1 while this scheduler leads its namespace (Config.Elector), else 0."),
		epoch: gauge("ax_leader_epoch",
			"The fencing epoch of this scheduler's latest term as leader."),
		transitions: counter("ax_leader_transitions_total",
			"Changes of this scheduler's role: terms begun and ended."),
		leaseRemaining: gauge("ax_leader_lease_remaining_seconds",
			"Seconds until the leader stops acting on its lease unless renewed (0 when not leading)."),
		fenced: counterVec("ax_fence_rejections_total",
			"Writes refused as fenced by a newer leader, per component (claim, schedule, recovery).", "component"),
		pruned: counterVec("ax_tasks_pruned_total",
			"Finished tasks deleted by retention (Config.Retention), with their executions, per status.", "status"),
		requests: counterVec("ax_executor_requests_total",
			"Dispatch requests the leader sent to other replicas' executors, per result (ok, busy, unreachable, fenced, error).", "result"),
		requestTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ax_executor_request_duration_seconds",
			Help: "Seconds a dispatch request to another replica's executor took.", Buckets: buckets}),
		limited: counterVec("ax_tasks_limited_total",
			"Due tasks a claim left waiting because their name's limit was reached, per task name and reason (the limit: concurrency, rate, key_rate).", "name", "reason"),
		nameLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ax_name_concurrency_limit",
			Help: "A task name's concurrency limit, per name with one, reported by the leader every Config.StatsInterval."}, []string{"name"}),
		nameInUse: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ax_name_slots_in_use",
			Help: "A limited task name's tasks DISPATCHING or RUNNING (slots in use), by the store, reported by the leader every Config.StatsInterval."}, []string{"name"}),
		nameWaiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ax_name_tasks_waiting",
			Help: "A limited task name's due tasks the leader holds waiting for a slot, reported every Config.StatsInterval."}, []string{"name"}),
		statuses: []ax.Status{ax.Scheduled, ax.Dispatching, ax.Running, ax.Succeeded, ax.Failed, ax.Cancelled, ax.Skipped},
	}
	o.names = newNameSet(cfg.maxNames, o.newNameSeries)
	o.schedules = newNameSet(cfg.maxNames, func(name string) *scheduleSeries { return &scheduleSeries{name: name} })

	collectors := []struct {
		name string
		c    prometheus.Collector
	}{
		{"ax_task_lateness_seconds", o.lateness},
		{"ax_task_dispatch_lateness_seconds", o.dispatchLateness},
		{"ax_task_duration_seconds", o.duration},
		{"ax_task_executions_total", o.executions},
		{"ax_task_dispatch_failures_total", o.dispatchFailures},
		{"ax_task_retries_total", o.retries},
		{"ax_tasks_skipped_total", o.skipped},
		{"ax_tasks_submitted_total", o.submitted},
		{"ax_tasks_unhandled_total", o.unhandled},
		{"ax_schedule_fires_total", o.scheduleFires},
		{"ax_schedule_next_fire_timestamp_seconds", o.nextFire},
		{"ax_tasks", o.tasks},
		{"ax_queue_lag_seconds", o.queueLag},
		{"ax_clock_offset_seconds", o.clockOffset},
		{"ax_wheel_tasks", o.wheelTasks},
		{"ax_orphans_recovered_total", o.orphans},
		{"ax_stuck_claims_total", o.stuck},
		{"ax_early_starts_total", o.earlyStarts},
		{"ax_observer_events_dropped_total", o.dropped},
		{"ax_leader_is_leader", o.isLeader},
		{"ax_leader_epoch", o.epoch},
		{"ax_leader_transitions_total", o.transitions},
		{"ax_leader_lease_remaining_seconds", o.leaseRemaining},
		{"ax_fence_rejections_total", o.fenced},
		{"ax_tasks_pruned_total", o.pruned},
		{"ax_executor_requests_total", o.requests},
		{"ax_executor_request_duration_seconds", o.requestTime},
		{"ax_tasks_limited_total", o.limited},
		{"ax_name_concurrency_limit", o.nameLimit},
		{"ax_name_slots_in_use", o.nameInUse},
		{"ax_name_tasks_waiting", o.nameWaiting},
	}
	for i, c := range collectors {
		if err := reg.Register(c.c); err != nil {
			for _, r := range collectors[:i] {
				reg.Unregister(r.c)
			}
			return nil, fmt.Errorf("ax: metrics: register %s: %w", c.name, err)
		}
	}
	return o, nil
}

// Observe records e. It allocates nothing for a name already admitted and a series
// already created. A manual Trigger's EventClaimed and EventStarted (Manual) admit
// the name but feed neither lateness histogram nor ax_early_starts_total; an
// EventFinished with OutcomeOrphaned counts in ax_task_executions_total but not in
// ax_task_duration_seconds, its run time being unknown. An EventScheduleFired with a
// zero Due leaves the schedule's next-fire gauge as it was; unknown event kinds only
// count their Dropped events.
func (o *Observer) Observe(e ax.Event) {
	if e.Dropped > 0 {
		o.dropped.Add(float64(e.Dropped))
	}
	switch e.Kind {
	case ax.EventSubmitted:
		if e.Count > 0 {
			s := o.names.get(e.Name)
			s.submitted.get(func() prometheus.Counter { return o.submitted.WithLabelValues(s.name) }).Add(float64(e.Count))
		}
	case ax.EventClaimed:
		s := o.names.get(e.Name)
		if e.Manual {
			return // a Trigger: its lateness means nothing
		}
		s.dispatchLateness.get(func() prometheus.Observer { return o.dispatchLateness.WithLabelValues(s.name) }).Observe(seconds(e.Lateness))
	case ax.EventStarted:
		s := o.names.get(e.Name)
		if e.Manual {
			return // a Trigger runs before its due time by design: neither late nor early
		}
		if e.Early {
			o.earlyStarts.Inc()
		}
		s.lateness.get(func() prometheus.Observer { return o.lateness.WithLabelValues(s.name) }).Observe(seconds(e.Lateness))
	case ax.EventFinished:
		s := o.names.get(e.Name)
		i := outcomeIndex(e.Outcome)
		if i < 0 {
			o.executions.WithLabelValues(s.name, string(e.Outcome)).Inc()
			o.duration.WithLabelValues(s.name, string(e.Outcome)).Observe(seconds(e.Duration))
			return
		}
		s.executions[i].get(func() prometheus.Counter { return o.executions.WithLabelValues(s.name, string(e.Outcome)) }).Inc()
		if e.Outcome == ax.OutcomeOrphaned {
			return // its run time is not known: a zero would drag the histogram down
		}
		s.duration[i].get(func() prometheus.Observer { return o.duration.WithLabelValues(s.name, string(e.Outcome)) }).Observe(seconds(e.Duration))
	case ax.EventDispatchFailed:
		s := o.names.get(e.Name)
		i := reasonIndex(ax.DispatchReason(e.Reason))
		if i < 0 {
			o.dispatchFailures.WithLabelValues(s.name, e.Reason).Inc()
			return
		}
		s.dispatchFailures[i].get(func() prometheus.Counter { return o.dispatchFailures.WithLabelValues(s.name, e.Reason) }).Inc()
	case ax.EventRetryScheduled:
		s := o.names.get(e.Name)
		s.retries.get(func() prometheus.Counter { return o.retries.WithLabelValues(s.name) }).Inc()
	case ax.EventOrphanRecovered:
		o.orphans.Inc()
	case ax.EventStuckClaimHandedBack:
		o.stuck.Inc()
	case ax.EventSkipped:
		s := o.names.get(e.Name)
		s.skipped.get(func() prometheus.Counter { return o.skipped.WithLabelValues(s.name) }).Inc()
		if e.Schedule != "" {
			o.scheduleFired(e.Schedule, ax.ScheduleSkippedOverlap, 1)
		}
	case ax.EventScheduleFired:
		o.scheduleFired(e.Schedule, e.Result, e.Count)
		if !e.Due.IsZero() {
			s := o.schedules.get(e.Schedule)
			s.nextFire.get(func() prometheus.Gauge { return o.nextFire.WithLabelValues(s.name) }).Set(unixSeconds(e.Due))
		}
	case ax.EventClockOffset:
		o.clockOffset.Set(e.Offset.Seconds())
	case ax.EventWheelSize:
		o.wheelTasks.Set(float64(e.Count))
	case ax.EventTaskCounts:
		o.queueLag.Set(e.Lag.Seconds())
		o.taskCounts(e.Counts)
	case ax.EventUnhandled:
		s := o.names.get(e.Name)
		s.unhandled.get(func() prometheus.Counter { return o.unhandled.WithLabelValues(s.name) }).Inc()
	case ax.EventLeadership:
		o.transitions.Inc()
		if e.Leader {
			o.isLeader.Set(1)
			o.epoch.Set(float64(e.Epoch))
		} else {
			// The task counts are the leader's to report: a replica that stopped
			// leading exports zeros, so that sums across replicas stay right.
			o.isLeader.Set(0)
			o.leaseRemaining.Set(0)
			o.queueLag.Set(0)
			o.taskCounts(nil)
			o.nameLimit.Reset()
			o.nameInUse.Reset()
			o.nameWaiting.Reset()
		}
	case ax.EventLease:
		// Sent every second of a term: it also repairs ax_leader_is_leader should a
		// leadership event have been dropped from a full queue.
		o.leaseRemaining.Set(e.LeaseRemaining.Seconds())
		if e.LeaseRemaining > 0 {
			o.isLeader.Set(1)
			o.epoch.Set(float64(e.Epoch))
		} else {
			o.isLeader.Set(0)
		}
	case ax.EventFenceRejected:
		o.fenced.WithLabelValues(e.Reason).Inc()
	case ax.EventExecutorRequest:
		o.requests.WithLabelValues(e.Reason).Inc()
		o.requestTime.Observe(seconds(e.Duration))
	case ax.EventPruned:
		o.pruned.WithLabelValues(e.Reason).Add(float64(e.Count))
	case ax.EventLimited:
		s := o.names.get(e.Name)
		o.limited.WithLabelValues(s.name, e.Reason).Add(float64(e.Count))
	case ax.EventNameSlots:
		s := o.names.get(e.Name)
		o.nameLimit.WithLabelValues(s.name).Set(float64(e.Limit))
		o.nameInUse.WithLabelValues(s.name).Set(float64(e.InUse))
		o.nameWaiting.WithLabelValues(s.name).Set(float64(e.Count))
	}
}

// scheduleFired adds n slots of schedule with result to ax_schedule_fires_total.
func (o *Observer) scheduleFired(schedule, result string, n int) {
	if n <= 0 {
		return
	}
	s := o.schedules.get(schedule)
	i := resultIndex(result)
	if i < 0 {
		o.scheduleFires.WithLabelValues(s.name, result).Add(float64(n))
		return
	}
	s.fires[i].get(func() prometheus.Counter { return o.scheduleFires.WithLabelValues(s.name, result) }).Add(float64(n))
}

// taskCounts sets ax_tasks from counts. A status absent from counts has no task: the
// statuses of ax, and any other status once reported, are set to 0.
func (o *Observer) taskCounts(counts map[ax.Status]int64) {
	o.statusMu.Lock()
	defer o.statusMu.Unlock()
	for st := range counts {
		if !slices.Contains(o.statuses, st) {
			o.statuses = append(o.statuses, st)
		}
	}
	for _, st := range o.statuses {
		o.tasks.WithLabelValues(string(st)).Set(float64(counts[st]))
	}
}

// seconds is d in seconds, at least 0, for a histogram, whose sum must never
// decrease: a lateness below zero (an early start, counted apart by
// ax_early_starts_total) is recorded as 0.
func seconds(d time.Duration) float64 {
	return max(d, 0).Seconds()
}

// unixSeconds is t as Unix time in seconds, with its fraction.
func unixSeconds(t time.Time) float64 {
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9
}
