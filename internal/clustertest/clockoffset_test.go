//go:build linux

package clustertest_test

import (
	"testing"
	"time"

	"github.com/axsched/ax/internal/clustertest"
)

// TestClockOffsetAcrossProcesses: three processes on PostgreSQL, elected by Redis; the
// only candidate, whose host clock is 30s ahead and which has no handler, dispatches a
// steady stream of delayed tasks over signed HTTP to two executor-only replicas, one
// on time and one 30s behind — 60s apart from the leader, twice the signing window.
// (The clocks are skewed in the processes' schedulers, internal/clock.WithSkew: a
// process cannot set its host's clock without privileges, so code reading the host's
// clock directly would go unnoticed; ax reads wall time through its clock for due
// times and signatures.) Without the correction the leader claims 30s early and its
// requests to the executor behind are 60s stale: the test fails. Each replica measures its
// offset to the database's clock and corrects it, so due decisions agree and so do the
// timestamps it signs and verifies requests by: every task runs once, on an executor,
// none before its due time by the database's clock (Verify), and none is handed back
// (a request refused as stale would be, as a dispatch failure), with both executors
// taking their share.
func TestClockOffsetAcrossProcesses(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	cfg := remoteTimings(t)
	cfg.Concurrency = 4
	c := newCluster(t, cfg)
	executor := func(skew time.Duration) *clustertest.Child {
		ln, url := clustertest.Listen(t)
		return c.spawnWith(func(cfg *clustertest.ChildConfig) {
			cfg.ExecutorOnly, cfg.Listener, cfg.Advertise, cfg.ClockSkew = true, ln, url, skew
		})
	}
	onTime, behind := executor(0), executor(-30*time.Second)
	c.ready(onTime)
	c.ready(behind)
	c.waitNodes(10*time.Second, onTime, behind)
	leader := c.spawnWith(func(cfg *clustertest.ChildConfig) { cfg.NoHandler, cfg.ClockSkew = true, 30*time.Second })
	c.ready(leader)
	if got, epoch := c.waitLeader(20 * time.Second); got != leader {
		t.Fatalf("%s leads (epoch %d), want %s", got.Node(), epoch, leader.Node())
	}

	l := startLoad(t, c.st, 150, 5, 200*time.Millisecond, time.Second)
	c.waitSettled(l, 40*time.Second)
	sum := c.verify(l)
	allSucceeded(t, sum)
	h := c.collect(l.dues())
	for _, tr := range h.Tasks {
		if tr.Task.DispatchRetries != 0 {
			t.Errorf("task %d was handed back %d times (last error %q): a dispatch was refused", tr.Task.ID, tr.Task.DispatchRetries, tr.Task.LastError)
		}
	}
	for _, ch := range []*clustertest.Child{onTime, behind} {
		n := len(c.starts(ch, time.Time{}))
		t.Logf("%s (clock %v) ran %d tasks", ch.Node(), ch.Config.ClockSkew, n)
		if n == 0 {
			t.Errorf("%s (clock %v) ran no task: the leader's requests did not get through", ch.Node(), ch.Config.ClockSkew)
		}
	}
	if n := len(c.starts(leader, time.Time{})); n != 0 {
		t.Errorf("the leader, without a handler, ran %d tasks", n)
	}
}
