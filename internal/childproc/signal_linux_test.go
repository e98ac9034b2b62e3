package childproc

import (
	"strconv"
	"testing"
	"time"
)

// A stopped child prints nothing until Cont.
func TestStopCont(t *testing.T) {
	t.Parallel()
	p := start(t, "tick", Options{})
	if _, err := p.WaitLine(10*time.Second, "TICK"); err != nil {
		t.Fatal(err)
	}
	stoppedAt, err := p.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if !stopped(p.PID()) {
		t.Fatal("Stop returned and /proc says the child runs")
	}
	time.Sleep(300 * time.Millisecond) // the time it stays stopped
	contAt, err := p.Cont()
	if err != nil {
		t.Fatal(err)
	}
	if contAt.Before(stoppedAt) {
		t.Errorf("Cont at %v, before Stop's %v", contAt, stoppedAt)
	}
	// Each TICK says when the child wrote it, so the check does not depend on when the
	// parent reads the lines the child wrote before it stopped.
	written := func(l Line) (time.Time, bool) {
		if len(l.Fields) != 2 || l.Fields[0] != "TICK" {
			return time.Time{}, false
		}
		ns, err := strconv.ParseInt(l.Fields[1], 10, 64)
		return time.Unix(0, ns), err == nil
	}
	if _, err := p.WaitFor(10*time.Second, "a line written after Cont", func(l Line) bool {
		at, ok := written(l)
		return ok && at.After(contAt)
	}); err != nil {
		t.Fatal(err)
	}
	var before int
	for _, l := range p.Lines() {
		at, ok := written(l)
		switch {
		case !ok:
		case !at.After(stoppedAt.Round(0)):
			before++
		case at.Before(contAt.Round(0)):
			t.Errorf("the stopped child wrote %q at %v, between Stop (%v) and Cont (%v)", l.Text, at, stoppedAt, contAt)
		}
	}
	if before == 0 {
		t.Error("the child wrote no TICK before it was stopped")
	}
}
