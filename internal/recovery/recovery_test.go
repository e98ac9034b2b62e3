package recovery

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/axsched/ax/internal/clock"
	"github.com/axsched/ax/internal/execute"
	"github.com/axsched/ax/internal/stats"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// An execution whose heartbeats stopped is a failed attempt, retried after the
// backoff; a claim never started is handed back as a dispatch failure. Both come
// back to the loop (Requeued) and free their task keys (Freed).
func TestOrphansAndStuckClaims(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		ctx := context.Background()
		due := time.Now()
		ins, err := st.Insert(ctx, []store.NewTask{
			{Name: "job", Key: "orphan", DueAt: due, MaxRetry: 3, TaskKey: "k1", Overlap: store.OverlapQueue},
			{Name: "job", Key: "stuck", DueAt: due, MaxRetry: 3},
			{Name: "job", Key: "fine", DueAt: due, MaxRetry: 3},
		})
		if err != nil {
			t.Fatal(err)
		}
		orphan, stuck, fine := ins[0].Task, ins[1].Task, ins[2].Task
		if _, err := st.Claim(ctx, store.Fence{}, []store.Claim{
			{ID: orphan.ID, ExecutionID: "01900000-0000-7000-8000-00000000000a"},
			{ID: stuck.ID, ExecutionID: "01900000-0000-7000-8000-00000000000b"},
			{ID: fine.ID, ExecutionID: "01900000-0000-7000-8000-00000000000c"},
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Start(ctx, store.Fence{}, []store.StartParams{
			{TaskID: orphan.ID, ExecutionID: "01900000-0000-7000-8000-00000000000a", Name: "job", Node: "gone"},
			{TaskID: fine.ID, ExecutionID: "01900000-0000-7000-8000-00000000000c", Name: "job", Node: "alive"},
		}); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var requeued []store.Due
		var freed []string
		cfg := Config{
			Store: st, Clock: clock.New(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			OrphanAfter: time.Minute, DispatchTimeout: 30 * time.Second, MaxDispatchRetries: 5,
			Backoff:  func(t *store.Task, n int) time.Duration { return execute.DefaultBackoff(n) },
			Requeued: func(d ...store.Due) { mu.Lock(); requeued = append(requeued, d...); mu.Unlock() },
			Freed:    func(k, _ []string) { mu.Lock(); freed = append(freed, k...); mu.Unlock() },
		}
		cfg.Stats = stats.New(stats.Config{Store: st, Node: "leader", Log: cfg.Log, Interval: time.Minute, Timeout: time.Second})
		// Before the deadlines nothing is stale.
		time.Sleep(20 * time.Second)
		if err := Once(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		if len(requeued) != 0 {
			t.Fatalf("recovered %v before any deadline", requeued)
		}
		// The fine one keeps heartbeating; the orphan does not.
		time.Sleep(50 * time.Second)
		if _, err := st.Heartbeat(ctx, []store.ExecRef{{TaskID: fine.ID, ExecutionID: "01900000-0000-7000-8000-00000000000c"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		recoveredAt := cfg.Clock.Now()
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); Run(runCtx, cfg) }()
		time.Sleep(time.Second)
		synctest.Wait()
		cancel()
		<-done

		got := map[string]*store.Task{}
		for _, task := range []*store.Task{orphan, stuck, fine} {
			if got[task.Key], err = st.Get(ctx, task.ID); err != nil {
				t.Fatal(err)
			}
		}
		// The orphan retries after the business backoff, the stuck claim after the
		// first dispatch backoff (100ms).
		near := func(got, want time.Time) bool { d := got.Sub(want); return d >= 0 && d < time.Second }
		if o := got["orphan"]; o.Status != store.Scheduled || o.Attempt != 1 || o.DispatchRetries != 0 ||
			!near(o.DueAt, recoveredAt.Add(execute.DefaultBackoff(1))) {
			t.Errorf("orphan: %s attempt %d dispatch retries %d due %v; want SCHEDULED, attempt 1, 0, due %v",
				o.Status, o.Attempt, o.DispatchRetries, o.DueAt, recoveredAt.Add(execute.DefaultBackoff(1)))
		}
		if s := got["stuck"]; s.Status != store.Scheduled || s.Attempt != 0 || s.DispatchRetries != 1 ||
			!near(s.DueAt, recoveredAt.Add(100*time.Millisecond)) {
			t.Errorf("stuck: %s attempt %d dispatch retries %d due %v; want SCHEDULED, attempt 0, 1, due %v",
				s.Status, s.Attempt, s.DispatchRetries, s.DueAt, recoveredAt.Add(100*time.Millisecond))
		}
		if f := got["fine"]; f.Status != store.Running {
			t.Errorf("fine: %s, want RUNNING (it heartbeats)", f.Status)
		}
		mu.Lock()
		defer mu.Unlock()
		back := map[int64]time.Time{}
		for _, d := range requeued {
			back[d.ID] = d.DueAt
		}
		if len(requeued) != 2 || !back[orphan.ID].Equal(got["orphan"].DueAt) || !back[stuck.ID].Equal(got["stuck"].DueAt) ||
			len(freed) != 1 || freed[0] != "k1" {
			t.Errorf("requeued %v, freed %v; want the orphan and the stuck claim at their new due times, and key k1", requeued, freed)
		}
		// The orphan counts in the statistics, as a failure retried; the stuck claim,
		// never started, does not.
		if err := cfg.Stats.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		rows, err := st.Stats(ctx, due.Add(-time.Hour))
		if err != nil || len(rows) != 1 || rows[0].Node != "leader" || rows[0].Orphaned != 1 || rows[0].Retried != 1 ||
			rows[0].Succeeded+rows[0].Failed != 0 || len(rows[0].Failures) != 1 || rows[0].Failures[0] != (store.NameCount{Name: "job", Count: 1}) {
			t.Errorf("statistics = %+v, %v; want one row of the leader: 1 orphaned, retried, job failing once", rows, err)
		}
	})
}
