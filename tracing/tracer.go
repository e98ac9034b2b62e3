package tracing

import (
	"context"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/axsched/ax"
)

// ScopeName is the instrumentation scope of the spans: the name of the
// OpenTelemetry tracer they come from.
const ScopeName = "github.com/axsched/ax/tracing"

// The attributes of an execution's span (see the package documentation).
const (
	AttrTaskName   = "ax.task.name"
	AttrTaskID     = "ax.task.id"
	AttrAttempt    = "ax.task.attempt"
	AttrExecution  = "ax.execution.id"
	AttrLateness   = "ax.task.lateness"
	AttrOccurrence = "ax.task.occurrence"
)

// SpanPrefix starts the name of an execution's span; the task's name follows.
const SpanPrefix = "ax.run "

// Tracer is ax.Tracer on OpenTelemetry: give it to ax.Config.Tracer. Create one with
// New; it is safe for concurrent use.
type Tracer struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

var _ ax.Tracer = (*Tracer)(nil)

// Option configures New.
type Option func(*Tracer)

// WithTracerProvider makes the spans with tp. Defaults to otel.GetTracerProvider() as
// New is called (the global provider, which delegates to the one otel.SetTracerProvider
// sets, even later).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(t *Tracer) { t.tracer = tp.Tracer(ScopeName) }
}

// WithPropagator writes and reads the stored trace context with p. Defaults to W3C
// TraceContext (propagation.TraceContext), not the global propagator, which is a no-op
// until otel.SetTextMapPropagator sets one.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(t *Tracer) { t.prop = p }
}

// New returns a Tracer configured by opts.
func New(opts ...Option) *Tracer {
	t := &Tracer{prop: propagation.TraceContext{}}
	for _, o := range opts {
		o(t)
	}
	if t.tracer == nil {
		t.tracer = otel.GetTracerProvider().Tracer(ScopeName)
	}
	return t
}

// traceparent is the field of the W3C trace context kept when the whole text would
// be over ax.MaxTraceLen.
const traceparent = "traceparent"

// Inject returns ctx's trace context as the propagator writes it, as a URL query: ""
// when ctx carries no valid span context. A text over ax.MaxTraceLen keeps only its
// traceparent, or is "" when it has none.
func (t *Tracer) Inject(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := carrier{}
	t.prop.Inject(ctx, c)
	if s := url.Values(c).Encode(); len(s) <= ax.MaxTraceLen {
		return s
	}
	if tp, ok := c[traceparent]; ok {
		if s := (url.Values{traceparent: tp}).Encode(); len(s) <= ax.MaxTraceLen {
			return s
		}
	}
	return ""
}

// Start starts the span of the execution run describes, in ctx (see the package
// documentation): a child of the stored span on a first run, else a new trace linked
// to it. The function it returns ends the span with the attempt's error.
func (t *Tracer) Start(ctx context.Context, run ax.RunInfo) (context.Context, func(err error)) {
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String(AttrTaskName, run.Name),
			attribute.Int64(AttrTaskID, run.TaskID),
			attribute.Int(AttrAttempt, run.Attempt),
			attribute.String(AttrExecution, run.ExecutionID),
			attribute.Float64(AttrLateness, run.Lateness.Seconds()),
			attribute.Bool(AttrOccurrence, run.Occurrence),
		),
	}
	if run.Trace != "" {
		if v, err := url.ParseQuery(run.Trace); err == nil {
			ctx = t.prop.Extract(ctx, carrier(v))
		}
	}
	if sc := trace.SpanContextFromContext(ctx); !sc.IsValid() || !run.FirstRun() {
		// The handler's context carries no span of its own: a valid one is the stored
		// one, linked to rather than followed.
		opts = append(opts, trace.WithNewRoot())
		if sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
	}
	ctx, span := t.tracer.Start(ctx, SpanPrefix+run.Name, opts...)
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			msg, _, _ := strings.Cut(err.Error(), "\n") // a panic's stack stays in the exception
			span.SetStatus(codes.Error, msg)
		}
		span.End()
	}
}

// carrier is a propagation.TextMapCarrier over the stored URL query.
type carrier url.Values

// Get returns the first value of key.
func (c carrier) Get(key string) string { return url.Values(c).Get(key) }

// Set sets key to value.
func (c carrier) Set(key, value string) { url.Values(c).Set(key, value) }

// Keys returns the keys present.
func (c carrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
