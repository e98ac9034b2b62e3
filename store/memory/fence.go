package memory

import (
	"context"
	"fmt"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
)

// RaiseFence records a new leader of namespace. See [store.Store.RaiseFence].
func (s *Store) RaiseFence(ctx context.Context, namespace, holder string, token int64) (store.Fence, error) {
	if err := driverkit.CheckRaiseFence(namespace, holder, token); err != nil {
		return store.Fence{}, fmt.Errorf("ax: raise fence: %w", err)
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
	r.epoch = driverkit.RaisedEpoch(r.holder, r.epoch, holder, token)
	r.holder = holder
	s.recordAcquired(namespace, holder, r.epoch)
	return store.Fence{Namespace: namespace, Token: r.epoch}, nil
}
