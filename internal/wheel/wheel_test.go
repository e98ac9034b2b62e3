package wheel

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
)

var origin = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// at returns the time d after origin.
func at(d time.Duration) time.Time { return origin.Add(d) }

func ids(entries []Entry) []int64 {
	out := make([]int64, len(entries))
	for i, e := range entries {
		out[i] = e.ID
	}
	return out
}

func TestNewLevelsAndSpan(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tick, span time.Duration
		levels     int
		wantSpan   time.Duration
	}{
		{10 * time.Millisecond, 5 * time.Minute, 3, 59 * 3600 * 10 * time.Millisecond},
		{10 * time.Millisecond, 0, 1, 590 * time.Millisecond},
		{10 * time.Millisecond, 590 * time.Millisecond, 1, 590 * time.Millisecond},
		{10 * time.Millisecond, 591 * time.Millisecond, 2, 59 * 60 * 10 * time.Millisecond},
		{time.Second, 5 * time.Minute, 2, 59 * time.Minute},
		{time.Second, 24 * time.Hour, 3, 59 * time.Hour},
		{time.Nanosecond, 300 * 24 * time.Hour, 10, 59 * 10077696000000000},
		// Beyond what 10 levels of 1ns cover: the widest wheel, short of span.
		{time.Nanosecond, math.MaxInt64, 10, 59 * 10077696000000000},
		// Span saturates instead of overflowing.
		{time.Hour, math.MaxInt64, 4, math.MaxInt64},
	} {
		w := New(tc.tick, tc.span, origin)
		if w.levels != tc.levels || w.Span() != tc.wantSpan || w.Tick() != tc.tick {
			t.Errorf("New(%v, %v): levels, Span, Tick = %d, %v, %v, want %d, %v, %v",
				tc.tick, tc.span, w.levels, w.Span(), w.Tick(), tc.levels, tc.wantSpan, tc.tick)
		}
	}
}

func TestNewPanicsOnBadTick(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("New(0, ...) did not panic")
		}
	}()
	New(0, time.Minute, origin)
}

// In a tick of few entries an entry comes out at its due, never before; Next names it.
func TestAdvanceHandsOutAtDue(t *testing.T) {
	t.Parallel()
	tick := 10 * time.Millisecond
	for _, due := range []time.Duration{
		15 * time.Millisecond, 20 * time.Millisecond, 20*time.Millisecond + 1, 0, 1,
		// Two levels up: cascades twice before it fires, still never early.
		time.Hour + 1, time.Hour + 3*time.Millisecond,
		// In the first tick of a higher-level slot (ticks 60, 3,600, 216,000): due
		// within it, not at its end.
		595 * time.Millisecond, 590*time.Millisecond + 1, 36*time.Second - 5*time.Millisecond,
		36*time.Minute - 9*time.Millisecond,
	} {
		w := New(tick, 2*time.Hour, origin)
		if !w.Add(1, at(due)) {
			t.Fatalf("Add(1, origin+%v) = false, want true", due)
		}
		for { // wake up as the owner does, until the entry's due
			next, ok := w.Next()
			if !ok || !next.Before(at(due)) {
				if !ok || !next.Equal(at(due)) {
					t.Errorf("due origin+%v: Next() = %v, %v; want the due", due, next, ok)
				}
				break
			}
			if got := w.Advance(next, nil); len(got) != 0 {
				t.Fatalf("due origin+%v: Advance(%v) = %v, before the due", due, next, got)
			}
		}
		if got := w.Advance(at(due-1), nil); len(got) != 0 {
			t.Errorf("due origin+%v: Advance(1ns before) = %v, want nothing", due, got)
		}
		want := []Entry{{ID: 1, Due: at(due)}}
		if diff := gocmp.Diff(want, w.Advance(at(due), nil)); diff != "" {
			t.Errorf("due origin+%v: Advance(the due) mismatch (-want +got):\n%s", due, diff)
		}
	}
}

// A tick of more than exactMax entries hands them out at its end, all at once: finding
// which are due by now would walk a long list at every wake-up.
func TestDenseTickWaitsForItsEnd(t *testing.T) {
	t.Parallel()
	tick := 10 * time.Millisecond
	w := New(tick, time.Minute, origin)
	for id := range int64(exactMax + 1) {
		w.Add(id, at(11*time.Millisecond+time.Duration(id)*time.Microsecond))
	}
	if next, ok := w.Next(); !ok || !next.Equal(at(20*time.Millisecond)) {
		t.Errorf("Next() = %v, %v; want the tick's end, origin+20ms", next, ok)
	}
	if got := w.Advance(at(20*time.Millisecond-1), nil); len(got) != 0 {
		t.Errorf("Advance(1ns before the tick's end) handed out %d entries, want none", len(got))
	}
	if got := w.Advance(at(20*time.Millisecond), nil); len(got) != exactMax+1 {
		t.Errorf("Advance(the tick's end) handed out %d entries, want %d", len(got), exactMax+1)
	}
}

// A coarse wheel hands a sparse tick out at its end too, and goes back to dues when
// told.
func TestCoarseWheelWaitsForTheTickEnd(t *testing.T) {
	t.Parallel()
	w := New(10*time.Millisecond, time.Minute, origin)
	w.Add(1, at(12*time.Millisecond))
	w.Add(2, at(33*time.Millisecond))
	w.SetCoarse(true)
	if next, ok := w.Next(); !ok || !next.Equal(at(20*time.Millisecond)) {
		t.Errorf("coarse: Next() = %v, %v; want the tick's end, origin+20ms", next, ok)
	}
	if got := w.Advance(at(15*time.Millisecond), nil); len(got) != 0 {
		t.Errorf("coarse: Advance(past the due, within the tick) handed out %v, want nothing", got)
	}
	if got := w.Advance(at(20*time.Millisecond), nil); len(got) != 1 || got[0].ID != 1 {
		t.Errorf("coarse: Advance(the tick's end) = %v, want entry 1", got)
	}
	w.SetCoarse(false)
	if next, ok := w.Next(); !ok || !next.Equal(at(33*time.Millisecond)) {
		t.Errorf("exact again: Next() = %v, %v; want entry 2's due, origin+33ms", next, ok)
	}
	if got := w.Advance(at(33*time.Millisecond), nil); len(got) != 1 || got[0].ID != 2 {
		t.Errorf("exact again: Advance(the due) = %v, want entry 2", got)
	}
}

// Entries due by now in the tick now lies in come out in due order, the rest stay.
func TestAdvanceWithinATick(t *testing.T) {
	t.Parallel()
	w := New(10*time.Millisecond, time.Minute, origin)
	for id, due := range []time.Duration{17, 12, 15, 19} {
		w.Add(int64(id), at(due*time.Millisecond))
	}
	got := w.Advance(at(16*time.Millisecond), nil)
	want := []Entry{{ID: 1, Due: at(12 * time.Millisecond)}, {ID: 2, Due: at(15 * time.Millisecond)}}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("Advance(origin+16ms) mismatch (-want +got):\n%s", diff)
	}
	if next, ok := w.Next(); !ok || !next.Equal(at(17*time.Millisecond)) {
		t.Errorf("Next() = %v, %v; want origin+17ms", next, ok)
	}
	if err := checkInvariants(w); err != nil {
		t.Error(err)
	}
}

func TestAddMovesExistingID(t *testing.T) {
	t.Parallel()
	w := New(10*time.Millisecond, 5*time.Minute, origin)
	w.Add(1, at(50*time.Millisecond))
	w.Add(1, at(3*time.Minute)) // later, onto a higher level
	w.Add(2, at(2*time.Minute))
	w.Add(2, at(40*time.Millisecond)) // earlier
	if w.Len() != 2 {
		t.Fatalf("Len() = %d, want 2", w.Len())
	}
	want := []Entry{{ID: 2, Due: at(40 * time.Millisecond)}}
	if diff := gocmp.Diff(want, w.Advance(at(time.Minute), nil)); diff != "" {
		t.Errorf("Advance(origin+1m) mismatch (-want +got):\n%s", diff)
	}
	want = []Entry{{ID: 1, Due: at(3 * time.Minute)}}
	if diff := gocmp.Diff(want, w.Advance(at(5*time.Minute), nil)); diff != "" {
		t.Errorf("Advance(origin+5m) mismatch (-want +got):\n%s", diff)
	}
	if w.Len() != 0 || w.Contains(1) || w.Contains(2) {
		t.Errorf("after draining: Len() = %d, Contains(1) = %v, Contains(2) = %v, want 0, false, false",
			w.Len(), w.Contains(1), w.Contains(2))
	}
}

func TestRemove(t *testing.T) {
	t.Parallel()
	w := New(10*time.Millisecond, 5*time.Minute, origin)
	for id := range int64(5) {
		w.Add(id, at(time.Duration(id)*time.Minute))
	}
	if !w.Remove(3) {
		t.Error("Remove(3) = false, want true")
	}
	if w.Remove(3) {
		t.Error("Remove(3) again = true, want false")
	}
	if w.Remove(42) {
		t.Error("Remove(42) = true, want false")
	}
	if w.Contains(3) || w.Len() != 4 {
		t.Errorf("after Remove(3): Contains(3), Len() = %v, %d, want false, 4", w.Contains(3), w.Len())
	}
	got := ids(w.Advance(at(5*time.Minute), nil))
	if diff := gocmp.Diff([]int64{0, 1, 2, 4}, got); diff != "" {
		t.Errorf("Advance ids mismatch (-want +got):\n%s", diff)
	}
	// The slot of a removed entry is reused.
	w.Add(7, at(6*time.Minute))
	if n := len(w.slab) - int(w.sentinels); n != 5 {
		t.Errorf("slab holds %d entries after re-adding, want 5 (free slots reused)", n)
	}
}

func TestAddBeyondSpan(t *testing.T) {
	t.Parallel()
	w := New(10*time.Millisecond, 5*time.Minute, origin)
	span := w.Span()
	if !w.Add(1, at(span)) {
		t.Errorf("Add(1, origin+Span) = false, want true")
	}
	if w.Add(2, at(span+1)) {
		t.Errorf("Add(2, origin+Span+1ns) = true, want false")
	}
	if w.Contains(2) || w.Len() != 1 {
		t.Errorf("after a rejected Add: Contains(2), Len() = %v, %d, want false, 1", w.Contains(2), w.Len())
	}
	// A rejected move leaves the entry where it was.
	if w.Add(1, at(time.Hour)) {
		t.Errorf("Add(1, origin+1h) = true, want false")
	}
	// (Next names the start of the top-level slot's first tick, where it cascades.)
	if got, _ := w.Next(); got.After(at(span)) || got.Before(at(span-10*time.Millisecond)) {
		t.Errorf("after a rejected move: Next() = %v, want within the tick before %v", got, at(span))
	}
	// The span is measured from the wheel's position.
	now := at(time.Hour + 5*time.Millisecond)
	w.Advance(now, nil)
	if !w.Add(3, now.Add(span)) {
		t.Errorf("Add(3, now+Span) = false, want true")
	}
	if w.Add(4, now.Add(span+10*time.Millisecond)) {
		t.Errorf("Add(4, now+Span+tick) = true, want false")
	}
}

func TestOverdueFiresOnNextAdvance(t *testing.T) {
	t.Parallel()
	w := New(10*time.Millisecond, 5*time.Minute, origin)
	now := at(time.Minute)
	w.Advance(now, nil)
	w.Add(1, now.Add(-time.Second))
	w.Add(2, now.Add(-time.Hour)) // before the origin
	w.Add(3, now)                 // its tick has been expired already
	w.Add(4, now.Add(10*time.Millisecond))
	next, ok := w.Next()
	if !ok || !next.Equal(now.Add(-time.Hour)) {
		t.Errorf("Next() = %v, %v, want %v, true", next, ok, now.Add(-time.Hour))
	}
	// Same now: only the overdue entries, earliest first.
	got := ids(w.Advance(now, nil))
	if diff := gocmp.Diff([]int64{2, 1, 3}, got); diff != "" {
		t.Errorf("Advance(same now) ids mismatch (-want +got):\n%s", diff)
	}
	// A now in the past still hands out overdue entries, and nothing else.
	w.Add(5, now.Add(-time.Millisecond))
	got = ids(w.Advance(now.Add(-time.Minute), nil))
	if diff := gocmp.Diff([]int64{5}, got); diff != "" {
		t.Errorf("Advance(earlier now) ids mismatch (-want +got):\n%s", diff)
	}
	if !w.Contains(4) {
		t.Error("Contains(4) = false, want true")
	}
}

func TestAdvanceOrdersAcrossTicks(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	w := New(10*time.Millisecond, 5*time.Minute, origin)
	for id := range int64(5000) {
		w.Add(id, at(time.Duration(r.Int64N(int64(5*time.Minute)))))
	}
	got := w.Advance(at(5*time.Minute), nil)
	if len(got) != 5000 {
		t.Fatalf("Advance returned %d entries, want 5000", len(got))
	}
	for i := 1; i < len(got); i++ {
		if w.ceilTick(got[i].Due) < w.ceilTick(got[i-1].Due) {
			t.Fatalf("entry %d (due %v) came out after entry %d (due %v), a later tick",
				i-1, got[i-1].Due, i, got[i].Due)
		}
	}
}

func TestAdvanceEndingAtCascadeBoundary(t *testing.T) {
	t.Parallel()
	// Advance stops just before a level-1 slot starts (tick 60); an entry
	// added afterwards must not overtake one waiting in that slot.
	w := New(10*time.Millisecond, 5*time.Minute, origin)
	w.Add(1, at(610*time.Millisecond)) // tick 61, level 1 slot 1
	w.Advance(at(590*time.Millisecond), nil)
	w.Add(2, at(650*time.Millisecond)) // tick 65
	got := ids(w.Advance(at(time.Second), nil))
	if diff := gocmp.Diff([]int64{1, 2}, got); diff != "" {
		t.Errorf("Advance ids mismatch (-want +got):\n%s", diff)
	}
}

func TestNextDrainsWheel(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	w := New(10*time.Millisecond, 5*time.Minute, origin)
	if _, ok := w.Next(); ok {
		t.Fatal("Next() on an empty wheel: ok = true, want false")
	}
	const n = 2000
	earliest := at(time.Hour)
	for id := range int64(n) {
		due := at(time.Duration(r.Int64N(int64(5 * time.Minute))))
		w.Add(id, due)
		if due.Before(earliest) {
			earliest = due
		}
	}
	var got []Entry
	wakeups := 0
	for {
		next, ok := w.Next()
		if !ok {
			break
		}
		if len(got) == 0 {
			if limit := at(time.Duration(w.ceilTick(earliest)) * w.Tick()); next.After(limit) {
				t.Fatalf("Next() = %v, after the earliest rounded due %v", next, limit)
			}
		}
		wakeups++
		if wakeups > n*w.levels {
			t.Fatalf("still not drained after %d wake-ups", wakeups)
		}
		got = w.Advance(next, got)
	}
	if len(got) != n || w.Len() != 0 {
		t.Errorf("drained %d entries, Len() = %d; want %d, 0", len(got), w.Len(), n)
	}
}

func TestAdvanceCatchesUpStallCheaply(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	// An hour of 10ms ticks is 360,000 ticks; an empty stretch costs nothing.
	w := New(10*time.Millisecond, 5*time.Minute, origin)
	if got := w.Advance(at(time.Hour), nil); len(got) != 0 || w.slotVisits != 0 {
		t.Errorf("empty wheel, 1h stall: %d entries, %d slot visits, want 0, 0", len(got), w.slotVisits)
	}

	// 100 entries within 5 minutes, then a 1 hour stall: each entry costs at
	// most one visit per level.
	now := at(time.Hour)
	const n = 100
	for id := range int64(n) {
		w.Add(id, now.Add(time.Duration(r.Int64N(int64(5*time.Minute)))))
	}
	w.slotVisits = 0
	got := w.Advance(now.Add(time.Hour), nil)
	if len(got) != n || w.Len() != 0 {
		t.Fatalf("after a 1h stall: %d entries out, Len() = %d, want %d, 0", len(got), w.Len(), n)
	}
	if limit := n * w.levels; w.slotVisits > limit {
		t.Errorf("1h stall with %d entries: %d slot visits, want <= %d", n, w.slotVisits, limit)
	}
}

// model is the reference the wheel is checked against: a plain map of entries
// with their rounded due ticks, the highest tick handed out so far, and whether
// the wheel is coarse.
type model struct {
	tick      time.Duration
	spanTicks int64
	expired   int64 // every tick <= expired has been handed out
	coarse    bool
	entries   map[int64]modelEntry
}

type modelEntry struct {
	due  time.Time
	tick int64
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func (m *model) roundUp(t time.Time) int64   { return -floorDiv(-int64(t.Sub(origin)), int64(m.tick)) }
func (m *model) roundDown(t time.Time) int64 { return floorDiv(int64(t.Sub(origin)), int64(m.tick)) }

func (m *model) add(id int64, due time.Time) bool {
	t := m.roundUp(due)
	if t > m.expired+1+m.spanTicks {
		return false
	}
	m.entries[id] = modelEntry{due: due.UTC(), tick: t}
	return true
}

func (m *model) advance(now time.Time) []Entry {
	m.expired = max(m.expired, m.roundDown(now))
	// The tick now lies in hands out what is due by now, if it holds few entries.
	cur, inCur := m.expired+1, 0
	for _, e := range m.entries {
		if e.tick == cur {
			inCur++
		}
	}
	var out []Entry
	for id, e := range m.entries {
		if e.tick <= m.expired || e.tick == cur && inCur <= exactMax && !m.coarse && !e.due.After(now) {
			out = append(out, Entry{ID: id, Due: e.due})
			delete(m.entries, id)
		}
	}
	return out
}

// handOut returns the earliest time at which an Advance hands an entry out, as
// things stand: an entry overdue when added at its due, at the latest; one of a
// sparse tick at its due unless the wheel is coarse; any other at its tick's end.
// A Next later than that would make the entry late.
func (m *model) handOut() (time.Time, bool) {
	if len(m.entries) == 0 {
		return time.Time{}, false
	}
	perTick := map[int64]int{}
	for _, e := range m.entries {
		perTick[e.tick]++
	}
	var first time.Time
	for _, e := range m.entries {
		at := origin.Add(time.Duration(e.tick) * m.tick)
		if e.tick <= m.expired || perTick[e.tick] <= exactMax && !m.coarse {
			at = e.due
		}
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first, true
}

func byID(a, b Entry) int { return cmp.Compare(a.ID, b.ID) }

// opReader turns fuzz or random bytes into operations; it yields zeros once
// the bytes run out.
type opReader struct {
	data []byte
}

func (r *opReader) more() bool { return len(r.data) > 0 }

func (r *opReader) next() int64 {
	if len(r.data) == 0 {
		return 0
	}
	b := r.data[0]
	r.data = r.data[1:]
	return int64(b)
}

// checkAgainstModel runs the operations encoded in data on a wheel and on the
// model and fails t at the first difference. Ids below 24 are added one by one;
// crowds of about exactMax use the others, up to maxID.
func checkAgainstModel(t *testing.T, data []byte) {
	const maxID = 200
	r := &opReader{data: data}
	ticks := []time.Duration{time.Nanosecond, time.Millisecond, 10 * time.Millisecond, time.Second}
	spans := []time.Duration{0, time.Second, 5 * time.Minute, time.Hour, 48 * time.Hour}
	tick := ticks[r.next()%int64(len(ticks))]
	w := New(tick, spans[r.next()%int64(len(spans))], origin)
	span := w.Span()
	m := &model{tick: tick, spanTicks: int64(span / tick), expired: -1, entries: map[int64]modelEntry{}}

	var trace []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("wheel(tick %v, span %v, %d levels), after ops:\n  %s\n%s", tick, span, w.levels,
			strings.Join(trace[max(0, len(trace)-30):], "\n  "), fmt.Sprintf(format, args...))
	}
	now := origin.Add(time.Duration(r.next()-128) * tick / 3)
	// The wheel starts at origin: a due before it fires on the first Advance.
	latest := origin // the latest now passed to Advance, or origin
	units := []time.Duration{0, 1, tick / 3, tick, 60 * tick, 3600 * tick, span / 7, span}
	offset := func() time.Duration {
		unit, k := r.next(), r.next()-40
		if unit%9 == 8 { // around the end of the span
			return span + time.Duration(k-100)*tick/2
		}
		return time.Duration(k) * units[unit%9]
	}
	steps := []time.Duration{0, 1, tick / 2, tick, 7 * tick, 59 * tick, 60 * tick, 61*tick + 1, 3600 * tick,
		time.Minute, time.Hour, span, span + tick, 24 * time.Hour, 1000 * time.Hour}
	advance := func(to time.Time) {
		now = to
		if now.After(latest) {
			latest = now
		}
		got := w.Advance(now, nil)
		for i, e := range got {
			if e.Due.After(latest) {
				fail("Advance(%v) handed out %d due %v: early", now, e.ID, e.Due)
			}
			if i > 0 && m.roundUp(e.Due) < m.roundUp(got[i-1].Due) {
				fail("Advance(%v) handed out %d (due %v) after %d (due %v)", now, e.ID, e.Due, got[i-1].ID, got[i-1].Due)
			}
		}
		want := m.advance(now)
		slices.SortFunc(got, byID)
		slices.SortFunc(want, byID)
		if diff := gocmp.Diff(want, got); diff != "" {
			fail("Advance(%v) mismatch (-want +got):\n%s", now, diff)
		}
	}

	for r.more() {
		switch op := r.next() % 10; op {
		case 0, 1, 2:
			id, due := r.next()%24, now.Add(offset())
			trace = append(trace, fmt.Sprintf("Add(%d, %v) now %v", id, due, now))
			if got, want := w.Add(id, due), m.add(id, due); got != want {
				fail("Add(%d, %v) = %v, want %v", id, due, got, want)
			}
		case 3:
			id := r.next() % 24
			trace = append(trace, fmt.Sprintf("Remove(%d)", id))
			_, want := m.entries[id]
			delete(m.entries, id)
			if got := w.Remove(id); got != want {
				fail("Remove(%d) = %v, want %v", id, got, want)
			}
		case 4, 5:
			step := steps[r.next()%int64(len(steps))]
			trace = append(trace, fmt.Sprintf("Advance(now+%v)", step))
			advance(now.Add(step))
		case 6:
			next, ok := w.Next()
			trace = append(trace, fmt.Sprintf("Advance(Next() = %v, %v)", next, ok))
			if ok {
				advance(next)
			}
		case 7:
			step := steps[r.next()%int64(len(steps))]
			trace = append(trace, fmt.Sprintf("Advance(now-%v)", step))
			advance(now.Add(-step))
		case 8: // a crowd: about exactMax entries due within a tick or two
			base, n := now.Add(offset()), exactMax-4+r.next()%8
			trace = append(trace, fmt.Sprintf("Add(%d entries from %v) now %v", n, base, now))
			for j := range n {
				id, due := 24+(r.next()+j)%(maxID-24), base.Add(time.Duration(j)*tick/time.Duration(n))
				if got, want := w.Add(id, due), m.add(id, due); got != want {
					fail("Add(%d, %v) = %v, want %v", id, due, got, want)
				}
			}
		case 9:
			on := r.next()%2 == 0
			trace = append(trace, fmt.Sprintf("SetCoarse(%v)", on))
			w.SetCoarse(on)
			m.coarse = on
		}

		if err := checkInvariants(w); err != nil {
			fail("invariants: %v", err)
		}
		if w.Len() != len(m.entries) {
			fail("Len() = %d, want %d", w.Len(), len(m.entries))
		}
		for id := range int64(maxID) {
			if _, want := m.entries[id]; w.Contains(id) != want {
				fail("Contains(%d) = %v, want %v", id, !want, want)
			}
		}
		next, ok := w.Next()
		limit, wantOK := m.handOut()
		if ok != wantOK {
			fail("Next() ok = %v, want %v", ok, wantOK)
		}
		if ok && next.After(limit) {
			fail("Next() = %v, after the earliest hand-out %v: late", next, limit)
		}
	}

	// Drain through Next, as the owner does: each wake-up makes progress.
	trace = append(trace, "drain")
	maxWakeups := (len(m.entries) + 1) * w.levels
	for wakeups := 0; ; wakeups++ {
		next, ok := w.Next()
		if !ok {
			break
		}
		if wakeups > maxWakeups {
			fail("not drained after %d wake-ups, %d entries left", wakeups, w.Len())
		}
		advance(next)
	}
	if w.Len() != 0 || len(m.entries) != 0 {
		fail("after draining: Len() = %d, model holds %d", w.Len(), len(m.entries))
	}
}

// checkInvariants verifies the invariants listed in doc.go by walking every
// list of the slab.
func checkInvariants(w *Wheel) error {
	listed := 0
	for h := range w.sentinels {
		var l, s int
		overdue := h == w.overdueHead()
		if !overdue {
			l, s = int(h)/slotsPerLevel, int(h)%slotsPerLevel
			if bit := w.occupied[l]&(1<<s) != 0; bit != (w.slab[h].next != h) {
				return fmt.Errorf("level %d slot %d: occupancy bit %v, list empty %v", l, s, bit, w.slab[h].next == h)
			}
		}
		prev := h
		for i := w.slab[h].next; i != h; prev, i = i, w.slab[i].next {
			e := w.slab[i]
			listed++
			if e.prev != prev {
				return fmt.Errorf("entry %d: prev = %d, want %d", e.id, e.prev, prev)
			}
			if j, ok := w.index[e.id]; !ok || j != i {
				return fmt.Errorf("entry %d at slab index %d, index says %d, %v", e.id, i, j, ok)
			}
			if overdue {
				if e.tick >= w.cur {
					return fmt.Errorf("entry %d (tick %d) on the overdue list, cur %d", e.id, e.tick, w.cur)
				}
				continue
			}
			wantL := w.levels - 1
			for k := range w.levels - 1 {
				if e.tick/w.gran[k+1] == w.cur/w.gran[k+1] {
					wantL = k
					break
				}
			}
			wantS := int((e.tick / w.gran[wantL]) % slotsPerLevel)
			if e.tick < w.cur || l != wantL || s != wantS || e.tick-w.cur > w.spanTicks {
				return fmt.Errorf("entry %d (tick %d) on level %d slot %d, want level %d slot %d (cur %d)",
					e.id, e.tick, l, s, wantL, wantS, w.cur)
			}
			if l > 0 && s == int((w.cur/w.gran[l])%slotsPerLevel) {
				return fmt.Errorf("entry %d (tick %d) in the slot of level %d that holds cur %d", e.id, e.tick, l, w.cur)
			}
		}
	}
	if listed != len(w.index) {
		return fmt.Errorf("%d entries linked, %d indexed", listed, len(w.index))
	}
	free := 0
	for i := w.free; i != nilIndex; i = w.slab[i].next {
		free++
	}
	if int(w.sentinels)+listed+free != len(w.slab) {
		return fmt.Errorf("slab of %d: %d heads + %d linked + %d free", len(w.slab), w.sentinels, listed, free)
	}
	return nil
}

func TestWheelMatchesModel(t *testing.T) {
	t.Parallel()
	seeds := 300
	if testing.Short() {
		seeds = 30
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(seed, 0xa5))
			data := make([]byte, 3000)
			for i := range data {
				data[i] = byte(r.Uint32())
			}
			checkAgainstModel(t, data)
		})
	}
}

func FuzzWheel(f *testing.F) {
	f.Add([]byte{2, 2, 0, 0, 1, 40, 5, 0, 3, 4, 10})
	f.Add([]byte{0, 0, 128, 1, 2, 3, 200, 6, 6, 6, 4, 13})
	f.Add([]byte{1, 4, 128, 0, 5, 7, 100, 1, 9, 8, 140, 6, 4, 14, 7, 2, 6})
	f.Add([]byte{3, 1, 0, 2, 3, 8, 200, 2, 4, 6, 1, 3, 3, 6, 4, 10, 6})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkAgainstModel(t, data)
	})
}
