package storetest

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/axsched/ax/store"
)

var statsTests = []test{
	{"RoundTrip", testStatsRoundTrip},
	{"Replace", testStatsReplace},
	{"Namespaces", testStatsNamespaces},
	{"Since", testStatsSince},
	{"Bounds", testStatsBounds},
	{"Invalid", testStatsInvalid},
	{"Prune", testStatsPrune},
}

// statsBase is the first minute the statistics tests write: any whole minute will do,
// the store's clock plays no part.
var statsBase = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

// minute returns statsBase + i minutes.
func minute(i int) time.Time { return statsBase.Add(time.Duration(i) * time.Minute) }

// statsRow returns a row with every field set, its counts derived from seed.
func statsRow(node string, m time.Time, seed int64) store.MinuteStats {
	r := store.MinuteStats{
		Node: node, Minute: m,
		Succeeded: 100 * seed, Failed: seed + 1, Panicked: seed + 2, TimedOut: seed + 3, Released: seed + 4,
		Orphaned: seed + 5, Retried: seed + 6, Early: 0,
		MaxLateness: time.Duration(seed)*time.Second + 1234567*time.Nanosecond,
		Failures: []store.NameCount{
			{Name: "order.close timeout", Count: 3 * (seed + 1)}, {Name: "报表.rerun", Count: 2 * (seed + 1)},
			{Name: "x", Count: seed + 1},
		},
	}
	for i := range r.Lateness {
		r.Lateness[i] = seed*int64(i) + int64(i%3)
	}
	return r
}

// stored returns r as the store gives it back.
func stored(r store.MinuteStats) store.MinuteStats {
	r.Minute = r.Minute.UTC()
	r.MaxLateness = r.MaxLateness.Truncate(time.Microsecond)
	return r
}

func (e *env) writeStats(rows ...store.MinuteStats) {
	e.t.Helper()
	if err := e.s.WriteStats(e.ctx, rows); err != nil {
		e.t.Fatalf("WriteStats(%d rows) error: %v", len(rows), err)
	}
}

func (e *env) stats(since time.Time) []store.MinuteStats {
	e.t.Helper()
	got, err := e.s.Stats(e.ctx, since)
	if err != nil {
		e.t.Fatalf("Stats(%v) error: %v", since, err)
	}
	return got
}

func testStatsRoundTrip(e *env) {
	if got := e.stats(minute(0)); len(got) != 0 {
		e.t.Fatalf("Stats of an empty store = %+v, want none", got)
	}
	// A time zone other than UTC, and rows not in (minute, node) order.
	cet := time.FixedZone("CET", 3600)
	rows := []store.MinuteStats{statsRow("node-b", minute(1).In(cet), 7), statsRow("node-a", minute(1), 1), statsRow("node-b", minute(0), 2)}
	rows[2].Failures = nil
	rows[2].Early = 4
	e.writeStats(rows...)
	want := []store.MinuteStats{stored(rows[2]), stored(rows[1]), stored(rows[0])}
	got := e.stats(minute(0))
	if d := diff(want, got); d != "" {
		e.t.Errorf("Stats mismatch (-want +got):\n%s", d)
	}
	for _, r := range got {
		if r.Minute.Location() != time.UTC {
			e.t.Errorf("Stats: Minute %v is not in UTC", r.Minute)
		}
	}
	if err := e.s.WriteStats(e.ctx, nil); err != nil {
		e.t.Errorf("WriteStats(no rows) error: %v", err)
	}
}

// A row replaces the stored one; writing it again changes nothing.
func testStatsReplace(e *env) {
	e.writeStats(statsRow("n1", minute(0), 5), statsRow("n2", minute(0), 1))
	smaller := statsRow("n1", minute(0), 2)
	smaller.Failures = smaller.Failures[:1]
	for range 2 {
		e.writeStats(smaller)
	}
	want := []store.MinuteStats{stored(smaller), stored(statsRow("n2", minute(0), 1))}
	if d := diff(want, e.stats(minute(0))); d != "" {
		e.t.Errorf("Stats after a replacing write (-want +got):\n%s", d)
	}
	zero := store.MinuteStats{Node: "n1", Minute: minute(0)}
	e.writeStats(zero)
	want[0] = zero
	if d := diff(want, e.stats(minute(0))); d != "" {
		e.t.Errorf("Stats after a zero row (-want +got):\n%s", d)
	}
}

func testStatsNamespaces(e *env) {
	other := e.view("stats-other")
	mine := statsRow("n1", minute(0), 3)
	e.writeStats(mine)
	if got := other.stats(minute(0)); len(got) != 0 {
		e.t.Errorf("Stats of another namespace = %+v, want none", got)
	}
	theirs := statsRow("n1", minute(0), 9)
	other.writeStats(theirs)
	if d := diff([]store.MinuteStats{stored(mine)}, e.stats(minute(0))); d != "" {
		e.t.Errorf("Stats after another namespace wrote the same node and minute (-want +got):\n%s", d)
	}
	if d := diff([]store.MinuteStats{stored(theirs)}, other.stats(minute(0))); d != "" {
		e.t.Errorf("Stats of the other namespace (-want +got):\n%s", d)
	}
	if n, err := other.s.PruneStats(e.ctx, minute(10), store.MaxPrune); err != nil || n != 1 {
		e.t.Errorf("PruneStats of the other namespace = %d, %v; want 1, nil", n, err)
	}
	if got := e.stats(minute(0)); len(got) != 1 {
		e.t.Errorf("Stats after the other namespace pruned = %d rows, want 1", len(got))
	}
}

func testStatsSince(e *env) {
	var rows []store.MinuteStats
	for i := range 5 {
		rows = append(rows, statsRow("n2", minute(i), int64(i)), statsRow("n1", minute(i), int64(i)))
	}
	e.writeStats(rows...)
	for _, c := range []struct {
		since time.Time
		first int // the first minute returned
	}{
		{minute(-60), 0}, {minute(0), 0}, {minute(2), 2}, {minute(2).Add(30 * time.Second), 3},
		{minute(3).Add(-time.Microsecond), 3}, {minute(4), 4}, {minute(5), 5},
	} {
		var want []store.MinuteStats
		for i := c.first; i < 5; i++ {
			want = append(want, stored(statsRow("n1", minute(i), int64(i))), stored(statsRow("n2", minute(i), int64(i))))
		}
		if d := diff(want, e.stats(c.since)); d != "" {
			e.t.Errorf("Stats(%v) mismatch (-want +got):\n%s", c.since, d)
		}
	}
}

// WriteStats takes MaxStatsRows rows; Stats returns the newest MaxStatsRead.
func testStatsBounds(e *env) {
	if err := e.s.WriteStats(e.ctx, make([]store.MinuteStats, store.MaxStatsRows+1)); !errors.Is(err, store.ErrInvalid) {
		e.t.Errorf("WriteStats(%d rows) error = %v, want ErrInvalid", store.MaxStatsRows+1, err)
	}
	if _, err := e.s.Stats(e.ctx, time.Time{}); !errors.Is(err, store.ErrInvalid) {
		e.t.Errorf("Stats(zero since) error = %v, want ErrInvalid", err)
	}
	const minutes = store.MaxStatsRead/store.MaxStatsNodes + 1
	var batch []store.MinuteStats
	for m := range minutes {
		for n := range store.MaxStatsNodes {
			batch = append(batch, store.MinuteStats{Node: fmt.Sprintf("node-%02d", n), Minute: minute(m), Succeeded: int64(m)})
			if len(batch) == store.MaxStatsRows || m == minutes-1 && n == store.MaxStatsNodes-1 {
				e.writeStats(batch...)
				batch = batch[:0]
			}
		}
	}
	got := e.stats(minute(0))
	if len(got) != store.MaxStatsRead {
		e.t.Fatalf("Stats over %d rows = %d rows, want %d", minutes*store.MaxStatsNodes, len(got), store.MaxStatsRead)
	}
	first, last := got[0], got[len(got)-1]
	if !first.Minute.Equal(minute(1)) || first.Node != "node-00" || !last.Minute.Equal(minute(minutes-1)) || last.Node != "node-63" {
		e.t.Errorf("Stats over %d rows: from %v %s to %v %s, want the newest: from %v node-00 to %v node-63",
			minutes*store.MaxStatsNodes, first.Minute, first.Node, last.Minute, last.Node, minute(1), minute(minutes-1))
	}
}

// An invalid row fails the whole call, and nothing is written.
func testStatsInvalid(e *env) {
	kept := statsRow("n1", minute(0), 1)
	e.writeStats(kept)
	long := strings.Repeat("x", store.MaxNameLen+1)
	many := make([]store.NameCount, store.MaxStatsNames+1)
	for i := range many {
		many[i] = store.NameCount{Name: fmt.Sprintf("name-%d", i), Count: 1}
	}
	twice := []store.NameCount{{Name: "a", Count: 2}, {Name: "a", Count: 1}}
	for name, mod := range map[string]func(*store.MinuteStats){
		"empty node":         func(r *store.MinuteStats) { r.Node = "" },
		"long node":          func(r *store.MinuteStats) { r.Node = long },
		"zero minute":        func(r *store.MinuteStats) { r.Minute = time.Time{} },
		"minute not whole":   func(r *store.MinuteStats) { r.Minute = r.Minute.Add(time.Second) },
		"minute before 1970": func(r *store.MinuteStats) { r.Minute = time.Date(1969, 12, 31, 23, 59, 0, 0, time.UTC) },
		"negative count":     func(r *store.MinuteStats) { r.Failed = -1 },
		"negative retried":   func(r *store.MinuteStats) { r.Retried = -1 },
		"negative bucket":    func(r *store.MinuteStats) { r.Lateness[store.LatenessBuckets-1] = -1 },
		"negative max":       func(r *store.MinuteStats) { r.MaxLateness = -time.Second },
		"too many names":     func(r *store.MinuteStats) { r.Failures = many },
		"long name":          func(r *store.MinuteStats) { r.Failures = []store.NameCount{{Name: long, Count: 1}} },
		"empty name":         func(r *store.MinuteStats) { r.Failures = []store.NameCount{{Name: "", Count: 1}} },
		"name with a break":  func(r *store.MinuteStats) { r.Failures = []store.NameCount{{Name: "a\nb", Count: 1}} },
		"name not UTF-8":     func(r *store.MinuteStats) { r.Failures = []store.NameCount{{Name: "\xff", Count: 1}} },
		"name twice":         func(r *store.MinuteStats) { r.Failures = twice },
		"zero name count":    func(r *store.MinuteStats) { r.Failures = []store.NameCount{{Name: "a", Count: 0}} },
	} {
		bad := statsRow("n2", minute(1), 2)
		mod(&bad)
		replace := statsRow("n1", minute(0), 8)
		if err := e.s.WriteStats(e.ctx, []store.MinuteStats{replace, bad}); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("WriteStats(%s) error = %v, want ErrInvalid", name, err)
		}
	}
	same := statsRow("n1", minute(0), 8)
	if err := e.s.WriteStats(e.ctx, []store.MinuteStats{same, same}); !errors.Is(err, store.ErrInvalid) {
		e.t.Errorf("WriteStats(one node and minute twice) error = %v, want ErrInvalid", err)
	}
	if d := diff([]store.MinuteStats{stored(kept)}, e.stats(minute(-1))); d != "" {
		e.t.Errorf("Stats after refused writes (-want +got):\n%s", d)
	}
	for _, limit := range []int{0, store.MaxPrune + 1} {
		if _, err := e.s.PruneStats(e.ctx, minute(10), limit); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("PruneStats(limit %d) error = %v, want ErrInvalid", limit, err)
		}
	}
	if _, err := e.s.PruneStats(e.ctx, time.Time{}, 10); !errors.Is(err, store.ErrInvalid) {
		e.t.Errorf("PruneStats(zero before) error = %v, want ErrInvalid", err)
	}
}

// PruneStats deletes the oldest rows before its time, at most limit a call.
func testStatsPrune(e *env) {
	for i := range 5 {
		e.writeStats(statsRow("n1", minute(i), int64(i)))
	}
	for _, want := range []int{2, 1, 0} {
		if n, err := e.s.PruneStats(e.ctx, minute(3), 2); err != nil || n != want {
			e.t.Errorf("PruneStats(before minute 3, limit 2) = %d, %v; want %d, nil", n, err, want)
		}
	}
	got := e.stats(minute(-10))
	if len(got) != 2 || !got[0].Minute.Equal(minute(3)) || !got[1].Minute.Equal(minute(4)) {
		e.t.Errorf("Stats after pruning = %+v, want minutes 3 and 4", got)
	}
}
