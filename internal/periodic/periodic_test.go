package periodic

import (
	"testing"
	"time"

	"github.com/axsched/ax/internal/cronspec"
	"github.com/axsched/ax/store"
)

func every(t *testing.T, d time.Duration, misfire store.MisfirePolicy) *Schedule {
	t.Helper()
	sp, err := cronspec.Every(d)
	if err != nil {
		t.Fatal(err)
	}
	return &Schedule{Name: "s", Spec: sp, Loc: time.UTC, Misfire: misfire}
}

// plan after ten minutes down, every two minutes: the misfire policy picks among the
// five missed slots, and the slots within FireAhead of now fire as usual.
func TestPlanAfterDowntime(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	next := t0                                  // the first slot not materialised
	now := t0.Add(10*time.Minute + time.Second) // back at 10:10:01
	grace := MisfireGrace(time.Second)
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	for _, tc := range []struct {
		policy     store.MisfirePolicy
		maxCatchUp int
		slots      []time.Time
		caught     int
	}{
		{store.MisfireFireOnce, 100, []time.Time{at(8)}, 1},
		{store.MisfireSkip, 100, nil, 0},
		{store.MisfireCatchUp, 100, []time.Time{at(0), at(2), at(4), at(6), at(8)}, 5},
		{store.MisfireCatchUp, 2, []time.Time{at(6), at(8)}, 2},
	} {
		p := every(t, 2*time.Minute, tc.policy)
		slots, caught, newNext := p.plan(next, now, grace, tc.maxCatchUp)
		// 10:10 is 1s past, within the grace: on time, not missed.
		want := append(append([]time.Time(nil), tc.slots...), at(10))
		if caught != tc.caught || !equal(slots, want) || !newNext.Equal(at(12)) {
			t.Errorf("%s (max %d): plan = %v, caught %d, next %v; want %v, %d, %v",
				tc.policy, tc.maxCatchUp, slots, caught, newNext, want, tc.caught, at(12))
		}
	}
	// On time: nothing missed.
	p := every(t, 2*time.Minute, store.MisfireFireOnce)
	slots, caught, newNext := p.plan(at(2), at(2).Add(-FireAhead), grace, 100)
	if caught != -1 || !equal(slots, []time.Time{at(2)}) || !newNext.Equal(at(4)) {
		t.Errorf("on time: plan = %v, caught %d, next %v; want [10:02], -1, 10:04", slots, caught, newNext)
	}
}

func equal(a, b []time.Time) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

// A spec no date satisfies has no next slot: Never, which plan never fires.
func TestNeverFires(t *testing.T) {
	sp, err := cronspec.Parse("0 0 30 2 *")
	if err != nil {
		t.Fatal(err)
	}
	p := &Schedule{Name: "s", Spec: sp, Loc: time.UTC}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := p.Next(now); !got.Equal(Never) {
		t.Errorf("Next = %v, want Never", got)
	}
	if slots, _, next := p.plan(Never, now, time.Second, 10); len(slots) != 0 || !next.Equal(Never) {
		t.Errorf("plan = %v, %v; want nothing, Never", slots, next)
	}
}

func TestOccurrenceKey(t *testing.T) {
	slot := time.Date(2026, 11, 29, 10, 2, 0, 0, time.FixedZone("X", 3600))
	if got := OccurrenceKey(slot); got != "2026-11-29T09:02:00Z" {
		t.Errorf("OccurrenceKey = %q, want the slot in RFC 3339 UTC", got)
	}
}

// missedGap covers the missed slots plan drops, up to the first one it fired or the
// first one on time, and says what the policy did.
func TestMissedGap(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	now := t0.Add(10*time.Minute + time.Second)
	grace := MisfireGrace(time.Second)
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	for _, tc := range []struct {
		policy     store.MisfirePolicy
		maxCatchUp int
		until      time.Time
		result     string
		none       bool
	}{
		{store.MisfireFireOnce, 100, at(8), "fired the last one", false},
		{store.MisfireSkip, 100, at(10), "skipped", false},
		{store.MisfireCatchUp, 2, at(6), "caught up 2, the most recent", false},
		{store.MisfireCatchUp, 100, time.Time{}, "", true}, // every missed slot fired
	} {
		p := every(t, 2*time.Minute, tc.policy)
		slots, caught, _ := p.plan(t0, now, grace, tc.maxCatchUp)
		g, ok := p.missedGap(t0, slots, caught, now.Add(-grace))
		if ok == tc.none || (ok && (!g.From.Equal(t0) || !g.Until.Equal(tc.until) || g.Result != tc.result || g.Why != store.GapMissed || g.Schedule != "s")) {
			t.Errorf("%s (max %d): missedGap = %+v, %v; want [%v, %v) %q", tc.policy, tc.maxCatchUp, g, ok, t0, tc.until, tc.result)
		}
	}
}
