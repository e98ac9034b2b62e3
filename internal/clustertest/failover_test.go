//go:build linux

package clustertest_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/internal/clustertest"
	"github.com/axsched/ax/store"
)

// timings are the replicas' settings in these tests: a 1s lease, heartbeats every
// 250ms and orphans after 3s (so a handler self-fences after 2.5s without a stamp),
// claims handed back after 3s, 50ms handlers.
func timings() clustertest.ChildConfig {
	return clustertest.ChildConfig{
		TTL: time.Second, HeartbeatInterval: 250 * time.Millisecond, OrphanAfter: 3 * time.Second,
		DispatchTimeout: 3 * time.Second, HandlerDuration: 50 * time.Millisecond,
	}
}

// TestPausedLeaderIsFenced: three replicas under a steady stream of delayed tasks; the
// leader is frozen (SIGSTOP) for 3s, past its lease, while a standby takes over; then
// thawed (SIGCONT). The frozen leader must start nothing from the moment it was
// stopped until it might lead again, must step down by itself once thawed, and the
// whole history must pass Verify.
func TestPausedLeaderIsFenced(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	c := newCluster(t, timings())
	c.start(3)
	old, oldEpoch := c.waitLeader(20 * time.Second)
	t.Logf("%s leads with epoch %d", old.Node(), oldEpoch)

	l := startLoad(t, c.st, 300, 5, 200*time.Millisecond, time.Second)
	waitUntil(t, 20*time.Second, old.Node()+" runs 20 tasks", func() bool { return len(c.starts(old, time.Time{})) >= 20 })

	stoppedAt, err := old.Stop()
	if err != nil {
		t.Fatal(err)
	}
	next, lead := c.waitNewLeader(old, oldEpoch, 10*time.Second)
	t.Logf("%s stopped at %s; %s leads with epoch %d %v later", old.Node(), stoppedAt.Format("15:04:05.000"),
		next.Node(), lead.Epoch(), lead.Stamp().Sub(stoppedAt).Round(time.Millisecond))
	waitUntil(t, 10*time.Second, next.Node()+" runs tasks", func() bool { return len(c.starts(next, lead.Stamp())) >= 5 })
	// The pause itself: past the lease (1s) and the self-fencing bound (2.5s).
	if d := time.Until(stoppedAt.Add(3 * time.Second)); d > 0 {
		time.Sleep(d)
	}
	contAt, err := old.Cont()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s continued after a pause of %v", old.Node(), contAt.Sub(stoppedAt).Round(time.Millisecond))
	fol, err := old.WaitFor(10*time.Second, "FOLLOWING after SIGCONT", func(l clustertest.Line) bool {
		return strings.HasPrefix(l.Text, "FOLLOWING ") && l.Received.After(contAt)
	})
	if err != nil {
		t.Errorf("the thawed leader did not step down by itself: %v; it printed %s", err, printed(old))
	} else {
		t.Logf("%s printed %q %v after SIGCONT", old.Node(), fol.Text, fol.Received.Sub(contAt).Round(time.Millisecond))
	}

	c.waitSettled(l, 40*time.Second)
	sum := c.verify(l)

	// When the old leader might lead again: its first term after the thaw, if any.
	relead := time.Time{}
	for _, ln := range old.Lines() {
		if ln.Epoch() > 0 && ln.Received.After(contAt) {
			relead = ln.Stamp()
			t.Logf("%s leads again with epoch %d at %s", old.Node(), ln.Epoch(), relead.Format("15:04:05.000"))
			break
		}
	}
	fenced := func(at time.Time) bool { return at.After(stoppedAt) && (relead.IsZero() || at.Before(relead)) }
	// By the run log: no handler called on the old leader while it was fenced (one
	// whose context had already ended, returning at once, did nothing).
	for _, e := range c.starts(old, stoppedAt) {
		switch {
		case !fenced(e.At):
		case e.CtxDone:
			t.Logf("%s called the handler of task %d (execution %s) at %s with its context already ended", old.Node(), e.TaskID, e.ExecutionID, e.At.Format("15:04:05.000000"))
		default:
			t.Errorf("%s, stopped at %s, started task %d (key %q, execution %s, attempt %d) at %s, %v after SIGCONT",
				old.Node(), stoppedAt.Format("15:04:05.000000"), e.TaskID, e.Key, e.ExecutionID, e.Attempt, e.At.Format("15:04:05.000000"), e.At.Sub(contAt))
		}
	}
	// By the store's stamps: no execution recorded for the old leader's node after it
	// was stopped (beyond a Start request already on its way then).
	h, err := clustertest.Collect(t.Context(), c.st, l.dues())
	if err != nil {
		t.Fatal(err)
	}
	const inFlight = 250 * time.Millisecond
	for _, tr := range h.Tasks {
		for _, x := range tr.Executions {
			local := x.StartedAt.Add(-h.ClockOffset)
			if x.Node == old.Node() && local.After(stoppedAt.Add(inFlight)) && fenced(local) {
				t.Errorf("%s, stopped at %s, recorded execution %s of task %d (key %q) started at %s (store time)",
					old.Node(), stoppedAt.Format("15:04:05.000000"), x.ID, tr.Task.ID, tr.Task.Key, x.StartedAt.Format("15:04:05.000000"))
			}
		}
	}
	if n := sum.ByStatus[store.Succeeded]; n != sum.Tasks {
		t.Errorf("%d of %d tasks SUCCEEDED, want all", n, sum.Tasks)
	}
	for _, ln := range old.Lines() {
		if strings.HasPrefix(ln.Text, "FENCED ") {
			t.Logf("%s: %s", old.Node(), ln.Text)
		}
	}
}

// TestLeaderKilledFailover: three replicas under a steady stream of delayed tasks; the
// leader is killed (SIGKILL) three times, a replacement started each time. A new
// leader must appear within 10s of each kill (liveness), every task must succeed once
// and never start early (Verify); a task may run again only after its execution was
// orphaned by the kill of its node. At the end the leader is stopped gracefully
// (SIGTERM): it must exit cleanly and hand over. The store's leadership history must
// tell the kills (no end recorded) from the stop (its end recorded). The failover times and the lateness
// of the tasks due during the gaps are logged, not asserted: benchmarks measure
// performance.
func TestLeaderKilledFailover(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	c := newCluster(t, timings())
	c.start(3)
	leader, epoch := c.waitLeader(20 * time.Second)
	leadAt, epoch0 := time.Now(), epoch
	t.Logf("%s leads with epoch %d", leader.Node(), epoch)

	l := startLoad(t, c.st, 400, 5, 200*time.Millisecond, time.Second)
	type gap struct {
		victim     string
		killed     time.Time
		next       string
		lead       time.Time // the new term's start, as the new leader stamped it
		leadEpoch  int64
		replaced   string
		readyAfter time.Duration
	}
	var gaps []gap
	for i := range 3 {
		// The second kill comes as soon as the new leader has started 15 tasks: in
		// the middle of the backlog it claims at once, many handlers running. The
		// others come after 2s of steady leadership.
		steady := i != 1
		waitUntil(t, 20*time.Second, fmt.Sprintf("%s runs 15 tasks", leader.Node()), func() bool {
			return len(c.starts(leader, leadAt)) >= 15 && (!steady || time.Since(leadAt) >= 2*time.Second)
		})
		killed := leader.Kill()
		repl := c.spawn()
		next, lead := c.waitNewLeader(leader, epoch, 10*time.Second)
		g := gap{victim: leader.Node(), killed: killed, next: next.Node(), lead: lead.Stamp(), leadEpoch: lead.Epoch(), replaced: repl.Node()}
		c.ready(repl)
		g.readyAfter = time.Since(killed)
		gaps = append(gaps, g)
		t.Logf("failover %d: %s killed at %s; %s leads with epoch %d %v later (its line read %v later); replacement %s ready %v after the kill",
			i+1, g.victim, killed.Format("15:04:05.000"), g.next, g.leadEpoch, g.lead.Sub(killed).Round(time.Millisecond),
			lead.Received.Sub(killed).Round(time.Millisecond), g.replaced, g.readyAfter.Round(time.Millisecond))
		leader, epoch, leadAt = next, lead.Epoch(), lead.Stamp()
	}

	c.waitSettled(l, 40*time.Second)

	// Last, the leader stops gracefully (SIGTERM): it hands over, and exits cleanly.
	termAt := time.Now()
	if err := leader.Term(); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.WaitLine("STOPPED", 20*time.Second); err != nil {
		t.Error(err)
	} else if err := leader.Wait(10 * time.Second); err != nil {
		t.Errorf("%s after SIGTERM: %v", leader.Node(), err)
	}
	next, lead := c.waitNewLeader(leader, epoch, 10*time.Second)
	t.Logf("%s stopped gracefully; %s leads with epoch %d %v after SIGTERM", leader.Node(), next.Node(), lead.Epoch(), lead.Stamp().Sub(termAt).Round(time.Millisecond))

	// The leadership history, kept in the store whichever the elector (Redis here): a
	// killed leader's term has no end, and the next term says so; the leader stopped
	// by SIGTERM recorded its end, and the next term names it.
	changes, err := c.st.LeadershipHistory(t.Context(), store.DefaultNamespace, store.MaxLeadershipHistory)
	if err != nil {
		t.Fatal(err)
	}
	byTerm := map[string]store.LeadershipChange{} // "<epoch> <kind>"
	for _, ch := range changes {
		byTerm[fmt.Sprint(ch.Epoch, " ", ch.Kind)] = ch
		t.Logf("leadership history: epoch %d %s by %q at %s: %s", ch.Epoch, ch.Kind, ch.Holder, ch.At.Format("15:04:05.000"), ch.Reason)
	}
	term := func(epoch int64, kind, node string, reason ...string) {
		t.Helper()
		ch, ok := byTerm[fmt.Sprint(epoch, " ", kind)]
		switch {
		case !ok:
			t.Errorf("leadership history: no %s change of epoch %d (%s)", kind, epoch, node)
		case !strings.HasSuffix(ch.Holder, " "+node):
			t.Errorf("leadership history: epoch %d %s by %q, want %s", epoch, kind, ch.Holder, node)
		default:
			for _, r := range reason {
				if !strings.Contains(ch.Reason, r) {
					t.Errorf("leadership history: epoch %d %s: reason %q does not mention %q", epoch, kind, ch.Reason, r)
				}
			}
		}
	}
	prev := epoch0
	for _, g := range gaps {
		if _, ok := byTerm[fmt.Sprint(prev, " ", store.LeadershipEnded)]; ok {
			t.Errorf("leadership history: the term of epoch %d, whose leader %s was killed, has an end", prev, g.victim)
		}
		term(g.leadEpoch, store.LeadershipAcquired, g.next, g.victim, "no end")
		prev = g.leadEpoch
	}
	term(epoch, store.LeadershipEnded, leader.Node(), "stopping")
	term(lead.Epoch(), store.LeadershipAcquired, next.Node(), leader.Node(), "stopping")

	sum := c.verify(l)
	if n := sum.ByStatus[store.Succeeded]; n != sum.Tasks {
		t.Errorf("%d of %d tasks SUCCEEDED, want all", n, sum.Tasks)
	}

	// The lateness of the tasks due during each gap (kill → the next term's start), by
	// their first execution's start.
	dues := l.dues()
	for i, g := range gaps {
		var lates []time.Duration
		for id, due := range dues {
			if !due.Before(g.killed) && due.Before(g.lead) {
				if late, ok := sum.Lateness[id]; ok {
					lates = append(lates, late)
				}
			}
		}
		slices.Sort(lates)
		if len(lates) == 0 {
			t.Logf("failover %d: no task due during the gap of %v", i+1, g.lead.Sub(g.killed).Round(time.Millisecond))
			continue
		}
		t.Logf("failover %d: %d tasks due during the gap of %v: lateness min %v, median %v, max %v", i+1, len(lates),
			g.lead.Sub(g.killed).Round(time.Millisecond), lates[0].Round(time.Millisecond), lates[len(lates)/2].Round(time.Millisecond), lates[len(lates)-1].Round(time.Millisecond))
	}
	// Tasks run more than once: after a crash of their executor (an orphan, or a claim
	// handed back before it started, which leaves no execution record) — or for another
	// reason, listed.
	h, err := clustertest.Collect(t.Context(), c.st, dues)
	if err != nil {
		t.Fatal(err)
	}
	killed := map[string]bool{}
	for _, g := range gaps {
		killed[g.victim] = true
	}
	crashed := 0
	for _, tr := range h.Tasks {
		var other []string
		for _, x := range tr.Executions[:max(len(tr.Executions)-1, 0)] {
			if !clustertest.Orphaned(x) || !killed[x.Node] {
				other = append(other, fmt.Sprintf("%s on %s: %s %q", x.ID, x.Node, x.Status, x.Error))
			}
		}
		switch {
		case len(other) > 0:
			t.Logf("task %d (key %q) ran %d times, not only because a node was killed: %s", tr.Task.ID, tr.Task.Key, len(tr.Executions), strings.Join(other, "; "))
		case len(tr.Executions) > 1:
			crashed++
		}
	}
	t.Logf("%d tasks ran again after their execution was orphaned on a killed node", crashed)
}
