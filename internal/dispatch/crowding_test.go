package dispatch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/internal/clock"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/memory"
)

// The loop goes coarse once crowdedAfter claims that tasks fell due behind within any
// crowdWindow, stays so for crowdHold after the last, and a slower trickle never
// makes it coarse.
func TestCrowding(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	var c crowding
	// A trickle: a little fewer than crowdedAfter claims behind a window.
	at := t0
	for range 10 * crowdedAfter {
		c.claimBehind(at)
		if c.coarse(at) {
			t.Fatalf("coarse at +%v after a trickle of claims behind", at.Sub(t0))
		}
		at = at.Add(crowdWindow/(crowdedAfter-1) + time.Microsecond) // 16 span just over a window
	}
	// A crowd straddling two seconds: half of it at the end of one, half at the start
	// of the next — within a window all the same.
	at = at.Add(10 * crowdWindow).Truncate(crowdWindow).Add(-crowdWindow / 4)
	for i := range crowdedAfter {
		if c.coarse(at) {
			t.Fatalf("coarse after %d claims behind, want after %d", i, crowdedAfter)
		}
		c.claimBehind(at)
		at = at.Add(crowdWindow / 2 / crowdedAfter)
	}
	crowded := at.Add(-crowdWindow / 2 / crowdedAfter)
	if !c.coarse(crowded) {
		t.Fatalf("not coarse after %d claims behind within %v", crowdedAfter, crowdWindow/2)
	}
	if !c.coarse(crowded.Add(crowdHold - time.Nanosecond)) {
		t.Errorf("exact again before crowdHold (%v) passed", crowdHold)
	}
	// One more while coarse, with the last crowdedAfter within a window: the hold
	// runs from it.
	more := crowded.Add(crowdWindow / 4)
	c.claimBehind(more)
	if !c.coarse(more.Add(crowdHold - time.Nanosecond)) {
		t.Errorf("a claim behind while crowded did not extend the hold")
	}
	if c.coarse(more.Add(crowdHold)) {
		t.Errorf("still coarse crowdHold (%v) after the last claim behind", crowdHold)
	}
}

// slowClaims is a store whose claims take claimTime of the bubble's clock, as on a
// machine whose cores are all busy, but for the first claim from stallAt on, which
// takes stall; it keeps when each began.
type slowClaims struct {
	store.Store
	claimTime time.Duration
	stallAt   time.Time
	stall     time.Duration
	mu        sync.Mutex
	began     []time.Time
	stalled   bool
}

func (s *slowClaims) ClaimStart(ctx context.Context, fence store.Fence, on store.StartOn, claims []store.Claim) (*store.ClaimResult, error) {
	s.mu.Lock()
	now, d := time.Now(), s.claimTime
	s.began = append(s.began, now)
	if !s.stalled && !s.stallAt.IsZero() && !now.Before(s.stallAt) {
		s.stalled, d = true, s.stall
	}
	s.mu.Unlock()
	time.Sleep(d)
	return s.Store.ClaimStart(ctx, fence, on, claims)
}

// claimsBetween returns when the claims that began in [from, to) began.
func (s *slowClaims) claimsBetween(from, to time.Time) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var in []time.Time
	for _, b := range s.began {
		if !b.Before(from) && b.Before(to) {
			in = append(in, b)
		}
	}
	return in
}

// runStream writes nts into st's store and runs a loop on st, with room for them
// all, until the bubble's clock reaches until; it returns what the loop dispatched.
func runStream(t *testing.T, st *slowClaims, tick time.Duration, nts []store.NewTask, until time.Time) *recorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := st.Store.Insert(ctx, nts); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	l := New(Config{
		Store: st, Clock: clock.New(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Executor: rec,
		Tick: tick, Window: time.Minute, RefillInterval: time.Second, Capacity: len(nts) + 1,
	})
	var wg sync.WaitGroup
	wg.Go(func() { l.Run(ctx) })
	time.Sleep(time.Until(until))
	synctest.Wait()
	cancel()
	wg.Wait()
	return rec
}

// In the loop: a stream that falls due faster than claims come back turns the wheel
// coarse — a claim per tick, at the tick's end — and a minute after the stream ends a
// lone task is claimed at its due again; while coarse, at its tick's end. Never early.
func TestLoopGoesCoarseWhileClaimsFallBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New()
		defer mem.Close()
		const tick = 10 * time.Millisecond
		st := &slowClaims{Store: mem, claimTime: 6 * time.Millisecond} // ≥ tick/2
		// The wheel's origin: its ticks end at origin + k·tick.
		origin := time.Now()
		streamFrom, streamTo := origin.Add(time.Second), origin.Add(3*time.Second)
		// A task at streamFrom, then one every claimTime from 2 ms after it: claims run
		// back to back, each with a task falling due behind it 2 ms after it was sent —
		// long before the half tick, which the claim outlasts.
		nts := []store.NewTask{{Name: "job", Key: "s0", DueAt: streamFrom, MaxRetry: 1}}
		for due := streamFrom.Add(2 * time.Millisecond); due.Before(streamTo); due = due.Add(st.claimTime) {
			nts = append(nts, store.NewTask{Name: "job", Key: fmt.Sprint("s", due.Sub(origin)), DueAt: due, MaxRetry: 1})
		}
		// Lone tasks 3 ms into a tick: in the hold, and after it.
		inHold, after := streamTo.Add(30*time.Second+3*time.Millisecond), streamTo.Add(crowdHold+10*time.Second+3*time.Millisecond)
		nts = append(nts, store.NewTask{Name: "job", Key: "in-hold", DueAt: inHold, MaxRetry: 1},
			store.NewTask{Name: "job", Key: "after", DueAt: after, MaxRetry: 1})
		rec := runStream(t, st, tick, nts, after.Add(time.Second))

		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.got) != len(nts) {
			t.Fatalf("%d tasks dispatched, want %d", len(rec.got), len(nts))
		}
		for i, task := range rec.got {
			if rec.when[i].Before(task.DueAt) {
				t.Errorf("task %s dispatched at %v, before its due %v", task.Key, rec.when[i], task.DueAt)
			}
		}
		// The stream's second half: claims at ticks' ends, one a tick at most.
		late := st.claimsBetween(streamFrom.Add(time.Second), streamTo)
		if len(late) == 0 || len(late) > int(time.Second/tick) {
			t.Errorf("%d claims in the stream's second second, want 1 to %d (a tick's end each)", len(late), time.Second/tick)
		}
		for _, b := range late {
			if b.Sub(origin)%tick != 0 {
				t.Errorf("a claim began %v after the origin, not at a tick's end: the wheel is not coarse", b.Sub(origin))
				break
			}
		}
		for _, c := range []struct {
			due  time.Time
			want time.Time
		}{
			{inHold, inHold.Truncate(tick).Add(tick)}, // coarse: at its tick's end
			{after, after}, // a minute on: at its due again
		} {
			got := st.claimsBetween(c.due.Add(-time.Second), c.due.Add(time.Second))
			if len(got) != 1 || !got[0].Equal(c.want) {
				t.Errorf("the task due %v after the stream was claimed at %v, want at %v",
					c.due.Sub(streamTo), got, c.want.Sub(streamTo))
			}
		}
	})
}

// One claim the store holds up (a checkpoint's stall, say) while a stream falls due
// behind it counts once: the loop stays exact.
func TestLoopStaysExactThroughAStalledClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New()
		defer mem.Close()
		const tick = 10 * time.Millisecond
		origin := time.Now()
		streamFrom, streamTo := origin.Add(time.Second), origin.Add(3*time.Second)
		st := &slowClaims{Store: mem, claimTime: tick / 20, stallAt: streamFrom.Add(500 * time.Millisecond), stall: 300 * time.Millisecond}
		var nts []store.NewTask
		for due := streamFrom; due.Before(streamTo); due = due.Add(2 * time.Millisecond) {
			nts = append(nts, store.NewTask{Name: "job", Key: fmt.Sprint("s", due.Sub(origin)), DueAt: due, MaxRetry: 1})
		}
		lone := streamTo.Add(2*time.Second + 3*time.Millisecond)
		runLone(t, st, tick, nts, lone)
		if !st.stalled {
			t.Fatal("no claim stalled")
		}
		wantExact(t, st, lone)
	})
}

// Claims that run back to back, each with a task falling due behind it, but each
// shorter than half a tick, are claims keeping up: the loop stays exact.
func TestLoopStaysExactWhileClaimsKeepUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New()
		defer mem.Close()
		const tick = 10 * time.Millisecond
		st := &slowClaims{Store: mem, claimTime: 4 * time.Millisecond} // < tick/2
		origin := time.Now()
		streamFrom, streamTo := origin.Add(time.Second), origin.Add(3*time.Second)
		nts := []store.NewTask{{Name: "job", Key: "s0", DueAt: streamFrom, MaxRetry: 1}}
		for due := streamFrom.Add(2 * time.Millisecond); due.Before(streamTo); due = due.Add(st.claimTime) {
			nts = append(nts, store.NewTask{Name: "job", Key: fmt.Sprint("s", due.Sub(origin)), DueAt: due, MaxRetry: 1})
		}
		lone := streamTo.Add(2*time.Second + 3*time.Millisecond)
		runLone(t, st, tick, nts, lone)
		if got := st.claimsBetween(streamFrom.Add(time.Second), streamTo); len(got) < int(time.Second/st.claimTime)/2 {
			t.Errorf("%d claims in the stream's second second, want claims back to back (about %d)", len(got), time.Second/st.claimTime)
		}
		wantExact(t, st, lone)
	})
}

// runLone runs the stream nts and a lone task due at lone, 3 ms into a tick, and
// checks that every task was dispatched.
func runLone(t *testing.T, st *slowClaims, tick time.Duration, nts []store.NewTask, lone time.Time) {
	t.Helper()
	nts = append(nts, store.NewTask{Name: "job", Key: "lone", DueAt: lone, MaxRetry: 1})
	if n := runStream(t, st, tick, nts, lone.Add(time.Second)).count(); n != len(nts) {
		t.Fatalf("%d tasks dispatched, want %d", n, len(nts))
	}
}

// wantExact checks that the lone task due at lone was claimed once, at its due: the
// wheel was not coarse then.
func wantExact(t *testing.T, st *slowClaims, lone time.Time) {
	t.Helper()
	if got := st.claimsBetween(lone.Add(-time.Second), lone.Add(time.Second)); len(got) != 1 || !got[0].Equal(lone) {
		t.Errorf("the lone task was claimed at %v, want at its due %v: the wheel went coarse", got, lone)
	}
}
