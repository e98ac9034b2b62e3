package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// fmtD rounds a duration for the report: to 100µs below a second, to the millisecond
// above.
func fmtD(d time.Duration) string {
	if d < time.Second && d > -time.Second {
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// String formats the distribution as "min=… p50=… p90=… p99=… max=…".
func (d Dist) String() string {
	if d.N == 0 {
		return "(no samples)"
	}
	return fmt.Sprintf("min=%s p50=%s p90=%s p99=%s max=%s", fmtD(d.Min), fmtD(d.P50), fmtD(d.P90), fmtD(d.P99), fmtD(d.Max))
}

// Write prints the report, its first line the command line that produced it.
func (r ClusterReport) Write(w io.Writer, cmdline string) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("$ %s", cmdline)
	if r.Elector == "sqllease" {
		p("cluster: %d node processes on one PostgreSQL schema (%s), elected by a SQL lease on it, lease TTL %v;", r.Nodes, r.Schema, r.TTL)
	} else {
		p("cluster: %d node processes on one PostgreSQL schema (%s), elected by Redis (key prefix %s), lease TTL %v;", r.Nodes, r.Schema, r.RedisPrefix, r.TTL)
	}
	p("  every node executes: the leader in-process and over signed HTTP (random 32-byte secret, loopback, round-robin) to the others;")
	p("  heartbeat %v, orphan-after %v, dispatch-timeout %v, concurrency %d per node; no-op handlers; run took %v",
		r.HeartbeatInterval, r.OrphanAfter, r.DispatchTimeout, r.Concurrency, r.Elapsed.Round(time.Second))
	if r.Analyze {
		p("  ANALYZE ax_tasks ran once, after the drain's backlog was written")
	}

	d := r.Drain
	p("")
	p("1. drain: %d tasks due at one instant (written beforehand), the leader in-process + %d HTTP executors", d.Tasks, r.Nodes-1)
	p("   postgres drain  nodes=%d tasks=%d conc=%d elapsed=%s rate=%.0f/s (due instant → last completion; last start %s)",
		r.Nodes, d.Tasks, r.Concurrency, fmtD(d.Elapsed), d.PerSec, fmtD(d.LastStart))
	p("   lateness (start − due) %s early=%d", d.Lateness, d.Early)
	r.writeCommon(p, d)

	s := r.Steady
	p("")
	p("2. lateness: a steady stream of %d tasks/s for %s (%d tasks), each due %v after it was written", r.Rate, fmtD(s.Elapsed), s.Tasks, r.Delay)
	p("   postgres steady nodes=%d tasks=%d lateness (first start − due, store stamps) %s early=%d", r.Nodes, s.Tasks, s.Lateness, s.Early)
	r.writeCommon(p, s)

	f := r.FailoverStream
	p("")
	p("3. failover: kill -9 of the leader ×%d under %d tasks/s each due %v after it was written, a replacement started at each kill;",
		len(r.Failovers), r.Rate, r.Delay)
	p("   each kill ≥ %v into a term, at a random point of the renew cycle (TTL/3)", r.Settle)
	p("   %-3s %-18s %-20s %-24s %-16s %s", "#", "killed (epoch)", "next leader (epoch)", "kill → EventLeadership", "tasks due in gap", "their max lateness")
	for i, x := range r.Failovers {
		p("   %-3d %-18s %-20s %-24s %-16d %s", i+1, fmt.Sprintf("%s (%d)", x.Victim, x.Epoch), fmt.Sprintf("%s (%d)", x.Next, x.NextEpoch),
			fmtD(x.Took), x.GapTasks, fmtD(x.GapMax))
	}
	p("   kill → next EventLeadership over %d failovers: min=%s median=%s p99=%s max=%s",
		r.FailoverTimes.N, fmtD(r.FailoverTimes.Min), fmtD(r.FailoverTimes.P50), fmtD(r.FailoverTimes.P99), fmtD(r.FailoverTimes.Max))
	p("   lateness of the %d tasks due during the gaps: %s", r.GapLateness.N, r.GapLateness)
	p("   the whole stream: %d tasks over %s, lateness %s early=%d", f.Tasks, fmtD(f.Elapsed), f.Lateness, f.Early)
	r.writeCommon(p, f)

	p("")
	p("4. graceful handover: SIGTERM of the leader (Stop) ×%d under the same stream, a replacement started after each", len(r.Handovers))
	p("   %-3s %-18s %-12s %-20s %s", "#", "stopped (epoch)", "its Stop", "next leader (epoch)", "SIGTERM → EventLeadership")
	for i, h := range r.Handovers {
		p("   %-3d %-18s %-12s %-20s %s", i+1, fmt.Sprintf("%s (%d)", h.Stopped, h.Epoch), fmtD(h.StopTook), fmt.Sprintf("%s (%d)", h.Next, h.NextEpoch), fmtD(h.Took))
	}
	p("   SIGTERM → next EventLeadership over %d handovers: min=%s median=%s max=%s",
		r.HandoverTimes.N, fmtD(r.HandoverTimes.Min), fmtD(r.HandoverTimes.P50), fmtD(r.HandoverTimes.Max))

	c := r.Check
	p("")
	p("5. exactly once, never early: ax_tasks, ax_executions and the handlers' run logs, all %d tasks", c.Tasks)
	p("   %d SUCCEEDED, %d execution records, %d handler calls", c.Succeeded, c.Executions, c.HandlerCalls)
	p("   ran exactly once: %d; ran again after kill -9 of their node mid-execution (orphaned, at-least-once): %d; released by Stop and run again: %d; early: %d",
		c.ExactlyOnce, c.RerunAfterKill, c.Released, c.Early)
	if c.Violations == 0 {
		p("   violations: 0")
		return
	}
	p("   VIOLATIONS: %d", c.Violations)
	for _, e := range c.Examples {
		p("     %s", e)
	}
}

// writeCommon prints a phase's spread over the nodes, dispatch failures and executor
// requests.
func (r ClusterReport) writeCommon(p func(string, ...any), ph PhaseReport) {
	total := 0
	for _, n := range ph.Spread {
		total += n.Tasks
	}
	var spread []string
	for _, n := range ph.Spread {
		lead := ""
		if n.Leader {
			lead = " (led)"
		}
		spread = append(spread, fmt.Sprintf("%s%s %d (%.1f%%)", n.Node, lead, n.Tasks, 100*float64(n.Tasks)/float64(max(total, 1))))
	}
	p("   spread: %s", strings.Join(spread, ", "))
	p("   dispatch failures: %d tasks with DispatchRetries > 0 (%d retries); EventDispatchFailed: %s",
		ph.RetriedTasks, ph.DispatchRetries, countsString(ph.Nodes.DispatchFailed))
	var reqs []string
	for _, k := range sortedKeys(ph.Nodes.Requests) {
		q := ph.Nodes.Requests[k]
		reqs = append(reqs, fmt.Sprintf("%s %d requests/%d tasks (mean %s, max %s)", k, q.Requests, q.Tasks,
			fmtD(q.Total/time.Duration(max(q.Requests, 1))), fmtD(q.Max)))
	}
	if len(reqs) == 0 {
		reqs = []string{"none"}
	}
	p("   leader's EventExecutorRequest by result: %s", strings.Join(reqs, "; "))
	if ph.Nodes.Dropped > 0 {
		p("   (the nodes' observers dropped %d events: the counts above miss them)", ph.Nodes.Dropped)
	}
}

func countsString(m map[string]int64) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
