package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

// The Lease group checks [store.Leaser], for the drivers that implement it.

var leaseTests = []test{
	{"AcquireFree", testLeaseAcquireFree},
	{"RefusedWhileLive", testLeaseRefusedWhileLive},
	{"AcquireAfterExpiry", testLeaseAcquireAfterExpiry},
	{"RenewByHolderOnly", testLeaseRenewByHolderOnly},
	{"Release", testLeaseRelease},
	{"ConcurrentAcquire", testLeaseConcurrentAcquire},
	{"Invalid", testLeaseInvalid},
}

func (e *env) acquire(l store.Leaser, ns, holder string, ttl time.Duration) (store.LeaseInfo, bool) {
	e.t.Helper()
	info, ok, err := l.AcquireLease(e.ctx, ns, holder, ttl)
	if err != nil {
		e.t.Fatalf("AcquireLease(%q, %q, %v) error: %v", ns, holder, ttl, err)
	}
	return info, ok
}

func (e *env) lease(l store.Leaser, ns string) store.LeaseInfo {
	e.t.Helper()
	info, err := l.Lease(e.ctx, ns)
	if err != nil {
		e.t.Fatalf("Lease(%q) error: %v", ns, err)
	}
	return info
}

func testLeaseAcquireFree(e *env) {
	l := e.s
	if got := e.lease(l, "ns"); got != (store.LeaseInfo{}) {
		e.t.Fatalf("Lease(never taken) = %+v, want zero", got)
	}
	info, ok := e.acquire(l, "ns", "a", 10*time.Second)
	if !ok || info.Holder != "a" || info.Epoch != 1 || info.Remaining != 10*time.Second {
		e.t.Fatalf("AcquireLease(free) = %+v, %v; want a, epoch 1, 10s, true", info, ok)
	}
	got := e.lease(l, "ns")
	if got.Holder != "a" || got.Epoch != 1 || got.Remaining <= 0 || got.Remaining > 10*time.Second {
		e.t.Fatalf("Lease = %+v, want a, epoch 1, remaining in (0, 10s]", got)
	}
	// Another namespace is another lease.
	if info, ok := e.acquire(l, "other", "b", time.Second); !ok || info.Epoch != 1 {
		e.t.Fatalf("AcquireLease(other namespace) = %+v, %v; want epoch 1, true", info, ok)
	}
}

func testLeaseRefusedWhileLive(e *env) {
	l := e.s
	e.acquire(l, "ns", "a", 10*time.Second)
	for _, h := range []string{"b", "a"} { // the holder itself cannot take it again either
		info, ok := e.acquire(l, "ns", h, 10*time.Second)
		if ok || info.Holder != "a" || info.Epoch != 1 || info.Remaining <= 0 || info.Remaining > 10*time.Second {
			e.t.Fatalf("AcquireLease(%q, live lease of a) = %+v, %v; want a, epoch 1, remaining in (0, 10s], false", h, info, ok)
		}
	}
	if got := e.lease(l, "ns"); got.Holder != "a" || got.Epoch != 1 {
		e.t.Fatalf("Lease after refused acquires = %+v, want a, epoch 1", got)
	}
}

// waitExpired waits until the namespace's lease has expired by the store's clock.
func (e *env) waitExpired(l store.Leaser, ns string) {
	e.t.Helper()
	end := time.Now().Add(deadline)
	for e.lease(l, ns).Remaining > 0 {
		if time.Now().After(end) {
			e.t.Fatalf("lease of %q did not expire within %v", ns, deadline)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func testLeaseAcquireAfterExpiry(e *env) {
	l := e.s
	start := time.Now()
	e.acquire(l, "ns", "a", 200*time.Millisecond)
	e.waitExpired(l, "ns")
	if el := time.Since(start); el < 150*time.Millisecond {
		e.t.Errorf("a 200ms lease expired after %v", el)
	}
	got := e.lease(l, "ns")
	if got.Holder != "a" || got.Epoch != 1 || got.Remaining > 0 {
		e.t.Fatalf("Lease(expired) = %+v, want a, epoch 1, remaining <= 0", got)
	}
	if ok, err := l.RenewLease(e.ctx, "ns", "a", 1, time.Second); err != nil || ok {
		e.t.Fatalf("RenewLease(expired) = %v, %v; want false", ok, err)
	}
	info, ok := e.acquire(l, "ns", "b", time.Second)
	if !ok || info.Holder != "b" || info.Epoch != 2 {
		e.t.Fatalf("AcquireLease(expired) = %+v, %v; want b, epoch 2, true", info, ok)
	}
}

// testLeaseRenewByHolderOnly tells a refused renewal from a granted one by the ttl
// asked (60s against the 10s the lease was taken for), not by a short lease surviving a
// few calls, so that a slow machine cannot fail it.
func testLeaseRenewByHolderOnly(e *env) {
	l := e.s
	e.acquire(l, "ns", "a", 10*time.Second)
	for _, c := range []struct {
		ns, holder string
		epoch      int64
	}{{"ns", "b", 1}, {"ns", "a", 2}, {"ns", "a", 0}, {"other", "a", 1}} {
		if ok, err := l.RenewLease(e.ctx, c.ns, c.holder, c.epoch, time.Minute); err != nil || ok {
			e.t.Fatalf("RenewLease(%q, %q, %d) of a's lease 1 = %v, %v; want false", c.ns, c.holder, c.epoch, ok, err)
		}
	}
	if got := e.lease(l, "ns"); got.Holder != "a" || got.Epoch != 1 || got.Remaining > 10*time.Second {
		e.t.Fatalf("Lease after refused renewals = %+v, want a, epoch 1, remaining <= 10s (not extended)", got)
	}
	if got := e.lease(l, "other"); got != (store.LeaseInfo{}) {
		e.t.Fatalf("Lease(other) after a refused renewal = %+v, want zero", got)
	}
	if ok, err := l.RenewLease(e.ctx, "ns", "a", 1, time.Minute); err != nil || !ok {
		e.t.Fatalf("RenewLease(holder, epoch) = %v, %v; want true", ok, err)
	}
	if got := e.lease(l, "ns"); got.Holder != "a" || got.Epoch != 1 || got.Remaining <= 30*time.Second || got.Remaining > time.Minute {
		e.t.Fatalf("Lease after renew = %+v, want a, epoch 1, remaining in (30s, 60s]", got)
	}
}

func testLeaseRelease(e *env) {
	l := e.s
	e.acquire(l, "ns", "a", 10*time.Second)
	if ok, err := l.ReleaseLease(e.ctx, "ns", "b", 1); err != nil || ok {
		e.t.Fatalf("ReleaseLease(not the holder) = %v, %v; want false", ok, err)
	}
	if ok, err := l.ReleaseLease(e.ctx, "ns", "a", 2); err != nil || ok {
		e.t.Fatalf("ReleaseLease(wrong epoch) = %v, %v; want false", ok, err)
	}
	if ok, err := l.ReleaseLease(e.ctx, "ns", "a", 1); err != nil || !ok {
		e.t.Fatalf("ReleaseLease(holder, epoch) = %v, %v; want true", ok, err)
	}
	if got := e.lease(l, "ns"); got.Holder != "a" || got.Epoch != 1 || got.Remaining > 0 {
		e.t.Fatalf("Lease after release = %+v, want a, epoch 1 kept, remaining <= 0", got)
	}
	if ok, err := l.ReleaseLease(e.ctx, "ns", "a", 1); err != nil || ok {
		e.t.Fatalf("second ReleaseLease = %v, %v; want false", ok, err)
	}
	if ok, err := l.RenewLease(e.ctx, "ns", "a", 1, time.Second); err != nil || ok {
		e.t.Fatalf("RenewLease after release = %v, %v; want false", ok, err)
	}
	info, ok := e.acquire(l, "ns", "b", 10*time.Second)
	if !ok || info.Holder != "b" || info.Epoch != 2 {
		e.t.Fatalf("AcquireLease after release = %+v, %v; want b, epoch 2, true", info, ok)
	}
}

func testLeaseConcurrentAcquire(e *env) {
	l := e.s
	const holders = 8
	rounds := 5
	if testing.Short() {
		rounds = 2
	}
	for round := 1; round <= rounds; round++ {
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			won    []store.LeaseInfo
			errs   []error
			starts = make(chan struct{})
		)
		for h := range holders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-starts
				info, ok, err := l.AcquireLease(e.ctx, "ns", fmt.Sprintf("h%d-%d", round, h), 10*time.Second)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					errs = append(errs, err)
				case ok:
					won = append(won, info)
				case info.Epoch != int64(round) && info.Remaining > 0:
					errs = append(errs, fmt.Errorf("refused with %+v, want the epoch %d of this round's winner", info, round))
				}
			}()
		}
		close(starts)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			e.t.Fatalf("round %d: %v", round, err)
		}
		if len(won) != 1 || won[0].Epoch != int64(round) {
			e.t.Fatalf("round %d: winners %+v, want exactly one with epoch %d", round, won, round)
		}
		if ok, err := l.ReleaseLease(e.ctx, "ns", won[0].Holder, won[0].Epoch); err != nil || !ok {
			e.t.Fatalf("round %d: ReleaseLease(winner) = %v, %v", round, ok, err)
		}
	}
}

func testLeaseInvalid(e *env) {
	l := e.s
	for _, c := range []struct {
		ns, holder string
		ttl        time.Duration
	}{{"", "a", time.Second}, {"ns", "", time.Second}, {"ns", "a", 0}} {
		if _, _, err := l.AcquireLease(e.ctx, c.ns, c.holder, c.ttl); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("AcquireLease(%q, %q, %v) error = %v, want ErrInvalid", c.ns, c.holder, c.ttl, err)
		}
	}
	if got := e.lease(l, "ns"); got != (store.LeaseInfo{}) {
		e.t.Fatalf("Lease after invalid acquires = %+v, want zero", got)
	}
}
