package tracing_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store/memory"
	"github.com/axsched/ax/tracing"
)

// A request submits a task; the task's run is a span of the request's trace, and the
// handler's own spans are children of the run's.
func Example() {
	exporter := tracetest.NewInMemoryExporter() // in production, an OTLP exporter
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	defer tp.Shutdown(context.Background())

	st := memory.New()
	defer st.Close()
	s, err := ax.New(ax.Config{
		Store:  st,
		Tracer: tracing.New(tracing.WithTracerProvider(tp)),
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	s.HandleFunc("order.close.timeout", func(ctx context.Context, t *ax.Task) error {
		_, span := tp.Tracer("shop").Start(ctx, "close order") // ctx carries the run's span
		defer span.End()
		return nil
	})
	if err := s.Start(context.Background()); err != nil {
		panic(err)
	}
	defer s.Stop(context.Background())

	ctx, request := tp.Tracer("shop").Start(context.Background(), "POST /orders")
	if _, err := s.Delay(ctx, "order.close.timeout", "order-42", 0); err != nil {
		panic(err)
	}
	request.End()

	// The run's span is exported when the attempt ends.
	for deadline := time.Now().Add(10 * time.Second); len(exporter.GetSpans()) < 3 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	spans := exporter.GetSpans()
	names := map[trace.SpanID]string{}
	for _, sp := range spans {
		names[sp.SpanContext.SpanID()] = sp.Name
	}
	var lines []string
	for _, sp := range spans {
		parent := "a root"
		if p, ok := names[sp.Parent.SpanID()]; ok {
			parent = "a child of " + p
		}
		lines = append(lines, sp.Name+": "+parent)
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// POST /orders: a root
	// ax.run order.close.timeout: a child of POST /orders
	// close order: a child of ax.run order.close.timeout
}
