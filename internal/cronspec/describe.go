package cronspec

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Describe returns the spec in English words, for people: "at 02:30 every day",
// "every 5 minutes", "at 09:00 on Monday through Friday", "every 30s" (an interval,
// in Go's duration notation without zero units). Times are wall-clock times of the
// schedule's zone, written as HH:MM (HH:MM:SS when the seconds are not zero), and the
// zone is not named: the caller adds it. The zero Spec is "".
//
// The words follow the fields: a field matching a single value or a short list is
// named in full; a run of three or more consecutive values is "a through b"; values
// at a step from the field's start to its end are "every k …". Day-of-month and
// day-of-week both restricted read "or", as they match (see the package doc).
func (s Spec) Describe() string {
	switch {
	case s.interval > 0:
		return "every " + shortDuration(s.interval)
	case s.month == 0:
		return ""
	}
	days := s.describeDays()
	var clock string
	switch sec, min, hr := values(s.second, 0, 59), values(s.minute, 0, 59), values(s.hour, 0, 23); {
	case len(sec) == 1 && len(min)*len(hr) <= 4 && s.hour&starBit == 0:
		// A few clock times: "at 09:00 and 17:30".
		var times []string
		for _, h := range hr {
			for _, m := range min {
				times = append(times, clockTime(h, m, sec[0]))
			}
		}
		clock = "at " + joinList(times)
		if days == "" {
			days = "every day"
		}
	default:
		clock = s.describeTimes(sec, min, hr)
	}
	if days == "" {
		return clock
	}
	return clock + " " + days
}

// describeTimes is the time of day of a spec that is not a few clock times.
func (s Spec) describeTimes(sec, min, hr []int) string {
	var parts []string
	secStar, minStar, hrStar := s.second&starBit != 0, s.minute&starBit != 0, s.hour&starBit != 0
	switch k := step(sec, 0, 59); {
	case secStar:
		parts = append(parts, "every second")
	case k > 1:
		parts = append(parts, fmt.Sprintf("every %d seconds", k))
	case len(sec) == 1 && sec[0] == 0:
	default:
		parts = append(parts, "at "+plural("second", sec)+" "+describeValues(sec, strconv.Itoa))
	}
	hourly := len(parts) == 0 && len(min) == 1 // "every hour at minute 30"
	switch k := step(min, 0, 59); {
	case minStar && len(parts) == 0:
		parts = append(parts, "every minute")
	case minStar:
	case k > 1 && len(parts) == 0:
		parts = append(parts, fmt.Sprintf("every %d minutes", k))
	case k > 1:
		parts = append(parts, fmt.Sprintf("of every %d minutes", k)) // "every 10 seconds of every 5 minutes"
	case hourly && !hrStar && step(hr, 0, 23) > 1:
		// "every 2 hours", "every 2 hours at minute 30": said with the hours below.
	case hourly && min[0] == 0:
		parts = append(parts, "every hour")
	case hourly:
		parts = append(parts, "every hour at minute "+strconv.Itoa(min[0]))
	default:
		parts = append(parts, "at "+plural("minute", min)+" "+describeValues(min, strconv.Itoa))
	}
	switch k := step(hr, 0, 23); {
	case hrStar:
	case k > 1 && hourly && min[0] == 0:
		parts = append(parts, fmt.Sprintf("every %d hours", k))
	case k > 1 && hourly:
		parts = append(parts, fmt.Sprintf("every %d hours at minute %d", k, min[0]))
	case k > 1:
		parts = append(parts, fmt.Sprintf("of every %d hours", k))
	default:
		parts = append(parts, describeHours(hr))
	}
	return strings.Join(parts, ", ")
}

// describeHours names the hours a spec runs in: "from 09:00 to 17:59", "in hours
// 09, 12 and 18".
func describeHours(hr []int) string {
	if runs := ranges(hr); len(runs) == 1 && runs[0][1] > runs[0][0] {
		return fmt.Sprintf("from %02d:00 to %02d:59", runs[0][0], runs[0][1])
	}
	return "in " + plural("hour", hr) + " " + describeValues(hr, func(h int) string { return fmt.Sprintf("%02d", h) })
}

// describeDays is the days a spec runs on, "" for every day.
func (s Spec) describeDays() string {
	domStar, dowStar, monStar := s.dom&starBit != 0, s.dow&starBit != 0, s.month&starBit != 0
	dom, dow, mon := values(s.dom, 1, 31), values(s.dow, 0, 6), values(s.month, 1, 12)
	monthName := func(m int) string { return time.Month(m).String() }
	dayName := func(d int) string { return time.Weekday(d).String() }
	var parts []string
	switch {
	case !domStar && !monStar && len(dom) == 1 && len(mon) == 1:
		parts = append(parts, fmt.Sprintf("on %s %d", monthName(mon[0]), dom[0])) // "on January 1"
		monStar = true                                                            // said
	case !domStar:
		parts = append(parts, "on "+plural("day", dom)+" "+describeValues(dom, strconv.Itoa)+" of the month")
	}
	if !dowStar {
		w := "on " + describeValues(dow, dayName)
		if !domStar {
			w = "or " + w
		}
		parts = append(parts, w)
	}
	if !monStar {
		m := "in " + describeValues(mon, monthName)
		if k := step(mon, 1, 12); k > 1 && len(mon) > 2 {
			m = fmt.Sprintf("every %d months from January", k)
		}
		parts = append(parts, m)
	}
	return strings.Join(parts, " ")
}

// values returns the values in [lo, hi] that field matches, in order.
func values(field uint64, lo, hi int) []int {
	var out []int
	for v := lo; v <= hi; v++ {
		if field&(1<<v) != 0 {
			out = append(out, v)
		}
	}
	return out
}

// step returns k > 1 when vs are lo, lo+k, lo+2k, … up to the last one at or below
// hi and k divides the field's span, so that the values are k apart also across
// the field's wrap ("*/15" minutes; not "*/7", which fires at :56 and then :00).
// Otherwise it returns 0.
func step(vs []int, lo, hi int) int {
	if len(vs) < 2 || vs[0] != lo {
		return 0
	}
	k := vs[1] - vs[0]
	if k < 2 {
		return 0
	}
	for i, v := range vs {
		if v != lo+i*k {
			return 0
		}
	}
	if vs[len(vs)-1]+k <= hi || (hi-lo+1)%k != 0 {
		return 0
	}
	return k
}

// ranges groups sorted values into runs of consecutive ones, [first, last] each.
func ranges(vs []int) [][2]int {
	var out [][2]int
	for _, v := range vs {
		if n := len(out); n > 0 && out[n-1][1] == v-1 {
			out[n-1][1] = v
			continue
		}
		out = append(out, [2]int{v, v})
	}
	return out
}

// describeValues names sorted values: runs of three or more as "a through b", the
// rest one by one, joined as a list.
func describeValues(vs []int, name func(int) string) string {
	var items []string
	for _, r := range ranges(vs) {
		switch {
		case r[1]-r[0] >= 2:
			items = append(items, name(r[0])+" through "+name(r[1]))
		case r[1] > r[0]:
			items = append(items, name(r[0]), name(r[1]))
		default:
			items = append(items, name(r[0]))
		}
	}
	return joinList(items)
}

// plural is unit, with an s when vs hold more than one value.
func plural(unit string, vs []int) string {
	if len(vs) == 1 {
		return unit
	}
	return unit + "s"
}

// joinList joins items as English does: "a", "a and b", "a, b and c".
func joinList(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

func clockTime(h, m, s int) string {
	if s != 0 {
		return fmt.Sprintf("%02d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%02d:%02d", h, m)
}

// shortDuration is d.String() without zero units: "2m", "1h30m", "90s" stays "1m30s".
func shortDuration(d time.Duration) string {
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}
