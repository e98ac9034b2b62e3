package ax_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store/memory"
)

// The facade's own cost of SubmitMany, without a database: 1,000 tasks a call on the
// memory store. (Before TaskSpec, the type was ax.Spec.)
func BenchmarkSubmitManyMemory(b *testing.B) {
	st := memory.New()
	defer st.Close()
	s, _ := ax.New(ax.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx := context.Background()
	due := time.Now().Add(time.Hour)
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		specs := make([]ax.TaskSpec, 1000)
		for j := range specs {
			specs[j] = ax.TaskSpec{Name: "bench.noop", Key: fmt.Sprint(n), DueAt: due}
			n++
		}
		if _, err := s.SubmitMany(ctx, specs); err != nil {
			b.Fatal(err)
		}
	}
}
