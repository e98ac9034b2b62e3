//go:build linux

package clustertest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/internal/clustertest"
	"github.com/axsched/ax/store"
)

// TestPeriodicAcrossFailovers: three replicas register the same Every(1s) schedule
// with catch-up misfires (ChildConfig.Every); the leader, which runs the occurrences
// itself, is killed (SIGKILL) three times between two occurrences, half a second
// before the next slot, a replacement started each time. Then the schedule is paused,
// which cancels its occurrences not yet started. The occurrences — the schedule's tasks, keyed by slot — must cover
// every slot from the first to the last without a gap or a duplicate; each slot up to
// the last the final leader ran after catching up must have run once and succeeded,
// the rest were cancelled by the pause; and the whole history must pass Verify.
func TestPeriodicAcrossFailovers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	cfg := timings()
	cfg.Every = time.Second
	c := newCluster(t, cfg)
	ctx := context.Background()
	begin, err := c.st.Now(ctx) // no slot at or before it fires
	if err != nil {
		t.Fatal(err)
	}
	c.start(3)
	leader, epoch := c.waitLeader(20 * time.Second)
	leadAt := time.Now()
	t.Logf("%s leads with epoch %d", leader.Node(), epoch)

	type gap struct {
		killed, lead time.Time
		victim, next string
		epoch        int64
	}
	var gaps []gap
	caught := map[int64]bool{} // occurrences running when their leader was killed
	for i := range 3 {
		// The leader is killed between two occurrences, after two seconds of steady
		// leadership: when it has run an occurrence of a slot two seconds past its
		// term's start, the store has that one's result, it runs none, and the next
		// slot is half a second away — so that the next one comes due in the gap.
		var idleAt time.Time
		waitUntil(t, 20*time.Second, fmt.Sprintf("%s runs an occurrence on time and is idle", leader.Node()), func() bool {
			idleAt = time.Now()
			last := c.lastSlotRun(leader)
			if since := time.Since(last); !last.After(leadAt.Add(2*time.Second)) || since < 400*time.Millisecond || since > 800*time.Millisecond {
				return false
			}
			if len(c.inFlight(leader)) > 0 {
				return false
			}
			tk, err := c.st.Lookup(ctx, clustertest.EveryName, last.UTC().Format(time.RFC3339))
			return err == nil && tk.Status == store.Succeeded
		})
		killed := leader.Kill()
		// A run begun between the check and the kill (a parent starved for half a
		// second) was cut short by it: it may run twice, after an orphaning.
		for _, e := range c.starts(leader, idleAt) {
			caught[e.TaskID] = true
			t.Logf("%s started occurrence %s between its idle check and its kill", leader.Node(), e.Key)
		}
		repl := c.spawn()
		next, lead := c.waitNewLeader(leader, epoch, 10*time.Second)
		g := gap{killed: killed, lead: lead.Stamp(), victim: leader.Node(), next: next.Node(), epoch: lead.Epoch()}
		gaps = append(gaps, g)
		t.Logf("failover %d: %s killed at %s; %s leads with epoch %d %v later", i+1, g.victim, killed.Format("15:04:05.000"),
			g.next, g.epoch, g.lead.Sub(killed).Round(time.Millisecond))
		c.ready(repl)
		leader, epoch, leadAt = next, lead.Epoch(), lead.Stamp()
	}
	// The last leader catches up: once it has run an occurrence of a slot two seconds
	// past the start of its term, every earlier slot has run (the occurrences queue,
	// in slot order).
	var caughtUp time.Time
	waitUntil(t, 20*time.Second, leader.Node()+" runs an occurrence 2s past its term's start", func() bool {
		caughtUp = c.lastSlotRun(leader)
		return caughtUp.After(leadAt.Add(2 * time.Second))
	})

	if _, err := c.st.PauseSchedule(ctx, clustertest.EveryName); err != nil {
		t.Fatal(err)
	}
	pausedAt := time.Now()
	sched, err := c.schedule(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The occurrences, by slot, from the first slot after begin to the last fired.
	type occurrence struct {
		slot time.Time
		task *store.Task
	}
	var occs []occurrence
	read := func() error {
		occs = occs[:0]
		for slot := begin.Truncate(time.Second).Add(time.Second); !slot.After(sched.LastFireAt); slot = slot.Add(time.Second) {
			tk, err := c.st.Lookup(ctx, clustertest.EveryName, slot.UTC().Format(time.RFC3339))
			switch {
			case errors.Is(err, store.ErrNotFound):
				tk = nil
			case err != nil:
				return err
			}
			occs = append(occs, occurrence{slot: slot, task: tk})
		}
		return nil
	}
	var open []string
	waitUntil(t, 20*time.Second, "every occurrence terminal after the pause", func() bool {
		if err := read(); err != nil {
			return false
		}
		open = open[:0]
		for _, o := range occs {
			if o.task != nil && !o.task.Status.Terminal() {
				open = append(open, fmt.Sprintf("%s %s", o.task.Key, o.task.Status))
			}
		}
		return len(open) == 0
	}, func() string { return "not terminal: " + strings.Join(open, ", ") })

	// Coverage: from the first occurrence on, every slot has one.
	first := -1
	for i, o := range occs {
		if o.task != nil {
			first = i
			break
		}
	}
	if first < 0 {
		t.Fatalf("no occurrence of %s written between %s and %s", clustertest.EveryName, begin.Format("15:04:05"), sched.LastFireAt.Format("15:04:05"))
	}
	occs = occs[first:]
	dues := map[int64]time.Time{}
	var missing []string
	succeeded, cancelled := 0, 0
	for _, o := range occs {
		key := o.slot.UTC().Format(time.RFC3339)
		switch {
		case o.task == nil:
			missing = append(missing, key)
			continue
		case o.task.Status == store.Succeeded:
			succeeded++
		case o.task.Status == store.Cancelled && o.slot.After(caughtUp):
			cancelled++ // by the pause
		default:
			t.Errorf("occurrence %s (task %d) is %s: %q; want SUCCEEDED (CANCELLED by the pause only after %s)", key, o.task.ID, o.task.Status,
				o.task.LastError, caughtUp.UTC().Format(time.RFC3339))
		}
		dues[o.task.ID] = o.slot
	}
	if len(missing) > 0 {
		t.Errorf("%d slots between the first occurrence %s and the last %s have no occurrence: %v", len(missing),
			occs[0].slot.UTC().Format(time.RFC3339), occs[len(occs)-1].slot.UTC().Format(time.RFC3339), missing)
	}
	t.Logf("%d slots from %s to %s: %d succeeded, %d cancelled by the pause at %s, %d missing", len(occs),
		occs[0].slot.UTC().Format("15:04:05"), occs[len(occs)-1].slot.UTC().Format("15:04:05"), succeeded, cancelled,
		pausedAt.Format("15:04:05.000"), len(missing))

	sum := c.verifyDues(dues)
	// Each ran once: one run, which succeeded. (The kills came between occurrences:
	// none was running, so none was orphaned.)
	h := c.collect(dues)
	oks := map[int64]int{}
	runs := map[int64]int{}
	for _, e := range h.Log {
		switch {
		case e.Event == clustertest.EventStart && !e.CtxDone:
			runs[e.TaskID]++
		case e.Event == clustertest.EventEnd && e.Result == clustertest.ResultOK:
			oks[e.TaskID]++
		}
	}
	for _, tr := range h.Tasks {
		if tr.Task.Status != store.Succeeded {
			continue
		}
		if caught[tr.Task.ID] {
			continue // Verify checked its runs
		}
		if oks[tr.Task.ID] != 1 || runs[tr.Task.ID] != 1 {
			t.Errorf("occurrence %s (task %d) ran %d times and completed %d times, want once; executions: %s", tr.Task.Key, tr.Task.ID,
				runs[tr.Task.ID], oks[tr.Task.ID], executions(tr.Executions))
		}
	}
	var firedLate []string
	for _, o := range occs {
		if o.task != nil && o.task.CreatedAt.After(o.slot) {
			firedLate = append(firedLate, fmt.Sprintf("%s (%v late)", o.slot.UTC().Format("15:04:05"), o.task.CreatedAt.Sub(o.slot).Round(time.Millisecond)))
		}
	}
	// Occurrences are written 2s ahead of their slot (periodic.FireAhead): with a
	// failover shorter than that, the dead leader had written those of the gap.
	t.Logf("occurrences written after their slot: %d %s", len(firedLate), strings.Join(firedLate, ", "))
	for i, g := range gaps {
		t.Logf("failover %d (%v): %s", i+1, g.lead.Sub(g.killed).Round(time.Millisecond), lateness(sum, dues, g.killed, g.lead))
	}
}

// lastSlotRun returns the latest slot of the occurrences ch ran to their end; zero
// when none.
func (c *cluster) lastSlotRun(ch *clustertest.Child) time.Time {
	c.t.Helper()
	es, err := clustertest.ReadRunLog(ch.Config.RunLog)
	if err != nil {
		c.t.Fatal(err)
	}
	var last time.Time
	for _, e := range es {
		if e.Event != clustertest.EventEnd || e.Name != clustertest.EveryName || e.Result != clustertest.ResultOK {
			continue
		}
		if slot, err := time.Parse(time.RFC3339, e.Key); err == nil && slot.After(last) {
			last = slot
		}
	}
	return last
}

// executions lists execution records for a message.
func executions(xs []store.Execution) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("{%s on %s %s %q}", x.ID, x.Node, x.Status, x.Error)
	}
	return strings.Join(parts, " ")
}

// schedule reads the stored row of the test's schedule.
func (c *cluster) schedule(ctx context.Context) (store.Schedule, error) {
	rows, err := c.st.Schedules(ctx)
	if err != nil {
		return store.Schedule{}, err
	}
	for _, r := range rows {
		if r.Name == clustertest.EveryName {
			return r, nil
		}
	}
	return store.Schedule{}, fmt.Errorf("schedule %q not stored", clustertest.EveryName)
}
