//go:build linux

package clustertest_test

import (
	"bufio"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/axsched/ax/internal/clustertest"
)

// selfFenceRE matches the executor's self-fencing warning in a child's log (slog's
// text format): its time and the execution id.
var selfFenceRE = regexp.MustCompile(`^time=(\S+) .*msg="ax: execution not stamped alive in time[^"]*".* execution_id=(\S+)`)

// selfFence is one self-fencing warning of a child's.
type selfFence struct {
	at          time.Time
	executionID string
}

// selfFences reads the self-fencing warnings from ch's log.
func selfFences(t *testing.T, ch *clustertest.Child) []selfFence {
	t.Helper()
	f, err := os.Open(ch.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []selfFence
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m := selfFenceRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			t.Fatalf("%s: %v in %q", ch.Stderr, err, sc.Text())
		}
		out = append(out, selfFence{at: at, executionID: m[2]})
	}
	return out
}

// TestNoSelfFenceAfterReturn: with neither pause nor kill, under a steady stream of
// short tasks, no execution is self-fenced — in particular none whose handler had
// already returned: the executor cancels the handler's context once its execution has
// gone OrphanAfter − 2 × HeartbeatInterval without a stamp in the store, which a
// handler that returned has no use for.
//
// It guards the timer's life: the heartbeater may stamp an execution whose handler has
// returned but whose result is not yet written (it is still in the running set), and
// that stamp must not re-arm the self-fencing timer stopped when the handler returned.
func TestNoSelfFenceAfterReturn(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	cfg := timings()
	bound := cfg.OrphanAfter - 2*cfg.HeartbeatInterval
	c := newCluster(t, cfg)
	cs := c.start(2)
	c.waitLeader(20 * time.Second)
	l := startLoad(t, c.st, 150, 5, 200*time.Millisecond, 500*time.Millisecond)
	c.waitSettled(l, 30*time.Second)
	c.verify(l)

	// A timer re-armed by the last heartbeat of an execution fires within the bound of
	// that heartbeat: wait that long past the last handler's end, then read the logs.
	log, err := clustertest.ReadRunLog(c.logs()...)
	if err != nil {
		t.Fatal(err)
	}
	last := log[len(log)-1].At
	time.Sleep(time.Until(last.Add(bound + cfg.HeartbeatInterval + 500*time.Millisecond)))

	ends := map[string]clustertest.Entry{}
	for _, e := range log {
		if e.Event == clustertest.EventEnd {
			ends[e.ExecutionID] = e
		}
	}
	n := 0
	for _, ch := range cs {
		for _, f := range selfFences(t, ch) {
			n++
			end, ok := ends[f.executionID]
			switch {
			case !ok:
				t.Errorf("%s self-fenced execution %s at %s, which never ended", ch.Node(), f.executionID, f.at.Format("15:04:05.000"))
			case end.At.Before(f.at.Add(-5 * time.Millisecond)): // the log's stamps are in milliseconds
				t.Errorf("%s self-fenced execution %s (task %d) at %s, %v after its handler returned (%s at %s)",
					ch.Node(), f.executionID, end.TaskID, f.at.Format("15:04:05.000"), f.at.Sub(end.At).Round(time.Millisecond), end.Result, end.At.Format("15:04:05.000"))
			default: // the machine starved the heartbeats: not what this test is about
				t.Logf("%s self-fenced execution %s (task %d) at %s with no pause: a heartbeat did not reach the store for %v",
					ch.Node(), f.executionID, end.TaskID, f.at.Format("15:04:05.000"), bound)
			}
		}
	}
	t.Logf("%d self-fencing warnings", n)
}
