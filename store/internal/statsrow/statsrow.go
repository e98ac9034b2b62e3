// Package statsrow checks and encodes the rows of store.StatsKeeper for the drivers,
// so that they agree on what is valid and on the text columns' format: the lateness
// buckets as comma-separated counts, the failing names as "count name" lines.
package statsrow

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/store"
)

// minMinute and maxMinute bound a row's minute: every store's time column holds them.
var (
	minMinute = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	maxMinute = time.Date(9999, 12, 31, 23, 59, 0, 0, time.UTC)
)

// Check rejects what the contract calls invalid for WriteStats: more than
// store.MaxStatsRows rows, two rows of one (Node, Minute), or a bad row (see
// checkRow). The error wraps store.ErrInvalid and names the row.
func Check(rows []store.MinuteStats) error {
	if len(rows) > store.MaxStatsRows {
		return fmt.Errorf("write stats: %d rows, more than %d: %w", len(rows), store.MaxStatsRows, store.ErrInvalid)
	}
	type key struct {
		node   string
		minute int64
	}
	seen := make(map[key]bool, len(rows))
	for i := range rows {
		r := &rows[i]
		if err := checkRow(r); err != nil {
			return fmt.Errorf("write stats: row %d: %w", i, err)
		}
		k := key{r.Node, r.Minute.Unix()}
		if seen[k] {
			return fmt.Errorf("write stats: row %d: node %q, minute %s given twice: %w", i, r.Node, r.Minute.UTC().Format(time.RFC3339), store.ErrInvalid)
		}
		seen[k] = true
	}
	return nil
}

// checkRow rejects a row with an empty or overlong node (store.MaxNameLen), a minute
// that is zero, not whole or outside 1970-9999, a negative count or lateness, more
// than store.MaxStatsNames failing names, or a failing name that is empty, overlong,
// not UTF-8, holds a NUL or a line break, comes twice or has a count below 1.
func checkRow(r *store.MinuteStats) error {
	switch {
	case !printable(r.Node):
		return fmt.Errorf("node %q: empty, over %d bytes or not printable: %w", r.Node, store.MaxNameLen, store.ErrInvalid)
	case r.Minute.IsZero() || !r.Minute.Equal(r.Minute.Truncate(time.Minute)) || r.Minute.Before(minMinute) || r.Minute.After(maxMinute):
		return fmt.Errorf("node %q: minute %v is not a whole minute of 1970-9999: %w", r.Node, r.Minute, store.ErrInvalid)
	case r.MaxLateness < 0:
		return fmt.Errorf("node %q: negative max lateness %v: %w", r.Node, r.MaxLateness, store.ErrInvalid)
	case len(r.Failures) > store.MaxStatsNames:
		return fmt.Errorf("node %q: %d failing names, more than %d: %w", r.Node, len(r.Failures), store.MaxStatsNames, store.ErrInvalid)
	}
	counts := []int64{r.Succeeded, r.Failed, r.Panicked, r.TimedOut, r.Released, r.Orphaned, r.Retried, r.Early}
	counts = append(counts, r.Lateness[:]...)
	if slices.ContainsFunc(counts, func(n int64) bool { return n < 0 }) {
		return fmt.Errorf("node %q: a negative count: %w", r.Node, store.ErrInvalid)
	}
	for i, f := range r.Failures {
		switch {
		case !printable(f.Name):
			return fmt.Errorf("node %q: failing name %q: empty, over %d bytes or not printable: %w", r.Node, f.Name, store.MaxNameLen, store.ErrInvalid)
		case f.Count < 1:
			return fmt.Errorf("node %q: failing name %q: count %d below 1: %w", r.Node, f.Name, f.Count, store.ErrInvalid)
		case slices.ContainsFunc(r.Failures[:i], func(g store.NameCount) bool { return g.Name == f.Name }):
			return fmt.Errorf("node %q: failing name %q given twice: %w", r.Node, f.Name, store.ErrInvalid)
		}
	}
	return nil
}

// printable reports whether s may be a row's node or failing name: non-empty, at
// most store.MaxNameLen bytes of UTF-8, without a NUL or the line break that
// FormatFailures puts between names.
func printable(s string) bool {
	return s != "" && len(s) <= store.MaxNameLen && utf8.ValidString(s) && !strings.ContainsAny(s, "\x00\n")
}

// CheckSince rejects a zero since.
func CheckSince(since time.Time) error {
	if since.IsZero() {
		return fmt.Errorf("stats: zero since: %w", store.ErrInvalid)
	}
	return nil
}

// FormatLateness encodes the buckets as comma-separated decimal counts.
func FormatLateness(b *[store.LatenessBuckets]int64) string {
	var sb strings.Builder
	for i, n := range b {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.FormatInt(n, 10))
	}
	return sb.String()
}

// parseLateness decodes FormatLateness's text; "" is every bucket empty.
func parseLateness(s string) ([store.LatenessBuckets]int64, error) {
	var b [store.LatenessBuckets]int64
	if s == "" {
		return b, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) != len(b) {
		return b, fmt.Errorf("lateness %q: %d buckets, want %d", s, len(parts), len(b))
	}
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return b, fmt.Errorf("lateness %q: %w", s, err)
		}
		b[i] = n
	}
	return b, nil
}

// FormatFailures encodes the failing names as lines "count name", in order.
func FormatFailures(fs []store.NameCount) string {
	var sb strings.Builder
	for i, f := range fs {
		if i > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString(strconv.FormatInt(f.Count, 10))
		sb.WriteByte(' ')
		sb.WriteString(f.Name)
	}
	return sb.String()
}

// parseFailures decodes FormatFailures's text; "" is none (nil).
func parseFailures(s string) ([]store.NameCount, error) {
	if s == "" {
		return nil, nil
	}
	lines := strings.Split(s, "\n")
	out := make([]store.NameCount, len(lines))
	for i, l := range lines {
		count, name, ok := strings.Cut(l, " ")
		n, err := strconv.ParseInt(count, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("failures line %q: not \"count name\"", l)
		}
		out[i] = store.NameCount{Name: name, Count: n}
	}
	return out, nil
}

// CheckPrune rejects a zero before or a limit outside [1, store.MaxPrune].
func CheckPrune(before time.Time, limit int) error {
	if before.IsZero() || limit < 1 || limit > store.MaxPrune {
		return fmt.Errorf("prune stats: a zero time, or a limit %d outside 1..%d: %w", limit, store.MaxPrune, store.ErrInvalid)
	}
	return nil
}

// Columns are ax_stats's columns after namespace, in the order of AppendValues and
// Scan.Dest.
const Columns = `minute, node, succeeded, failed, panicked, timed_out, released, orphaned, retried,
	early, max_lateness, lateness, failures`

// AppendValues appends r's values for Columns to args: minute as the driver encodes
// it, the maximum lateness in microseconds, the text columns encoded.
func AppendValues(args []any, r *store.MinuteStats, minute any) []any {
	return append(args, minute, r.Node, r.Succeeded, r.Failed, r.Panicked, r.TimedOut, r.Released,
		r.Orphaned, r.Retried, r.Early, r.MaxLateness.Microseconds(), FormatLateness(&r.Lateness),
		FormatFailures(r.Failures))
}

// Scan receives one row of Columns: pass Dest to the driver's Scan, then Decode.
type Scan struct {
	row                store.MinuteStats
	maxLate            int64
	lateness, failures string
}

// Dest returns the scan destinations of Columns, minute being the driver's own. A
// driver that scans the minute into a time.Time may pass MinuteDest.
func (s *Scan) Dest(minute any) []any {
	r := &s.row
	return []any{minute, &r.Node, &r.Succeeded, &r.Failed, &r.Panicked, &r.TimedOut, &r.Released,
		&r.Orphaned, &r.Retried, &r.Early, &s.maxLate, &s.lateness, &s.failures}
}

// MinuteDest is the row's minute, for Dest.
func (s *Scan) MinuteDest() *time.Time { return &s.row.Minute }

// Decode returns the scanned row, its minute in UTC and its text columns decoded.
func (s *Scan) Decode() (store.MinuteStats, error) {
	r := s.row
	r.Minute, r.MaxLateness = r.Minute.UTC(), time.Duration(s.maxLate)*time.Microsecond
	var err error
	if r.Lateness, err = parseLateness(s.lateness); err != nil {
		return r, err
	}
	r.Failures, err = parseFailures(s.failures)
	return r, err
}
