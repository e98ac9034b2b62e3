package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/axsched/ax/store"
)

// Start records executions and moves their tasks from DISPATCHING to RUNNING. See
// [store.Store.Start], which says which inputs are ErrInvalid.
func (s *Store) Start(ctx context.Context, fence store.Fence, starts []store.StartParams) ([]store.StartResult, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: start executions: %w", err)
	}
	defer s.mu.Unlock()
	if err := checkStarts(starts); err != nil {
		return nil, fmt.Errorf("ax: %w", err)
	}
	if err := s.fenced(fence); err != nil {
		return nil, fmt.Errorf("ax: start executions: %w", err)
	}
	now := s.now()
	out := make([]store.StartResult, len(starts))
	for i, p := range starts {
		if e, ok := s.execs[p.ExecutionID]; ok {
			if _, mine := s.mine(e.TaskID); mine {
				out[i] = store.StartResult{Outcome: store.Duplicate, Execution: new(*e)}
			} else {
				out[i] = store.StartResult{Outcome: store.Lost} // another namespace's
			}
			continue
		}
		r, ok := s.mine(p.TaskID)
		if !ok || r.task.Status != store.Dispatching || r.task.ExecutionID != p.ExecutionID || r.task.Name != p.Name {
			out[i] = store.StartResult{Outcome: store.Lost}
			continue
		}
		e := s.start(r, p.Node, now)
		out[i] = store.StartResult{Outcome: store.Started, Task: copyTask(&r.task), Execution: new(*e)}
	}
	return out, nil
}

// start records the execution of the DISPATCHING row r on node and moves r to RUNNING.
func (s *Store) start(r *row, node string, now time.Time) *store.Execution {
	e := &store.Execution{
		ID:          r.task.ExecutionID,
		TaskID:      r.task.ID,
		Attempt:     r.task.Attempt,
		Node:        node,
		Status:      store.Running,
		DueAt:       r.task.DueAt,
		ClaimedAt:   r.task.DispatchedAt,
		StartedAt:   now,
		HeartbeatAt: now,
	}
	s.execs[e.ID] = e
	r.execs = append(r.execs, e.ID)
	r.task.Status = store.Running
	r.task.StartedAt = now
	r.task.HeartbeatAt = now
	r.task.UpdatedAt = now
	return e
}

// running returns the row of task id if it is of the view's namespace and RUNNING
// with this execution id.
func (s *Store) running(id int64, executionID string) (*row, bool) {
	r, ok := s.mine(id)
	if !ok || r.task.Status != store.Running || r.task.ExecutionID != executionID {
		return nil, false
	}
	return r, true
}

// Heartbeat stamps HeartbeatAt on running executions and their tasks. See
// [store.Store.Heartbeat]. It also stamps the task's UpdatedAt.
func (s *Store) Heartbeat(ctx context.Context, refs []store.ExecRef) ([]store.Beat, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: heartbeat executions: %w", err)
	}
	defer s.mu.Unlock()
	now := s.now()
	out := make([]store.Beat, len(refs))
	for i, ref := range refs {
		r, ok := s.running(ref.TaskID, ref.ExecutionID)
		if !ok {
			continue
		}
		r.task.HeartbeatAt = now
		r.task.UpdatedAt = now
		if e := s.execs[ref.ExecutionID]; e != nil {
			e.HeartbeatAt = now
		}
		out[i] = store.BeatAlive
		if !r.task.CancelRequestedAt.IsZero() {
			out[i] = store.BeatCancel
		}
	}
	return out, nil
}

// Finish records the results of running executions. See [store.Store.Finish]. A
// Status other than Succeeded, Scheduled or Failed, an empty execution id, or a
// Scheduled result with a zero DueAt or a negative Attempt is ErrInvalid.
func (s *Store) Finish(ctx context.Context, fence store.Fence, results []store.Finish) ([]bool, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: finish executions: %w", err)
	}
	defer s.mu.Unlock()
	if err := checkFinishes(results); err != nil {
		return nil, fmt.Errorf("ax: %w", err)
	}
	if err := s.fenced(fence); err != nil {
		return nil, fmt.Errorf("ax: finish executions: %w", err)
	}
	now := s.now()
	out := make([]bool, len(results))
	for i, f := range results {
		r, ok := s.running(f.TaskID, f.ExecutionID)
		if !ok {
			continue
		}
		e := s.execs[f.ExecutionID]
		e.FinishedAt = now
		e.Error = f.Error
		r.task.UpdatedAt = now
		if !r.task.CancelRequestedAt.IsZero() && f.Status != store.Succeeded {
			// Cancelled while it ran: whatever else the result says, it ends here.
			e.Status, e.Error = store.Cancelled, "cancelled by "+r.task.CancelledBy
			if f.Error != "" {
				e.Error += ": " + f.Error
			}
			r.task.Status, r.task.FinishedAt, r.task.LastError = store.Cancelled, now, e.Error
			out[i] = true
			continue
		}
		switch f.Status {
		case store.Succeeded:
			e.Status, e.Error = store.Succeeded, "" // a success records no error
			r.task.Status = store.Succeeded
			r.task.FinishedAt = now
		case store.Failed:
			e.Status = store.Failed
			r.task.Status = store.Failed
			r.task.FinishedAt = now
			r.task.LastError = f.Error
		case store.Scheduled:
			e.Status = store.Failed
			if f.Snooze {
				e.Status = store.Snoozed
				r.task.Snoozes++
			}
			r.task.Status = store.Scheduled
			r.task.Attempt = f.Attempt
			r.task.DueAt = utc(f.DueAt)
			r.task.LastError = f.Error
			s.schedule(r)
		}
		out[i] = true
	}
	return out, nil
}

// Requeue hands back tasks that could not be dispatched. See [store.Store.Requeue]. A
// task that goes to FAILED also gets DispatchRetries+1, LastError and FinishedAt; its
// DueAt is unchanged. An empty execution id, a zero DueAt or a negative
// MaxDispatchRetries is ErrInvalid.
func (s *Store) Requeue(ctx context.Context, fence store.Fence, requeues []store.Requeue) ([]bool, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: requeue tasks: %w", err)
	}
	defer s.mu.Unlock()
	if err := s.fenced(fence); err != nil {
		return nil, fmt.Errorf("ax: requeue tasks: %w", err)
	}
	for _, q := range requeues {
		var err error
		switch {
		case q.ExecutionID == "":
			err = errors.New("empty execution id")
		case q.DueAt.IsZero():
			err = errors.New("zero due time")
		case q.MaxDispatchRetries < 0:
			err = fmt.Errorf("negative max dispatch retries %d", q.MaxDispatchRetries)
		}
		if err != nil {
			return nil, fmt.Errorf("ax: requeue tasks: task %d: %w: %w", q.TaskID, err, store.ErrInvalid)
		}
	}
	now := s.now()
	out := make([]bool, len(requeues))
	for i, q := range requeues {
		r, ok := s.mine(q.TaskID)
		if !ok || r.task.Status != store.Dispatching || r.task.ExecutionID != q.ExecutionID {
			continue
		}
		r.task.DispatchRetries++
		r.task.LastError = q.Error
		r.task.UpdatedAt = now
		if r.task.DispatchRetries > q.MaxDispatchRetries {
			r.task.Status = store.Failed
			r.task.FinishedAt = now
		} else {
			r.task.Status = store.Scheduled
			r.task.DueAt = utc(q.DueAt)
			s.schedule(r)
		}
		out[i] = true
	}
	return out, nil
}

// Stale lists tasks stuck in RUNNING or DISPATCHING since before a time. See
// [store.Store.Stale]. A limit below 1 is ErrInvalid.
func (s *Store) Stale(ctx context.Context, status store.Status, before time.Time, limit int) ([]store.Task, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: list stale %s tasks: %w", status, err)
	}
	defer s.mu.Unlock()
	var since func(*store.Task) time.Time
	switch status {
	case store.Running:
		since = func(t *store.Task) time.Time { return t.HeartbeatAt }
	case store.Dispatching:
		since = func(t *store.Task) time.Time { return t.DispatchedAt }
	default:
		return nil, fmt.Errorf("ax: list stale %q tasks: %w", status, store.ErrInvalid)
	}
	if limit < 1 {
		return nil, fmt.Errorf("ax: list stale %s tasks: limit %d: %w", status, limit, store.ErrInvalid)
	}
	var stale []*store.Task
	for _, r := range s.rows {
		if r.ns == s.ns && r.task.Status == status && since(&r.task).Before(before) {
			stale = append(stale, &r.task)
		}
	}
	slices.SortFunc(stale, func(a, b *store.Task) int {
		return dueKey{since(a), a.ID}.compare(dueKey{since(b), b.ID})
	})
	out := make([]store.Task, 0, min(limit, len(stale)))
	for _, t := range stale[:min(limit, len(stale))] {
		out = append(out, *copyTask(t))
	}
	return out, nil
}
