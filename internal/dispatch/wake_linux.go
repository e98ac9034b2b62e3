package dispatch

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// newWaker returns a precise waker, a timerfd read through the runtime's poller,
// where the clock is real and the system gives one; else a Go timer's.
func newWaker() waker {
	if !realClock() {
		return newGoWaker()
	}
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return newGoWaker()
	}
	w := &fdWaker{fd: fd, f: os.NewFile(uintptr(fd), "ax-timerfd"), c: make(chan time.Time, 1), done: make(chan struct{})}
	go w.read()
	return w
}

// fdWaker is a waker on a timerfd: its goroutine reads the expirations, which the
// runtime's poller hands it as soon as the kernel marks the descriptor readable.
type fdWaker struct {
	fd   int
	f    *os.File
	c    chan time.Time // holds one fire at most
	done chan struct{}
}

func (w *fdWaker) read() {
	defer close(w.done)
	var buf [8]byte // the count of expirations since the last read
	for {
		if _, err := w.f.Read(buf[:]); err != nil {
			return // closed by stop
		}
		w.fire()
	}
}

// fire puts a fire in c, unless one waits there already.
func (w *fdWaker) fire() {
	select {
	case w.c <- time.Now():
	default:
	}
}

func (w *fdWaker) reset(d time.Duration) {
	select { // a fire for the time set before: the reset replaces it
	case <-w.c:
	default:
	}
	// A zero value disarms a timerfd: at once is a nanosecond from now.
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(max(d.Nanoseconds(), 1))}
	if err := unix.TimerfdSettime(w.fd, 0, &spec, nil); err != nil {
		w.fire() // not armed: wake the loop now, which asks again
	}
}

func (w *fdWaker) C() <-chan time.Time { return w.c }

func (w *fdWaker) stop() {
	w.f.Close() // ends read's Read
	<-w.done
}
