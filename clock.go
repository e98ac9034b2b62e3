package ax

import (
	"context"
	"sync/atomic"
	"time"
)

// clock is the scheduler's notion of the database's time: the local monotonic clock,
// read as wall time at construction plus the elapsed monotonic duration, corrected by
// the measured offset between the database clock and the local one. A step of the
// local wall clock (NTP, an operator) does not move it; a re-measured offset does.
type clock struct {
	base   time.Time    // time.Now() at construction, with its monotonic reading
	wall   time.Time    // base without the monotonic reading
	offset atomic.Int64 // database minus local, in nanoseconds
}

func newClock() *clock { return newClockSkewed(0) }

// newClockSkewed is a clock whose local wall time is off by skew, as on a host whose
// clock is wrong: tests use it to run schedulers "on" different hosts.
func newClockSkewed(skew time.Duration) *clock {
	now := time.Now()
	return &clock{base: now, wall: now.Round(0).Add(skew)}
}

// now returns the corrected current time. It has no monotonic reading: compare it
// only with times from the store or from now.
func (c *clock) now() time.Time {
	return c.wall.Add(time.Since(c.base) + time.Duration(c.offset.Load()))
}

// measure samples the store's clock a few times and keeps the offset of the sample
// with the lowest round trip, taken at its midpoint.
func (c *clock) measure(ctx context.Context, st Store, samples int) (offset, rtt time.Duration, err error) {
	best := time.Duration(-1)
	for range samples {
		t0 := c.now()
		m0 := time.Now()
		db, err := st.Now(ctx)
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
