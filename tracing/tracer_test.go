package tracing_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/axsched/ax"
	"github.com/axsched/ax/tracing"
)

// provider returns a tracer provider that exports every ended span at once to the
// exporter it returns.
func provider(t testing.TB) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return tp, exp
}

// remoteContext returns a context carrying a sampled remote span context with
// tracestate ts.
func remoteContext(t testing.TB, ts string) (context.Context, trace.SpanContext) {
	t.Helper()
	state, err := trace.ParseTraceState(ts)
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled, TraceState: state, Remote: true,
	})
	return trace.ContextWithRemoteSpanContext(context.Background(), sc), sc
}

func TestInjectWritesTheTraceContext(t *testing.T) {
	t.Parallel()
	tr := tracing.New()
	const parent = "traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	plain, _ := remoteContext(t, "")
	withState, _ := remoteContext(t, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
	long, _ := remoteContext(t, "a="+strings.Repeat("x", 250)+",b="+strings.Repeat("y", 250))
	for name, c := range map[string]struct {
		ctx  context.Context
		want string
	}{
		"no span":              {context.Background(), ""},
		"a span":               {plain, parent},
		"a span and its state": {withState, parent + "&tracestate=rojo%3D00f067aa0ba902b7%2Ccongo%3Dt61rcWkgMzE"},
		"a state too long":     {long, parent},
	} {
		if got := tr.Inject(c.ctx); got != c.want {
			t.Errorf("Inject(%s) = %q, want %q", name, got, c.want)
		}
		if got := tr.Inject(c.ctx); len(got) > ax.MaxTraceLen {
			t.Errorf("Inject(%s) is %d bytes, over %d", name, len(got), ax.MaxTraceLen)
		}
	}
}

// attrs returns a span's attributes by key.
func attrs(s tracetest.SpanStub) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// run starts and ends the span of an execution described by info, ended with err, and
// returns it, checking that the handler's context carries it.
func run(t *testing.T, info ax.RunInfo, err error) tracetest.SpanStub {
	t.Helper()
	tp, exp := provider(t)
	ctx, end := tracing.New(tracing.WithTracerProvider(tp)).Start(context.Background(), info)
	end(err)
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans exported, want 1", len(spans))
	}
	if got := trace.SpanContextFromContext(ctx); !got.Equal(spans[0].SpanContext) {
		t.Errorf("the handler's context carries span %v, want the execution's %v", got, spans[0].SpanContext)
	}
	return spans[0]
}

// The first run of a submitted task is a child of the submitting span, in its trace,
// with the task's attributes and nothing of its payload.
func TestStartFirstRunIsAChild(t *testing.T) {
	t.Parallel()
	ctx, parent := remoteContext(t, "rojo=1")
	info := ax.RunInfo{Trace: tracing.New().Inject(ctx), TaskID: 42, Name: "order.close", ExecutionID: "0190-exec",
		Lateness: 1500 * time.Millisecond}
	s := run(t, info, nil)
	if s.Name != "ax.run order.close" || s.SpanKind != trace.SpanKindConsumer {
		t.Errorf("span %q of kind %v, want %q, consumer", s.Name, s.SpanKind, "ax.run order.close")
	}
	if s.Parent.SpanID() != parent.SpanID() || s.SpanContext.TraceID() != parent.TraceID() || len(s.Links) != 0 {
		t.Errorf("span parent %v in trace %v, links %v; want a child of %v in its trace, no link", s.Parent, s.SpanContext.TraceID(), s.Links, parent)
	}
	if ts := s.SpanContext.TraceState().Get("rojo"); ts != "1" {
		t.Errorf("tracestate rojo = %q, want the submitter's %q", ts, "1")
	}
	want := map[string]attribute.Value{
		"ax.task.name": attribute.StringValue("order.close"), "ax.task.id": attribute.Int64Value(42),
		"ax.task.attempt": attribute.Int64Value(0), "ax.execution.id": attribute.StringValue("0190-exec"),
		"ax.task.lateness": attribute.Float64Value(1.5), "ax.task.occurrence": attribute.BoolValue(false),
	}
	got := attrs(s)
	if len(got) != len(want) {
		t.Errorf("attributes %v, want exactly %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("attribute %s = %v, want %v", k, got[k].Emit(), v.Emit())
		}
	}
	if s.Status.Code != codes.Unset || len(s.Events) != 0 {
		t.Errorf("a succeeded run: status %v, events %v; want unset, none", s.Status, s.Events)
	}
}

// A retry and a schedule's occurrence start a trace of their own, linked to the
// stored span.
func TestStartRetryAndOccurrenceLink(t *testing.T) {
	t.Parallel()
	ctx, stored := remoteContext(t, "")
	text := tracing.New().Inject(ctx)
	for name, info := range map[string]ax.RunInfo{
		"retry":      {Trace: text, TaskID: 1, Name: "a", Attempt: 1},
		"occurrence": {Trace: text, TaskID: 2, Name: "tick", Occurrence: true},
	} {
		s := run(t, info, nil)
		if s.Parent.IsValid() || s.SpanContext.TraceID() == stored.TraceID() {
			t.Errorf("%s: parent %v, trace %v; want a new trace", name, s.Parent, s.SpanContext.TraceID())
		}
		if len(s.Links) != 1 || !s.Links[0].SpanContext.Equal(stored) {
			t.Errorf("%s: links %+v, want one to %v", name, s.Links, stored)
		}
	}
}

// A task stored without a trace context, or with one that does not parse, runs in a
// trace of its own, unlinked.
func TestStartWithoutTrace(t *testing.T) {
	t.Parallel()
	for _, stored := range []string{"", "%zz", "traceparent=not-a-traceparent"} {
		s := run(t, ax.RunInfo{Trace: stored, TaskID: 1, Name: "a"}, nil)
		if s.Parent.IsValid() || len(s.Links) != 0 || !s.SpanContext.IsValid() {
			t.Errorf("stored %q: parent %v, links %v, span %v; want a valid root without links", stored, s.Parent, s.Links, s.SpanContext)
		}
	}
}

// A failed attempt records its error and sets the status to Error, described by the
// error's first line: a panic's stack stays in the recorded exception.
func TestStartFailureSetsErrorStatus(t *testing.T) {
	t.Parallel()
	err := errors.New("panic: boom\ngoroutine 7 [running]:\nmain.handler()")
	s := run(t, ax.RunInfo{TaskID: 1, Name: "a"}, err)
	if s.Status.Code != codes.Error || s.Status.Description != "panic: boom" {
		t.Errorf("status %+v, want Error %q", s.Status, "panic: boom")
	}
	if len(s.Events) != 1 || s.Events[0].Name != "exception" {
		t.Fatalf("events %+v, want one exception", s.Events)
	}
	for _, kv := range s.Events[0].Attributes {
		if kv.Key == "exception.message" && kv.Value.AsString() != err.Error() {
			t.Errorf("exception.message = %q, want the whole error %q", kv.Value.AsString(), err.Error())
		}
	}
}
