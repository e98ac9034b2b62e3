//go:build linux

package clustertest_test

import (
	"testing"
	"time"

	"github.com/axsched/ax/internal/clustertest"
	"github.com/axsched/ax/internal/servicetest"
)

// TestLeaderStoreCut: three replicas, each reaching PostgreSQL through a proxy of its
// own, under a steady stream of delayed tasks; the leader's proxy is cut, while Redis
// still answers it. The leader must step down by itself (its store has not answered
// for StoreTimeout: it resigns) and not campaign again while its store is cut; another
// replica must lead with a higher epoch. The handlers the cut-off leader was running
// self-fence, and their tasks are recovered as orphans and run elsewhere. Then the
// proxy is restored, and the whole history must pass Verify.
func TestLeaderStoreCut(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	cfg := timings()
	cfg.StoreTimeout = 2 * time.Second // how long a leader's store may not answer before it resigns
	c := newCluster(t, cfg)
	proxies := map[*clustertest.Child]*servicetest.Proxy{}
	for range 3 {
		px := servicetest.NewProxy(t, c.postgresHost())
		ch := c.spawnWith(func(cfg *clustertest.ChildConfig) { cfg.PostgresDSN = viaProxy(t, cfg.PostgresDSN, px.Addr()) })
		proxies[ch] = px
	}
	for _, ch := range c.all() {
		c.ready(ch)
	}
	old, oldEpoch := c.waitLeader(20 * time.Second)
	t.Logf("%s leads with epoch %d", old.Node(), oldEpoch)

	l := startLoad(t, c.st, 250, 5, 200*time.Millisecond, time.Second)
	waitUntil(t, 20*time.Second, old.Node()+" runs 15 tasks", func() bool { return len(c.starts(old, time.Time{})) >= 15 })

	cutAt := time.Now()
	proxies[old].Cut()
	fol := waitLinePrinted(t, old, "FOLLOWING ", cutAt, 20*time.Second)
	t.Logf("%s's database cut at %s; it printed %q %v later", old.Node(), cutAt.Format("15:04:05.000"), fol.Text, fol.Stamp().Sub(cutAt).Round(time.Millisecond))
	next, lead := c.waitNewLeader(old, oldEpoch, 20*time.Second)
	t.Logf("%s leads with epoch %d %v after the cut", next.Node(), lead.Epoch(), lead.Stamp().Sub(cutAt).Round(time.Millisecond))
	waitUntil(t, 10*time.Second, next.Node()+" runs tasks", func() bool { return len(c.starts(next, lead.Stamp())) >= 5 })
	// The cut lasts past OrphanAfter from the leader's step-down, so that what it was
	// running is recovered while it is still cut off.
	sleepUntil(fol.Stamp().Add(cfg.OrphanAfter + time.Second))
	restoreAt := time.Now()
	proxies[old].Restore()
	t.Logf("%s's database restored after %v", old.Node(), restoreAt.Sub(cutAt).Round(time.Millisecond))

	c.waitSettled(l, 40*time.Second)
	sum := c.verify(l)
	allSucceeded(t, sum)

	for _, ln := range old.Lines() {
		if ln.Epoch() > 0 && ln.Stamp().After(cutAt) && ln.Stamp().Before(restoreAt) {
			t.Errorf("%s, cut from its database at %s, led again with epoch %d at %s, before the restore", old.Node(),
				cutAt.Format("15:04:05.000"), ln.Epoch(), ln.Stamp().Format("15:04:05.000"))
		}
	}
	h := c.collect(l.dues())
	orphaned, cancelled := 0, 0
	for _, tr := range h.Tasks {
		for _, x := range tr.Executions {
			if x.Node == old.Node() && clustertest.Orphaned(x) {
				orphaned++
			}
		}
	}
	for _, e := range h.Log {
		if e.Event == clustertest.EventEnd && e.Node == old.Node() && e.Result == clustertest.ResultCancelled {
			cancelled++
		}
	}
	t.Logf("%s: %d of its executions recovered as orphans, %d handlers saw their context cancelled (self-fencing)", old.Node(), orphaned, cancelled)
	t.Logf("tasks due during the gap: %s", lateness(sum, l.dues(), cutAt, lead.Stamp()))
}
