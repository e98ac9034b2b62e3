package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/axsched/ax/store"
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
		if r.ns == s.ns && selects(q, &r.task) && (q.After == nil || before(q, q.After, &r.task)) {
			out = append(out, *copyTask(&r.task))
		}
	}
	slices.SortFunc(out, func(a, b store.Task) int {
		if before(q, &store.TaskCursor{ID: a.ID, DueAt: a.DueAt}, &b) {
			return -1
		}
		return 1
	})
	return out[:min(len(out), q.Limit)], nil
}

// CountTasks counts the tasks per status, each count at most atMost + 1. See
// [store.Store.CountTasks].
func (s *Store) CountTasks(ctx context.Context, atMost int64) (map[store.Status]int64, error) {
	if err := invalid("count cap", rule{atMost < 1, "below 1"}); err != nil {
		return nil, fmt.Errorf("ax: count tasks: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: count tasks: %w", err)
	}
	defer s.mu.Unlock()
	counts := zeroCounts()
	for _, r := range s.rows {
		if r.ns == s.ns && counts[r.task.Status] <= atMost {
			counts[r.task.Status]++
		}
	}
	return counts, nil
}

// selects reports whether q's filters select t: each filter set must match, a time
// range is [from, before), and a Finished range leaves out unfinished tasks.
func selects(q store.TaskQuery, t *store.Task) bool {
	in := func(at, from, to time.Time) bool {
		return (from.IsZero() || !at.Before(from)) && (to.IsZero() || at.Before(to))
	}
	finished := q.FinishedFrom.IsZero() && q.FinishedBefore.IsZero() ||
		!t.FinishedAt.IsZero() && in(t.FinishedAt, q.FinishedFrom, q.FinishedBefore)
	return (len(q.Statuses) == 0 || slices.Contains(q.Statuses, t.Status)) &&
		(q.Name == "" || t.Name == q.Name) && strings.HasPrefix(t.Key, q.KeyPrefix) &&
		(q.OwnerService == "" || t.OwnerService == q.OwnerService) &&
		(q.TaskKey == "" || t.TaskKey == q.TaskKey) && in(t.DueAt, q.DueFrom, q.DueBefore) && finished
}

// before reports whether the task at c comes before t in q's order: newest id first,
// or with Soonest by (DueAt, ID).
func before(q store.TaskQuery, c *store.TaskCursor, t *store.Task) bool {
	if q.Soonest {
		return dueKey{c.DueAt, c.ID}.compare(dueKey{t.DueAt, t.ID}) < 0
	}
	return c.ID > t.ID
}

// zeroCounts returns a count of 0 for every status, as CountTasks and TaskStats
// start from: a status without tasks is present.
func zeroCounts() map[store.Status]int64 {
	counts := make(map[store.Status]int64)
	for _, st := range store.Statuses() {
		counts[st] = 0
	}
	return counts
}
