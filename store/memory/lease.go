package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/axsched/ax/store"
)

// Leases live in s.leases, one row per namespace, read and written under s.mu with the
// store's clock (WithClockSkew included), so that each call is one conditional write.

type leaseRow struct {
	holder    string
	epoch     int64
	expiresAt time.Time
}

func (r *leaseRow) info(now time.Time) store.LeaseInfo {
	return store.LeaseInfo{Holder: r.holder, Epoch: r.epoch, Remaining: r.expiresAt.Sub(now)}
}

// live returns holder's lease of that epoch if it is live at now, else nil. s.mu must be
// held.
func (s *Store) live(namespace, holder string, epoch int64, now time.Time) *leaseRow {
	r, ok := s.leases[namespace]
	if !ok || r.holder != holder || r.epoch != epoch || !r.expiresAt.After(now) {
		return nil
	}
	return r
}

// AcquireLease takes the namespace's lease if it is free or expired. See [store.Leaser].
func (s *Store) AcquireLease(ctx context.Context, namespace, holder string, ttl time.Duration) (store.LeaseInfo, bool, error) {
	if err := checkLease("acquire lease", namespace, holder, ttl); err != nil {
		return store.LeaseInfo{}, false, fmt.Errorf("ax: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return store.LeaseInfo{}, false, fmt.Errorf("ax: acquire lease: %w", err)
	}
	defer s.mu.Unlock()
	now := s.now()
	r, ok := s.leases[namespace]
	if !ok {
		r = &leaseRow{}
		s.leases[namespace] = r
	} else if r.expiresAt.After(now) {
		return r.info(now), false, nil
	}
	r.holder, r.epoch, r.expiresAt = holder, r.epoch+1, now.Add(ttl)
	return r.info(now), true, nil
}

// RenewLease extends holder's live lease of that epoch to now + ttl. See [store.Leaser].
func (s *Store) RenewLease(ctx context.Context, namespace, holder string, epoch int64, ttl time.Duration) (bool, error) {
	if err := checkLease("renew lease", namespace, holder, ttl); err != nil {
		return false, fmt.Errorf("ax: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return false, fmt.Errorf("ax: renew lease: %w", err)
	}
	defer s.mu.Unlock()
	now := s.now()
	r := s.live(namespace, holder, epoch, now)
	if r == nil {
		return false, nil
	}
	r.expiresAt = now.Add(ttl)
	return true, nil
}

// ReleaseLease makes holder's live lease of that epoch expire now. See [store.Leaser].
func (s *Store) ReleaseLease(ctx context.Context, namespace, holder string, epoch int64) (bool, error) {
	if err := s.lock(ctx); err != nil {
		return false, fmt.Errorf("ax: release lease: %w", err)
	}
	defer s.mu.Unlock()
	now := s.now()
	r := s.live(namespace, holder, epoch, now)
	if r == nil {
		return false, nil
	}
	r.expiresAt = now
	return true, nil
}

// Lease reads the namespace's lease. See [store.Leaser].
func (s *Store) Lease(ctx context.Context, namespace string) (store.LeaseInfo, error) {
	if err := s.lock(ctx); err != nil {
		return store.LeaseInfo{}, fmt.Errorf("ax: read lease: %w", err)
	}
	defer s.mu.Unlock()
	r, ok := s.leases[namespace]
	if !ok {
		return store.LeaseInfo{}, nil
	}
	return r.info(s.now()), nil
}

// fenced returns nil if a write fenced with f may apply, else the store.ErrFenced
// error (or ErrInvalid for a malformed fence). s.mu must be held: the check and the
// write it guards are one step under the lock, so no RaiseFence comes between.
func (s *Store) fenced(f store.Fence) error {
	if err := checkFence(f); err != nil || f.Token == 0 {
		return err
	}
	if r, ok := s.leases[f.Namespace]; ok && f.Token < r.epoch { // no row is epoch 0
		return fmt.Errorf("token %d below epoch %d of namespace %q: %w", f.Token, r.epoch, f.Namespace, store.ErrFenced)
	}
	return nil
}
