// Package metrics exports ax's scheduler events as Prometheus metrics. Its Observer
// implements ax.Observer on github.com/prometheus/client_golang; package ax itself
// imports no metrics library.
//
//	reg := prometheus.NewRegistry()
//	m, err := metrics.New(reg)
//	s, err := ax.New(ax.Config{Store: st, Observer: m})
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// New registers every collector on the Registerer it is given, and fails, leaving the
// registry as it was, if one is already there. A process with several schedulers
// gives each its own Observer, on a Registerer of its own, e.g.
// prometheus.WrapRegistererWith(prometheus.Labels{"scheduler": "billing"}, reg):
// gauges such as ax_wheel_tasks describe one scheduler.
//
// # Metrics
//
// Durations and times are in seconds. Labels carry only the values below, never task
// ids, keys, attempts or payloads.
//
//	metric                                   labels              from
//	ax_task_lateness_seconds                 name                handler start − due (histogram; not for a Trigger)
//	ax_task_dispatch_lateness_seconds        name                claim − due (histogram; not for a Trigger)
//	ax_task_duration_seconds                 name, outcome       the handler's run time (histogram; not for
//	                                                             orphaned executions, whose run time is unknown)
//	ax_task_executions_total                 name, outcome       executions ended: succeeded, failed, panicked,
//	                                                             timed_out, released, orphaned, snoozed, cancelled
//	                                                             (a running task's cancel)
//	ax_task_dispatch_failures_total          name, reason        claimed tasks handed back unstarted: no_handler,
//	                                                             stopping, stuck, lease_ended, busy, unreachable,
//	                                                             fenced, refused
//	ax_task_retries_total                    name                failed executions that will be retried
//	ax_tasks_submitted_total                 name                tasks written (submitted, or a schedule's occurrences)
//	ax_tasks_skipped_total                   name                tasks SKIPPED because their task key was held
//	ax_tasks_unhandled_total                 name                tasks due under a name with no handler here
//	ax_tasks_pruned_total                    status              finished tasks deleted by retention (Config.Retention)
//	ax_tasks_limited_total                   name, reason        due tasks a claim left waiting, their name's limit
//	                                                             reached: concurrency, rate
//	ax_name_concurrency_limit                name                a limited name's concurrency limit (the leader's)
//	ax_name_slots_in_use                     name                its tasks DISPATCHING or RUNNING, by the store
//	ax_name_tasks_waiting                    name                its due tasks the leader holds waiting for a slot
//	ax_schedule_fires_total                  schedule, result    slots: dispatched, misfired, caught_up,
//	                                                             skipped_overlap
//	ax_schedule_next_fire_timestamp_seconds  schedule            Unix time of the schedule's next slot
//	ax_tasks                                 status              tasks in the store per status (SCHEDULED, …)
//	ax_queue_lag_seconds                     —                   age of the oldest due task not yet claimed
//	ax_orphans_recovered_total               —                   RUNNING tasks recovered after their heartbeats stopped
//	ax_stuck_claims_total                    —                   claimed tasks not started in time, handed back
//	ax_early_starts_total                    —                   handlers started before their due time: must stay 0
//	ax_clock_offset_seconds                  —                   the store's clock minus the local clock
//	ax_wheel_tasks                           —                   tasks held in the timing wheel
//	ax_observer_events_dropped_total         —                   events dropped because the Observer's queue was full
//	ax_leader_is_leader                      —                   1 while this scheduler leads (Config.Elector), else 0
//	ax_leader_epoch                          —                   the fencing epoch of its latest term
//	ax_leader_transitions_total              —                   terms begun and ended
//	ax_leader_lease_remaining_seconds        —                   time until the leader stops acting on its lease
//	                                                             unless renewed; 0 when not leading
//	ax_fence_rejections_total                component           writes refused as fenced by a newer leader: claim,
//	                                                             schedule, recovery (an executor's refusal: executor
//	                                                             dispatch failures, reason fenced)
//	ax_executor_requests_total               result              dispatch requests to other replicas: ok, busy,
//	                                                             unreachable, fenced, error
//	ax_executor_request_duration_seconds     —                   time of a dispatch request (histogram)
//
// The histograms share one set of buckets, from a millisecond to an hour: 0.001,
// 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900,
// 3600 (and +Inf). A lateness below zero, an early start, is recorded as 0 and
// counted in ax_early_starts_total.
//
// A manual Trigger (ax.Event.Manual) runs a task now, whatever its due time: its
// claim and start are in neither lateness histogram, nor in ax_early_starts_total,
// so that the histograms' counts are the scheduled claims and starts; its execution
// counts in ax_task_executions_total and ax_task_duration_seconds as any other. An
// orphaned execution counts in ax_task_executions_total{outcome="orphaned"} but has no
// ax_task_duration_seconds sample: how long it ran is not known.
//
// The metrics without labels are exported from New on, at 0. A labelled series
// appears at its first event, except that a task name's ax_task_executions_total
// series start at 0 for every outcome as soon as the name is first seen, so that
// increase() shows a first failure. ax_tasks has a series for each of ax's statuses
// from the first count on; a status without tasks is 0.
//
// # Name cap
//
// The name label takes at most WithMaxNames values (default 1000), admitted first
// come first served for the life of the Observer; every later name is reported as
// "_other". The schedule label has its own cap of the same size. Reading the series
// of an admitted name takes a read lock and allocates nothing: each name's child
// series are created once and cached.
//
// # Cost
//
// Every metric is fed by the scheduler's events, delivered off the scheduling path
// (see ax.Observer); a scrape reads counters in memory and never queries the store.
// ax_tasks and ax_queue_lag_seconds come from one store query the scheduler runs
// every Config.StatsInterval (default 15 s), so they are as old as that at most.
package metrics
