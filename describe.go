package ax

import (
	"time"
)

// DescribeSpec returns a Cron or Every spec in English words, for people: "at 02:30
// every day, Europe/Berlin", "every 5 minutes, UTC", "at 09:00 on Monday through
// Friday, America/New_York", "every 30s" ("@every 30s": an interval has no time
// zone). Times are wall-clock times of loc (nil means UTC), which ends the text. A
// spec Cron would refuse is ErrInvalid, as is a time zone Cron refuses.
func DescribeSpec(spec string, loc *time.Location) (string, error) {
	if loc == nil {
		loc = time.UTC
	}
	sp, err := parseCron(spec)
	if err == nil {
		err = validZone(loc)
	}
	if err != nil {
		return "", errorf("ax: describe spec %q: %w", spec, err)
	}
	if sp.Interval() > 0 {
		return sp.Describe(), nil
	}
	return sp.Describe() + ", " + loc.String(), nil
}

// Describe returns the schedule's spec in words, as DescribeSpec does with its time
// zone; the spec itself when it cannot (a time zone this host does not know).
func (sc Schedule) Describe() string {
	loc, err := time.LoadLocation(sc.TimeZone)
	if err != nil {
		return sc.Spec
	}
	text, err := DescribeSpec(sc.Spec, loc)
	if err != nil {
		return sc.Spec
	}
	return text
}

// FireTime is one fire time of a schedule as FireTimes reports it, with what the
// schedule's time zone says of it.
type FireTime struct {
	At    time.Time // the fire time, UTC
	Local time.Time // At on the wall clock of the schedule's zone
	// Offset is the zone's offset from UTC at At, and Zone its abbreviation then
	// (e.g. CEST).
	Offset time.Duration
	Zone   string
	// OffsetChanged reports that the zone's offset at At differs from its offset at
	// the previous fire time (for the first one, at from): a daylight-saving change,
	// or another change of the zone's rules, lies between them. A fire time pinned
	// to the wall clock may have moved with it (see the README's "Time zones and
	// DST"): mark it for people.
	OffsetChanged bool
}

// FireTimes is NextFireTimes with each fire time placed in loc: its wall-clock time,
// the zone's offset, and whether the offset changed since the previous one, so that a
// page can mark the daylight-saving changes among a schedule's next fire times. Its
// arguments and errors are NextFireTimes'.
func FireTimes(spec string, loc *time.Location, from time.Time, n int) ([]FireTime, error) {
	times, err := NextFireTimes(spec, loc, from, n)
	if err != nil {
		return nil, err
	}
	if loc == nil {
		loc = time.UTC
	}
	_, prev := from.In(loc).Zone()
	out := make([]FireTime, len(times))
	for i, t := range times {
		local := t.In(loc)
		zone, offset := local.Zone()
		out[i] = FireTime{At: t, Local: local, Offset: time.Duration(offset) * time.Second, Zone: zone, OffsetChanged: offset != prev}
		prev = offset
	}
	return out, nil
}
