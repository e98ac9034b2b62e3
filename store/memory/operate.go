package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/axsched/ax/store"
)

// Cancel cancels the task (name, key): a SCHEDULED or DISPATCHING one at once, a
// RUNNING one by requesting it. See [store.Store.Cancel].
func (s *Store) Cancel(ctx context.Context, name, key, by string) (*store.Task, error) {
	op := fmt.Sprintf("ax: cancel task %q/%q", name, key)
	if err := checkCancelledBy(by); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer s.mu.Unlock()
	id, ok := s.keys[nameKey{s.ns, name, key}]
	if !ok {
		return nil, fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	r := s.rows[id]
	now := s.now()
	switch r.task.Status {
	case store.Scheduled, store.Dispatching:
		if r.task.Status == store.Scheduled {
			s.unschedule(r)
		}
		r.task.Status = store.Cancelled
		r.task.FinishedAt = now
	case store.Running:
		if !r.task.CancelRequestedAt.IsZero() {
			return copyTask(&r.task), nil // asked already: the first request stands
		}
	default:
		return refusal(op, copyTask(&r.task), store.ErrNotCancellable)
	}
	r.task.CancelledBy, r.task.CancelRequestedAt = by, now
	r.task.UpdatedAt = now
	return copyTask(&r.task), nil
}

// Reschedule moves the SCHEDULED task (name, key) to be due at at. See
// [store.Store.Reschedule].
func (s *Store) Reschedule(ctx context.Context, name, key string, at time.Time) (*store.Task, error) {
	op := fmt.Sprintf("ax: reschedule task %q/%q", name, key)
	if at.IsZero() {
		return nil, fmt.Errorf("%s: zero due time: %w", op, store.ErrInvalid)
	}
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer s.mu.Unlock()
	id, ok := s.keys[nameKey{s.ns, name, key}]
	if !ok {
		return nil, fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	r := s.rows[id]
	if r.task.Status != store.Scheduled {
		return refusal(op, copyTask(&r.task), store.ErrNotReschedulable)
	}
	s.unschedule(r)
	r.task.DueAt = utc(at)
	r.task.UpdatedAt = s.now()
	s.schedule(r)
	return copyTask(&r.task), nil
}

// Retry moves a FAILED task back to SCHEDULED, due now, with a fresh retry budget.
// See [store.Store.Retry].
func (s *Store) Retry(ctx context.Context, id int64) (*store.Task, error) {
	op := fmt.Sprintf("ax: retry task %d", id)
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer s.mu.Unlock()
	r, ok := s.mine(id)
	if !ok {
		return nil, fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	if r.task.Status != store.Failed || r.task.Superseded {
		return refusal(op, copyTask(&r.task), store.ErrNotRetryable)
	}
	now := s.now()
	r.task.Status, r.task.DueAt, r.task.UpdatedAt = store.Scheduled, now, now
	r.task.Attempt, r.task.DispatchRetries, r.task.Snoozes, r.task.FinishedAt = 0, 0, 0, time.Time{}
	s.schedule(r)
	return copyTask(&r.task), nil
}

// Trigger moves one task from SCHEDULED or FAILED to DISPATCHING now. See
// [store.Store.Trigger]. From FAILED it also clears FinishedAt: the task is no longer in
// a terminal state.
func (s *Store) Trigger(ctx context.Context, id int64, executionID string) (*store.Task, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: trigger task %d: %w", id, err)
	}
	defer s.mu.Unlock()
	if executionID == "" {
		return nil, fmt.Errorf("ax: trigger task %d: empty execution id: %w", id, store.ErrInvalid)
	}
	r, ok := s.mine(id)
	if !ok {
		return nil, fmt.Errorf("ax: trigger task %d: %w", id, store.ErrNotFound)
	}
	op := fmt.Sprintf("ax: trigger task %d", id)
	if r.task.Status != store.Scheduled && r.task.Status != store.Failed || r.task.Superseded {
		return refusal(op, copyTask(&r.task), store.ErrNotTriggerable)
	}
	if s.keyConcurrency(r.task.Name) > 1 { // a claim applies its key's rule
		s.makeDue(r)
		return copyTask(&r.task), nil
	}
	if serialised(&r.task) {
		if h, held := s.holders()[r.task.TaskKey]; held {
			return copyTask(&r.task), fmt.Errorf("%s: %w", op, &store.KeyHeldError{TaskKey: r.task.TaskKey, Holder: h.first})
		}
	}
	if s.limited(r.task.Name) { // a claim applies the name's limits
		s.makeDue(r)
		return copyTask(&r.task), nil
	}
	if r.task.Status == store.Scheduled {
		s.unschedule(r)
	} else {
		r.task.Attempt++
		r.task.FinishedAt = time.Time{}
	}
	now := s.now()
	r.task.Status = store.Dispatching
	r.task.ExecutionID = executionID
	r.task.DispatchedAt = now
	r.task.TriggeredAt = now
	r.task.UpdatedAt = now
	return copyTask(&r.task), nil
}

// MakeDue makes a SCHEDULED or FAILED task due now without claiming it. See
// [store.TaskWriter.MakeDue].
func (s *Store) MakeDue(ctx context.Context, id int64) (*store.Task, error) {
	op := fmt.Sprintf("ax: make task %d due", id)
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer s.mu.Unlock()
	r, ok := s.mine(id)
	if !ok {
		return nil, fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	if r.task.Status != store.Scheduled && r.task.Status != store.Failed || r.task.Superseded {
		return refusal(op, copyTask(&r.task), store.ErrNotTriggerable)
	}
	s.makeDue(r)
	return copyTask(&r.task), nil
}

// makeDue makes the SCHEDULED or FAILED row r due now, triggered (see MakeDue).
func (s *Store) makeDue(r *row) {
	if r.task.Status == store.Scheduled {
		s.unschedule(r)
	} else {
		r.task.Attempt++
		r.task.FinishedAt = time.Time{}
	}
	now := s.now()
	r.task.Status, r.task.DueAt, r.task.TriggeredAt, r.task.UpdatedAt = store.Scheduled, now, now, now
	s.schedule(r)
}

// refusal is the answer of a transition that does not apply to t: t as it is, and
// the sentinel under op, saying t's status.
func refusal(op string, t *store.Task, sentinel error) (*store.Task, error) {
	superseded := ""
	if t.Superseded {
		superseded = " and superseded: a newer task holds its key"
	}
	return t, fmt.Errorf("%s: task is %s%s: %w", op, t.Status, superseded, sentinel)
}
