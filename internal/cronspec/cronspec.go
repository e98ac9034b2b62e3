package cronspec

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/axsched/ax/store"
)

// MinInterval is the shortest interval [Every] and "@every" accept.
const MinInterval = time.Second

// Spec is a parsed schedule: a cron expression or a fixed interval. Build one with
// [Parse] or [Every]. A Spec is an immutable value, safe to copy and to use from
// several goroutines at once.
//
// The zero Spec is not a schedule: its Next returns the zero time and its String is "".
type Spec struct {
	text     string        // canonical text, see String
	interval time.Duration // > 0 for an interval spec

	// The cron fields as robfig/cron bit sets: bit v is set when value v matches
	// (starBit marks a "*" or "?" field). All zero for an interval spec.
	second, minute, hour, dom, month, dow uint64
	// flowing: the hour field matches every hour, so the spec follows absolute time
	// across DST changes (see the package doc). Otherwise it is wall-clock pinned.
	flowing bool
	// never: no calendar date satisfies the day-of-month, month and day-of-week
	// fields (e.g. "0 0 30 2 *"), so Next always returns the zero time.
	never bool
}

// starBit is robfig/cron's marker for a "*" or "?" field (cron/v3 spec.go).
const starBit = 1 << 63

// allHours has bits 0 to 23 set.
const allHours = 1<<24 - 1

// parser is robfig/cron's parser in the layout ax accepts: an optional leading
// seconds field, the five standard fields, and descriptors.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom |
	cron.Month | cron.Dow | cron.Descriptor)

// fieldChecks re-parse one field of a spec that failed, to name the faulty field in
// the error. Each field is parsed after a valid dummy "1" so that it never starts
// the spec (where robfig would take "@…" or "TZ=…" for something else); the seconds
// field is checked in the minute slot, which has the same bounds.
var fieldChecks = []struct {
	name   string
	parser cron.Parser
}{
	{"second", cron.NewParser(cron.Second | cron.Minute)},
	{"minute", cron.NewParser(cron.Second | cron.Minute)},
	{"hour", cron.NewParser(cron.Minute | cron.Hour)},
	{"day-of-month", cron.NewParser(cron.Hour | cron.Dom)},
	{"month", cron.NewParser(cron.Dom | cron.Month)},
	{"day-of-week", cron.NewParser(cron.Month | cron.Dow)},
}

// Parse parses a schedule spec:
//
//   - a standard 5-field cron expression, "minute hour day-of-month month day-of-week",
//     e.g. "*/15 9-17 * * mon-fri";
//   - a 6-field expression with a leading seconds field, e.g. "30 0 * * * *";
//   - a descriptor: @yearly (= @annually), @monthly, @weekly, @daily (= @midnight),
//     @hourly;
//   - "@every <duration>", a fixed interval in time.ParseDuration syntax, at least
//     [MinInterval] and a whole number of seconds, e.g. "@every 1h30m".
//
// Field syntax is robfig/cron/v3's: numbers, names (jan-dec, sun-sat), ranges, lists,
// steps, "*" and "?". Surrounding white space is ignored. A "CRON_TZ=" or "TZ=" prefix
// is rejected: the time zone is passed to [Spec.Next].
//
// Every error wraps [store.ErrInvalid] and names the problem.
func Parse(spec string) (Spec, error) {
	text := strings.TrimSpace(spec)
	if text == "" {
		return Spec{}, invalidSpec(spec, "empty spec")
	}
	for _, prefix := range []string{"CRON_TZ=", "TZ="} {
		if strings.HasPrefix(text, prefix) {
			return Spec{}, invalidSpec(spec, "time zone prefix %s is not supported: the time zone is given separately", prefix)
		}
	}
	if fields := strings.Fields(text); fields[0] == "@every" {
		if len(fields) != 2 {
			return Spec{}, invalidSpec(spec, `@every takes one duration, e.g. "@every 5m"`)
		}
		d, err := time.ParseDuration(fields[1])
		if err != nil {
			return Spec{}, invalidSpec(spec, "@every: %v", err)
		}
		if problem := checkInterval(d); problem != "" {
			return Spec{}, invalidSpec(spec, "interval %v %s", d, problem)
		}
		return every(d), nil
	}

	sched, err := parser.Parse(text)
	if err != nil {
		return Spec{}, invalidSpec(spec, "%s", describeParseError(text, err))
	}
	ss, ok := sched.(*cron.SpecSchedule)
	if !ok { // cannot happen: "@every" is handled above
		return Spec{}, invalidSpec(spec, "unsupported schedule %T", sched)
	}
	s := Spec{
		text:   text,
		second: ss.Second, minute: ss.Minute, hour: ss.Hour,
		dom: ss.Dom, month: ss.Month, dow: ss.Dow,
	}
	s.flowing = s.hour&allHours == allHours
	s.never = !s.satisfiable()
	return s, nil
}

// Every returns a spec that fires every d, anchored at the Unix epoch (see the
// package doc). d must be at least [MinInterval] and a whole number of seconds.
// Its String is "@every " + d.String(), e.g. "@every 2m0s".
func Every(d time.Duration) (Spec, error) {
	if problem := checkInterval(d); problem != "" {
		return Spec{}, fmt.Errorf("ax: interval %v %s: %w", d, problem, store.ErrInvalid)
	}
	return every(d), nil
}

func every(d time.Duration) Spec {
	return Spec{text: "@every " + d.String(), interval: d}
}

// checkInterval returns what is wrong with d as an interval, or "".
func checkInterval(d time.Duration) string {
	switch {
	case d < 0:
		return "is negative"
	case d < MinInterval:
		return fmt.Sprintf("is below the minimum of %v", MinInterval)
	case d%time.Second != 0:
		return "is not a whole number of seconds"
	}
	return ""
}

// String returns the spec's canonical text, the form to persist: Parse(s.String())
// gives back the same schedule. For a cron expression or descriptor it is the input
// without surrounding white space; for an interval it is "@every " + the duration's
// String, e.g. "@every 1h30m0s".
func (s Spec) String() string { return s.text }

// Never reports whether no date satisfies the spec (e.g. "0 0 30 2 *"): Next always
// returns the zero time.
func (s Spec) Never() bool { return s.never }

// Interval returns the interval of an interval spec ([Every], "@every"), and 0 for a
// cron expression or descriptor.
func (s Spec) Interval() time.Duration { return s.interval }

// invalidSpec returns the error for a spec that does not parse.
func invalidSpec(spec, format string, args ...any) error {
	return fmt.Errorf("ax: cron spec %q: %s: %w", spec, fmt.Sprintf(format, args...), store.ErrInvalid)
}

// describeParseError returns robfig's message for text, prefixed with the name of
// the faulty field when that can be told.
func describeParseError(text string, err error) string {
	if strings.HasPrefix(text, "@") {
		return err.Error()
	}
	fields := strings.Fields(text)
	checks := fieldChecks
	switch len(fields) {
	case 5:
		checks = checks[1:]
	case 6:
	default:
		return err.Error()
	}
	for i, f := range fields {
		if _, ferr := checks[i].parser.Parse("1 " + f); ferr != nil {
			// robfig ends some messages with the field again ("…(59): 61").
			return fmt.Sprintf("%s field: %s", checks[i].name, strings.TrimSuffix(ferr.Error(), ": "+f))
		}
	}
	return err.Error()
}
