package driverkit

import (
	"cmp"
	"encoding/binary"
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

// AddClaimed adds the tasks a claiming statement read back to res: the RUNNING ones
// to Started, the DISPATCHING ones to Claimed. When every one started and Started is
// still empty — a drain's usual answer — claimed becomes Started as it is, uncopied:
// the caller must not use it afterwards.
func AddClaimed(res *store.ClaimResult, claimed []store.Task) {
	running := 0
	for i := range claimed {
		if claimed[i].Status == store.Running {
			running++
		}
	}
	if running == len(claimed) && len(res.Started) == 0 {
		res.Started = claimed
		return
	}
	for i := range claimed {
		switch claimed[i].Status {
		case store.Running:
			res.Started = append(res.Started, claimed[i])
		case store.Dispatching:
			res.Claimed = append(res.Claimed, claimed[i])
		}
	}
}

// Keyed is a due SCHEDULED task that a Claim cannot simply take, as the Claim found
// it: its task key restricts it (a key, Overlap skip or queue), or its name has a
// concurrency or rate limit, or both.
type Keyed struct {
	ID      int64
	DueAt   time.Time
	Name    string
	TaskKey string
	Overlap store.OverlapPolicy
	Holder  int64 // set by ResolveKeys on the losers to a key: the task holding the key
	// Limit and RetryAt are set by ResolveKeys on the losers to a name's limit (see
	// store.Limited).
	Limit   int
	RetryAt time.Time
	// KeyLimited is set with them when the name's rate per task key held it back:
	// the driver reports its TaskKey in store.Limited.
	KeyLimited bool
}

// keyRestricts reports whether k's key restricts it: a key, and Overlap skip or queue.
func (k *Keyed) keyRestricts() bool { return k.TaskKey != "" && k.Overlap != store.OverlapAllow }

// KeyHold is what a Claim read, under a key's lock, of the tasks holding the key
// (DISPATCHING or RUNNING with it): the lowest id among them, and how many there are.
type KeyHold struct {
	First int64
	Count int
}

// NameLimit is what a Claim read, under the name's lock, of a task name's limits.
type NameLimit struct {
	// KeyConcurrency is how many tasks sharing a key the name's tasks admit (0, 1:
	// one); read with the others, but under the key's lock, not the name's.
	KeyConcurrency int
	Concurrency    int // 0: none
	InFlight       int // the name's tasks DISPATCHING or RUNNING
	Rate           int // 0: none
	Per            time.Duration
	// Starts are the times of the name's last claims (at most Rate), ascending, as
	// stored with the name (DecodeStarts). ResolveKeys adds its winners' and keeps
	// the last Rate: the driver writes them back when Changed.
	Starts  []time.Time
	Changed bool
	// KeyRate and KeyPer are the name's rate per task key (0: none). KeyStarts are
	// the times of the last claims of the name's tasks with each key (at most
	// KeyRate), ascending, read under the keys' locks for the keys of the claim's
	// tasks that restrict them (a key missing has none). ResolveKeys adds its
	// winners' and keeps the last KeyRate, listing in KeyChanged the keys the driver
	// writes back.
	KeyRate    int
	KeyPer     time.Duration
	KeyStarts  map[string][]time.Time
	KeyChanged []string
}

// admits reports whether the name admits one more claim at now, and, when its rate
// does not, when it will.
func (n *NameLimit) admits(now time.Time) (ok bool, limit int, retryAt time.Time) {
	if n.Concurrency > 0 && n.InFlight >= n.Concurrency {
		return false, n.Concurrency, time.Time{}
	}
	if n.Rate > 0 {
		if at := rateFull(n.Starts, n.Rate, n.Per, now); !at.IsZero() {
			return false, n.Rate, at
		}
	}
	return true, 0, time.Time{}
}

// admitsKey reports whether the name's rate per task key admits one more claim of a
// task with key at now, and, when it does not, when it will.
func (n *NameLimit) admitsKey(key string, now time.Time) (ok bool, limit int, retryAt time.Time) {
	if n.KeyRate > 0 {
		if at := rateFull(n.KeyStarts[key], n.KeyRate, n.KeyPer, now); !at.IsZero() {
			return false, n.KeyRate, at
		}
	}
	return true, 0, time.Time{}
}

// rateFull returns, when the closed window [now − per, now] holds rate of starts
// (ascending), the time at which the window admits another: once the oldest start
// that would still be in it with the next one has left it. Zero when it admits one.
func rateFull(starts []time.Time, rate int, per time.Duration, now time.Time) time.Time {
	i, _ := slices.BinarySearchFunc(starts, now.Add(-per), func(s, t time.Time) int { return s.Compare(t) })
	if len(starts)-i < rate {
		return time.Time{}
	}
	return starts[len(starts)-rate].Add(per + time.Microsecond)
}

// take records one claim of the name at now, of a task whose key restricts it when
// key is not empty.
func (n *NameLimit) take(key string, now time.Time) {
	n.InFlight++
	if n.Rate > 0 {
		n.Starts = appendStart(n.Starts, now, n.Rate)
		n.Changed = true
	}
	if n.KeyRate > 0 && key != "" {
		if n.KeyStarts == nil {
			n.KeyStarts = make(map[string][]time.Time)
		}
		n.KeyStarts[key] = appendStart(n.KeyStarts[key], now, n.KeyRate)
		if !slices.Contains(n.KeyChanged, key) {
			n.KeyChanged = append(n.KeyChanged, key)
		}
	}
}

// appendStart appends now to starts, keeping the last rate.
func appendStart(starts []time.Time, now time.Time, rate int) []time.Time {
	starts = append(starts, now)
	if len(starts) > rate {
		starts = slices.Delete(starts, 0, len(starts)-rate)
	}
	return starts
}

// ResolveKeys applies the overlap rule and the names' limits to the tasks a Claim
// asked for that they restrict, given what was read under the keys' and the names'
// locks: the holders of their keys (a key missing is free) and the names' limits (a
// name missing has none), at now, the claim's time by the store's clock
// (microseconds), which its winners' DispatchedAt must be. In (DueAt, ID) order, a
// task whose key is held by as many tasks as its name admits (its KeyConcurrency, at
// least one) loses to the key's first holder and is skipped or blocked by its
// Overlap; else a task whose name admits no claim (no free slot, or its rate's window
// full) is limited; else a task whose key restricts it and whose name's rate per key
// is full for its key is limited (Keyed.RetryAt set, and the caller reports its
// TaskKey); else it wins, holding its key, a slot and a start. Each list is in id
// order; names records the winners.
func ResolveKeys(tasks []Keyed, holders map[string]KeyHold, names map[string]*NameLimit, now time.Time) (claim, skip, block, limited []Keyed) {
	sorted := slices.Clone(tasks)
	slices.SortFunc(sorted, func(a, b Keyed) int {
		if c := a.DueAt.Compare(b.DueAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	held := maps.Clone(holders)
	if held == nil {
		held = map[string]KeyHold{}
	}
	for _, k := range sorted {
		n := names[k.Name]
		hold := held[k.TaskKey]
		admits := 1
		if n != nil && n.KeyConcurrency > 1 {
			admits = n.KeyConcurrency
		}
		holder, busy := hold.First, hold.Count >= admits
		switch {
		case k.keyRestricts() && busy && k.Overlap == store.OverlapSkip:
			k.Holder = holder
			skip = append(skip, k)
			continue
		case k.keyRestricts() && busy:
			k.Holder = holder
			block = append(block, k)
			continue
		}
		if n != nil {
			key := ""
			if k.keyRestricts() {
				key = k.TaskKey
			}
			ok, limit, retryAt := n.admits(now)
			if ok && key != "" {
				if ok, limit, retryAt = n.admitsKey(key, now); !ok {
					k.KeyLimited = true
				}
			}
			if !ok {
				k.Limit, k.RetryAt = limit, retryAt
				limited = append(limited, k)
				continue
			}
			n.take(key, now)
		}
		if k.keyRestricts() {
			if hold.Count == 0 || k.ID < hold.First {
				hold.First = k.ID
			}
			hold.Count++
			held[k.TaskKey] = hold
		}
		claim = append(claim, k)
	}
	byID := func(a, b Keyed) int { return cmp.Compare(a.ID, b.ID) }
	slices.SortFunc(claim, byID)
	slices.SortFunc(skip, byID)
	slices.SortFunc(block, byID)
	slices.SortFunc(limited, byID)
	return claim, skip, block, limited
}

// EncodeStarts is the stored form of a name's claim times (NameLimit.Starts): each
// time's Unix microseconds, 8 bytes big-endian, in order.
func EncodeStarts(starts []time.Time) []byte {
	b := make([]byte, 0, 8*len(starts))
	for _, t := range starts {
		b = binary.BigEndian.AppendUint64(b, uint64(t.UnixMicro()))
	}
	return b
}

// DecodeStarts reads what EncodeStarts wrote.
func DecodeStarts(b []byte) ([]time.Time, error) {
	if len(b)%8 != 0 {
		return nil, fmt.Errorf("a rate's start times of %d bytes: not a multiple of 8", len(b))
	}
	out := make([]time.Time, len(b)/8)
	for i := range out {
		out[i] = time.UnixMicro(int64(binary.BigEndian.Uint64(b[8*i:]))).UTC()
	}
	return out, nil
}

// SetKeyStarts sets, in the limits of names, the claim times of name's tasks with
// key as stored (EncodeStarts), read under the key's lock; a name missing from names
// or without a rate per key is left alone.
func SetKeyStarts(names map[string]*NameLimit, name, key string, stored []byte) error {
	n := names[name]
	if n == nil || n.KeyRate == 0 {
		return nil
	}
	starts, err := DecodeStarts(stored)
	if err != nil {
		return fmt.Errorf("name %q, task key %q: %w", name, key, err)
	}
	if n.KeyStarts == nil {
		n.KeyStarts = make(map[string][]time.Time)
	}
	n.KeyStarts[key] = starts
	return nil
}

// SkipReason is the LastError of a task skipped because its key was held.
func SkipReason(taskKey string, holder int64) string {
	return fmt.Sprintf("skipped: task key %q held by task %d", taskKey, holder)
}
