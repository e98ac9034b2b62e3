package clock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// fakeSource is a clock off by skew whose answers take rtt to come back, half each
// way.
type fakeSource struct {
	skew time.Duration
	rtt  []time.Duration
	n    int
	err  error
}

func (f *fakeSource) Now(ctx context.Context) (time.Time, error) {
	if f.err != nil {
		return time.Time{}, f.err
	}
	rtt := f.rtt[f.n%len(f.rtt)]
	f.n++
	time.Sleep(rtt / 2)
	t := time.Now().Add(f.skew)
	time.Sleep(rtt / 2)
	return t, nil
}

// Measure keeps the lowest-round-trip sample, taken at its midpoint, and Now follows
// the corrected clock without a monotonic reading.
func TestMeasure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New()
		src := &fakeSource{skew: 30 * time.Second, rtt: []time.Duration{40 * time.Millisecond, 2 * time.Millisecond, 90 * time.Millisecond}}
		offset, rtt, err := c.Measure(context.Background(), src, 3)
		if err != nil {
			t.Fatal(err)
		}
		if offset != 30*time.Second || rtt != 2*time.Millisecond {
			t.Errorf("Measure = %v, rtt %v; want 30s, 2ms", offset, rtt)
		}
		if d := c.Now().Sub(time.Now().Add(30 * time.Second)); d != 0 {
			t.Errorf("Now is %v off the store's clock, want 0", d)
		}
		if c.Now().Round(0) != c.Now() {
			t.Error("Now carries a monotonic reading")
		}
		src.err = errors.New("down")
		if _, _, err := c.Measure(context.Background(), src, 3); !errors.Is(err, src.err) {
			t.Errorf("Measure against a failing source = %v, want its error", err)
		}
	})
}

// A clock skewed like a wrong host's reads the store's time once measured.
func TestSkewedClockMeasuresBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewSkewed(-45 * time.Second)
		if _, _, err := c.Measure(context.Background(), &fakeSource{rtt: []time.Duration{0}}, 1); err != nil {
			t.Fatal(err)
		}
		if d := c.Now().Sub(time.Now()); d != 0 {
			t.Errorf("a host 45s slow reads %v off the store after Measure, want 0", d)
		}
	})
}

// A skew carried by the context moves the clock until a measurement corrects it.
func TestSkewFromContext(t *testing.T) {
	ctx := WithSkew(context.Background(), 30*time.Second)
	if d := SkewFrom(ctx); d != 30*time.Second {
		t.Fatalf("SkewFrom = %v, want 30s", d)
	}
	if d := SkewFrom(context.Background()); d != 0 {
		t.Fatalf("SkewFrom(no skew) = %v, want 0", d)
	}
	c := New()
	c.Skew(SkewFrom(ctx))
	if off := c.Now().Sub(time.Now()); off < 29*time.Second || off > 31*time.Second {
		t.Fatalf("a clock skewed by 30s reads %v off, want about 30s", off)
	}
}

// Offset is the store's clock minus the host's, whichever way the host's is off: a
// skew applied to the clock (Skew, NewSkewed) is the host's, not the store's.
func TestOffsetIsStoreMinusHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			name      string
			clock     func() *Clock
			storeSkew time.Duration
			want      time.Duration
		}{
			{"host 45s slow", func() *Clock { return NewSkewed(-45 * time.Second) }, 0, 45 * time.Second},
			{"host 30s fast by Skew", func() *Clock { c := New(); c.Skew(30 * time.Second); return c }, 0, -30 * time.Second},
			{"store 10s ahead", New, 10 * time.Second, 10 * time.Second},
		} {
			c := tc.clock()
			if d := c.Offset(); d != 0 {
				t.Errorf("%s: Offset before Measure = %v, want 0", tc.name, d)
			}
			if _, _, err := c.Measure(context.Background(), &fakeSource{skew: tc.storeSkew, rtt: []time.Duration{0}}, 1); err != nil {
				t.Fatal(err)
			}
			if d := c.Offset(); d != tc.want {
				t.Errorf("%s: Offset = %v, want %v", tc.name, d, tc.want)
			}
		}
	})
}

// flakySource is a store's clock, skew ahead, that fails while down is set.
type flakySource struct {
	skew time.Duration
	down atomic.Bool
}

func (f *flakySource) Now(ctx context.Context) (time.Time, error) {
	if f.down.Load() {
		return time.Time{}, errors.New("connection refused")
	}
	return time.Now().Add(f.skew), nil
}

// Follow measures every interval, and after a failed measurement again every
// followRetry until one succeeds: a store back after an outage (perhaps another
// server, with another clock) is measured within a second, not an interval later.
func TestFollowRetriesAfterAnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New()
		src := &flakySource{skew: 5 * time.Second}
		src.down.Store(true)
		stop := follow(c, src, nil)
		time.Sleep(time.Minute + 2500*time.Millisecond) // fails at 1m, 1m1s, 1m2s
		synctest.Wait()
		src.down.Store(false) // back, 5s ahead
		time.Sleep(time.Second)
		synctest.Wait()
		at, errs := stop()

		if len(at) != 4 {
			t.Fatalf("%d measurements in 1m3.5s, want 4 (at 1m, then every second until one succeeds)", len(at))
		}
		for i, want := range []time.Duration{time.Minute, time.Minute + time.Second, time.Minute + 2*time.Second, time.Minute + 3*time.Second} {
			if got := at[i]; got != want {
				t.Errorf("measurement %d at %v, want %v", i+1, got, want)
			}
		}
		if errs[2] == nil || errs[3] != nil {
			t.Errorf("errors %v: want the first three failed and the fourth succeeded", errs)
		}
		if d := c.Now().Sub(time.Now().Add(5 * time.Second)); d != 0 {
			t.Errorf("after the store came back the clock is %v off its clock, want 0", d)
		}
	})
}

// A nudge (another store call failed: the store may be failing over) measures at once,
// and every second until a measurement succeeds: the clock of the server that answers
// then is followed within a second, not at the next minute.
func TestFollowMeasuresWhenNudged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New()
		src := &flakySource{skew: 5 * time.Second}
		nudge := make(chan struct{}, 1)
		stop := follow(c, src, nudge)
		time.Sleep(10 * time.Second)
		src.down.Store(true)
		nudge <- struct{}{} // at 10s: fails, then 11s fails
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		src.down.Store(false) // back at 11.5s, 5s ahead: measured at 12s
		time.Sleep(time.Second)
		synctest.Wait()
		at, _ := stop()

		want := []time.Duration{10 * time.Second, 11 * time.Second, 12 * time.Second}
		if !slices.Equal(at, want) {
			t.Errorf("measured at %v, want %v", at, want)
		}
		if d := c.Now().Sub(time.Now().Add(5 * time.Second)); d != 0 {
			t.Errorf("after the nudge the clock is %v off the store's, want 0", d)
		}
	})
}

// follow runs c.Follow on src every minute, with nudge, until stop, which returns
// when each measurement was made (since follow was called) and its error.
func follow(c *Clock, src Source, nudge <-chan struct{}) (stop func() ([]time.Duration, []error)) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var at []time.Duration
	var errs []error
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Follow(ctx, src, time.Minute, nudge, func(offset, rtt time.Duration, err error) {
			mu.Lock()
			defer mu.Unlock()
			at, errs = append(at, time.Since(start)), append(errs, err)
		})
	}()
	return func() ([]time.Duration, []error) {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return at, errs
	}
}
