// Package tracing traces ax's tasks from submit to run with OpenTelemetry. Its Tracer
// implements ax.Tracer on go.opentelemetry.io/otel; package ax itself imports no
// tracing library.
//
//	tr := tracing.New() // otel.GetTracerProvider(), W3C trace context
//	s, err := ax.New(ax.Config{Store: st, Tracer: tr})
//	t, err := s.Delay(ctx, "order.close.timeout", orderID, 30*time.Minute) // ctx: the request's span
//
// Give every replica a Tracer: the replica that runs a task makes the span of its
// execution, from the trace context stored with the task.
//
// # What is stored
//
// Delay, At, SubmitMany and TriggerSchedule store, with their tasks, the trace context
// of their ctx as the propagator writes it (W3C TraceContext by default: traceparent,
// and tracestate when there is one), as a URL query:
//
//	traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
//
// A context without a valid span context stores nothing. A text over ax.MaxTraceLen
// (512 bytes) keeps only the traceparent. The schedules a scheduler stores carry the
// trace context of the ctx given to its Start, and their occurrences carry the
// schedule's. A propagator that also writes baggage stores it too: keep baggage that
// must not reach the database out of it.
//
// # Spans
//
// Each execution is one span, started right before the handler and ended when the
// attempt's outcome is decided: named "ax.run " and the task's name, of kind
// consumer, with the attributes
//
//	ax.task.name        string   the task's name (its handler's)
//	ax.task.id          int64    the task's id
//	ax.task.attempt     int64    0 on the first execution, one more per business retry
//	ax.execution.id     string   the execution id (a UUIDv7)
//	ax.task.lateness    float64  seconds from DueAt to the execution's start, by the
//	                             store's clock (ax.Execution.Lateness)
//	ax.task.occurrence  bool     a schedule's occurrence
//
// and never the payload or the business key. A failed attempt — an error, a panic (its
// stack in the recorded exception), a deadline passed — records the error and sets
// the status to Error, its description the error's first line.
//
// The span of a task's first execution (attempt 0, not a schedule's occurrence) is a
// child of the span that submitted the task: one trace from the request to the run.
// A retry, and a schedule's occurrence, starts a trace of its own with a link to that
// span: it was not caused by the submitting call but by a failure, or by the clock.
// An execution of a task stored without a trace context starts a trace of its own,
// unlinked. The attempt is the task's count of business retries (ax.RunInfo.FirstRun):
// a run again after a release at Stop, which keeps its attempt, is a child too, and so
// is the next run after an operator's Retry of a FAILED task, which starts the count
// again at 0.
//
// The replica that runs a task reads its trace context from the store, whether the
// task was claimed there or dispatched to it by the leader over the executor protocol
// (package remote): nothing of it travels in the dispatch request.
package tracing
