//go:build linux

package clustertest_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store"
)

// TestRedisRestart: three replicas reach Redis through one proxy, under a steady
// stream of delayed tasks. The proxy is cut for three TTLs — the election's Redis is
// gone, as in a restart — and then restored. While it is cut the leader cannot renew:
// it must step down, and no handler may start from a claim made after the cut began
// plus one TTL (the longest the lease it had can have lasted); nobody leads. After the
// restore a leader is elected again with a higher epoch, the tasks due during the cut
// run late, never early, and the whole history passes Verify.
func TestRedisRestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	cfg := timings()
	c := newCluster(t, cfg)
	px := servicetest.NewProxy(t, c.base.RedisAddr)
	c.base.RedisAddr = px.Addr()
	c.start(3)
	leader, epoch := c.waitLeader(20 * time.Second)
	t.Logf("%s leads with epoch %d", leader.Node(), epoch)

	l := startLoad(t, c.st, 200, 5, 200*time.Millisecond, time.Second)
	waitUntil(t, 20*time.Second, leader.Node()+" runs 15 tasks", func() bool { return len(c.starts(leader, time.Time{})) >= 15 })

	cutAt := time.Now()
	px.Cut()
	fol := waitLinePrinted(t, leader, "FOLLOWING ", cutAt, 10*time.Second)
	t.Logf("Redis cut at %s; %s printed %q %v later", cutAt.Format("15:04:05.000"), leader.Node(), fol.Text, fol.Stamp().Sub(cutAt).Round(time.Millisecond))
	sleepUntil(cutAt.Add(3 * cfg.TTL))
	restoreAt := time.Now()
	px.Restore()
	next, lead := c.waitLeadingAbove(epoch, 15*time.Second)
	t.Logf("Redis restored after %v; %s leads with epoch %d %v after the restore, %v after the cut",
		restoreAt.Sub(cutAt).Round(time.Millisecond), next.Node(), lead.Epoch(),
		lead.Stamp().Sub(restoreAt).Round(time.Millisecond), lead.Stamp().Sub(cutAt).Round(time.Millisecond))

	c.waitSettled(l, 40*time.Second)
	sum := c.verify(l)
	allSucceeded(t, sum)

	// Nobody began a term while Redis was cut (a term begun just before the cut
	// would have been won before it: allow the lease's length).
	for _, ll := range c.leadings() {
		if at := ll.line.Stamp(); at.After(cutAt.Add(cfg.TTL)) && at.Before(restoreAt) {
			t.Errorf("%s began a term with epoch %d at %s, %v into the Redis cut", ll.child.Node(), ll.line.Epoch(),
				at.Format("15:04:05.000"), at.Sub(cutAt).Round(time.Millisecond))
		}
	}
	// No handler started during the cut from a claim made later than the cut's start
	// plus one TTL: by then the lease was lost and the leader claimed nothing more.
	// (The claim's stamp is the store's, taken when its transaction runs, a little
	// after the leader checked its lease: claimSlack allows for that.)
	const claimSlack = 250 * time.Millisecond
	h := c.collect(l.dues())
	during, last := 0, time.Duration(0)
	for _, ch := range c.all() {
		for _, e := range c.starts(ch, cutAt) {
			if !e.At.Before(restoreAt) || e.CtxDone {
				continue
			}
			during++
			last = max(last, e.At.Sub(cutAt))
			claimed := e.ClaimedAt.Add(-h.ClockOffset) // to the local clock
			if e.ClaimedAt.IsZero() || claimed.After(cutAt.Add(cfg.TTL+claimSlack)) {
				t.Errorf("%s started task %d (key %q, execution %s) at %s, %v into the Redis cut, from a claim at %s (%v into it)",
					ch.Node(), e.TaskID, e.Key, e.ExecutionID, e.At.Format("15:04:05.000"), e.At.Sub(cutAt).Round(time.Millisecond),
					claimed.Format("15:04:05.000"), claimed.Sub(cutAt).Round(time.Millisecond))
			}
		}
	}
	t.Logf("%d handlers started during the cut, the last %v into it (from claims made before the lease ran out)", during, last.Round(time.Millisecond))
	t.Logf("tasks due during the gap: %s", lateness(sum, l.dues(), cutAt, lead.Stamp()))
}

// TestRedisDataLoss: Redis loses its data twice. First while a leader holds the lease,
// under a steady stream of delayed tasks: every key of the test's prefix is deleted
// (the lease and the epoch counter). The leader's renewal fails and it steps down, and
// a leader is elected again. Then in a cold restart: every replica stops, the keys
// are deleted again, and fresh replicas — whose electors have seen no token — start;
// Redis hands out token 1 again, and the store's fence must be the floor. Every term
// begun during the test has a higher epoch than the one before, and the whole history
// passes Verify.
func TestRedisDataLoss(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	c := newCluster(t, timings())
	cs := c.start(3)
	leader, epoch := c.waitLeader(20 * time.Second)
	t.Logf("%s leads with epoch %d (Redis token %d)", leader.Node(), epoch, c.redisToken())

	l := startLoad(t, c.st, 250, 5, 200*time.Millisecond, time.Second)
	waitUntil(t, 20*time.Second, leader.Node()+" runs 15 tasks", func() bool { return len(c.starts(leader, time.Time{})) >= 15 })

	// Round 1: the data goes while the leader holds the lease.
	lostAt := time.Now()
	keys, err := deletePrefix(context.Background(), c.rc, c.prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("round 1: deleted %v", keys)
	fol := waitLinePrinted(t, leader, "FOLLOWING ", lostAt, 10*time.Second)
	next, lead := c.waitLeadingAbove(epoch, 10*time.Second)
	t.Logf("round 1: Redis lost its keys at %s; %s printed %q %v later; %s leads with epoch %d %v after the loss (Redis token %d)",
		lostAt.Format("15:04:05.000"), leader.Node(), fol.Text, fol.Stamp().Sub(lostAt).Round(time.Millisecond),
		next.Node(), lead.Epoch(), lead.Stamp().Sub(lostAt).Round(time.Millisecond), c.redisToken())
	waitUntil(t, 10*time.Second, next.Node()+" runs tasks", func() bool { return len(c.starts(next, lead.Stamp())) >= 5 })

	// Round 2: a cold restart with an empty Redis. Every replica stops gracefully.
	stopAt := time.Now()
	for _, ch := range cs {
		if err := ch.Term(); err != nil {
			t.Fatal(err)
		}
	}
	for _, ch := range cs {
		if _, err := ch.WaitLine("STOPPED", 20*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := ch.Wait(10 * time.Second); err != nil {
			t.Fatalf("%s after SIGTERM: %v", ch.Node(), err)
		}
	}
	high := int64(0)
	for _, ll := range c.leadings() {
		high = max(high, ll.line.Epoch())
	}
	if keys, err = deletePrefix(context.Background(), c.rc, c.prefix); err != nil {
		t.Fatal(err)
	}
	t.Logf("round 2: deleted %v", keys)
	fresh := c.start(2)
	next2, lead2 := c.waitLeadingAbove(high, 20*time.Second)
	tok := c.redisToken()
	t.Logf("round 2: all stopped at %s, Redis emptied; fresh %s leads with epoch %d %v after the stop, on Redis token %d (the highest epoch before: %d)",
		stopAt.Format("15:04:05.000"), next2.Node(), lead2.Epoch(), lead2.Stamp().Sub(stopAt).Round(time.Millisecond), tok, high)
	if !slices.Contains(fresh, next2) {
		t.Errorf("%s leads, which was stopped", next2.Node())
	}

	c.waitSettled(l, 40*time.Second)
	sum := c.verify(l)
	allSucceeded(t, sum)
	terms := c.checkEpochsIncrease()
	t.Logf("terms in order (node:epoch): %s", strings.Join(terms, " "))
	t.Logf("tasks due during the cold restart: %s", lateness(sum, l.dues(), stopAt, lead2.Stamp()))
}

// redisToken returns the token in the lease's value in Redis ("<token> <id>
// <candidate>"), or 0 when no lease is held.
func (c *cluster) redisToken() int64 {
	c.t.Helper()
	key := c.prefix + "leader:" + store.DefaultNamespace
	v, err := c.rc.Get(context.Background(), key).Result()
	if err != nil {
		return 0
	}
	tok, _ := strconv.ParseInt(strings.SplitN(v, " ", 2)[0], 10, 64)
	return tok
}
