package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/axsched/ax/store"
)

// Get returns the task with this id. See [store.Store.Get].
func (s *Store) Get(ctx context.Context, id int64) (*store.Task, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: get task %d: %w", id, err)
	}
	defer s.mu.Unlock()
	r, ok := s.mine(id)
	if !ok {
		return nil, fmt.Errorf("ax: get task %d: %w", id, store.ErrNotFound)
	}
	return copyTask(&r.task), nil
}

// Lookup returns the task with this name and key. See [store.Store.Lookup].
func (s *Store) Lookup(ctx context.Context, name, key string) (*store.Task, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: look up task %q/%q: %w", name, key, err)
	}
	defer s.mu.Unlock()
	id, ok := s.keys[nameKey{s.ns, name, key}]
	if !ok {
		return nil, fmt.Errorf("ax: look up task %q/%q: %w", name, key, store.ErrNotFound)
	}
	return copyTask(&s.rows[id].task), nil
}

// Executions returns the task's executions, oldest first. See [store.Store.Executions].
func (s *Store) Executions(ctx context.Context, taskID int64) ([]store.Execution, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: list executions of task %d: %w", taskID, err)
	}
	defer s.mu.Unlock()
	r, ok := s.mine(taskID)
	if !ok {
		return nil, fmt.Errorf("ax: list executions of task %d: %w", taskID, store.ErrNotFound)
	}
	out := make([]store.Execution, 0, len(r.execs))
	for _, id := range r.execs {
		out = append(out, *s.execs[id])
	}
	return out, nil
}

// TaskStats counts the tasks per status and finds the oldest due SCHEDULED task. See
// [store.Store.TaskStats]. It scans every row, as a test store may; the oldest due
// task is the head of the window.
func (s *Store) TaskStats(ctx context.Context, now time.Time) (*store.TaskStats, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: task stats: %w", err)
	}
	defer s.mu.Unlock()
	if now.IsZero() {
		return nil, fmt.Errorf("ax: task stats: zero time: %w", store.ErrInvalid)
	}
	st := &store.TaskStats{Counts: zeroCounts()}
	for _, r := range s.rows {
		if r.ns == s.ns {
			st.Counts[r.task.Status]++
		}
	}
	for _, k := range s.window {
		if k.at.After(now) {
			break
		}
		if s.rows[k.id].ns == s.ns {
			st.OldestDue = k.at
			break
		}
	}
	return st, nil
}
