// Package cronspec parses and evaluates the schedule specs of periodic tasks: cron
// expressions and fixed intervals.
//
//	s, err := cronspec.Parse("30 2 * * *")      // or "@daily", "0 30 2 * * *", "@every 5m"
//	next := s.Next(after, loc)                   // first fire time > after, in UTC
//	text := s.String()                           // canonical text, to persist
//
// Parsing is robfig/cron/v3's parser (5 fields, or 6 with leading seconds, and the
// descriptors @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly,
// "@every <duration>"). The fire times are computed here, by the rules below, not by
// robfig's schedules. Invalid specs are errors wrapping store.ErrInvalid.
//
// # Intervals
//
// An interval spec ([Every], "@every d") fires at 1970-01-01T00:00:00Z + k*d for
// every integer k: the slots are anchored at the Unix epoch, not at the moment the
// task was created or the scheduler started, so every node and every restart computes
// the same fire times, and the occurrence keys derived from them agree. The time zone
// does not affect intervals. d is at least 1s and a whole number of seconds.
// (robfig's own ConstantDelaySchedule adds d to the current time instead.)
//
//	Every(2m):   ... 10:00:00  10:02:00  10:04:00 ...   Next(10:01:30) = 10:02:00
//	Every(7s):   ... 1970-01-01T00:00:00Z + 7s*k ...    Next(epoch) = 00:00:07
//
// # Cron expressions and daylight saving time
//
// A cron expression is evaluated on the wall clock of the location passed to
// [Spec.Next] (nil means UTC); fire times are returned in UTC. On days without a
// clock change it fires at every wall-clock second that matches. When the clock jumps,
// a spec is one of two kinds:
//
//   - flowing: its hour field matches every hour ("* * * * *", "*/15 * * * *",
//     "30 * * * *", @hourly). It follows absolute time: it fires at every instant whose
//     wall-clock reading matches, no more, no less.
//   - pinned: any other hour field (a single hour, a list, a range or a step of hours,
//     and @daily, @weekly, @monthly, @yearly). Every matching wall-clock date and time
//     fires once: at its first occurrence, or at the jump if the clock skipped it.
//
// The rules, with the 2026 changes in America/New_York and Europe/Berlin:
//
//  1. Spring forward, pinned: a wall-clock time that does not exist fires once, at the
//     first instant after the gap, the moment of the jump. "30 2 * * *" fires at
//     03:00 EDT on 2026-03-08 in New York (07:00Z) and at 03:00 CEST on 2026-03-29 in
//     Berlin (01:00Z). Several skipped times, and a skipped time plus the jump time
//     itself ("0 2,3 * * *"), collapse into that one fire.
//  2. Spring forward, flowing: skipped wall-clock times do not fire; absolute time
//     keeps its pace. @hourly fires at 01:00 EST then 03:00 EDT, one hour apart;
//     "30 * * * *" at 01:30 EST then 03:30 EDT.
//  3. Fall back, pinned: a wall-clock time that occurs twice fires once, at its first
//     (summer-time) occurrence. "30 1 * * *" fires at 01:30 EDT on 2026-11-01 in New
//     York (05:30Z), not at 01:30 EST; "30 2 * * *" fires at 02:30 CEST on 2026-10-25
//     in Berlin (00:30Z), not at 02:30 CET.
//  4. Fall back, pinned, time outside the repeated hour: fires once as usual.
//     "30 2 * * *" fires at 02:30 EST on 2026-11-01 in New York (07:30Z), where 02:30
//     occurs once.
//  5. Fall back, flowing: every real instant that matches fires, so the repeated hour
//     runs twice. @hourly fires at 01:00 EDT, 01:00 EST and 02:00 EST in New York
//     (05:00Z, 06:00Z, 07:00Z); "*/15 * * * *" fires every 15 minutes of absolute time
//     straight through the change.
//  6. Only the change itself is special: the days before and after fire at their usual
//     wall-clock times. "0 12 * * *" fires 23 hours apart across a spring change, 25
//     hours apart across a fall change and 24 hours apart otherwise; "30 2 * * *" in
//     New York fires at 07:30Z on 03-07, 07:00Z on 03-08 and 06:30Z on 03-09.
//
// Pictured, wall clock on top, fire times marked with *:
//
//	New York, 2026-03-08, spring forward at 07:00Z
//	wall clock     01:00 EST   01:30 EST | 02:00-02:59 do not exist | 03:00 EDT   03:30 EDT
//	"30 2 * * *"                         |                          | * 07:00Z
//	"30 * * * *"               * 06:30Z  |                          |             * 07:30Z
//	@hourly        * 06:00Z              |                          | * 07:00Z
//
//	Berlin, 2026-10-25, fall back at 01:00Z
//	wall clock     02:00 CEST  02:30 CEST | 02:00 CET   02:30 CET   03:00 CET
//	"30 2 * * *"               * 00:30Z   |             (no fire)
//	@hourly        * 00:00Z               | * 01:00Z                * 02:00Z
//
// The rules apply to any clock change a zone has (30-minute changes, changes at
// midnight, historical ones), as recorded in the time zone database Go loads.
//
// # Next
//
// [Spec.Next] returns the first fire time strictly after its argument, never one
// <= after, so feeding each result back in walks the fire times in order, and the
// result depends only on the spec, the time zone and after: not on when or where it
// is called. It is pure (no clock, no I/O), allocation-free and safe for concurrent
// use; it returns the zero time when there is no fire time (a date that never occurs,
// e.g. "0 0 30 2 *", or one after year 9999).
package cronspec
