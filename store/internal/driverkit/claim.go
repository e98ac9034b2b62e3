package driverkit

import (
	"cmp"
	"fmt"
	"maps"
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

// Keyed is a due SCHEDULED task that a Claim cannot simply take, as the Claim found
// it: its task key restricts it (a key, Overlap skip or queue), or its name has a
// concurrency limit, or both.
type Keyed struct {
	ID      int64
	DueAt   time.Time
	Name    string
	TaskKey string
	Overlap store.OverlapPolicy
	Holder  int64 // set by ResolveKeys on the losers to a key: the task holding the key
	Limit   int   // set by ResolveKeys on the losers to a limit: the name's limit
}

// keyRestricts reports whether k's key restricts it: a key, and Overlap skip or queue.
func (k *Keyed) keyRestricts() bool { return k.TaskKey != "" && k.Overlap != store.OverlapAllow }

// ResolveKeys applies the overlap rule and the names' concurrency limits to the tasks
// a Claim asked for that they restrict, given what was read under the keys' and the
// names' locks: the holders of their keys (key → id of the task DISPATCHING or
// RUNNING with it), the names' limits (name → n > 0; a name missing has none) and the
// tasks of each name DISPATCHING or RUNNING. In (DueAt, ID) order, a task whose key is
// held loses to the holder (or an earlier winner) and is skipped or blocked by its
// Overlap; else a task whose name has no free slot is limited; else it wins, holding
// its key and a slot. Each list is in id order.
func ResolveKeys(tasks []Keyed, holders map[string]int64, limits, inflight map[string]int) (claim, skip, block, limited []Keyed) {
	sorted := slices.Clone(tasks)
	slices.SortFunc(sorted, func(a, b Keyed) int {
		if c := a.DueAt.Compare(b.DueAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	held := maps.Clone(holders)
	if held == nil {
		held = map[string]int64{}
	}
	used := maps.Clone(inflight)
	if used == nil {
		used = map[string]int{}
	}
	for _, k := range sorted {
		holder, busy := held[k.TaskKey]
		n := limits[k.Name]
		switch {
		case k.keyRestricts() && busy && k.Overlap == store.OverlapSkip:
			k.Holder = holder
			skip = append(skip, k)
		case k.keyRestricts() && busy:
			k.Holder = holder
			block = append(block, k)
		case n > 0 && used[k.Name] >= n:
			k.Limit = n
			limited = append(limited, k)
		default:
			if k.keyRestricts() {
				held[k.TaskKey] = k.ID
			}
			used[k.Name]++
			claim = append(claim, k)
		}
	}
	byID := func(a, b Keyed) int { return cmp.Compare(a.ID, b.ID) }
	slices.SortFunc(claim, byID)
	slices.SortFunc(skip, byID)
	slices.SortFunc(block, byID)
	slices.SortFunc(limited, byID)
	return claim, skip, block, limited
}

// SkipReason is the LastError of a task skipped because its key was held.
func SkipReason(taskKey string, holder int64) string {
	return fmt.Sprintf("skipped: task key %q held by task %d", taskKey, holder)
}
