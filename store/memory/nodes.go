package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/axsched/ax/store"
)

// Nodes live in s.nodes, by (namespace, name), stamped with the store's clock.

// RegisterNode writes the node's row. See [store.NodeRegistry].
func (s *Store) RegisterNode(ctx context.Context, n store.NodeInfo) error {
	if err := checkNode(n); err != nil {
		return fmt.Errorf("ax: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return fmt.Errorf("ax: register node %q: %w", n.Name, err)
	}
	defer s.mu.Unlock()
	now := s.now()
	c := n
	c.Handlers = slices.Sorted(slices.Values(n.Handlers))
	c.HeartbeatAt = now
	c.ClockOffset = n.ClockOffset.Truncate(time.Microsecond) // as the SQL stores keep it
	if c.StartedAt.IsZero() {
		c.StartedAt = now
	} else {
		c.StartedAt = utc(c.StartedAt)
	}
	s.nodes[nameKey{ns: s.ns, name: n.Name}] = &c
	return nil
}

// Nodes returns the nodes that beat within aliveWithin, by name. See [store.NodeRegistry].
func (s *Store) Nodes(ctx context.Context, aliveWithin time.Duration) ([]store.NodeInfo, error) {
	if aliveWithin <= 0 {
		return nil, fmt.Errorf("ax: list nodes: alive within %v: %w", aliveWithin, store.ErrInvalid)
	}
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: list nodes: %w", err)
	}
	defer s.mu.Unlock()
	since := s.now().Add(-aliveWithin)
	var out []store.NodeInfo
	for k, n := range s.nodes {
		if k.ns == s.ns && n.HeartbeatAt.After(since) {
			c := *n
			c.Handlers = slices.Clone(n.Handlers)
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b store.NodeInfo) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// RemoveNode deletes the node's row. See [store.NodeRegistry].
func (s *Store) RemoveNode(ctx context.Context, name string) error {
	if err := s.lock(ctx); err != nil {
		return fmt.Errorf("ax: remove node %q: %w", name, err)
	}
	defer s.mu.Unlock()
	delete(s.nodes, nameKey{ns: s.ns, name: name})
	return nil
}

// ExpireNodes deletes the rows of nodes dead for deadFor. See [store.NodeRegistry].
func (s *Store) ExpireNodes(ctx context.Context, deadFor time.Duration) (int, error) {
	if deadFor <= 0 {
		return 0, fmt.Errorf("ax: expire nodes: dead for %v: %w", deadFor, store.ErrInvalid)
	}
	if err := s.lock(ctx); err != nil {
		return 0, fmt.Errorf("ax: expire nodes: %w", err)
	}
	defer s.mu.Unlock()
	before := s.now().Add(-deadFor)
	n := 0
	for k, node := range s.nodes {
		if k.ns == s.ns && node.HeartbeatAt.Before(before) {
			delete(s.nodes, k)
			n++
		}
	}
	return n, nil
}
