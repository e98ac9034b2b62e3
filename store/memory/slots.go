package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/axsched/ax/store"
)

type gapRow struct {
	ns  string
	gap store.SlotGap
}

// recordGaps appends gaps of schedule name; the caller holds s.mu.
func (s *Store) recordGaps(name string, gaps []store.SlotGap) {
	now := s.now()
	for _, g := range gaps {
		s.lastGap++
		g.ID, g.Schedule, g.CreatedAt = s.lastGap, name, now
		g.From, g.Until = utc(g.From), utc(g.Until)
		s.gaps = append(s.gaps, gapRow{ns: s.ns, gap: g})
	}
}

// SlotGaps returns the gaps of a schedule that overlap [from, to], newest first. See
// [store.SlotHistory].
func (s *Store) SlotGaps(ctx context.Context, name string, from, to time.Time, limit int) ([]store.SlotGap, error) {
	if err := invalid("slot gaps", rule{outside(limit, store.MaxQueryLimit), "limit out of range"}, rule{from.After(to), "from after to"}); err != nil {
		return nil, fmt.Errorf("ax: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: slot gaps: %w", err)
	}
	defer s.mu.Unlock()
	out := []store.SlotGap{}
	for _, r := range s.gaps {
		if r.ns == s.ns && r.gap.Schedule == name && !r.gap.From.After(to) && r.gap.Until.After(from) {
			out = append(out, r.gap)
		}
	}
	slices.SortFunc(out, func(a, b store.SlotGap) int {
		return cmp.Or(b.Until.Compare(a.Until), cmp.Compare(b.ID, a.ID))
	})
	return out[:min(len(out), limit)], nil
}

// TasksByKeys returns the tasks named name with one of keys, by id. See
// [store.SlotHistory].
func (s *Store) TasksByKeys(ctx context.Context, name string, keys []string) ([]store.Task, error) {
	if err := invalid("tasks by keys", rule{len(keys) > store.MaxKeys, "too many keys"},
		rule{slices.ContainsFunc(keys, func(k string) bool { return !store.CleanText(k) }), "key not UTF-8 or with a NUL"}); err != nil {
		return nil, fmt.Errorf("ax: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: tasks by keys: %w", err)
	}
	defer s.mu.Unlock()
	want := make(map[string]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	out := []store.Task{}
	for _, r := range s.rows {
		if r.ns == s.ns && r.task.Name == name && want[r.task.Key] {
			out = append(out, *copyTask(&r.task))
		}
	}
	slices.SortFunc(out, func(a, b store.Task) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// TasksByKeyRange returns the tasks named name with a key in [from, before), greatest
// key first. See [store.SlotHistory].
func (s *Store) TasksByKeyRange(ctx context.Context, name, from, before string, limit int) ([]store.Task, error) {
	if err := invalid("tasks by key range", rule{outside(limit, store.MaxQueryLimit), "limit out of range"},
		rule{!store.CleanText(from) || !store.CleanText(before), "bound not UTF-8 or with a NUL"}, rule{from >= before, "empty range"}); err != nil {
		return nil, fmt.Errorf("ax: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: tasks by key range: %w", err)
	}
	defer s.mu.Unlock()
	out := []store.Task{}
	for _, r := range s.rows {
		if r.ns == s.ns && r.task.Name == name && r.task.Key >= from && r.task.Key < before {
			out = append(out, *copyTask(&r.task))
		}
	}
	slices.SortFunc(out, func(a, b store.Task) int { return cmp.Or(cmp.Compare(b.Key, a.Key), cmp.Compare(b.ID, a.ID)) })
	return out[:min(len(out), limit)], nil
}

// PruneSlotGaps deletes the namespace's gaps that ended at or before before, oldest
// first. See [store.Pruner].
func (s *Store) PruneSlotGaps(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := checkPruneBefore("prune slot gaps", before, limit); err != nil {
		return 0, fmt.Errorf("ax: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return 0, fmt.Errorf("ax: prune slot gaps: %w", err)
	}
	defer s.mu.Unlock()
	var old []int
	for i, r := range s.gaps {
		if r.ns == s.ns && !r.gap.Until.After(before) {
			old = append(old, i)
		}
	}
	slices.SortFunc(old, func(a, b int) int {
		return cmp.Or(s.gaps[a].gap.Until.Compare(s.gaps[b].gap.Until), cmp.Compare(s.gaps[a].gap.ID, s.gaps[b].gap.ID))
	})
	old = old[:min(len(old), limit)]
	drop := make(map[int]bool, len(old))
	for _, i := range old {
		drop[i] = true
	}
	kept := s.gaps[:0]
	for i, r := range s.gaps {
		if !drop[i] {
			kept = append(kept, r)
		}
	}
	clear(s.gaps[len(kept):])
	s.gaps = kept
	return len(old), nil
}
