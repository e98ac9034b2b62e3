package cronspec

import (
	"math"
	"math/bits"
	"time"
)

// Next computes fire times within the years 1 to 9999 (UTC).
var (
	minUnix = time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC).Unix()
	maxUnix = time.Date(9999, time.December, 31, 23, 59, 59, 0, time.UTC).Unix()
)

// horizon bounds the search for a cron fire time, in seconds. A spec that matches
// some calendar date at all matches one within 8 years (February 29 skips 2100), so
// ten years is enough; specs that match no date are caught by Parse (Spec.never).
const horizon = 10 * 366 * 24 * 60 * 60

// Next returns the spec's first fire time strictly after after, in UTC, or the zero
// time if there is none: a cron expression no date satisfies (e.g. "0 0 30 2 *"), or
// an after or a fire time outside the years 1 to 9999.
//
// Cron expressions are evaluated in loc, nil meaning UTC, following the
// daylight-saving rules of the package doc; intervals ignore loc. Fire times are
// whole seconds and never <= after, so feeding each result back in walks the fire
// times in order. Next is a pure function of its arguments: it reads no clock,
// allocates nothing and is safe for concurrent use.
func (s Spec) Next(after time.Time, loc *time.Location) time.Time {
	u := after.Unix() // rounded down to the second
	switch {
	case u < minUnix || u >= maxUnix:
		return time.Time{}
	case s.interval > 0:
		return s.nextInterval(u)
	case s.month == 0 || s.never:
		return time.Time{}
	}
	if loc == nil {
		loc = time.UTC
	}
	return s.nextCron(u+1, loc)
}

// nextInterval returns the first multiple of the interval after the epoch that is
// > u, in UTC, or the zero time past year 9999.
func (s *Spec) nextInterval(u int64) time.Time {
	d := int64(s.interval / time.Second)
	k := u / d
	if u%d != 0 && u < 0 {
		k-- // round towards minus infinity
	}
	next := (k + 1) * d
	if next > maxUnix {
		return time.Time{}
	}
	return time.Unix(next, 0).UTC()
}

// nextCron returns the first fire time >= u (Unix seconds).
//
// It walks the zone's offset periods ([time.Time.ZoneBounds]) from u on. Within one
// period, instants and wall-clock readings correspond one to one (civil = unix +
// offset), so the first fire time in the period is the first matching wall-clock
// reading in the period's range. At a period's start the wall clock jumped:
//   - forward (a gap): a pinned spec whose matching readings fell in the gap fires at
//     the period's first instant; a flowing spec skips them;
//   - backward (an overlap): a pinned spec skips the readings the previous period
//     already showed; a flowing spec fires on them again.
func (s *Spec) nextCron(u int64, loc *time.Location) time.Time {
	t := time.Unix(u, 0).In(loc)
	_, off0 := t.Zone()
	limitUnix := u + horizon
	limitCivil := u + int64(off0) + horizon

	// The last civil search: found is the first match >= from (ok), or there is none
	// before limitCivil (!ok). Successive periods mostly search further on.
	var from, found int64
	var ok, searched bool

	for {
		start, end := t.ZoneBounds()
		_, off := t.Zone()
		u := t.Unix()
		lo := u + int64(off) // first wall-clock reading to consider
		if !s.flowing && !start.IsZero() {
			_, prev := start.Add(-time.Second).Zone()
			switch su := start.Unix(); {
			case prev < off && su == u: // entering after a gap: include the skipped readings
				lo = su + int64(prev)
			case prev > off: // after an overlap: skip readings already shown
				lo = max(lo, su+int64(prev))
			}
		}
		hi := int64(math.MaxInt64) // first reading past the period
		if !end.IsZero() {
			hi = end.Unix() + int64(off)
		}

		if !searched || lo < from || (ok && found < lo) {
			from = lo
			found, ok = s.nextCivil(lo, limitCivil)
			searched = true
		}
		if ok && found < hi {
			fire := max(found-int64(off), u) // a reading in a gap fires at the period's start
			if fire > maxUnix {
				return time.Time{}
			}
			return time.Unix(fire, 0).UTC()
		}
		if end.IsZero() || end.Unix() > limitUnix {
			return time.Time{}
		}
		t = end
	}
}

// nextCivil returns the first wall-clock reading >= c that matches the spec, or false
// if there is none before limit. Readings are seconds since 1970-01-01 00:00:00 on a
// clock without time zone (unix + offset); the calendar is computed in UTC.
func (s *Spec) nextCivil(c, limit int64) (int64, bool) {
	for c < limit {
		t := time.Unix(c, 0).UTC()
		y, mo, d := t.Date()
		h, mi, sec := t.Clock()
		if n := nextBit(s.month, int(mo)); n != int(mo) {
			if n > 12 {
				c = civil(y+1, time.January, 1, 0, 0, 0)
			} else {
				c = civil(y, time.Month(n), 1, 0, 0, 0)
			}
			continue
		}
		if !s.dayMatches(d, t.Weekday()) {
			c = civil(y, mo, d+1, 0, 0, 0)
			continue
		}
		if n := nextBit(s.hour, h); n != h {
			if n > 23 {
				c = civil(y, mo, d+1, 0, 0, 0)
			} else {
				c = civil(y, mo, d, n, 0, 0)
			}
			continue
		}
		if n := nextBit(s.minute, mi); n != mi {
			if n > 59 {
				c = civil(y, mo, d, h+1, 0, 0)
			} else {
				c = civil(y, mo, d, h, n, 0)
			}
			continue
		}
		if n := nextBit(s.second, sec); n != sec {
			if n > 59 {
				c = civil(y, mo, d, h, mi+1, 0)
			} else {
				c = civil(y, mo, d, h, mi, n)
			}
			continue
		}
		return c, true
	}
	return 0, false
}

// civil returns the reading of a wall-clock date and time, normalised like time.Date.
func civil(y int, mo time.Month, d, h, mi, sec int) int64 {
	return time.Date(y, mo, d, h, mi, sec, 0, time.UTC).Unix()
}

// nextBit returns the lowest value >= v whose bit is set in field, or 64 if none.
func nextBit(field uint64, v int) int {
	return bits.TrailingZeros64(field &^ starBit & (math.MaxUint64 << v))
}

// dayMatches reports whether day-of-month d, weekday w match the spec, the way
// robfig/cron does (and Vixie cron): if either day field is "*", both must match,
// otherwise either may.
func (s *Spec) dayMatches(d int, w time.Weekday) bool {
	domMatch := s.dom&(1<<d) != 0
	dowMatch := s.dow&(1<<w) != 0
	if s.dom&starBit != 0 || s.dow&starBit != 0 {
		return domMatch && dowMatch
	}
	return domMatch || dowMatch
}

// satisfiable reports whether some wall-clock time matches the spec.
func (s *Spec) satisfiable() bool {
	for _, f := range []uint64{s.second, s.minute, s.hour, s.month, s.dom | s.dow} {
		if f&^starBit == 0 {
			return false // a field that matches nothing, e.g. ","
		}
	}
	weekdays := s.dow&^starBit != 0
	if s.dom&starBit != 0 { // every day of the month, and the weekday decides
		return weekdays
	}
	fits := false // some day-of-month exists in some month
	for m := 1; m <= 12; m++ {
		days := 31
		switch time.Month(m) {
		case time.February:
			days = 29
		case time.April, time.June, time.September, time.November:
			days = 30
		}
		if s.month&(1<<m) != 0 && s.dom&(1<<(days+1)-1) != 0 {
			fits = true
		}
	}
	if s.dow&starBit != 0 { // every weekday, and the day-of-month decides
		return fits
	}
	return fits || weekdays
}
