package memory

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/axsched/ax/store"
)

// Insert writes new SCHEDULED tasks. See [store.Store.Insert].
func (s *Store) Insert(ctx context.Context, tasks []store.NewTask) ([]store.Inserted, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: insert tasks: %w", err)
	}
	defer s.mu.Unlock()
	for i, nt := range tasks {
		if err := checkNewTask(nt); err != nil {
			return nil, fmt.Errorf("ax: insert tasks: task %d: %w", i, err)
		}
	}
	return s.insert(tasks), nil
}

// insert writes validated tasks; the caller holds s.mu.
func (s *Store) insert(tasks []store.NewTask) []store.Inserted {
	now := s.now()
	out := make([]store.Inserted, len(tasks))
	for i, nt := range tasks {
		k := nameKey{s.ns, nt.Name, nt.Key}
		if id, ok := s.keys[k]; ok { // the newest task of the key
			old := &s.rows[id].task
			if !old.KeyHold.Frees(old.Status, old.KeyUntil, now) {
				out[i] = store.Inserted{
					Task: copyTask(old),
					Err:  fmt.Errorf("ax: insert task %q/%q: %w", nt.Name, nt.Key, store.ErrDuplicate),
				}
				continue
			}
			old.Superseded = true
		}
		s.lastID++
		r := &row{ns: s.ns, task: store.Task{
			ID:           s.lastID,
			Name:         nt.Name,
			Key:          nt.Key,
			Payload:      slices.Clone(nt.Payload),
			Status:       store.Scheduled,
			DueAt:        utc(nt.DueAt),
			MaxRetry:     nt.MaxRetry,
			OwnerService: nt.OwnerService,
			Timeout:      nt.Timeout,
			Backoff:      slices.Clone(nt.Backoff),
			TaskKey:      nt.TaskKey,
			Overlap:      nt.Overlap,
			KeyHold:      nt.KeyHold,
			KeyUntil:     utc(nt.KeyUntil).Truncate(time.Microsecond),
			Trace:        nt.Trace,
			CreatedAt:    now,
			UpdatedAt:    now,
		}}
		s.rows[r.task.ID] = r
		s.keys[k] = r.task.ID
		s.schedule(r)
		out[i] = store.Inserted{Task: copyTask(&r.task)}
	}
	return out
}
