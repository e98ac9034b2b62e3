package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/axsched/ax/store"
)

// Prune deletes finished tasks with their executions. See [store.Pruner].
func (s *Store) Prune(ctx context.Context, p store.PruneParams) (int, error) {
	if err := checkPrune(p); err != nil {
		return 0, fmt.Errorf("ax: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return 0, fmt.Errorf("ax: prune: %w", err)
	}
	defer s.mu.Unlock()
	var finished []*row
	for _, r := range s.rows {
		if r.ns == s.ns && r.task.Status == p.Status {
			finished = append(finished, r)
		}
	}
	slices.SortFunc(finished, func(a, b *row) int {
		if c := a.task.FinishedAt.Compare(b.task.FinishedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.task.ID, b.task.ID)
	})
	beyond := 0 // the oldest rows past the KeepNewest newest
	if p.KeepNewest > 0 {
		beyond = max(len(finished)-p.KeepNewest, 0)
	}
	n, now := 0, s.now()
	gone := map[int64]bool{}
	for i, r := range finished {
		if n == p.Limit || i >= beyond && (p.Before.IsZero() || !r.task.FinishedAt.Before(p.Before)) {
			break
		}
		if !r.task.KeyUntil.IsZero() && now.Before(r.task.KeyUntil) {
			continue // it holds its key for a UniqueFor window still
		}
		s.delete(r)
		gone[r.task.ID] = true
		n++
	}
	if n > 0 { // the change log must not name rows that are gone
		s.changes = slices.DeleteFunc(s.changes, func(c change) bool { return gone[c.id] })
	}
	return n, nil
}
