package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/axsched/ax/store"
)

// statsKey names a row of the statistics: its namespace, node and minute (Unix
// seconds).
type statsKey struct {
	ns, node string
	minute   int64
}

// WriteStats implements [store.StatsKeeper].
func (s *Store) WriteStats(ctx context.Context, rows []store.MinuteStats) error {
	if err := checkStats(rows); err != nil {
		return fmt.Errorf("ax: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return fmt.Errorf("ax: write stats: %w", err)
	}
	defer s.mu.Unlock()
	for _, r := range rows {
		r = normalStats(r)
		s.stats[statsKey{s.ns, r.Node, r.Minute.Unix()}] = r
	}
	return nil
}

// Stats implements [store.StatsKeeper].
func (s *Store) Stats(ctx context.Context, since time.Time) ([]store.MinuteStats, error) {
	if err := invalid("stats", rule{since.IsZero(), "zero since"}); err != nil {
		return nil, fmt.Errorf("ax: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: stats: %w", err)
	}
	defer s.mu.Unlock()
	out := []store.MinuteStats{}
	for k, r := range s.stats {
		if k.ns == s.ns && !r.Minute.Before(since) {
			out = append(out, normalStats(r))
		}
	}
	slices.SortFunc(out, func(a, b store.MinuteStats) int {
		return cmp.Or(a.Minute.Compare(b.Minute), cmp.Compare(a.Node, b.Node))
	})
	if len(out) > store.MaxStatsRead {
		out = out[len(out)-store.MaxStatsRead:]
	}
	return out, nil
}

// PruneStats implements [store.Pruner].
func (s *Store) PruneStats(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := checkPruneBefore("prune stats", before, limit); err != nil {
		return 0, fmt.Errorf("ax: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return 0, fmt.Errorf("ax: prune stats: %w", err)
	}
	defer s.mu.Unlock()
	var old []statsKey
	for k, r := range s.stats {
		if k.ns == s.ns && r.Minute.Before(before) {
			old = append(old, k)
		}
	}
	slices.SortFunc(old, func(a, b statsKey) int { return cmp.Or(cmp.Compare(a.minute, b.minute), cmp.Compare(a.node, b.node)) })
	old = old[:min(len(old), limit)]
	for _, k := range old {
		delete(s.stats, k)
	}
	return len(old), nil
}

// normalStats returns r as the store keeps it: Minute in UTC, MaxLateness to the
// microsecond, no failing names as nil.
func normalStats(r store.MinuteStats) store.MinuteStats {
	r.Minute, r.MaxLateness = r.Minute.UTC(), r.MaxLateness.Truncate(time.Microsecond)
	r.Failures = slices.Clip(slices.Clone(r.Failures))
	if len(r.Failures) == 0 {
		r.Failures = nil
	}
	return r
}
