// Package clock is the scheduler's notion of the store's time: the local monotonic
// clock, read as wall time at construction plus the elapsed monotonic duration,
// corrected by the measured offset between the store's clock and the local one. A
// step of the local wall clock (NTP, an operator) does not move it; a re-measured
// offset does. Every due decision in the scheduler reads this clock.
//
// Follow, the re-measurement, blocks until its context ends.
package clock

import (
	"context"
	"sync/atomic"
	"time"
)

// Clock is safe for concurrent use.
type Clock struct {
	base   time.Time    // time.Now() at construction, with its monotonic reading
	wall   time.Time    // base without the monotonic reading
	offset atomic.Int64 // store minus local, in nanoseconds
	skew   atomic.Int64 // the Skew of the local clock, in nanoseconds (part of offset)
}

// New returns a clock that reads the local time until Measure corrects it.
func New() *Clock { return NewSkewed(0) }

// NewSkewed is a clock whose local wall time is off by skew, as on a host whose clock
// is wrong: tests use it to run schedulers "on" different hosts.
func NewSkewed(skew time.Duration) *Clock {
	now := time.Now()
	return &Clock{base: now, wall: now.Round(0).Add(skew)}
}

// Skew moves the clock by d, as if its host's wall clock were off by d: until the next
// Measure, which corrects it like any offset.
func (c *Clock) Skew(d time.Duration) {
	c.skew.Add(int64(d))
	c.offset.Add(int64(d))
}

// Offset returns the store's clock minus the local one, as last measured: positive
// when the local clock is behind. The local clock is the host's, off by any Skew or
// NewSkewed skew; zero until the first Measure.
func (c *Clock) Offset() time.Duration {
	return time.Duration(c.offset.Load() - c.skew.Load())
}

type skewKey struct{}

// WithSkew returns ctx carrying a skew for the clock of a scheduler started under it
// (Scheduler.Start reads it before it first measures the store's clock): tests run
// replicas, in other processes too, "on" hosts whose wall clocks are off by d, which a
// process cannot make true of its real clock without privileges. Only this module can
// set it: the package is internal.
func WithSkew(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, skewKey{}, d)
}

// SkewFrom returns the skew ctx carries (WithSkew); zero when none.
func SkewFrom(ctx context.Context) time.Duration {
	d, _ := ctx.Value(skewKey{}).(time.Duration)
	return d
}

// Now returns the corrected current time. It has no monotonic reading: compare it
// only with times from the store or from Now.
func (c *Clock) Now() time.Time {
	return c.wall.Add(time.Since(c.base) + time.Duration(c.offset.Load()))
}

// Source is a clock to measure against: the store's Now.
type Source interface {
	Now(ctx context.Context) (time.Time, error)
}

// Measure samples src a few times and corrects the clock by the offset of the sample
// with the lowest round trip, taken at its midpoint. It returns the clock's offset
// after the correction and that round trip.
func (c *Clock) Measure(ctx context.Context, src Source, samples int) (offset, rtt time.Duration, err error) {
	best := time.Duration(-1)
	for range samples {
		t0 := c.Now()
		m0 := time.Now()
		db, err := src.Now(ctx)
		if err != nil {
			return 0, 0, err
		}
		r := time.Since(m0)
		if best < 0 || r < best {
			best = r
			offset = db.Sub(t0.Add(r / 2))
		}
	}
	c.offset.Add(int64(offset))
	return time.Duration(c.offset.Load()), best, nil
}

// Follow re-measures the clock against src every interval until ctx ends, so that
// drift between the hosts' clocks does not accumulate; measured is told each result.
// After a measurement fails it tries again every second (followRetry; or every interval, if
// that is shorter) until one succeeds: a store that was out of reach may be another
// server when it answers again (a database's failover), with a clock of its own. A
// value on nudge (another call to the store failed) starts the same: a measurement at
// once, and every second until one succeeds.
func (c *Clock) Follow(ctx context.Context, src Source, every time.Duration, nudge <-chan struct{}, measured func(offset, rtt time.Duration, err error)) {
	timer := time.NewTimer(every)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-nudge:
		}
		offset, rtt, err := c.Measure(ctx, src, 5)
		if ctx.Err() != nil {
			return
		}
		measured(offset, rtt, err)
		if err != nil {
			timer.Reset(min(every, followRetry))
		} else {
			timer.Reset(every)
		}
	}
}

// followRetry is how soon Follow measures again after a measurement failed.
const followRetry = time.Second

// Every calls f every interval, the first time one interval from now, until ctx ends:
// the loop of the scheduler's periodic chores (node registration, store pings, health
// probes).
func Every(ctx context.Context, interval time.Duration, f func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
