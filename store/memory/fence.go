package memory

import (
	"context"
	"fmt"

	"github.com/axsched/ax/store"
)

// RaiseFence records a new leader of namespace. See [store.Store.RaiseFence].
func (s *Store) RaiseFence(ctx context.Context, namespace, holder string, token int64) (store.Fence, error) {
	if err := checkRaiseFence(namespace, holder, token); err != nil {
		return store.Fence{}, fmt.Errorf("ax: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return store.Fence{}, fmt.Errorf("ax: raise fence: %w", err)
	}
	defer s.mu.Unlock()
	r, ok := s.leases[namespace]
	if !ok {
		r = &leaseRow{expiresAt: s.now()}
		s.leases[namespace] = r
	}
	if r.holder != holder || r.epoch != token { // else a repeat, or the lease raised it
		r.epoch = max(token, r.epoch+1)
	}
	r.holder = holder
	s.recordAcquired(namespace, holder, r.epoch)
	return store.Fence{Namespace: namespace, Token: r.epoch}, nil
}
