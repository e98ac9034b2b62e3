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
	C() <-chan struct{}
	// stop releases the waker.
	stop()
}

// goWaker is a waker on a Go timer.
type goWaker struct {
	t *time.Timer
	c chan struct{}
}

func newGoWaker() *goWaker {
	w := &goWaker{c: make(chan struct{}, 1)}
	w.t = time.AfterFunc(time.Hour, func() {
		select {
		case w.c <- struct{}{}:
		default:
		}
	})
	return w
}

func (w *goWaker) reset(d time.Duration) {
	drain(w.c)
	w.t.Reset(d)
}
func (w *goWaker) C() <-chan struct{} { return w.c }
func (w *goWaker) stop()              { w.t.Stop() }

// drain takes a fire for a time set before out of c: a reset sets the one time.
func drain(c chan struct{}) {
	select {
	case <-c:
	default:
	}
}

// realClock reports whether time.Now reads the system's clock: its reading has a
// monotonic part, which the fake clock of a testing/synctest bubble's lacks. A
// precise waker waits on the system's clock, so in a bubble it would fire in real
// time while the bubble's stood still.
func realClock() bool {
	now := time.Now()
	return now != now.Round(0) // Round(0) strips the monotonic reading
}
