package ax

import (
	"context"
	"testing"

	"github.com/axsched/ax/store/memory"
)

// Without a Tracer, tracing costs the submit path no allocation and the executor
// nothing at all: it is given no hook to call.
func TestNoTracerCostsNothing(t *testing.T) {
	st := memory.New()
	defer st.Close()
	s, err := New(Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.WithValue(context.Background(), struct{}{}, "a request")
	if n := testing.AllocsPerRun(100, func() { _ = s.traceOf(ctx) }); n != 0 {
		t.Errorf("traceOf without a Tracer: %v allocations, want 0", n)
	}
	if s.spanStarter() != nil {
		t.Error("spanStarter without a Tracer is not nil: the executor would call it for every execution")
	}
}
