package driverkit

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/axsched/ax/store"
)

// UniqueClaims returns claims with each task id kept once, with its first execution
// id, sorted by ascending id: the order in which drivers lock rows.
func UniqueClaims(claims []store.Claim) []store.Claim {
	seen := make(map[int64]bool, len(claims))
	uniq := make([]store.Claim, 0, len(claims))
	for _, c := range claims {
		if !seen[c.ID] {
			seen[c.ID] = true
			uniq = append(uniq, c)
		}
	}
	slices.SortFunc(uniq, func(a, b store.Claim) int { return cmp.Compare(a.ID, b.ID) })
	return uniq
}

// SortedOrder returns the indexes 0..n-1 ordered by ascending id(i), stable: the
// order in which batched statements touch rows, so that concurrent batches cannot
// deadlock.
func SortedOrder(n int, id func(i int) int64) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(id(a), id(b)) })
	return order
}

// Startable returns the ids of uniq, claims with each task once (UniqueClaims), whose
// Start is set, when on can start them, for a driver to look tasks up in; nil when
// none can start (no handler names, or no claim asks).
func Startable(on store.StartOn, uniq []store.Claim) map[int64]bool {
	if on.Node == "" || len(on.Handlers) == 0 {
		return nil
	}
	var m map[int64]bool
	for _, c := range uniq {
		if c.Start {
			if m == nil {
				m = make(map[int64]bool)
			}
			m[c.ID] = true
		}
	}
	return m
}

// Keyed is a due SCHEDULED task with a task key whose Overlap is skip or queue, as a
// Claim found it.
type Keyed struct {
	ID      int64
	DueAt   time.Time
	TaskKey string
	Overlap store.OverlapPolicy
	Holder  int64 // set by ResolveKeys on the losers: the task holding the key
}

// ResolveKeys applies the overlap rule to the keyed tasks a Claim asked for, given
// the holders of their keys (key → id of the task DISPATCHING or RUNNING with it,
// read under the key's lock): for each free key the first task in (DueAt, ID) order
// wins; every other task loses to the holder (or the winner) and is skipped or
// blocked by its Overlap. Each list is in id order.
func ResolveKeys(tasks []Keyed, holders map[string]int64) (claim, skip, block []Keyed) {
	sorted := slices.Clone(tasks)
	slices.SortFunc(sorted, func(a, b Keyed) int {
		if c := a.DueAt.Compare(b.DueAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	held := make(map[string]int64, len(holders)+len(sorted))
	for k, id := range holders {
		held[k] = id
	}
	for _, k := range sorted {
		holder, busy := held[k.TaskKey]
		switch {
		case !busy:
			held[k.TaskKey] = k.ID
			claim = append(claim, k)
		case k.Overlap == store.OverlapSkip:
			k.Holder = holder
			skip = append(skip, k)
		default:
			k.Holder = holder
			block = append(block, k)
		}
	}
	byID := func(a, b Keyed) int { return cmp.Compare(a.ID, b.ID) }
	slices.SortFunc(claim, byID)
	slices.SortFunc(skip, byID)
	slices.SortFunc(block, byID)
	return claim, skip, block
}

// SkipReason is the LastError of a task skipped because its key was held.
func SkipReason(taskKey string, holder int64) string {
	return fmt.Sprintf("skipped: task key %q held by task %d", taskKey, holder)
}
