package dispatch

import (
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

// The real clock has a monotonic reading; a bubble's fake one has none.
func TestRealClock(t *testing.T) {
	if !realClock() {
		t.Error("realClock() = false outside a bubble")
	}
	synctest.Test(t, func(t *testing.T) {
		if realClock() {
			t.Error("realClock() = true in a synctest bubble")
		}
	})
}

// A waker fires once per reset, at once for a time passed; stop ends its goroutine
// (goleak checks it in TestMain).
func TestWakerFires(t *testing.T) {
	w := newWaker()
	defer w.stop()
	if _, onGoTimer := w.(goWaker); onGoTimer == (runtime.GOOS == "linux") {
		t.Errorf("newWaker() = %T on %s", w, runtime.GOOS)
	}
	fired := func(what string) {
		t.Helper()
		select {
		case <-w.C():
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not fired within 10s", what)
		}
	}
	w.reset(time.Millisecond)
	fired("reset(1ms)")
	w.reset(0)
	fired("reset(0)")
	w.reset(-time.Second)
	fired("reset(-1s)")
	w.reset(time.Hour)
	w.reset(time.Millisecond) // replaces the hour
	fired("reset(1h), then reset(1ms)")
}

// In a bubble a waker runs on the bubble's clock: it fires at the fake instant set,
// and not for a time a reset replaced.
func TestWakerInABubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWaker()
		defer w.stop()
		start := time.Now()
		w.reset(3 * time.Millisecond)
		<-w.C()
		if got := time.Since(start); got != 3*time.Millisecond {
			t.Errorf("fired %v after reset(3ms), want 3ms on the bubble's clock", got)
		}
		w.reset(time.Millisecond)
		w.reset(time.Hour) // replaces the millisecond
		time.Sleep(time.Minute)
		synctest.Wait()
		select {
		case <-w.C():
			t.Error("fired for a time replaced by reset(1h)")
		default:
		}
	})
}
