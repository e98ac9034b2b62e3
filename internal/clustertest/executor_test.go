//go:build linux

package clustertest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/internal/clustertest"
	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store"
)

// remoteTimings are the timings of the tests where the leader dispatches over HTTP:
// those of timings(), a shared secret, and dispatch requests bounded by 1s.
func remoteTimings(t *testing.T) clustertest.ChildConfig {
	cfg := timings()
	cfg.Secret = newSecret(t)
	cfg.RequestTimeout = time.Second
	return cfg
}

// startExecutor starts an executor-only child with the handler, serving its executor
// endpoint on a loopback listener of its own; it advertises the URL advertise returns
// for the listener's address (nil: the listener's own URL).
func (c *cluster) startExecutor(advertise func(addr string) string) *clustertest.Child {
	c.t.Helper()
	ln, url := clustertest.Listen(c.t)
	if advertise != nil {
		url = advertise(ln.Addr().String())
	}
	return c.spawnWith(func(cfg *clustertest.ChildConfig) {
		cfg.ExecutorOnly, cfg.Listener, cfg.Advertise = true, ln, url
	})
}

// startDispatcher starts the only candidate for leadership: it has no handler, so it
// sends every task to an executor, and waits until it leads.
func (c *cluster) startDispatcher() (*clustertest.Child, int64) {
	c.t.Helper()
	leader := c.spawnWith(func(cfg *clustertest.ChildConfig) { cfg.NoHandler = true })
	c.ready(leader)
	return c.waitLeader(20 * time.Second)
}

// TestExecutorCutFromLeader: a leader without handlers dispatches a steady stream of
// delayed tasks over HTTP to two executor-only replicas of four slots each; it reaches
// one of them through a proxy, which that replica advertises. The load (25 tasks/s of
// 200ms) needs more than one executor's capacity (20 tasks/s). The proxy is cut
// mid-load, for three seconds, then restored. The cut executor's share goes to the
// other one, and what that one has no slot for is handed back as a dispatch failure:
// it counts in DispatchRetries, never as a business retry (Attempt), and no task
// fails. The whole history must pass Verify.
func TestExecutorCutFromLeader(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	cfg := remoteTimings(t)
	cfg.Concurrency, cfg.HandlerDuration = 4, 200*time.Millisecond
	c := newCluster(t, cfg)
	direct := c.startExecutor(nil)
	var px *servicetest.Proxy
	proxied := c.startExecutor(func(addr string) string {
		px = servicetest.NewProxy(t, addr)
		return "http://" + px.Addr()
	})
	c.ready(direct)
	c.ready(proxied)
	c.waitNodes(10*time.Second, direct, proxied)
	leader, epoch := c.startDispatcher()
	t.Logf("%s leads with epoch %d; executors %s (direct) and %s (through a proxy)", leader.Node(), epoch, direct.Node(), proxied.Node())

	l := startLoad(t, c.st, 250, 5, 200*time.Millisecond, time.Second)
	waitUntil(t, 20*time.Second, proxied.Node()+" runs 15 tasks", func() bool { return len(c.starts(proxied, time.Time{})) >= 15 })

	cutAt := time.Now()
	px.Cut()
	waitUntil(t, 15*time.Second, direct.Node()+" runs 15 tasks after the cut", func() bool { return len(c.starts(direct, cutAt)) >= 15 })
	sleepUntil(cutAt.Add(3 * time.Second))
	restoreAt := time.Now()
	px.Restore()
	t.Logf("%s's proxy cut at %s for %v", proxied.Node(), cutAt.Format("15:04:05.000"), restoreAt.Sub(cutAt).Round(time.Millisecond))

	c.waitSettled(l, 40*time.Second)
	sum := c.verify(l)
	allSucceeded(t, sum)

	// The share of each executor before, during and after the cut, by handler starts.
	share := func(ch *clustertest.Child) string {
		var before, during, after int
		for _, e := range c.starts(ch, time.Time{}) {
			switch {
			case e.At.Before(cutAt):
				before++
			case e.At.Before(restoreAt):
				during++
			default:
				after++
			}
		}
		return fmt.Sprintf("%s ran %d before the cut, %d during it, %d after it", ch.Node(), before, during, after)
	}
	t.Logf("%s; %s", share(direct), share(proxied))
	var lateStarts []string
	for _, e := range c.starts(proxied, cutAt.Add(time.Second)) {
		if e.At.Before(restoreAt) {
			lateStarts = append(lateStarts, fmt.Sprintf("task %d at %s", e.TaskID, e.At.Format("15:04:05.000")))
		}
	}
	if len(lateStarts) > 0 { // only dispatches accepted before the cut may start during it
		t.Logf("%s started, more than a second into the cut: %s", proxied.Node(), strings.Join(lateStarts, ", "))
	}

	// The leader's view: the failed requests and the hand-backs.
	requests := map[string]int{}
	var slowest time.Duration
	for _, ln := range linesOf(leader, "REQUEST ") {
		requests[ln.Fields[1]]++
		var d time.Duration
		fmt.Sscan(ln.Fields[3], &d)
		slowest = max(slowest, d)
	}
	handedBack := map[string]int{}
	var backBefore, backDuring, backAfter int
	for _, ln := range linesOf(leader, "DISPATCH_FAILED ") {
		handedBack[ln.Fields[1]]++
		switch at := ln.Stamp(); {
		case at.Before(cutAt):
			backBefore++
		case at.Before(restoreAt):
			backDuring++
		default:
			backAfter++
		}
	}
	t.Logf("%s: dispatch requests not ok: %v (the slowest took %v); tasks handed back, by reason: %v (%d before the cut, %d during it, %d after it)",
		leader.Node(), requests, slowest.Round(time.Millisecond), handedBack, backBefore, backDuring, backAfter)
	if len(requests) == 0 {
		t.Errorf("%s reported no failed dispatch request to %s during its cut", leader.Node(), proxied.Node())
	}

	// In the store: dispatch failures count against DispatchRetries, never Attempt.
	h := c.collect(l.dues())
	retried, failed, most := 0, 0, 0
	lastErrors := map[string]int{} // of the tasks with dispatch retries: the last one's reason
	for _, tr := range h.Tasks {
		if tr.Task.DispatchRetries > 0 && tr.Task.Attempt == 0 {
			retried++
			most = max(most, tr.Task.DispatchRetries)
			reason := strings.ReplaceAll(tr.Task.LastError, proxied.Node(), "<cut executor>")
			lastErrors[reason]++
		}
		if tr.Task.Status == store.Failed {
			failed++
		}
		if tr.Task.Attempt > 0 { // not from the cut: a handler self-fenced on a starved machine
			t.Logf("task %d (key %q) used a business retry (attempt %d): %s", tr.Task.ID, tr.Task.Key, tr.Task.Attempt, tr.Task.LastError)
		}
	}
	t.Logf("%d tasks show dispatch retries with attempt 0 (at most %d each), %d FAILED; their last errors: %v", retried, most, failed, lastErrors)
	if retried == 0 {
		t.Errorf("no task shows DispatchRetries > 0 with Attempt 0: the cut executor's tasks were not counted as dispatch failures")
	}
	if failed > 0 {
		t.Errorf("%d tasks FAILED", failed)
	}
}

// TestExecutorKilledMidTask: a leader without handlers dispatches tasks whose handlers
// take two seconds to two executor-only replicas; one is killed (SIGKILL) while it
// runs several. Its executions are recovered as orphans after OrphanAfter and their
// tasks run again on the other replica (the one overlap Verify allows: after an
// orphaned predecessor). The whole history must pass Verify.
func TestExecutorKilledMidTask(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	cfg := remoteTimings(t)
	cfg.HandlerDuration = 2 * time.Second
	c := newCluster(t, cfg)
	victim, other := c.startExecutor(nil), c.startExecutor(nil)
	c.ready(victim)
	c.ready(other)
	c.waitNodes(10*time.Second, victim, other)
	leader, epoch := c.startDispatcher()
	t.Logf("%s leads with epoch %d; executors %s and %s", leader.Node(), epoch, victim.Node(), other.Node())

	l := startLoad(t, c.st, 60, 4, 250*time.Millisecond, 500*time.Millisecond)
	waitUntil(t, 20*time.Second, victim.Node()+" runs 4 tasks at once", func() bool { return len(c.inFlight(victim)) >= 4 })
	running := c.inFlight(victim)
	killedAt := victim.Kill()
	t.Logf("%s killed at %s while running %d tasks", victim.Node(), killedAt.Format("15:04:05.000"), len(running))

	c.waitSettled(l, 40*time.Second)
	sum := c.verify(l)
	allSucceeded(t, sum)

	// Each run cut short by the kill: orphaned, then run again to success elsewhere.
	h := c.collect(l.dues())
	byID := map[int64]clustertest.TaskRecord{}
	for _, tr := range h.Tasks {
		byID[tr.Task.ID] = tr
	}
	var recovered, rerun []time.Duration
	for _, e := range c.inFlight(victim) {
		tr := byID[e.TaskID]
		var orphan *store.Execution
		var next *store.Execution
		for i := range tr.Executions {
			x := &tr.Executions[i]
			switch {
			case x.ID == e.ExecutionID:
				orphan = x
			case orphan != nil && next == nil:
				next = x
			}
		}
		switch {
		case orphan == nil:
			t.Errorf("task %d: the store has no record of execution %s, which ran on %s", e.TaskID, e.ExecutionID, victim.Node())
		case !clustertest.Orphaned(*orphan):
			t.Errorf("task %d: execution %s on %s, cut short by the kill, is %s %q, not orphaned", e.TaskID, e.ExecutionID, victim.Node(), orphan.Status, orphan.Error)
		case next == nil || next.Status != store.Succeeded || next.Node == victim.Node():
			t.Errorf("task %d: after execution %s on %s was orphaned, no execution on another replica succeeded: %+v", e.TaskID, e.ExecutionID, victim.Node(), tr.Executions)
		default:
			recovered = append(recovered, orphan.FinishedAt.Add(-h.ClockOffset).Sub(killedAt))
			rerun = append(rerun, next.StartedAt.Add(-h.ClockOffset).Sub(killedAt))
		}
	}
	if len(recovered) == 0 {
		t.Errorf("no run of %s was cut short by its kill", victim.Node())
	}
	t.Logf("%d runs cut short by the kill; after it, recovered as orphans at %v, run again at %v", len(recovered), roundAll(recovered), roundAll(rerun))
	if sum.Orphaned != len(recovered) {
		t.Logf("%d executions orphaned in all", sum.Orphaned)
	}
	requests := map[string]int{}
	for _, ln := range linesOf(leader, "REQUEST ") {
		requests[ln.Fields[1]]++
	}
	t.Logf("%s: dispatch requests not ok: %v; orphans recovered: %d", leader.Node(), requests, len(linesOf(leader, "ORPHAN ")))
}

// roundAll rounds each duration to the millisecond, for a log line.
func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}
