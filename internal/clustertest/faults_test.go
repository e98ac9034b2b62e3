//go:build linux

package clustertest_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/internal/clustertest"
	"github.com/axsched/ax/store"
)

// The helpers of the fault tests (redis_test.go, storecut_test.go, executor_test.go,
// periodic_test.go).

// leadLine is a LEADING line and the child that printed it.
type leadLine struct {
	child *clustertest.Child
	line  clustertest.Line
}

// leadings returns every LEADING line of every child started, in order of their
// stamps.
func (c *cluster) leadings() []leadLine {
	var out []leadLine
	for _, ch := range c.all() {
		for _, l := range ch.Lines() {
			if l.Epoch() > 0 {
				out = append(out, leadLine{child: ch, line: l})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b leadLine) int { return a.line.Stamp().Compare(b.line.Stamp()) })
	return out
}

// checkEpochsIncrease fails t unless the epochs of every term begun during the test,
// in the order the terms began, strictly increase; it returns them.
func (c *cluster) checkEpochsIncrease() []string {
	c.t.Helper()
	var terms []string
	var prev int64
	for _, ll := range c.leadings() {
		terms = append(terms, fmt.Sprintf("%s:%d", ll.child.Node(), ll.line.Epoch()))
		if ll.line.Epoch() <= prev {
			c.t.Errorf("%s began a term with epoch %d at %s, after a term with epoch %d: epochs must strictly increase",
				ll.child.Node(), ll.line.Epoch(), ll.line.Stamp().Format("15:04:05.000"), prev)
		}
		prev = ll.line.Epoch()
	}
	return terms
}

// waitLeadingAbove waits until some child, the old leader included, prints LEADING
// with an epoch above epoch, and returns it and that line.
func (c *cluster) waitLeadingAbove(epoch int64, timeout time.Duration) (*clustertest.Child, clustertest.Line) {
	c.t.Helper()
	var found leadLine
	waitUntil(c.t, timeout, fmt.Sprintf("a child leads with an epoch above %d", epoch), func() bool {
		for _, ll := range c.leadings() {
			if ll.line.Epoch() > epoch {
				found = ll
				return true
			}
		}
		return false
	})
	return found.child, found.line
}

// waitLinePrinted waits until ch prints a line starting with prefix received after
// after, and returns it; it fails the test when timeout passes first.
func waitLinePrinted(t *testing.T, ch *clustertest.Child, prefix string, after time.Time, timeout time.Duration) clustertest.Line {
	t.Helper()
	l, err := ch.WaitFor(timeout, fmt.Sprintf("%q after %s", prefix, after.Format("15:04:05.000")), func(l clustertest.Line) bool {
		return strings.HasPrefix(l.Text, prefix) && l.Received.After(after)
	})
	if err != nil {
		t.Fatalf("%v; it printed %s", err, printed(ch))
	}
	return l
}

// linesOf returns the lines of ch that start with prefix.
func linesOf(ch *clustertest.Child, prefix string) []clustertest.Line {
	var out []clustertest.Line
	for _, l := range ch.Lines() {
		if strings.HasPrefix(l.Text, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// waitNodes waits until the store's node registry lists every child of cs as live.
func (c *cluster) waitNodes(timeout time.Duration, cs ...*clustertest.Child) {
	c.t.Helper()
	reg := c.st
	var live []string
	waitUntil(c.t, timeout, "the executors registered", func() bool {
		ns, err := reg.Nodes(context.Background(), 3*c.base.HeartbeatInterval)
		if err != nil {
			return false
		}
		live = live[:0]
		for _, n := range ns {
			live = append(live, n.Name)
		}
		for _, ch := range cs {
			if !slices.Contains(live, ch.Node()) {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprintf("live: %v", live) })
}

// collect reads the history of the tasks in dues, without checking it.
func (c *cluster) collect(dues map[int64]time.Time) clustertest.History {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, err := clustertest.Collect(ctx, c.st, dues, c.logs()...)
	if err != nil {
		c.t.Fatal(err)
	}
	return h
}

// inFlight returns the runs ch's run log shows started and not ended.
func (c *cluster) inFlight(ch *clustertest.Child) []clustertest.Entry {
	c.t.Helper()
	es, err := clustertest.ReadRunLog(ch.Config.RunLog)
	if err != nil {
		c.t.Fatal(err)
	}
	open := map[string]clustertest.Entry{}
	var order []string
	for _, e := range es {
		switch e.Event {
		case clustertest.EventStart:
			if !e.CtxDone {
				open[e.ExecutionID] = e
				order = append(order, e.ExecutionID)
			}
		case clustertest.EventEnd:
			delete(open, e.ExecutionID)
		}
	}
	var out []clustertest.Entry
	for _, id := range order {
		if e, ok := open[id]; ok {
			out = append(out, e)
		}
	}
	return out
}

// lateness describes the lateness (first start − due) of the tasks of dues due in
// [from, to), as Verify measured it.
func lateness(sum clustertest.Summary, dues map[int64]time.Time, from, to time.Time) string {
	var lates []time.Duration
	for id, due := range dues {
		if !due.Before(from) && due.Before(to) {
			if late, ok := sum.Lateness[id]; ok {
				lates = append(lates, late)
			}
		}
	}
	if len(lates) == 0 {
		return fmt.Sprintf("no task due in the %v from %s", to.Sub(from).Round(time.Millisecond), from.Format("15:04:05.000"))
	}
	slices.Sort(lates)
	return fmt.Sprintf("%d tasks due in the %v from %s: lateness min %v, median %v, max %v", len(lates),
		to.Sub(from).Round(time.Millisecond), from.Format("15:04:05.000"),
		lates[0].Round(time.Millisecond), lates[len(lates)/2].Round(time.Millisecond), lates[len(lates)-1].Round(time.Millisecond))
}

// sleepUntil waits until at: the length of a fault the test injects, not a wait for a
// condition.
func sleepUntil(at time.Time) {
	if d := time.Until(at); d > 0 {
		time.Sleep(d)
	}
}

// allSucceeded fails t unless every task Verify counted SUCCEEDED.
func allSucceeded(t *testing.T, sum clustertest.Summary) {
	t.Helper()
	if n := sum.ByStatus[store.Succeeded]; n != sum.Tasks {
		t.Errorf("%d of %d tasks SUCCEEDED, want all", n, sum.Tasks)
	}
}
