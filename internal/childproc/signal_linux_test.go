package childproc

import (
	"testing"
	"time"
)

// A stopped child prints nothing until Cont.
func TestStopCont(t *testing.T) {
	t.Parallel()
	p := start(t, "tick", Options{})
	if _, err := p.WaitLine(10*time.Second, "READY"); err != nil {
		t.Fatal(err)
	}
	stoppedAt, err := p.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if !stopped(p.PID()) {
		t.Fatal("Stop returned and /proc says the child runs")
	}
	time.Sleep(100 * time.Millisecond) // the lines written before the stop are read
	n := len(p.Lines())
	time.Sleep(200 * time.Millisecond)
	if m := len(p.Lines()); m != n {
		t.Errorf("the stopped child printed %d lines", m-n)
	}
	contAt, err := p.Cont()
	if err != nil {
		t.Fatal(err)
	}
	if contAt.Before(stoppedAt) {
		t.Errorf("Cont at %v, before Stop's %v", contAt, stoppedAt)
	}
	if _, err := p.WaitFor(10*time.Second, "a line after Cont", func(l Line) bool { return l.Received.After(contAt) }); err != nil {
		t.Error(err)
	}
}
