package dispatch

import "time"

// A waker wakes the loop once, a while from now: a Go timer, or where the system
// has one and the clock is real, a precise one (wake_linux.go).
//
// Go's timers wake a process that sleeps with nothing else to do in whole
// milliseconds: on Linux the runtime waits in epoll_wait, whose timeout counts
// milliseconds, so a wake-up comes 0.5 ms after its time at the median and up to 1
// ms after (measured: 0.56 ms median, 1.1 ms at p99) — half of a task's lateness
// once it is handed out at its due. A timerfd in the runtime's poller fires to the
// microsecond: its expiry ends the runtime's epoll_wait at once.
type waker interface {
	// reset has C fire once, d from now (at once if d ≤ 0), instead of when it was
	// to fire.
	reset(d time.Duration)
	// C fires when the time set comes; it may also fire once more for a time set
	// before a reset, which costs the loop a wake-up for nothing.
	C() <-chan time.Time
	// stop releases the waker.
	stop()
}

// goWaker is a waker on a Go timer, whose Reset drops a fire not yet received.
type goWaker struct{ t *time.Timer }

func newGoWaker() goWaker               { return goWaker{time.NewTimer(time.Hour)} }
func (w goWaker) reset(d time.Duration) { w.t.Reset(d) }
func (w goWaker) C() <-chan time.Time   { return w.t.C }
func (w goWaker) stop()                 { w.t.Stop() }

// realClock reports whether time.Now reads the system's clock: its reading has a
// monotonic part, which the fake clock of a testing/synctest bubble's lacks. A
// precise waker waits on the system's clock, so in a bubble it would fire in real
// time while the bubble's stood still.
func realClock() bool {
	now := time.Now()
	return now != now.Round(0) // Round(0) strips the monotonic reading
}
