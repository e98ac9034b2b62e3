package demo

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"time"
)

// Printer serialises the demo's output: handlers, the user simulation and the
// progress ticker all write lines to the same writer. After close, lines are dropped,
// so that a handler still running after Run returned cannot write to out.
type Printer struct {
	mu     sync.Mutex
	out    io.Writer
	start  time.Time
	closed bool
}

// Line writes one line, prefixed with the time since the scenario started.
func (p *Printer) Line(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	el := time.Since(p.start).Seconds()
	fmt.Fprintf(p.out, "[%6.2fs] %s\n", el, fmt.Sprintf(format, args...))
}

// Plain writes one line as is.
func (p *Printer) Plain(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	fmt.Fprintf(p.out, format+"\n", args...)
}

// NewPrinter returns a Printer on out whose lines count time from now.
func NewPrinter(out io.Writer) *Printer { return &Printer{out: out, start: time.Now()} }

// Close makes the Printer drop every later line.
func (p *Printer) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}

// tally counts what the handler and the simulated users did. Its methods are safe
// for concurrent use.
type tally struct {
	mu             sync.Mutex
	expected       int // tasks that must settle: orders minus cancelled ones
	paid           int
	fired          int
	closed         int
	alreadyPaid    int
	alreadyClosed  int
	failed         int
	retried        int
	cancelled      int
	cancelledFired int
	early          int
	stale          int
	lateness       []time.Duration
	done           chan struct{} // closed when every expected task settled
	doneClosed     bool
}

// snapshot is a consistent copy of the counters.
type snapshot struct {
	paid, fired, closed, alreadyPaid, alreadyClosed, failed, retried int
	cancelled, cancelledFired, early, stale, pending                 int
}

func (t *tally) snapshot() snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	return snapshot{
		paid: t.paid, fired: t.fired, closed: t.closed, alreadyPaid: t.alreadyPaid, alreadyClosed: t.alreadyClosed,
		failed: t.failed, retried: t.retried, cancelled: t.cancelled, cancelledFired: t.cancelledFired,
		early: t.early, stale: t.stale, pending: max(t.pending(), 0),
	}
}

// settle records that one task reached its business outcome; f updates the counter.
func (t *tally) settle(f func(t *tally)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(t)
	if !t.doneClosed && t.pending() <= 0 {
		t.doneClosed = true
		close(t.done)
	}
}

// pending is how many expected tasks have not settled; the caller holds mu.
func (t *tally) pending() int {
	return t.expected - t.cancelled - (t.closed + t.alreadyPaid + t.alreadyClosed)
}

func (t *tally) update(f func(t *tally)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(t)
}

func (t *tally) latenessCopy() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.lateness)
}

// progressLine formats the compact progress line.
func (s snapshot) progressLine() string {
	return fmt.Sprintf("paid %d | fired %d | closed %d | already-paid %d | retried %d | cancelled %d | pending %d",
		s.paid, s.fired, s.closed, s.alreadyPaid, s.retried, s.cancelled, s.pending)
}

// Percentile returns the nearest-rank p-quantile (0 < p <= 1) of sorted.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Ms formats a duration in milliseconds with one decimal, e.g. "3.2ms".
func Ms(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

// Secs formats a duration in seconds with one decimal, e.g. "2.5s".
func Secs(d time.Duration) string {
	return fmt.Sprintf("%.1fs", d.Seconds())
}
