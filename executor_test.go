package ax

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/sqlite"
)

// A second delivery of the same execution id must not run the handler again.
func TestDuplicateDeliveryRunsOnce(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "ax.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := New(Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	s.HandleFunc("job", func(ctx context.Context, t *Task) error { runs.Add(1); return nil })
	ctx := context.Background()
	task, err := s.Delay(ctx, "job", "k", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	claimed, err := st.Trigger(ctx, task.ID, "01900000-0000-7000-8000-000000000001")
	if err != nil {
		t.Fatal(err)
	}
	ex := s.current().exec
	for range 3 { // the same execution delivered three times, as a retrying sender would
		ex.dispatch([]store.Task{*claimed}, false)
	}
	waitFor(t, st, task.ID, Succeeded, 10*time.Second)
	// Let the duplicates reach the store: they are answered from the record.
	deadline := time.Now().Add(5 * time.Second)
	for {
		ex.mu.Lock()
		idle := len(ex.pending) == 0 && ex.free == s.cfg.Concurrency
		ex.mu.Unlock()
		if idle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the duplicate deliveries were still pending after 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("handler ran %d times for one execution id, want 1", n)
	}
	execs, _ := st.Executions(ctx, task.ID)
	if len(execs) != 1 {
		t.Errorf("%d execution records, want 1", len(execs))
	}
}
