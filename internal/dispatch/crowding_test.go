package dispatch

import (
	"testing"
	"time"
)

// The loop goes coarse once crowdedAfter tasks fell due behind a claim within
// crowdWindow, stays so for crowdHold, and a slower trickle never makes it coarse.
func TestCrowding(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	var c crowding
	// A trickle: fewer than crowdedAfter tasks behind claims a window.
	at := t0
	for range 10 * crowdedAfter {
		c.fellDue(at, 1)
		at = at.Add(crowdWindow / time.Duration(crowdedAfter-2))
		if c.coarse(at) {
			t.Fatalf("coarse at +%v after a trickle of tasks behind claims", at.Sub(t0))
		}
	}
	// A crowd: crowdedAfter tasks behind claims within a window.
	at = at.Add(crowdWindow)
	for i := range crowdedAfter {
		if c.coarse(at) {
			t.Fatalf("coarse after %d tasks behind claims, want after %d", i, crowdedAfter)
		}
		c.fellDue(at, 1)
		at = at.Add(time.Millisecond)
	}
	crowded := at.Add(-time.Millisecond)
	if !c.coarse(at) {
		t.Fatalf("not coarse after %d tasks behind claims within %v", crowdedAfter, crowdWindow)
	}
	if !c.coarse(crowded.Add(crowdHold - time.Nanosecond)) {
		t.Errorf("exact again before crowdHold (%v) passed", crowdHold)
	}
	if c.coarse(crowded.Add(crowdHold)) {
		t.Errorf("still coarse crowdHold (%v) after the crowd", crowdHold)
	}
}
