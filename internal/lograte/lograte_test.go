package lograte

import (
	"fmt"
	"testing"
	"time"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestOneLinePerKeyPerInterval(t *testing.T) {
	c := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := New(time.Minute, 10, c.now)
	if ok, n := l.Allow("a"); !ok || n != 0 {
		t.Fatalf("first Allow(a) = %v, %d; want true, 0", ok, n)
	}
	for i := range 5 {
		if ok, _ := l.Allow("a"); ok {
			t.Fatalf("Allow(a) #%d within the interval = true", i+2)
		}
	}
	if ok, n := l.Allow("b"); !ok || n != 5 {
		t.Fatalf("Allow(b) = %v, %d; want true, the 5 lines of a held back", ok, n)
	}
	l.Allow("a")
	c.t = c.t.Add(time.Minute)
	if ok, n := l.Allow("a"); !ok || n != 1 {
		t.Fatalf("Allow(a) an interval later = %v, %d; want true, 1 held back", ok, n)
	}
	if ok, n := l.Allow("a"); ok || n != 0 {
		t.Fatalf("Allow(a) right after = %v, %d; want false", ok, n)
	}
}

// TestBoundedKeys: a flood from ever new keys keeps at most maxKeys entries, writes at
// most one line per interval for the ones that found no room, and loses no count.
func TestBoundedKeys(t *testing.T) {
	c := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := New(time.Minute, 4, c.now)
	written, reported := 0, 0
	const floods = 1000
	for i := range floods {
		if ok, n := l.Allow(fmt.Sprint("k", i)); ok {
			written++
			reported += n
		}
	}
	if len(l.last) > 5 { // 4 keys and the overflow
		t.Fatalf("%d keys kept, want at most 5", len(l.last))
	}
	if l.sweeps != 1 {
		t.Fatalf("%d new keys in one interval, past the bound, swept the keys %d times, want once", floods-4, l.sweeps)
	}
	if written != 5 {
		t.Fatalf("%d lines written for %d new keys in one interval, want 5 (4 keys and one for the overflow)", written, floods)
	}
	c.t = c.t.Add(time.Minute)
	if ok, n := l.Allow("late"); !ok {
		t.Fatal("a new key an interval later is held back")
	} else {
		reported += n
	}
	if ok, n := l.Allow("another"); ok {
		reported += n
	}
	if got, want := reported+written, floods; got != want {
		t.Fatalf("lines written and reported held back = %d, want all %d", got, want)
	}
}
