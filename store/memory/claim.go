package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
)

// Claim moves due tasks from SCHEDULED to DISPATCHING. See [store.Store.Claim]. An
// empty execution id is ErrInvalid; an id given twice is claimed at most once.
func (s *Store) Claim(ctx context.Context, fence store.Fence, claims []store.Claim) (*store.ClaimResult, error) {
	return s.ClaimStart(ctx, fence, store.StartOn{}, claims)
}

// ClaimStart is Claim that moves the tasks on can start straight to RUNNING. See
// [store.Store.ClaimStart].
func (s *Store) ClaimStart(ctx context.Context, fence store.Fence, on store.StartOn, claims []store.Claim) (*store.ClaimResult, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: claim tasks: %w", err)
	}
	defer s.mu.Unlock()
	if err := driverkit.CheckClaims(claims); err != nil {
		return nil, fmt.Errorf("ax: claim tasks: %w", err)
	}
	if err := driverkit.CheckStartOn(on); err != nil {
		return nil, fmt.Errorf("ax: claim tasks: %w", err)
	}
	if err := s.fenced(fence); err != nil {
		return nil, fmt.Errorf("ax: claim tasks: %w", err)
	}
	now := s.now()
	res := &store.ClaimResult{}
	uniq := driverkit.UniqueClaims(claims)
	startable := driverkit.Startable(on, uniq)
	var keyed []driverkit.Keyed
	execs := make(map[int64]string)
	for _, c := range uniq {
		r, ok := s.mine(c.ID)
		if !ok || r.task.Status != store.Scheduled {
			continue
		}
		if r.task.DueAt.After(now) {
			res.NotDue = append(res.NotDue, store.Due{ID: r.task.ID, DueAt: r.task.DueAt})
			continue
		}
		if serialised(&r.task) {
			keyed = append(keyed, driverkit.Keyed{ID: r.task.ID, DueAt: r.task.DueAt, TaskKey: r.task.TaskKey, Overlap: r.task.Overlap})
			execs[r.task.ID] = c.ExecutionID
			continue
		}
		s.dispatch(r, c.ExecutionID, now)
		if startable[c.ID] && slices.Contains(on.Handlers, r.task.Name) {
			s.start(r, on.Node, now)
			res.Started = append(res.Started, *copyTask(&r.task))
			continue
		}
		res.Claimed = append(res.Claimed, *copyTask(&r.task))
	}
	if len(keyed) == 0 {
		return res, nil
	}
	claim, skip, block := driverkit.ResolveKeys(keyed, s.holders(keyed))
	for _, k := range claim {
		r := s.rows[k.ID]
		s.dispatch(r, execs[k.ID], now)
		res.Claimed = append(res.Claimed, *copyTask(&r.task))
	}
	slices.SortFunc(res.Claimed, func(a, b store.Task) int { return cmp.Compare(a.ID, b.ID) })
	for _, k := range skip {
		r := s.rows[k.ID]
		s.unschedule(r)
		r.task.Status = store.Skipped
		r.task.LastError = driverkit.SkipReason(k.TaskKey, k.Holder)
		r.task.FinishedAt = now
		r.task.UpdatedAt = now
		res.Skipped = append(res.Skipped, *copyTask(&r.task))
	}
	for _, k := range block {
		res.Blocked = append(res.Blocked, store.Blocked{Due: store.Due{ID: k.ID, DueAt: k.DueAt}, TaskKey: k.TaskKey})
	}
	return res, nil
}

// dispatch moves the SCHEDULED row r to DISPATCHING with executionID.
func (s *Store) dispatch(r *row, executionID string, now time.Time) {
	s.unschedule(r)
	r.task.Status = store.Dispatching
	r.task.ExecutionID = executionID
	r.task.DispatchedAt = now
	r.task.UpdatedAt = now
}
