package console

import (
	"fmt"
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax/admin"
)

// funcs are the templates' functions.
var funcs = template.FuncMap{
	"ts":    timestamp,
	"tsp":   func(t *time.Time) string { return timestampPtr(t) },
	"iso":   func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	"ms":    millis,
	"msp":   func(d *int64) string { return millisPtr(d) },
	"lower": strings.ToLower,
	// pathEscape makes a name one segment of a URL's path: "/", "?", "#", "%" and
	// ".." in a schedule's name stay in the segment.
	"pathEscape": url.PathEscape,
	"join":       strings.Join,
	"statusOf":   func(s string) string { return strings.ToLower(s) },
	"has":        func(m map[string]bool, k string) bool { return m[k] },
	"add":        func(a, b int) int { return a + b },
	"add64": func(vs ...int64) int64 {
		var sum int64
		for _, v := range vs {
			sum += v
		}
		return sum
	},
	"hhmm": func(t time.Time) string { return t.UTC().Format("15:04Z") },
	"msf":  millisFrac,
	// offset writes a clock offset in microseconds, signed: "+1.20 ms", "−3.4 s".
	"offset": func(us int64) string {
		if us < 0 {
			return "−" + millisFrac(float64(-us)/1000)
		}
		return "+" + millisFrac(float64(us)/1000)
	},
	"count": func(m map[string]admin.CountView, status string) string {
		if c, ok := m[status]; ok {
			return c.Text
		}
		return "0"
	},
}

// timestamp writes t in UTC to the millisecond, or "—" for the zero time.
func timestamp(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

func timestampPtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return timestamp(*t)
}

// millis writes a duration in milliseconds for reading: "850 ms", "12.4 s", "3m05s".
func millis(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < 0:
		return "−" + millis(-ms)
	case d < time.Second:
		return fmt.Sprintf("%d ms", ms)
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

func millisPtr(ms *int64) string {
	if ms == nil {
		return "—"
	}
	return millis(*ms)
}

// millisFrac writes milliseconds with a fraction as millis does, finer below 10 ms.
func millisFrac(ms float64) string {
	if ms < 10 {
		return strconv.FormatFloat(ms, 'f', 2, 64) + " ms"
	}
	return millis(int64(ms))
}
