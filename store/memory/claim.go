package memory

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/axsched/ax/store"
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
	if err := checkClaims(claims, on); err != nil {
		return nil, fmt.Errorf("ax: %w", err)
	}
	if err := s.fenced(fence); err != nil {
		return nil, fmt.Errorf("ax: claim tasks: %w", err)
	}
	// Each task once, with its first execution id, in id order.
	uniq := make(map[int64]store.Claim, len(claims))
	for _, c := range slices.Backward(claims) {
		uniq[c.ID] = c
	}
	now := s.now()
	res := &store.ClaimResult{}
	var keyed []*row // due and waiting for their task key
	execs := make(map[int64]string)
	for _, id := range slices.Sorted(maps.Keys(uniq)) {
		c := uniq[id]
		r, ok := s.mine(id)
		switch {
		case !ok || r.task.Status != store.Scheduled:
		case r.task.DueAt.After(now):
			res.NotDue = append(res.NotDue, store.Due{ID: id, DueAt: r.task.DueAt})
		case s.paused(r.task.Name):
			res.Paused = append(res.Paused, store.Due{ID: id, DueAt: r.task.DueAt})
		case serialised(&r.task) || s.limited(r.task.Name):
			keyed, execs[id] = append(keyed, r), c.ExecutionID
		default:
			s.dispatch(r, c.ExecutionID, now)
			if c.Start && on.Node != "" && slices.Contains(on.Handlers, r.task.Name) {
				s.start(r, on.Node, now)
				res.Started = append(res.Started, *copyTask(&r.task))
			} else {
				res.Claimed = append(res.Claimed, *copyTask(&r.task))
			}
		}
	}
	// The overlap rule and the names' limits: in (DueAt, ID) order, a task whose key
	// is held loses to its holder, skipped or blocked by its policy; else one whose
	// name has no free slot, or whose key its name's rate per key holds back, is
	// limited; else it takes its key, a slot and its starts.
	slices.SortFunc(keyed, func(a, b *row) int {
		return dueKey{a.task.DueAt, a.task.ID}.compare(dueKey{b.task.DueAt, b.task.ID})
	})
	var held map[string]keyHold
	var used map[string]int
	if len(keyed) > 0 { // each scans every task: not for a claim with no keyed or limited task
		held, used = s.holders(), s.inflight()
	}
	for _, r := range keyed {
		t := &r.task
		h := held[t.TaskKey]
		holder, busy := h.first, h.count >= max(s.keyConcurrency(t.Name), 1)
		n, retryAt := s.admits(t.Name, used, now)
		var keyLimited bool
		if n == 0 && serialised(t) {
			n, retryAt = s.keyAdmits(t.Name, t.TaskKey, now)
			keyLimited = n > 0
		}
		switch {
		case serialised(t) && busy && t.Overlap == store.OverlapSkip:
			s.unschedule(r)
			t.Status, t.FinishedAt, t.UpdatedAt = store.Skipped, now, now
			t.LastError = fmt.Sprintf("skipped: task key %q held by task %d", t.TaskKey, holder)
			res.Skipped = append(res.Skipped, *copyTask(t))
		case serialised(t) && busy:
			res.Blocked = append(res.Blocked, store.Blocked{Due: store.Due{ID: t.ID, DueAt: t.DueAt}, TaskKey: t.TaskKey})
		case n > 0:
			lt := store.Limited{Due: store.Due{ID: t.ID, DueAt: t.DueAt}, Name: t.Name, Limit: n, RetryAt: retryAt}
			if keyLimited {
				lt.TaskKey = t.TaskKey
			}
			res.Limited = append(res.Limited, lt)
		default:
			if serialised(t) {
				if h.count == 0 || t.ID < h.first {
					h.first = t.ID
				}
				h.count++
				held[t.TaskKey] = h
			}
			used[t.Name]++
			key := ""
			if serialised(t) {
				key = t.TaskKey
			}
			s.started(t.Name, key, now)
			s.dispatch(r, execs[t.ID], now)
			res.Claimed = append(res.Claimed, *copyTask(t))
		}
	}
	byID := func(a, b store.Task) int { return cmp.Compare(a.ID, b.ID) }
	slices.SortFunc(res.Claimed, byID)
	slices.SortFunc(res.Skipped, byID)
	slices.SortFunc(res.Blocked, func(a, b store.Blocked) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(res.Limited, func(a, b store.Limited) int { return cmp.Compare(a.ID, b.ID) })
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
