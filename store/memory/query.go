package memory

import (
	"context"
	"fmt"
	"slices"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
)

// Tasks returns the tasks q selects, in its order. See [store.Store.Tasks].
func (s *Store) Tasks(ctx context.Context, q store.TaskQuery) ([]store.Task, error) {
	if err := store.CheckTaskQuery(q); err != nil {
		return nil, fmt.Errorf("ax: list tasks: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: list tasks: %w", err)
	}
	defer s.mu.Unlock()
	var out []store.Task
	for _, r := range s.rows {
		if r.ns == s.ns && driverkit.Selects(q, &r.task) && driverkit.Follows(q, &r.task) {
			out = append(out, *copyTask(&r.task))
		}
	}
	slices.SortFunc(out, func(a, b store.Task) int {
		if driverkit.Before(q, &a, &b) {
			return -1
		}
		return 1
	})
	return out[:min(len(out), q.Limit)], nil
}

// CountTasks counts the tasks per status, each count at most atMost + 1. See
// [store.Store.CountTasks].
func (s *Store) CountTasks(ctx context.Context, atMost int64) (map[store.Status]int64, error) {
	if err := driverkit.CheckCountCap(atMost); err != nil {
		return nil, fmt.Errorf("ax: count tasks: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: count tasks: %w", err)
	}
	defer s.mu.Unlock()
	counts := driverkit.NewTaskStats().Counts
	for _, r := range s.rows {
		if r.ns == s.ns && counts[r.task.Status] <= atMost {
			counts[r.task.Status]++
		}
	}
	return counts, nil
}
