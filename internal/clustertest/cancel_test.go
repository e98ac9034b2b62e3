//go:build linux

package clustertest_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/internal/clustertest"
	"github.com/axsched/ax/store"
)

// TestCancelOnAnotherReplica: a leader without handlers dispatches long tasks to an
// executor-only replica; an operations node (this test process, a scheduler that is
// not started) cancels them while they run. Each handler's context is cancelled at
// the executor's next heartbeat, the tasks end CANCELLED without a retry, each
// execution record says who cancelled it, and the whole history passes Verify.
func TestCancelOnAnotherReplica(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	cfg := remoteTimings(t)
	cfg.HandlerDuration = time.Minute // ended only by the cancel
	c := newCluster(t, cfg)
	executor := c.startExecutor(nil)
	c.ready(executor)
	c.waitNodes(10*time.Second, executor)
	leader, epoch := c.startDispatcher()
	t.Logf("%s leads with epoch %d; executor %s", leader.Node(), epoch, executor.Node())

	const n = 6
	l := startLoad(t, c.st, n, n, 100*time.Millisecond, 200*time.Millisecond)
	waitUntil(t, 20*time.Second, executor.Node()+" runs every task", func() bool { return len(c.inFlight(executor)) == n })

	ops, err := ax.New(ax.Config{Store: c.st, Node: "ops", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	asked := map[int64]time.Time{}
	for _, e := range c.inFlight(executor) {
		asked[e.TaskID] = time.Now()
		if err := ops.Cancel(ctx, e.Name, e.Key, ax.WithActor("operator")); err != nil {
			t.Fatalf("Cancel of running task %d: %v", e.TaskID, err)
		}
	}
	c.waitSettled(l, 30*time.Second)
	c.verify(l)

	// Each run ended cancelled on the executor, within a heartbeat (and the time a
	// busy machine takes to pass it on), and nothing ran again.
	es, err := clustertest.ReadRunLog(executor.Config.RunLog)
	if err != nil {
		t.Fatal(err)
	}
	var stops []time.Duration
	starts := map[int64]int{}
	for _, e := range es {
		switch {
		case e.Event == clustertest.EventStart:
			starts[e.TaskID]++
		case e.Event == clustertest.EventEnd:
			if e.Result != clustertest.ResultCancelled {
				t.Errorf("task %d's run ended %s, want cancelled", e.TaskID, e.Result)
			}
			stops = append(stops, e.At.Sub(asked[e.TaskID]))
		}
	}
	t.Logf("handlers stopped %v after their cancel (heartbeat interval %v)", roundAll(stops), cfg.HeartbeatInterval)
	for _, d := range stops {
		if d > cfg.HeartbeatInterval+time.Second {
			t.Errorf("a handler stopped %v after its cancel, want within the heartbeat interval %v (and 1s of slack)", d, cfg.HeartbeatInterval)
		}
	}
	h := c.collect(l.dues())
	for _, tr := range h.Tasks {
		const want = "cancelled by operator: context canceled"
		switch {
		case tr.Task.Status != store.Cancelled || tr.Task.Attempt != 0 || starts[tr.Task.ID] != 1:
			t.Errorf("task %d = %s attempt %d after %d runs, want CANCELLED after one run, not retried", tr.Task.ID, tr.Task.Status, tr.Task.Attempt, starts[tr.Task.ID])
		case len(tr.Executions) != 1 || tr.Executions[0].Status != store.Cancelled || tr.Executions[0].Error != want:
			t.Errorf("task %d executions = %+v, want one CANCELLED %q", tr.Task.ID, tr.Executions, want)
		case tr.Task.CancelledBy != "operator" || tr.Task.CancelRequestedAt.IsZero():
			t.Errorf("task %d: cancelled by %q at %v, want operator and a time", tr.Task.ID, tr.Task.CancelledBy, tr.Task.CancelRequestedAt)
		}
	}
}
