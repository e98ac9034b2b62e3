// Package electtest is the conformance suite every elect.Elector passes.
//
// A backend's test calls Run with a Harness. Each case is a subtest with its own election:
// electors that Harness.New returns for the same *testing.T compete for one lease, and a
// different *testing.T means a different election. Cases wait on channels and conditions
// with deadlines, with TTLs of 300 ms to 1 s; the whole suite takes a few seconds.
package electtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/elect"
)

// Harness adapts one backend to the suite.
type Harness struct {
	// New returns a new elector of t's election with the given TTL: all electors New returns
	// for the same t compete for the same lease, and electors of different t never meet.
	// Required.
	New func(t *testing.T, ttl time.Duration) elect.Elector

	// Freeze, when set, makes e stop talking to its backend until the returned func is
	// called: a frozen process, whose renewals do not reach the backend. Requests already
	// blocked should end when their context does (a Freezer behind e's connection does
	// both). Without it the expiry and frozen-holder cases are skipped.
	Freeze func(e elect.Elector) (thaw func())

	// WakesOnRelease says that a Resign wakes the standbys of every elector of the
	// election (Redis: a PUBLISH they subscribe to), not only a fallback poll. The Release
	// case then wants the takeover within wakeBound of the Resign, not only within the TTL.
	WakesOnRelease bool

	// LoseData, when set, makes the backend forget the state of t's election (Redis: FLUSHDB
	// of the test's own database). Run never calls it while another case is running.
	// Without it the data-loss case is skipped.
	LoseData func(t *testing.T)
}

// Run runs every case. The data-loss case runs first and alone; the others run in parallel.
func Run(t *testing.T, h Harness) {
	t.Helper()
	t.Run("TokensIncreaseAfterDataLoss", func(t *testing.T) { testDataLoss(t, h) })
	cases := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"Acquire", testAcquire},
		{"Contention", testContention},
		{"RenewByHolderOnly", testRenewByHolderOnly},
		{"Expiry", testExpiry},
		{"Release", testRelease},
		{"FrozenHolder", testFrozenHolder},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, h)
		})
	}
}

// campaign is a Campaign running in the background.
type campaign struct {
	done  chan struct{}
	lease elect.Lease
	err   error
	at    time.Time // when Campaign returned (monotonic)
}

func startCampaign(ctx context.Context, e elect.Elector, candidate string) *campaign {
	c := &campaign{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.lease, c.err = e.Campaign(ctx, candidate)
		c.at = time.Now()
	}()
	return c
}

// wait waits for the campaign to return within d.
func (c *campaign) wait(t *testing.T, d time.Duration) elect.Lease {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(d):
		t.Fatalf("Campaign did not return within %v", d)
	}
	if c.err != nil {
		t.Fatalf("Campaign: %v", c.err)
	}
	return c.lease
}

func mustCampaign(t *testing.T, e elect.Elector, candidate string, within time.Duration) elect.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	l, err := e.Campaign(ctx, candidate)
	if err != nil {
		t.Fatalf("Campaign(%q) = %v", candidate, err)
	}
	if l.Context().Err() != nil {
		t.Fatalf("Campaign(%q): lease context already done: %v", candidate, context.Cause(l.Context()))
	}
	return l
}

func resign(t *testing.T, l elect.Lease) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return l.Resign(ctx)
}

func leader(t *testing.T, e elect.Elector) elect.State {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := e.Leader(ctx)
	if err != nil {
		t.Fatalf("Leader: %v", err)
	}
	return s
}

func wantLeader(t *testing.T, e elect.Elector, holder string, l elect.Lease) {
	t.Helper()
	s := leader(t, e)
	if s.Holder != holder || s.Token != l.Token() {
		t.Fatalf("Leader() = %+v, want holder %q token %d", s, holder, l.Token())
	}
}

// waitDone waits for ctx to end within d and returns when it was observed.
func waitDone(t *testing.T, ctx context.Context, d time.Duration, what string) time.Time {
	t.Helper()
	select {
	case <-ctx.Done():
		return time.Now()
	case <-time.After(d):
		t.Fatalf("%s: context not done within %v", what, d)
		return time.Time{}
	}
}

func testAcquire(t *testing.T, h Harness) {
	const ttl = time.Second
	e := h.New(t, ttl)
	if s := leader(t, e); s.Holder != "" {
		t.Fatalf("Leader() before any campaign = %+v, want no holder", s)
	}
	l := mustCampaign(t, e, "a", ttl)
	if l.Token() <= 0 {
		t.Fatalf("Token() = %d, want > 0", l.Token())
	}
	s := leader(t, e)
	if s.Holder != "a" || s.Token != l.Token() || s.Remaining <= 0 || s.Remaining > ttl {
		t.Fatalf("Leader() = %+v, want holder a, token %d, remaining in (0, %v]", s, l.Token(), ttl)
	}
	if err := resign(t, l); err != nil {
		t.Fatalf("Resign() = %v, want nil", err)
	}
	if err := context.Cause(l.Context()); !errors.Is(err, elect.ErrResigned) {
		t.Fatalf("context.Cause(lease) after Resign = %v, want ErrResigned", err)
	}
	if s := leader(t, e); s.Holder != "" {
		t.Fatalf("Leader() after Resign = %+v, want no holder", s)
	}
	l2 := mustCampaign(t, e, "a", ttl)
	if l2.Token() <= l.Token() {
		t.Fatalf("second Token() = %d, want > %d", l2.Token(), l.Token())
	}
	if err := resign(t, l2); err != nil {
		t.Fatalf("Resign() = %v, want nil", err)
	}
}

func testContention(t *testing.T, h Harness) {
	const (
		ttl        = time.Second
		candidates = 8
		rounds     = 16
	)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var (
		mu      sync.Mutex
		holding string
		tokens  []int64
		errs    []error
		wg      sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
		cancel()
	}
	for i := range candidates {
		e := h.New(t, ttl)
		name := fmt.Sprintf("c%d", i)
		wg.Go(func() {
			for ctx.Err() == nil {
				l, err := e.Campaign(ctx, name)
				if err != nil {
					if ctx.Err() == nil {
						fail(fmt.Errorf("%s: Campaign: %w", name, err))
					}
					return
				}
				mu.Lock()
				if holding != "" {
					mu.Unlock()
					fail(fmt.Errorf("%s acquired token %d while %s held the lease", name, l.Token(), holding))
					return
				}
				if n := len(tokens); n > 0 && l.Token() <= tokens[n-1] {
					errs = append(errs, fmt.Errorf("%s: token %d after %d, want strictly increasing", name, l.Token(), tokens[n-1]))
				}
				holding = name
				tokens = append(tokens, l.Token())
				last := len(tokens) >= rounds
				mu.Unlock()
				time.Sleep(time.Millisecond) // hold briefly, so that overlaps could show
				if l.Context().Err() != nil {
					fail(fmt.Errorf("%s lost its lease within 1ms: %v", name, context.Cause(l.Context())))
				}
				mu.Lock()
				holding = ""
				mu.Unlock()
				rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
				err = l.Resign(rctx)
				rcancel()
				if err != nil {
					fail(fmt.Errorf("%s: Resign: %w", name, err))
					return
				}
				if last {
					cancel()
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	if len(tokens) < rounds {
		t.Fatalf("%d acquisitions before the deadline, want %d", len(tokens), rounds)
	}
}

// electTTL is the lease TTL of the cases in which a holder must keep renewing through
// the whole check: at 300–500 ms a renewal delayed by a machine busy with the other
// tests' databases (their migrations' commits) lost the lease about once in ten runs,
// and at 1 s once under the whole suite (SQLite).
const electTTL = 2 * time.Second

func testRenewByHolderOnly(t *testing.T, h Harness) {
	const ttl = electTTL
	a, b := h.New(t, ttl), h.New(t, ttl)
	la := mustCampaign(t, a, "a", ttl)

	// b campaigns under the same candidate name for 3 TTLs: it must not get in.
	ctx, cancel := context.WithTimeout(context.Background(), 3*ttl)
	defer cancel()
	cb := startCampaign(ctx, b, "a")
	select {
	case <-la.Context().Done():
		t.Fatalf("lease lost while its holder renews: %v", context.Cause(la.Context()))
	case <-cb.done:
		if cb.err == nil {
			t.Fatalf("second elector acquired token %d while the first held %d", cb.lease.Token(), la.Token())
		}
		if !errors.Is(cb.err, context.DeadlineExceeded) {
			t.Fatalf("Campaign by second elector = %v, want context.DeadlineExceeded", cb.err)
		}
	}
	if la.Context().Err() != nil {
		t.Fatalf("lease lost while its holder renews: %v", context.Cause(la.Context()))
	}
	wantLeader(t, b, "a", la)

	if err := resign(t, la); err != nil {
		t.Fatalf("Resign() = %v, want nil", err)
	}
	lb := mustCampaign(t, b, "a", ttl)
	if lb.Token() <= la.Token() {
		t.Fatalf("new holder's Token() = %d, want > %d", lb.Token(), la.Token())
	}
	// Resigning the old lease again leaves the new holder alone.
	if err := resign(t, la); err != nil {
		t.Fatalf("second Resign() = %v, want the first call's nil", err)
	}
	wantLeader(t, a, "a", lb)
	if lb.Context().Err() != nil {
		t.Fatalf("new lease ended by the old lease's Resign: %v", context.Cause(lb.Context()))
	}
	if err := resign(t, lb); err != nil {
		t.Fatalf("Resign() = %v, want nil", err)
	}
}

func testExpiry(t *testing.T, h Harness) {
	if h.Freeze == nil {
		t.Skip("Harness.Freeze not set")
	}
	const ttl = 500 * time.Millisecond
	a, b := h.New(t, ttl), h.New(t, ttl)
	la := mustCampaign(t, a, "a", ttl)
	ctx, cancel := context.WithTimeout(context.Background(), 5*ttl)
	defer cancel()
	cb := startCampaign(ctx, b, "b")

	frozen := time.Now()
	thaw := h.Freeze(a)
	defer thaw()
	lost := waitDone(t, la.Context(), ttl, "frozen holder")
	if d := lost.Sub(frozen); d >= ttl {
		t.Fatalf("frozen holder lost its lease %v after the freeze, want < TTL %v", d, ttl)
	}
	if err := context.Cause(la.Context()); !errors.Is(err, elect.ErrLost) {
		t.Fatalf("context.Cause(lease) = %v, want ErrLost", err)
	}
	lb := cb.wait(t, 2*ttl)
	if !lost.Before(cb.at) {
		t.Fatalf("new holder acquired at %v, before the frozen holder's context ended at %v", cb.at.Sub(frozen), lost.Sub(frozen))
	}
	if d := cb.at.Sub(frozen); d > ttl+ttl/2+100*time.Millisecond {
		t.Fatalf("new holder acquired %v after the freeze, want within TTL + poll", d)
	}
	if lb.Token() <= la.Token() {
		t.Fatalf("new holder's Token() = %d, want > %d", lb.Token(), la.Token())
	}
	t.Logf("lost %v after the freeze, taken over after %v", lost.Sub(frozen), cb.at.Sub(frozen))
	thaw()
	if err := resign(t, la); !errors.Is(err, elect.ErrLost) {
		t.Fatalf("Resign() of the expired lease = %v, want ErrLost", err)
	}
	wantLeader(t, b, "b", lb)
	if err := resign(t, lb); err != nil {
		t.Fatalf("Resign() = %v, want nil", err)
	}
}

// wakeBound is how soon after a Resign a woken standby must hold the lease: a few round
// trips, far below the fallback poll (TTL/2) of the Release case.
const wakeBound = 100 * time.Millisecond

func testRelease(t *testing.T, h Harness) {
	const ttl = time.Second
	a, b := h.New(t, ttl), h.New(t, ttl)
	la := mustCampaign(t, a, "a", ttl)
	ctx, cancel := context.WithTimeout(context.Background(), 5*ttl)
	defer cancel()
	cb := startCampaign(ctx, b, "b")
	// Let b fail its first attempt and stand by; it must still get in at once after Resign.
	select {
	case <-cb.done:
		t.Fatalf("Campaign returned while the lease was held: %v, %v", cb.lease, cb.err)
	case <-time.After(ttl / 5):
	}
	released := time.Now()
	if err := resign(t, la); err != nil {
		t.Fatalf("Resign() = %v, want nil", err)
	}
	lb := cb.wait(t, ttl)
	d := cb.at.Sub(released)
	t.Logf("standby acquired %v after Resign", d)
	if d >= ttl {
		t.Fatalf("standby acquired %v after Resign, want < TTL %v", d, ttl)
	}
	if h.WakesOnRelease && d >= wakeBound {
		t.Fatalf("standby acquired %v after Resign, want < %v: Harness.WakesOnRelease says a Resign wakes it", d, wakeBound)
	}
	if lb.Token() <= la.Token() {
		t.Fatalf("new holder's Token() = %d, want > %d", lb.Token(), la.Token())
	}
	if err := resign(t, lb); err != nil {
		t.Fatalf("Resign() = %v, want nil", err)
	}
}

func testFrozenHolder(t *testing.T, h Harness) {
	if h.Freeze == nil {
		t.Skip("Harness.Freeze not set")
	}
	const ttl = electTTL
	a, b := h.New(t, ttl), h.New(t, ttl)
	la := mustCampaign(t, a, "a", ttl)
	thaw := h.Freeze(a)
	lb := mustCampaign(t, b, "b", 3*ttl)
	if lb.Token() <= la.Token() {
		thaw()
		t.Fatalf("new holder's Token() = %d, want > %d", lb.Token(), la.Token())
	}
	thaw()
	if la.Context().Err() == nil {
		t.Fatal("old lease's context not done after another candidate took over")
	}
	// Give the old holder's renewer several renew periods: none may take the lease back.
	ctx, cancel := context.WithTimeout(context.Background(), 2*ttl)
	defer cancel()
	ca := startCampaign(ctx, a, "a")
	select {
	case <-lb.Context().Done():
		t.Fatalf("new holder lost its lease after the old one thawed: %v", context.Cause(lb.Context()))
	case <-ca.done:
		if ca.err == nil {
			t.Fatalf("thawed elector acquired token %d while the new holder held %d", ca.lease.Token(), lb.Token())
		}
	}
	wantLeader(t, a, "b", lb)
	if err := resign(t, la); !errors.Is(err, elect.ErrLost) {
		t.Fatalf("Resign() of the overtaken lease = %v, want ErrLost", err)
	}
	wantLeader(t, a, "b", lb)
	if err := resign(t, lb); err != nil {
		t.Fatalf("Resign() = %v, want nil", err)
	}
}

func testDataLoss(t *testing.T, h Harness) {
	if h.LoseData == nil {
		t.Skip("Harness.LoseData not set")
	}
	const ttl = 500 * time.Millisecond
	a, b := h.New(t, ttl), h.New(t, ttl)
	// Raise the token a little, so that a fresh epoch would visibly be lower.
	var la elect.Lease
	for range 3 {
		if la != nil {
			if err := resign(t, la); err != nil {
				t.Fatalf("Resign() = %v", err)
			}
		}
		la = mustCampaign(t, a, "a", ttl)
	}
	n := la.Token()
	wantLeader(t, b, "a", la) // b has seen token n
	h.LoseData(t)
	// The backend no longer records a as the holder: its next renewal fails.
	waitDone(t, la.Context(), ttl, "holder after data loss")
	lb := mustCampaign(t, b, "b", 2*ttl)
	if lb.Token() <= n {
		t.Fatalf("Token() after data loss = %d, want > %d (seen before the loss)", lb.Token(), n)
	}
	if err := resign(t, lb); err != nil {
		t.Fatalf("Resign() = %v", err)
	}
	h.LoseData(t)
	la2 := mustCampaign(t, a, "a", 2*ttl)
	if la2.Token() <= n {
		t.Fatalf("Token() after a second data loss = %d, want > %d (issued by the same elector before)", la2.Token(), n)
	}
	if err := resign(t, la2); err != nil {
		t.Fatalf("Resign() = %v", err)
	}
}

// CampaignWonAsCtxEnds checks a backend's answer to a campaign whose ctx ends just as
// its acquire wins: e must be built so that its backend cancels ctx as a winning
// acquire answers (a backend-specific hook). Campaign must return the lease — ctx
// bounds the wait only — and keep renewing it rather than leave it to expire.
func CampaignWonAsCtxEnds(t *testing.T, e elect.Elector, ctx context.Context, ttl time.Duration) {
	t.Helper()
	l, err := e.Campaign(ctx, "a")
	if err != nil {
		t.Fatalf("Campaign whose ctx ended as it won = %v, want the lease", err)
	}
	if ctx.Err() == nil {
		t.Fatal("the hook did not cancel Campaign's ctx")
	}
	if l.Context().Err() != nil {
		t.Fatalf("lease context done: %v", context.Cause(l.Context()))
	}
	wantLeader(t, e, "a", l)
	time.Sleep(ttl / 2) // past a renewal (every TTL/3): the lease is kept, not left to expire
	if l.Context().Err() != nil {
		t.Fatalf("lease lost while renewed: %v", context.Cause(l.Context()))
	}
	if err := l.Resign(context.Background()); err != nil {
		t.Fatalf("Resign() = %v, want nil", err)
	}
}
