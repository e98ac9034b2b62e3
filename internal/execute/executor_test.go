package execute

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/axsched/ax/internal/clock"
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
	ctx := context.Background()
	ins, err := st.Insert(ctx, []store.NewTask{{Name: "job", Key: "k", DueAt: time.Now().Add(time.Hour), MaxRetry: 5}})
	if err != nil {
		t.Fatal(err)
	}
	task := ins[0].Task
	var runs atomic.Int32
	const concurrency = 4
	ex := New(Config{
		Store: st, Clock: clock.New(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Node: "test", Concurrency: concurrency, HeartbeatInterval: time.Second, MaxDispatchRetries: 3,
		Handler: func(name string) *Handler {
			return &Handler{Run: func(context.Context, *store.Task) error { runs.Add(1); return nil }, Timeout: time.Minute}
		},
	})
	ex.Start()
	defer ex.Stop(ctx)
	claimed, err := st.Trigger(ctx, task.ID, "01900000-0000-7000-8000-000000000001")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // the same execution delivered three times, as a retrying sender would
		ex.Dispatch([]store.Task{*claimed}, false)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		got, err := st.Get(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == store.Succeeded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task is %s after 10s, want SUCCEEDED", got.Status)
		}
	}
	// Let the duplicates reach the store: they are answered from the record.
	deadline := time.Now().Add(5 * time.Second)
	for {
		ex.mu.Lock()
		idle := len(ex.pending) == 0 && ex.free == concurrency
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

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
