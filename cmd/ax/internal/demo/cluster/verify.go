package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/cmd/ax/internal/demo"
)

// verify reads the run back from the shared file — the scheduler's tasks, the
// orders, and every execution the replicas recorded — fills sum and returns the
// checks that failed. The error is for a run that could not be read.
func (c *cluster) verify(ctx context.Context, sum *Summary) ([]string, error) {
	c.fillPartial(sum)
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	runs, err := c.biz.runs(ctx)
	if err != nil {
		return nil, fmt.Errorf("demo: verify: %w", err)
	}
	orders, err := c.biz.orders(ctx)
	if err != nil {
		return nil, fmt.Errorf("demo: verify: %w", err)
	}
	sum.RunsByNode = map[string]int{}
	byKey := map[string][]bizRun{} // name + "/" + key
	for _, r := range runs {
		sum.RunsByNode[r.Node]++
		byKey[r.Name+"/"+r.Key] = append(byKey[r.Name+"/"+r.Key], r)
		if r.Late < 0 {
			sum.Early++
			bad("%s %s started %s before its due time, on %s", r.Name, r.Key, demo.Ms(-r.Late), r.Node)
		}
		if r.Ended.IsZero() {
			if c.killed != nil && r.Node == c.killed.name {
				sum.Interrupted++
			} else {
				bad("%s %s: execution %s on %s never ended, and its replica was not killed", r.Name, r.Key, r.Exec, r.Node)
			}
		}
	}
	if c.replacement != nil {
		sum.Replacement, sum.ReplacementRuns = c.replacement.name, sum.RunsByNode[c.replacement.name]
	}
	if c.killed != nil && !c.leaseExpired.IsZero() {
		sum.LeaseExpiredAfter = c.leaseExpired.Sub(c.killedAt)
	}

	// The orders: each timeout ran to a business outcome in exactly one execution.
	sum.Orders, sum.Paid, sum.Cancelled = len(c.plan.IDs), c.paidN, 0
	var lat, onTime []time.Duration
	for _, id := range c.plan.IDs {
		rs := byKey[demo.TaskName+"/"+id]
		t, err := c.client.Lookup(ctx, demo.TaskName, id)
		if err != nil {
			return nil, fmt.Errorf("demo: verify: %w", err)
		}
		o := orders[id]
		completed, closes := 0, 0
		var closer string
		for _, r := range rs {
			sum.Executions++
			lat = append(lat, r.Late)
			if c.inGap(r.Due) {
				sum.GapTasks++
				if sum.GapTasks == 1 || r.Late < sum.GapLatenessMin {
					sum.GapLatenessMin = r.Late
				}
				sum.GapLatenessMax = max(sum.GapLatenessMax, r.Late)
			} else {
				onTime = append(onTime, r.Late)
			}
			switch r.Outcome {
			case outClosed:
				closes++
				closer = r.Exec
				sum.Closed++
			case outAlreadyPaid:
				sum.AlreadyPaid++
			case outFailed:
				sum.Failed++
			}
			if r.completed() {
				completed++
			}
		}
		if id == c.plan.Cancelled {
			sum.Cancelled++
			if t.Status != ax.Cancelled {
				bad("order %s was cancelled, but its task is %s", id, t.Status)
			}
			if len(rs) > 0 {
				bad("order %s was cancelled, but its timeout ran %d times", id, len(rs))
			}
			if o.Status != demo.Closed || o.Reason != "cancelled by user" {
				bad("order %s: cancelled by its user, but it is %s (%s)", id, o.Status, o.Reason)
			}
			continue
		}
		if t.Status != ax.Succeeded {
			bad("task of order %s is %s, want SUCCEEDED (last error %q)", id, t.Status, t.LastError)
		}
		switch again := c.redelivered(rs); {
		case completed == 1:
			sum.ClosedOnce++
		case completed == 0:
			bad("order %s: no execution of its timeout reached an outcome (%d executions)", id, len(rs))
		case again == completed-1:
			sum.ClosedOnce++
			sum.Redelivered += again
		default:
			sum.Duplicates++
			bad("order %s: its timeout reached an outcome in %d executions, want exactly 1", id, completed)
		}
		switch o.Status {
		case demo.Closed:
			if closes != 1 || o.ClosedBy != closer || o.Reason != "timeout" {
				bad("order %s is closed (%s) by execution %q, but %d executions closed it", id, o.Reason, o.ClosedBy, closes)
			}
		case demo.Paid:
			if closes != 0 {
				bad("order %s is paid, but %d executions closed it", id, closes)
			}
		default:
			bad("order %s is %s, want closed or paid", id, o.Status)
		}
	}
	if sum.Paid != sum.AlreadyPaid {
		bad("%d orders paid in time, but %d executions found their order paid", sum.Paid, sum.AlreadyPaid)
	}
	slices.Sort(lat)
	slices.Sort(onTime)
	sum.LatenessP50, sum.LatenessP99 = demo.Percentile(lat, 0.50), demo.Percentile(lat, 0.99)
	if len(lat) > 0 {
		sum.LatenessMax = lat[len(lat)-1]
	}
	sum.OnTimeP99 = demo.Percentile(onTime, 0.99)

	// The reconciliation: no slot lost or doubled, never two runs at once.
	if c.slots > 0 {
		sum.ReconcileFrom, sum.ReconcileSlots = c.slot0, c.slots
		var recLat []time.Duration
		for i := range c.slots {
			key := demo.SlotKey(c.slot(i))
			rs := byKey[demo.ReconcileName+"/"+key]
			completed := 0
			for _, r := range rs {
				if r.completed() {
					completed++
					recLat = append(recLat, r.Late)
				}
			}
			t, err := c.client.Lookup(ctx, demo.ReconcileName, key)
			switch {
			case errors.Is(err, ax.ErrNotFound):
				sum.ReconcileLost++
				bad("reconcile slot %s: no task: the slot was lost", demo.Clock(c.slot(i)))
				continue
			case err != nil:
				return nil, fmt.Errorf("demo: verify: %w", err)
			}
			again := c.redelivered(rs)
			switch {
			case completed > 1 && again != completed-1:
				sum.ReconcileDoubled++
				bad("reconcile slot %s ran to completion %d times", demo.Clock(c.slot(i)), completed)
			case t.Status == ax.Succeeded && completed-again == 1:
				sum.ReconcileRuns++
				sum.Redelivered += again
			case t.Status == ax.Skipped && len(rs) == 0:
				sum.ReconcileSkipped++
			case t.Status == ax.Skipped && completed == 0:
				sum.ReconcileLost++
				bad("reconcile slot %s: its run was cut short by the kill and its retry SKIPPED (%s): the slot was lost",
					demo.Clock(c.slot(i)), t.LastError)
			default:
				sum.ReconcileLost++
				bad("reconcile slot %s is %s after %d executions (%d completed), want SUCCEEDED once or SKIPPED (last error %q)",
					demo.Clock(c.slot(i)), t.Status, len(rs), completed, t.LastError)
			}
		}
		slices.Sort(recLat)
		sum.ReconcileLatenessP99 = demo.Percentile(recLat, 0.99)
		var all []bizRun
		for _, r := range runs {
			if r.Name == demo.ReconcileName {
				all = append(all, r)
			}
		}
		var when string
		sum.ReconcileMaxConcurrent, when = maxConcurrent(all, c.killedAt, time.Now())
		if sum.ReconcileMaxConcurrent > 1 {
			bad("%d reconciliation runs at once (%s), want at most 1", sum.ReconcileMaxConcurrent, when)
		}
	}

	// The failover.
	switch {
	case c.killed == nil:
		bad("the leader was never killed")
	case c.newLeader == nil:
		bad("no replica led after %s was killed", c.killed.name)
	case c.newLeader == c.killed || c.newEpoch <= c.killedEpoch:
		bad("after the kill of %s (epoch %d), %s led with epoch %d: want another replica and a higher epoch",
			c.killed.name, c.killedEpoch, c.newLeader.name, c.newEpoch)
	}
	if n := len(sum.RunsByNode); n < 2 {
		bad("the tasks ran on %d replica(s), want them spread over several", n)
	}
	return problems, nil
}

// redelivered counts the executions among rs that reached their outcome on the
// killed replica, before the kill, and were followed by another execution that did:
// the replica died after the handler's business transaction committed and before ax
// recorded the result, so ax ran the task again (at least once, as it promises; the
// handler's conditional write keeps the effect once).
func (c *cluster) redelivered(rs []bizRun) int {
	if c.killed == nil {
		return 0
	}
	n, last := 0, -1
	for i, r := range rs {
		if r.completed() {
			last = i
		}
	}
	for i, r := range rs {
		if i < last && r.completed() && r.Node == c.killed.name && r.Started.Before(c.killedAt) {
			n++
		}
	}
	return n
}

// maxConcurrent is the most runs in progress at once, and when; a run that never
// ended (its replica was killed) ends at killedAt, or at now.
func maxConcurrent(runs []bizRun, killedAt, now time.Time) (int, string) {
	type edge struct {
		at    time.Time
		delta int
		run   bizRun
	}
	var edges []edge
	for _, r := range runs {
		end := r.Ended
		if end.IsZero() {
			end = now
			if !killedAt.IsZero() && killedAt.After(r.Started) {
				end = killedAt
			}
		}
		edges = append(edges, edge{r.Started, +1, r}, edge{end, -1, r})
	}
	// Ends before starts at the same instant: back to back is not at once.
	sort.SliceStable(edges, func(i, j int) bool {
		if !edges[i].at.Equal(edges[j].at) {
			return edges[i].at.Before(edges[j].at)
		}
		return edges[i].delta < edges[j].delta
	})
	cur, best := 0, 0
	when := ""
	for _, e := range edges {
		cur += e.delta
		if cur > best {
			best = cur
			when = fmt.Sprintf("slot %s on %s at %s", demo.Clock(keyTime(e.run.Key)), e.run.Node, demo.Clock(e.at))
		}
	}
	return best, when
}

func keyTime(key string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, key)
	return t
}

// report prints the checks and the summary.
func (c *cluster) report(sum Summary, problems []string) {
	o := c.out
	o.Plain("")
	if len(problems) > 0 {
		o.Plain("verify: FAILED")
		for _, p := range problems {
			o.Plain("  - %s", p)
		}
	} else {
		o.Plain("verify: OK: read back from the shared file (ax's tasks, demo_orders, and demo_runs: every execution, recorded in its business transaction)")
	}
	o.Plain("")
	o.Plain("summary:")
	o.Plain("  orders:    %d: %d closed by their timeout, %d found paid, 1 cancelled (never ran); every order closed exactly once:",
		sum.Orders, sum.Closed, sum.AlreadyPaid)
	o.Plain("             %d of %d timeouts reached their outcome in exactly one execution, duplicates %d; %d executions in all (%d injected failures retried)",
		sum.ClosedOnce, sum.Orders-sum.Cancelled, sum.Duplicates, sum.Executions, sum.Failed)
	if sum.Interrupted > 0 {
		o.Plain("             %d executions were cut short by the kill (they ran on the leader): ax ran them again elsewhere after OrphanAfter (%s)",
			sum.Interrupted, demo.Secs(c.tm.orphanAfter))
	}
	if sum.Redelivered > 0 {
		o.Plain("             %d executions finished on the killed replica just before ax recorded them, and ran again (at least once);", sum.Redelivered)
		o.Plain("             the handler's conditional write kept their effect once")
	}
	o.Plain("  lateness:  p50 %s, p99 %s, max %s over %d executions; early = %d", demo.Ms(sum.LatenessP50), demo.Ms(sum.LatenessP99), demo.Ms(sum.LatenessMax), sum.Executions, sum.Early)
	if sum.GapTasks > 0 {
		o.Plain("             %d came due while nobody led: late by %s–%s, never early; the others: p99 %s",
			sum.GapTasks, demo.Ms(sum.GapLatenessMin), demo.Ms(sum.GapLatenessMax), demo.Ms(sum.OnTimeP99))
	} else {
		o.Plain("             no order came due while nobody led; p99 of the others %s", demo.Ms(sum.OnTimeP99))
	}
	if sum.ReconcileSlots > 0 {
		o.Plain("  reconcile: %d slots from %s: %d ran once, %d SKIPPED (a run held the key), lost %d, doubled %d; max concurrent %d over every replica; p99 %s late",
			sum.ReconcileSlots, demo.Clock(sum.ReconcileFrom), sum.ReconcileRuns, sum.ReconcileSkipped, sum.ReconcileLost, sum.ReconcileDoubled,
			sum.ReconcileMaxConcurrent, demo.Ms(sum.ReconcileLatenessP99))
	}
	if sum.NewLeader != "" {
		o.Plain("  failover:  %s (epoch %d) killed; its lease expired %s later; %s led (epoch %d) %s after the kill, with a lease TTL of %s",
			sum.Killed, sum.KilledEpoch, secs2(sum.LeaseExpiredAfter), sum.NewLeader, sum.NewEpoch, secs2(sum.Failover), demo.Secs(sum.LeaseTTL))
	}
	o.Plain("  leaders:   %s", strings.Join(sum.Leaders, " → "))
	var by []string
	for _, name := range sum.Replicas {
		by = append(by, fmt.Sprintf("%s %d", name, sum.RunsByNode[name]))
	}
	o.Plain("  runs:      %s (handler executions per replica; %s joined after the failover)", strings.Join(by, ", "), sum.Replacement)
	o.Plain("  in %s from the orders' creation", demo.Secs(sum.Elapsed))
	if sum.KeptDB {
		o.Plain("  the tasks, orders and executions stay in %s (namespace %q)", sum.DB, sum.Namespace)
	}
}
