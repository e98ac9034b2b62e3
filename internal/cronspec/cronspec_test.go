package cronspec

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the DST cases need these zones even where the system has none

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/robfig/cron/v3"

	"github.com/axsched/ax/store"
)

// utc parses an RFC 3339 time.
func utc(t testing.TB, s string) time.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func load(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func mustParse(t testing.TB, spec string) Spec {
	t.Helper()
	s, err := Parse(spec)
	if err != nil {
		t.Fatalf("Parse(%q): %v", spec, err)
	}
	return s
}

// fires returns the first n fire times after after, as RFC 3339 UTC strings.
func fires(s Spec, after time.Time, loc *time.Location, n int) []string {
	var out []string
	for range n {
		next := s.Next(after, loc)
		if next.IsZero() {
			return append(out, "zero")
		}
		out = append(out, next.Format(time.RFC3339))
		after = next
	}
	return out
}

func TestParseForms(t *testing.T) {
	t.Parallel()
	// A Wednesday.
	const after = "2026-07-15T10:20:30Z"
	tests := []struct {
		spec string
		want []string
	}{
		{"*/20 * * * *", []string{"2026-07-15T10:40:00Z", "2026-07-15T11:00:00Z", "2026-07-15T11:20:00Z"}},
		{"0 9 * * mon-fri", []string{"2026-07-16T09:00:00Z", "2026-07-17T09:00:00Z", "2026-07-20T09:00:00Z"}},
		{"0 0 1,15 * *", []string{"2026-08-01T00:00:00Z", "2026-08-15T00:00:00Z", "2026-09-01T00:00:00Z"}},
		{"0 0 1 jan,jul *", []string{"2027-01-01T00:00:00Z", "2027-07-01T00:00:00Z", "2028-01-01T00:00:00Z"}},
		// Day-of-month and day-of-week both restricted: either matches (Vixie cron).
		{"0 0 13 * fri", []string{"2026-07-17T00:00:00Z", "2026-07-24T00:00:00Z", "2026-07-31T00:00:00Z", "2026-08-07T00:00:00Z", "2026-08-13T00:00:00Z"}},
		// 6 fields: leading seconds.
		{"*/20 * * * * *", []string{"2026-07-15T10:20:40Z", "2026-07-15T10:21:00Z", "2026-07-15T10:21:20Z"}},
		{"15 20 10 * * *", []string{"2026-07-16T10:20:15Z", "2026-07-17T10:20:15Z"}},
		{"0 */20 * * * *", []string{"2026-07-15T10:40:00Z", "2026-07-15T11:00:00Z"}},
		// 5 fields: the seconds are 0.
		{"20 10 * * *", []string{"2026-07-16T10:20:00Z", "2026-07-17T10:20:00Z"}},
		{"@yearly", []string{"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"}},
		{"@annually", []string{"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"}},
		{"@monthly", []string{"2026-08-01T00:00:00Z", "2026-09-01T00:00:00Z"}},
		{"@weekly", []string{"2026-07-19T00:00:00Z", "2026-07-26T00:00:00Z"}},
		{"@daily", []string{"2026-07-16T00:00:00Z", "2026-07-17T00:00:00Z"}},
		{"@midnight", []string{"2026-07-16T00:00:00Z", "2026-07-17T00:00:00Z"}},
		{"@hourly", []string{"2026-07-15T11:00:00Z", "2026-07-15T12:00:00Z"}},
		{"@every 1h", []string{"2026-07-15T11:00:00Z", "2026-07-15T12:00:00Z"}},
		{"@every 45m", []string{"2026-07-15T10:30:00Z", "2026-07-15T11:15:00Z"}},
		{"  @every 90s\t", []string{"2026-07-15T10:21:00Z", "2026-07-15T10:22:30Z"}},
		{"0 0 29 2 *", []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		// Dates that never occur.
		{"0 0 30 2 *", []string{"zero"}},
		{"0 0 31 4,6,9,11 *", []string{"zero"}},
		{"0 0 , * *", []string{"zero"}},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, tt.spec)
			got := fires(s, utc(t, after), nil, len(tt.want))
			if diff := gocmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse(%q).Next… (-want +got):\n%s", tt.spec, diff)
			}
		})
	}
}

func TestStringAndInterval(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec     string
		string   string
		interval time.Duration
	}{
		{"*/15 * * * *", "*/15 * * * *", 0},
		{"  0 30 2 * * *\n", "0 30 2 * * *", 0},
		{"0  9 * *   mon-fri", "0  9 * *   mon-fri", 0},
		{"@daily", "@daily", 0},
		{" @hourly ", "@hourly", 0},
		{"@every 2m", "@every 2m0s", 2 * time.Minute},
		{"@every 120s", "@every 2m0s", 2 * time.Minute},
		{"@every   1h30m ", "@every 1h30m0s", 90 * time.Minute},
		{"@every 1s", "@every 1s", time.Second},
	}
	for _, tt := range tests {
		s := mustParse(t, tt.spec)
		if got := s.String(); got != tt.string {
			t.Errorf("Parse(%q).String() = %q, want %q", tt.spec, got, tt.string)
		}
		if got := s.Interval(); got != tt.interval {
			t.Errorf("Parse(%q).Interval() = %v, want %v", tt.spec, got, tt.interval)
		}
		// Round trip: the canonical text parses to the same schedule.
		again := mustParse(t, s.String())
		if again.String() != s.String() {
			t.Errorf("Parse(%q).String() = %q, want %q", s.String(), again.String(), s.String())
		}
		after := utc(t, "2026-11-01T04:00:00Z")
		ny := load(t, "America/New_York")
		if diff := gocmp.Diff(fires(s, after, ny, 5), fires(again, after, ny, 5)); diff != "" {
			t.Errorf("Parse(%q) and Parse(its String) fire differently (-orig +again):\n%s", tt.spec, diff)
		}
	}

	e, err := Every(2 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := e.String(), "@every 2m0s"; got != want {
		t.Errorf("Every(2m).String() = %q, want %q", got, want)
	}
	if got, want := e.Interval(), 2*time.Minute; got != want {
		t.Errorf("Every(2m).Interval() = %v, want %v", got, want)
	}
	var zero Spec
	if got := zero.Next(time.Now(), nil); !got.IsZero() {
		t.Errorf("Spec{}.Next = %v, want zero", got)
	}
	if zero.String() != "" || zero.Interval() != 0 {
		t.Errorf("Spec{} = %q, %v, want \"\", 0", zero.String(), zero.Interval())
	}
}

func TestIntervalAnchoredAtEpoch(t *testing.T) {
	t.Parallel()
	every := func(d time.Duration) Spec {
		s, err := Every(d)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ny := load(t, "America/New_York")
	tests := []struct {
		name  string
		spec  Spec
		after string
		loc   *time.Location
		want  string
	}{
		{"2m mid-slot", every(2 * time.Minute), "2026-07-15T10:01:30Z", nil, "2026-07-15T10:02:00Z"},
		{"2m on a slot", every(2 * time.Minute), "2026-07-15T10:02:00Z", nil, "2026-07-15T10:04:00Z"},
		{"2m just before a slot", every(2 * time.Minute), "2026-07-15T10:01:59.999999999Z", nil, "2026-07-15T10:02:00Z"},
		{"2m just after a slot", every(2 * time.Minute), "2026-07-15T10:02:00.000000001Z", nil, "2026-07-15T10:04:00Z"},
		{"2m, zone ignored", every(2 * time.Minute), "2026-07-15T10:01:30Z", ny, "2026-07-15T10:02:00Z"},
		{"2m across fall back", every(2 * time.Minute), "2026-11-01T05:59:00Z", ny, "2026-11-01T06:00:00Z"},
		{"7s from the epoch", every(7 * time.Second), "1970-01-01T00:00:00Z", nil, "1970-01-01T00:00:07Z"},
		{"7s before the epoch", every(7 * time.Second), "1969-12-31T23:59:55Z", nil, "1970-01-01T00:00:00Z"},
		{"7s far before the epoch", every(7 * time.Second), "1969-12-31T23:59:52Z", nil, "1969-12-31T23:59:53Z"},
		// 1784110830 = 7 * 254872975 + 5.
		{"7s", every(7 * time.Second), "2026-07-15T10:20:30Z", nil, "2026-07-15T10:20:32Z"},
		{"7s on a slot", every(7 * time.Second), "2026-07-15T10:20:32Z", nil, "2026-07-15T10:20:39Z"},
		{"@every 7s", mustParse(t, "@every 7s"), "2026-07-15T10:20:30Z", ny, "2026-07-15T10:20:32Z"},
		// 1784110830 / 3600 = 495586.34: hours since the epoch, whatever the zone.
		{"1h", every(time.Hour), "2026-07-15T10:20:30Z", ny, "2026-07-15T11:00:00Z"},
		// 1784110830 / 86400 = 20649.43: days since the epoch, in UTC.
		{"24h", every(24 * time.Hour), "2026-07-15T10:20:30Z", ny, "2026-07-16T00:00:00Z"},
		{"zero after", every(time.Hour), "0001-01-01T00:00:00Z", nil, "0001-01-01T01:00:00Z"},
		{"past year 9999", every(time.Hour), "9999-12-31T23:30:00Z", nil, "zero"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := fires(tt.spec, utc(t, tt.after), tt.loc, 1)[0]
			if got != tt.want {
				t.Errorf("%v.Next(%s) = %s, want %s", tt.spec, tt.after, got, tt.want)
			}
		})
	}

	// Every slot is a whole multiple of the interval since the epoch, from any start.
	for _, d := range []time.Duration{time.Second, 7 * time.Second, 90 * time.Second, 7 * time.Hour, 97 * time.Hour} {
		s := every(d)
		for _, after := range []time.Time{utc(t, "2026-03-08T06:59:59.5Z"), utc(t, "1955-05-05T05:05:05Z"), time.Now()} {
			next := s.Next(after, ny)
			if next.Unix()%int64(d/time.Second) != 0 || !next.After(after) || next.Sub(after) > d {
				t.Errorf("Every(%v).Next(%v) = %v: not the next multiple of %v since the epoch", d, after, next, d)
			}
		}
	}
}

func TestNextStrictlyAfter(t *testing.T) {
	t.Parallel()
	berlin := load(t, "Europe/Berlin")
	for _, spec := range []string{"* * * * * *", "* * * * *", "0 30 2 * * *", "@hourly", "@every 1s", "@every 1m"} {
		s := mustParse(t, spec)
		at := utc(t, "2026-10-25T00:59:58Z")
		for range 200 {
			next := s.Next(at, berlin)
			if !next.After(at) {
				t.Fatalf("Parse(%q).Next(%v) = %v, want after it", spec, at, next)
			}
			if next.Location() != time.UTC {
				t.Fatalf("Parse(%q).Next(%v) is in %v, want UTC", spec, at, next.Location())
			}
			// Any after in [previous fire, next) gives next; next itself gives a later one.
			if got := s.Next(next.Add(-time.Nanosecond), berlin); !got.Equal(next) {
				t.Fatalf("Parse(%q).Next(%v) = %v, want %v", spec, next.Add(-time.Nanosecond), got, next)
			}
			at = next
		}
	}
}

func TestDST(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		zone  string
		spec  string
		after string
		want  []string
	}{
		// Spring forward, New York, 2026-03-08 07:00Z: 02:00 EST -> 03:00 EDT.
		{"ny spring pinned in gap", "America/New_York", "30 2 * * *", "2026-03-06T12:00:00Z",
			[]string{"2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"}},
		{"ny spring pinned in gap, seconds", "America/New_York", "15 30 2 * * *", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:15Z"}},
		{"ny spring pinned two in gap", "America/New_York", "0,30 2 * * *", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z", "2026-03-09T06:30:00Z"}},
		{"ny spring pinned gap and jump time", "America/New_York", "0 2,3 * * *", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z", "2026-03-09T07:00:00Z"}},
		{"ny spring pinned every minute of 2am", "America/New_York", "* 2 * * *", "2026-03-08T06:58:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z", "2026-03-09T06:01:00Z"}},
		{"ny spring outside gap 23h", "America/New_York", "0 12 * * *", "2026-03-06T12:00:00Z",
			[]string{"2026-03-06T17:00:00Z", "2026-03-07T17:00:00Z", "2026-03-08T16:00:00Z", "2026-03-09T16:00:00Z"}},
		{"ny spring midnight", "America/New_York", "@daily", "2026-03-07T00:00:00Z",
			[]string{"2026-03-07T05:00:00Z", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"}},
		{"ny spring hourly flows", "America/New_York", "@hourly", "2026-03-08T05:30:00Z",
			[]string{"2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"}},
		{"ny spring half past flows", "America/New_York", "30 * * * *", "2026-03-08T05:45:00Z",
			[]string{"2026-03-08T06:30:00Z", "2026-03-08T07:30:00Z", "2026-03-08T08:30:00Z"}},
		{"ny spring quarter hours flow", "America/New_York", "*/15 * * * *", "2026-03-08T06:40:00Z",
			[]string{"2026-03-08T06:45:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:15:00Z"}},
		// Spring forward, Berlin, 2026-03-29 01:00Z: 02:00 CET -> 03:00 CEST.
		{"berlin spring pinned in gap", "Europe/Berlin", "30 2 * * *", "2026-03-27T12:00:00Z",
			[]string{"2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z"}},
		{"berlin spring outside gap 23h", "Europe/Berlin", "0 12 * * *", "2026-03-27T12:00:00Z",
			[]string{"2026-03-28T11:00:00Z", "2026-03-29T10:00:00Z", "2026-03-30T10:00:00Z"}},
		{"berlin spring hourly flows", "Europe/Berlin", "@hourly", "2026-03-28T23:30:00Z",
			[]string{"2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"}},
		// Fall back, New York, 2026-11-01 06:00Z: 02:00 EDT -> 01:00 EST.
		{"ny fall pinned in repeated hour", "America/New_York", "30 1 * * *", "2026-10-30T12:00:00Z",
			[]string{"2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z", "2026-11-03T06:30:00Z"}},
		{"ny fall pinned after first pass", "America/New_York", "30 1 * * *", "2026-11-01T05:30:00Z",
			[]string{"2026-11-02T06:30:00Z"}},
		{"ny fall pinned in second pass", "America/New_York", "30 1 * * *", "2026-11-01T06:15:00Z",
			[]string{"2026-11-02T06:30:00Z"}},
		{"ny fall pinned steps in repeated hour", "America/New_York", "*/30 1 * * *", "2026-11-01T04:59:00Z",
			[]string{"2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:00:00Z"}},
		{"ny fall 2:30 exists once", "America/New_York", "30 2 * * *", "2026-10-30T12:00:00Z",
			[]string{"2026-10-31T06:30:00Z", "2026-11-01T07:30:00Z", "2026-11-02T07:30:00Z"}},
		{"ny fall outside repeated hour 25h", "America/New_York", "0 12 * * *", "2026-10-30T12:00:00Z",
			[]string{"2026-10-30T16:00:00Z", "2026-10-31T16:00:00Z", "2026-11-01T17:00:00Z", "2026-11-02T17:00:00Z"}},
		{"ny fall hourly flows", "America/New_York", "@hourly", "2026-11-01T03:30:00Z",
			[]string{"2026-11-01T04:00:00Z", "2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"}},
		{"ny fall quarter hours flow", "America/New_York", "*/15 * * * *", "2026-11-01T05:40:00Z",
			[]string{"2026-11-01T05:45:00Z", "2026-11-01T06:00:00Z", "2026-11-01T06:15:00Z", "2026-11-01T06:30:00Z", "2026-11-01T06:45:00Z", "2026-11-01T07:00:00Z"}},
		{"ny fall hourly from second pass", "America/New_York", "30 * * * *", "2026-11-01T05:45:00Z",
			[]string{"2026-11-01T06:30:00Z", "2026-11-01T07:30:00Z"}},
		// Fall back, Berlin, 2026-10-25 01:00Z: 03:00 CEST -> 02:00 CET.
		{"berlin fall pinned in repeated hour", "Europe/Berlin", "30 2 * * *", "2026-10-23T12:00:00Z",
			[]string{"2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z", "2026-10-27T01:30:00Z"}},
		{"berlin fall outside repeated hour 25h", "Europe/Berlin", "0 12 * * *", "2026-10-23T12:00:00Z",
			[]string{"2026-10-24T10:00:00Z", "2026-10-25T11:00:00Z", "2026-10-26T11:00:00Z"}},
		{"berlin fall hourly flows", "Europe/Berlin", "@hourly", "2026-10-24T23:30:00Z",
			[]string{"2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z"}},
		{"berlin fall step of hours is pinned", "Europe/Berlin", "0 */2 * * *", "2026-10-24T21:30:00Z",
			[]string{"2026-10-24T22:00:00Z", "2026-10-25T00:00:00Z", "2026-10-25T03:00:00Z"}},
		// Australia/Lord_Howe moves by 30 minutes: 2026-10-04 02:00 -> 02:30 (15:30Z),
		// 2026-04-05 02:00 -> 01:30 (15:00Z).
		{"lord howe spring pinned in gap", "Australia/Lord_Howe", "15 2 * * *", "2026-10-02T12:00:00Z",
			[]string{"2026-10-02T15:45:00Z", "2026-10-03T15:30:00Z", "2026-10-04T15:15:00Z"}},
		{"lord howe fall pinned", "Australia/Lord_Howe", "45 1 * * *", "2026-04-03T12:00:00Z",
			[]string{"2026-04-03T14:45:00Z", "2026-04-04T14:45:00Z", "2026-04-05T15:15:00Z"}},
		{"lord howe fall quarter hours flow", "Australia/Lord_Howe", "*/15 * * * *", "2026-04-04T14:40:00Z",
			[]string{"2026-04-04T14:45:00Z", "2026-04-04T15:00:00Z", "2026-04-04T15:15:00Z", "2026-04-04T15:30:00Z"}},
		// America/Sao_Paulo changed at midnight: 2018-11-04 00:00 -> 01:00 (03:00Z).
		{"sao paulo midnight gap", "America/Sao_Paulo", "@daily", "2018-11-02T12:00:00Z",
			[]string{"2018-11-03T03:00:00Z", "2018-11-04T03:00:00Z", "2018-11-05T02:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, tt.spec)
			got := fires(s, utc(t, tt.after), load(t, tt.zone), len(tt.want))
			if diff := gocmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse(%q).Next… in %s after %s (-want +got):\n%s", tt.spec, tt.zone, tt.after, diff)
			}
		})
	}
}

// TestNextMatchesReference checks Next against a direct reading of the rules in the
// package doc, minute by minute around clock changes: every instant whose wall clock
// matches fires (flowing), or only the first instant showing each matching reading,
// plus the first instant after a gap that hid one (pinned). Matching is robfig's.
func TestNextMatchesReference(t *testing.T) {
	t.Parallel()
	specs := []string{
		"30 2 * * *", "30 1 * * *", "0 12 * * *", "@hourly", "30 * * * *", "*/15 * * * *",
		"0,30 2 * * *", "0 2,3 * * *", "* 2 * * *", "*/30 1 * * *", "0 */2 * * *", "@daily",
		"5 0 * * 0", "0 1-3 * * *", "* * * * *", "59 23 * * *", "0 0 1 * *",
	}
	changes := []struct{ zone, around string }{
		{"America/New_York", "2026-03-08T07:00:00Z"},
		{"America/New_York", "2026-11-01T06:00:00Z"},
		{"Europe/Berlin", "2026-03-29T01:00:00Z"},
		{"Europe/Berlin", "2026-10-25T01:00:00Z"},
		{"Australia/Lord_Howe", "2026-04-04T15:00:00Z"},
		{"Australia/Lord_Howe", "2026-10-03T15:30:00Z"},
		{"America/Sao_Paulo", "2018-11-04T03:00:00Z"},
		{"America/Sao_Paulo", "2019-02-17T02:00:00Z"},
		{"Asia/Kolkata", "2026-03-08T07:00:00Z"},
	}
	for _, c := range changes {
		t.Run(c.zone+"/"+c.around, func(t *testing.T) {
			t.Parallel()
			loc := load(t, c.zone)
			around := utc(t, c.around)
			from, to := around.Add(-30*time.Hour), around.Add(30*time.Hour)
			for _, spec := range specs {
				s := mustParse(t, spec)
				want := referenceFires(t, s, loc, from, to)
				// Check from 12h in, once a repeated reading's first showing is in view.
				// Each minute, once: on it, just before it, or half-way to the next.
				nudges := []time.Duration{0, -time.Nanosecond, 30 * time.Second}
				for k, x := 0, from.Add(12*time.Hour); x.Before(to); k, x = k+1, x.Add(time.Minute) {
					after := x.Add(nudges[k%len(nudges)])
					i, _ := slices.BinarySearchFunc(want, after, func(f, after time.Time) int {
						if f.After(after) {
							return 1
						}
						return -1
					})
					if i == len(want) {
						break // past the window's last fire time
					}
					if got := s.Next(after, loc); !got.Equal(want[i]) {
						t.Fatalf("Parse(%q).Next(%v) in %s = %v, want %v", spec, after.In(loc), c.zone, got.In(loc), want[i].In(loc))
					}
				}
			}
		})
	}
}

// referenceFires lists the fire times in [from, to) of a spec whose seconds field is
// 0, in a zone that changes offset on whole minutes, by stepping through the minutes.
func referenceFires(t *testing.T, s Spec, loc *time.Location, from, to time.Time) []time.Time {
	t.Helper()
	sched, err := cron.ParseStandard(s.String())
	if err != nil {
		t.Fatal(err)
	}
	ss := sched.(*cron.SpecSchedule)
	ss.Location = time.UTC
	wallClock := func(i time.Time) time.Time {
		l := i.In(loc)
		return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), 0, 0, time.UTC)
	}
	// The matching wall-clock readings, from a day before to a day after the window.
	matching := map[time.Time]bool{}
	for wall := ss.Next(wallClock(from).Add(-24 * time.Hour)); wall.Before(wallClock(to).Add(24 * time.Hour)); wall = ss.Next(wall) {
		matching[wall] = true
	}
	matches := func(wall time.Time) bool { return matching[wall] }

	var out []time.Time
	seen := map[time.Time]bool{}
	prev := wallClock(from.Add(-time.Minute))
	for i := from; i.Before(to); i = i.Add(time.Minute) {
		wall := wallClock(i)
		fire := matches(wall) && (s.flowing || !seen[wall])
		if !s.flowing {
			for skipped := prev.Add(time.Minute); skipped.Before(wall); skipped = skipped.Add(time.Minute) {
				fire = fire || matches(skipped)
			}
		}
		if fire {
			out = append(out, i)
		}
		seen[wall] = true
		prev = wall
	}
	return out
}

func TestNeverAndFarFuture(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec, after, want string
	}{
		{"0 0 30 2 *", "2026-01-01T00:00:00Z", "zero"},
		{"0 0 31 2,4 *", "2026-01-01T00:00:00Z", "zero"},
		{"0 0 29 2 *", "2096-03-01T00:00:00Z", "2104-02-29T00:00:00Z"},   // 2100 is not a leap year
		{"0 0 29 2 mon", "2026-01-01T00:00:00Z", "2026-02-02T00:00:00Z"}, // February: the 29th or a Monday
		{"0 0 31 * *", "2026-04-01T00:00:00Z", "2026-05-31T00:00:00Z"},
		{"@yearly", "9998-06-01T00:00:00Z", "9999-01-01T00:00:00Z"},
		{"@yearly", "9999-06-01T00:00:00Z", "zero"},
		{"@hourly", "0001-01-01T00:00:00Z", "0001-01-01T01:00:00Z"},
		{"@hourly", "0000-12-31T00:00:00Z", "zero"},
	}
	for _, tt := range tests {
		if got := fires(mustParse(t, tt.spec), utc(t, tt.after), nil, 1)[0]; got != tt.want {
			t.Errorf("Parse(%q).Next(%s) = %s, want %s", tt.spec, tt.after, got, tt.want)
		}
	}
}

func TestParseInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec string
		want string // a part of the message
	}{
		{"", `ax: cron spec "": empty spec: invalid input`},
		{" \t\n", "empty spec"},
		{"CRON_TZ=Europe/Berlin 0 3 * * *", "time zone prefix CRON_TZ= is not supported: the time zone is given separately"},
		{"TZ=UTC * * * * *", "time zone prefix TZ= is not supported: the time zone is given separately"},
		{"TZ=UTC", "time zone prefix TZ= is not supported"},
		{"61 * * * *", `ax: cron spec "61 * * * *": minute field: end of range (61) above maximum (59): invalid input`},
		{"60 * * * * *", "second field: end of range (60) above maximum (59)"},
		{"0 60 * * * *", "minute field: end of range (60) above maximum (59)"},
		{"* 24 * * *", "hour field: end of range (24) above maximum (23)"},
		{"* * 0 * *", "day-of-month field: beginning of range (0) below minimum (1)"},
		{"* * 32 * *", "day-of-month field: end of range (32) above maximum (31)"},
		{"* * * 13 *", "month field: end of range (13) above maximum (12)"},
		{"* * * foo *", "month field: failed to parse int from foo"},
		{"* * * * 7", "day-of-week field: end of range (7) above maximum (6)"},
		{"* @x * * *", "hour field: failed to parse int from @x"},
		{"a * * * *", "minute field: failed to parse int from a"},
		{"5-1 * * * *", "minute field: beginning of range (5) beyond end of range (1)"},
		{"*/0 * * * *", "minute field: step of range should be a positive number"},
		{"1-2-3 * * * *", "minute field: too many hyphens"},
		{"* * * *", "expected 5 to 6 fields, found 4"},
		{"* * * * * * *", "expected 5 to 6 fields, found 7"},
		{"@reboot", "unrecognized descriptor: @reboot"},
		{"@daily 5", "unrecognized descriptor: @daily 5"},
		{"@every", `@every takes one duration, e.g. "@every 5m"`},
		{"@every 5m 10s", "@every takes one duration"},
		{"@every abc", `@every: time: invalid duration "abc"`},
		{"@every 5", `@every: time: missing unit in duration "5"`},
		{"@every -5m", "interval -5m0s is negative"},
		{"@every 0s", "interval 0s is below the minimum of 1s"},
		{"@every 500ms", "interval 500ms is below the minimum of 1s"},
		{"@every 1.5s", "interval 1.5s is not a whole number of seconds"},
	}
	for _, tt := range tests {
		s, err := Parse(tt.spec)
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Parse(%q) = %v, %v, want an error wrapping store.ErrInvalid", tt.spec, s, err)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) error = %q, want it to contain %q", tt.spec, err, tt.want)
		}
	}

	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Minute, "ax: interval -1m0s is negative: invalid input"},
		{0, "ax: interval 0s is below the minimum of 1s: invalid input"},
		{999 * time.Millisecond, "interval 999ms is below the minimum of 1s"},
		{2500 * time.Millisecond, "interval 2.5s is not a whole number of seconds"},
	} {
		s, err := Every(tt.d)
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Every(%v) = %v, %v, want an error wrapping store.ErrInvalid containing %q", tt.d, s, err, tt.want)
		}
	}
}

func TestNextAllocs(t *testing.T) {
	ny := load(t, "America/New_York")
	after := utc(t, "2026-11-01T05:45:00Z")
	for _, spec := range []string{"30 1 * * *", "@hourly", "0 0 29 2 *", "@every 1m"} {
		s := mustParse(t, spec)
		if n := testing.AllocsPerRun(100, func() { s.Next(after, ny) }); n != 0 {
			t.Errorf("Parse(%q).Next allocates %v times, want 0", spec, n)
		}
	}
}

func BenchmarkNext(b *testing.B) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		b.Fatal(err)
	}
	after := time.Date(2026, 10, 31, 12, 0, 0, 0, time.UTC)
	for _, spec := range []string{"*/15 * * * *", "30 1 * * *", "0 9 * * mon-fri", "0 0 29 2 *", "@every 1m"} {
		s, err := Parse(spec)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("spec="+spec, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.Next(after, ny)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"* * * * *", "*/15 * * * *", "0 30 2 * * *", "30 1 * * *", "0 0 29 2 *", "0 0 30 2 *",
		"@hourly", "@daily", "@yearly", "@every 90s", "@every -1s", "@every 1.5s",
		"TZ=UTC", "CRON_TZ=x * * * * *", "61 * * * *", "1-2-3 * * * *", "*/0 * * * *",
		"@", "", "0 0 13 * fri", "? ? ? ? ?", "0 0 , * *",
	} {
		f.Add(seed, int64(1793512800), uint32(3600), uint8(1)) // 2026-11-01T05:00:00Z, New York
	}
	zones := []*time.Location{time.UTC, load(f, "America/New_York"), load(f, "Europe/Berlin"),
		load(f, "Australia/Lord_Howe"), load(f, "America/Sao_Paulo"), nil}
	f.Fuzz(func(t *testing.T, spec string, afterUnix int64, later uint32, zone uint8) {
		s, err := Parse(spec)
		if err != nil {
			if !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("Parse(%q) error %v does not wrap store.ErrInvalid", spec, err)
			}
			return
		}
		loc := zones[int(zone)%len(zones)]
		// Keep after within years 1 to 9999, where Next computes.
		after := time.Unix(minUnix+afterUnix%(maxUnix-minUnix), 0)
		if afterUnix < 0 {
			after = time.Unix(maxUnix+afterUnix%(maxUnix-minUnix), 0)
		}
		next := s.Next(after, loc)
		if !next.IsZero() && !next.After(after) {
			t.Fatalf("Parse(%q).Next(%v, %v) = %v, want after it", spec, after, loc, next)
		}
		if !next.IsZero() && s.Next(next, loc).Equal(next) {
			t.Fatalf("Parse(%q).Next(%v, %v) = %v again", spec, next, loc, next)
		}
		// The fire times are one fixed set: from a later after, Next is no earlier, and
		// the same as long as no fire time lies between.
		after2 := after.Add(time.Duration(later) * time.Second)
		next2 := s.Next(after2, loc)
		if !next.IsZero() && !next2.IsZero() && next2.Before(next) {
			t.Fatalf("Parse(%q): Next(%v) = %v but Next(%v) = %v", spec, after, next, after2, next2)
		}
		if next.After(after2) && !next2.Equal(next) {
			t.Fatalf("Parse(%q): Next(%v) = %v but Next(%v) = %v", spec, after, next, after2, next2)
		}
		again, err := Parse(s.String())
		if err != nil {
			t.Fatalf("Parse(%q) of Parse(%q).String(): %v", s.String(), spec, err)
		}
		if got := again.Next(after, loc); !got.Equal(next) {
			t.Fatalf("Parse(%q).Next = %v, but Parse of its String %q gives %v", spec, next, s.String(), got)
		}
	})
}
