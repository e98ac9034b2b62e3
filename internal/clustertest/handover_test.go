//go:build linux

package clustertest_test

import (
	"slices"
	"testing"
	"time"

	"github.com/axsched/ax/internal/clustertest"
)

// TestGracefulStopHandsOver: three replicas elected by a SQL lease on PostgreSQL, each
// serving its executor endpoint, under a steady stream of delayed tasks. The leader is
// stopped gracefully (SIGTERM) three times, a replacement started each time. The
// lease's TTL is 30s and its fallback poll a minute: a standby told nothing tries
// again only when the lease it last saw would expire, 20–30s after it looked. The
// leader's release notice makes one campaign at once, so each handover must take less
// than 5s (its figure is logged). The whole history must pass Verify, every task
// SUCCEEDED.
func TestGracefulStopHandsOver(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	cfg := remoteTimings(t)
	cfg.SQLLease, cfg.TTL, cfg.LeasePoll = true, 30*time.Second, time.Minute
	c := newCluster(t, cfg)
	serve := func(cfg *clustertest.ChildConfig) {
		ln, url := clustertest.Listen(t)
		cfg.Listener, cfg.Advertise = ln, url
	}
	var first []*clustertest.Child
	for range 3 {
		first = append(first, c.spawnWith(serve))
	}
	for _, ch := range first {
		c.ready(ch)
	}
	c.waitNodes(10*time.Second, first...)
	leader, epoch := c.waitLeader(20 * time.Second)
	t.Logf("%s leads with epoch %d", leader.Node(), epoch)

	l := startLoad(t, c.st, 300, 5, 200*time.Millisecond, time.Second)
	var handovers []time.Duration
	for i := range 3 {
		waitUntil(t, 20*time.Second, leader.Node()+" runs 10 tasks", func() bool {
			return len(c.starts(leader, time.Time{})) >= 10
		})
		termAt := time.Now()
		if err := leader.Term(); err != nil {
			t.Fatal(err)
		}
		next, lead := c.waitNewLeader(leader, epoch, 20*time.Second)
		took := lead.Stamp().Sub(termAt)
		handovers = append(handovers, took)
		t.Logf("handover %d: %s stopped; %s leads with epoch %d %v after SIGTERM", i+1, leader.Node(), next.Node(), lead.Epoch(), took.Round(time.Millisecond))
		if took > 5*time.Second {
			t.Errorf("handover %d took %v: the standby was not told of the release (it would have tried at the lease's expiry)", i+1, took)
		}
		if _, err := leader.WaitLine("STOPPED", 20*time.Second); err != nil {
			t.Error(err)
		} else if err := leader.Wait(10 * time.Second); err != nil {
			t.Errorf("%s after SIGTERM: %v", leader.Node(), err)
		}
		repl := c.spawnWith(serve)
		c.ready(repl)
		leader, epoch = next, lead.Epoch()
	}
	slices.Sort(handovers)
	t.Logf("graceful handovers: min %v, median %v, max %v", handovers[0].Round(time.Millisecond),
		handovers[len(handovers)/2].Round(time.Millisecond), handovers[len(handovers)-1].Round(time.Millisecond))

	c.waitSettled(l, 60*time.Second)
	allSucceeded(t, c.verify(l))
}
