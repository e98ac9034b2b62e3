package wheel

import (
	"math"
	"math/bits"
	"slices"
	"time"
)

const (
	// slotsPerLevel is the number of slots on every level; one uint64 holds a
	// level's occupancy bitmap.
	slotsPerLevel = 60

	// maxLevels bounds the hierarchy so that 60^maxLevels ticks still fit in
	// an int64 (60^10 ≈ 6.0e17 < 2^63).
	maxLevels = 10

	// maxTick clamps tick numbers derived from times, so cur+1 and
	// cur+spanTicks can never overflow.
	maxTick = int64(1) << 62

	// nilIndex marks the end of the free list.
	nilIndex int32 = -1

	// exactMax is the most entries a tick may hold for the wheel to hand them out
	// at their exact dues rather than at the tick's end (see Advance): finding the
	// ones due by now, or the earliest, walks the tick's list.
	exactMax = 64
)

// Entry is one expired timer, as returned by [Wheel.Advance].
type Entry struct {
	// ID is the id passed to Add.
	ID int64
	// Due is the due time passed to Add (not rounded), in UTC and without a
	// monotonic clock reading.
	Due time.Time
}

// entry is one slot of the slab. It holds no pointers, so the garbage
// collector never scans the slab.
//
// Indices below Wheel.sentinels are list heads (one per slot, plus the
// overdue list): their next/prev make the circular doubly linked list of the
// slot and their other fields are unused. Above that, a live entry is linked
// into exactly one list, and a free entry is on the free list through next.
type entry struct {
	id   int64
	due  int64 // the due passed to Add, in Unix nanoseconds
	tick int64 // due rounded up to a tick boundary, in ticks since origin
	next int32
	prev int32
}

// Wheel is a hierarchical timing wheel: it holds (id, due) pairs and hands
// them out, in due order, once an explicit clock passes their due time.
//
// A Wheel reads no clock, starts no goroutine and takes no lock: it is owned
// by one goroutine, and concurrent use needs external synchronisation. Add,
// Remove, Contains and Len are O(1); Advance is O(expired entries + non-empty
// slots passed over), independent of how much time it skips. See the package
// documentation for the layout and its invariants.
type Wheel struct {
	tick      time.Duration
	origin    time.Time // wall time of tick 0, no monotonic reading
	levels    int
	spanTicks int64                // Add accepts a rounded due tick <= cur+spanTicks
	gran      [maxLevels + 1]int64 // gran[L] = 60^L: ticks per slot on level L
	occupied  [maxLevels]uint64    // bit s of occupied[L]: slot s of level L is non-empty
	cur       int64                // first tick not yet expired; every tick < cur has been handed out
	slab      []entry              // [0, sentinels) are list heads, the rest entries
	sentinels int32                // levels*60 slot heads + the overdue head
	free      int32                // head of the free list, or nilIndex
	index     map[int64]int32      // id -> slab index
	minDue    int64                // lower bound of the overdue list's smallest due (Unix ns)
	coarse    bool                 // SetCoarse: every tick handed out at its end

	// slotVisits counts the slots Advance expired or cascaded. Tests use it
	// to check that catching up is proportional to the non-empty slots, not
	// to the time skipped.
	slotVisits int
}

// New returns an empty wheel whose slots are tick wide and whose span covers
// at least span. origin is the wall time of tick 0; pass the owner's start
// time. New strips any monotonic clock reading from origin, so every time is
// compared by its wall clock.
//
// The wheel has as many levels of 60 slots as needed to cover span
// (tick 10ms and span 5m give 3 levels and an actual span of 35m24s; see
// [Wheel.Span]). Only with ticks shorter than 16ns and spans of many years can
// the 10-level maximum fall short, in which case Span reports less than
// requested. New panics if tick is not positive.
func New(tick time.Duration, span time.Duration, origin time.Time) *Wheel {
	if tick <= 0 {
		panic("wheel: New: tick must be positive")
	}
	need := int64(0)
	if span > 0 {
		need = ceilDiv(int64(span), int64(tick))
	}
	w := &Wheel{
		tick:   tick,
		origin: origin.Round(0),
		free:   nilIndex,
		index:  make(map[int64]int32),
	}
	g := int64(1)
	for l := range w.gran {
		w.gran[l] = g
		if l < maxLevels {
			g *= slotsPerLevel
		}
	}
	w.levels = 1
	for w.levels < maxLevels && (slotsPerLevel-1)*w.gran[w.levels-1] < need {
		w.levels++
	}
	w.spanTicks = (slotsPerLevel - 1) * w.gran[w.levels-1]
	w.sentinels = int32(w.levels*slotsPerLevel + 1)
	w.slab = make([]entry, w.sentinels)
	for i := range w.sentinels {
		w.slab[i].next, w.slab[i].prev = i, i
	}
	return w
}

// Tick returns the width of one slot on level 0: the resolution of the wheel.
func (w *Wheel) Tick() time.Duration { return w.tick }

// Span returns how far ahead of its position the wheel accepts entries:
// 59 top-level slots, which is at least the span passed to New. Add always
// accepts a due no later than the time of the last Advance (or the origin)
// plus Span.
func (w *Wheel) Span() time.Duration {
	if w.spanTicks > math.MaxInt64/int64(w.tick) {
		return math.MaxInt64
	}
	return time.Duration(w.spanTicks) * w.tick
}

// Len returns the number of entries in the wheel.
func (w *Wheel) Len() int { return len(w.index) }

// Contains reports whether id is in the wheel.
func (w *Wheel) Contains(id int64) bool {
	_, ok := w.index[id]
	return ok
}

// Add schedules id at due, or moves it there if id is already in the wheel:
// an id is present at most once.
//
// due, rounded up to the next tick boundary, picks the entry's slot; Advance
// never hands it out before due itself. A due at or before the wheel's current position
// (a tick already expired) is handed out by the next Advance, whatever its
// now. Add returns false and leaves the wheel unchanged (an existing entry
// for id keeps its old due) when due, rounded up, lies more than Span past
// the wheel's position; a due within Span of the last Advance's now is always
// accepted. Dues must lie within the range of [time.Time.UnixNano].
func (w *Wheel) Add(id int64, due time.Time) bool {
	t := w.ceilTick(due)
	if t > w.cur+w.spanTicks {
		return false
	}
	i, ok := w.index[id]
	if ok {
		w.unlink(i)
	} else {
		i = w.alloc()
		w.index[id] = i
	}
	e := &w.slab[i]
	e.id, e.due, e.tick = id, due.UnixNano(), t
	w.insert(i)
	return true
}

// Remove deletes id from the wheel and reports whether it was there.
func (w *Wheel) Remove(id int64) bool {
	i, ok := w.index[id]
	if !ok {
		return false
	}
	w.unlink(i)
	delete(w.index, id)
	w.release(i)
	return true
}

// SetCoarse sets whether every tick is handed out at its end, as a dense one always
// is (true), or a sparse tick's entries each at its due (false, the default): its
// owner's choice while handing entries out one by one costs it more than the tick's
// wait (see dispatch's crowding). Next and Advance follow it at once.
func (w *Wheel) SetCoarse(on bool) { w.coarse = on }

// Coarse reports whether every tick is handed out at its end (SetCoarse).
func (w *Wheel) Coarse() bool { return w.coarse }

// Advance moves the wheel to now, appends to dst every entry whose rounded
// due tick is at most floor((now-origin)/tick), and, from the tick now lies in,
// every entry whose due is at most now while that tick holds at most 64 entries
// (exactMax) and the wheel is not coarse (SetCoarse) — so no entry earlier than
// its due, each at its due in a sparse tick and at most one tick after it in a
// dense one — and returns dst. Entries
// that were already overdue when added come out first. Entries come out in due
// order across ticks, in no particular order within one tick (in due order
// from the tick now lies in), and each leaves the wheel as it comes out.
//
// A now earlier than a previous one moves nothing back: it only hands out
// overdue entries. Catching up a long stall costs time proportional to the
// entries handed out and the non-empty slots passed over, not to the number
// of ticks skipped.
func (w *Wheel) Advance(now time.Time, dst []Entry) []Entry {
	dst = w.expireOverdue(dst)
	target := w.floorTick(now)
	for w.cur <= target {
		level, slot, start, ok := w.nextSlot()
		if !ok {
			w.cur = target + 1
			break
		}
		if start > target {
			w.enter(target + 1)
			break
		}
		if level == 0 {
			dst = w.expire(slot, dst)
			w.enter(start + 1)
		} else {
			w.enter(start)
		}
	}
	return w.expireDue(now, dst)
}

// expireDue appends to dst, in due order, the entries of tick cur — the tick now
// lies in, not yet expired — whose due is at most now, if the tick holds at most
// exactMax entries. By the invariants they all lie in cur's level-0 slot.
func (w *Wheel) expireDue(now time.Time, dst []Entry) []Entry {
	s := int(w.cur % slotsPerLevel)
	if w.occupied[0]&(1<<s) == 0 {
		return dst
	}
	h := w.head(0, s)
	if w.coarse || w.count(h) > exactMax {
		return dst
	}
	n, due := len(dst), now.UnixNano()
	for i := w.slab[h].next; i != h; {
		e := w.slab[i]
		if e.due <= due {
			dst = append(dst, Entry{ID: e.id, Due: time.Unix(0, e.due).UTC()})
			w.unlink(i)
			delete(w.index, e.id)
			w.release(i)
		}
		i = e.next
	}
	slices.SortFunc(dst[n:], func(a, b Entry) int { return a.Due.Compare(b.Due) })
	return dst
}

// count returns the length of the list headed by h, or exactMax+1 if it is longer.
func (w *Wheel) count(h int32) int {
	n := 0
	for i := w.slab[h].next; i != h && n <= exactMax; i = w.slab[i].next {
		n++
	}
	return n
}

// Next returns a safe wake-up time — no later than the earliest time at which
// Advance would hand out an entry — and false when the wheel is empty. It is
// the due of the earliest overdue entry; else, when the earliest non-empty slot
// is on level 0, the earliest due in it if it holds at most exactMax entries
// and the wheel is not coarse (Advance hands them out at their dues), or its
// tick's end; or else, for the earliest non-empty higher-level slot, the start of
// its first tick (the end of the tick before), where Advance cascades it — an
// entry of that first tick may be due at any instant of it. In the last case
// Advance(Next()) hands out nothing but makes progress, and the owner asks Next
// again.
func (w *Wheel) Next() (time.Time, bool) {
	if len(w.index) == 0 {
		return time.Time{}, false
	}
	if w.slab[w.overdueHead()].next != w.overdueHead() {
		return time.Unix(0, w.minDue).UTC(), true
	}
	level, slot, start, _ := w.nextSlot()
	if h := w.head(0, slot); level == 0 && !w.coarse && w.count(h) <= exactMax {
		first := int64(math.MaxInt64)
		for i := w.slab[h].next; i != h; i = w.slab[i].next {
			first = min(first, w.slab[i].due)
		}
		return time.Unix(0, first).UTC(), true
	}
	if level > 0 && !w.coarse {
		// The slot cascades once cur reaches start, which Advance does from the end of
		// tick start-1 on (start > cur: cur's own slots have cascaded already).
		return w.tickTime(start - 1), true
	}
	return w.tickTime(start), true
}

// nextSlot finds the earliest non-empty slot: the lowest non-empty level,
// and on it the first occupied slot at or after the one holding cur (the
// invariants guarantee nothing earlier is occupied). It returns the level,
// the slot index and the slot's first tick.
func (w *Wheel) nextSlot() (level int, slot int, start int64, ok bool) {
	for l := range w.levels {
		occ := w.occupied[l]
		if occ == 0 {
			continue
		}
		q := w.cur / w.gran[l]
		c := int(q % slotsPerLevel)
		var dist int
		if ahead := occ >> c; ahead != 0 {
			dist = bits.TrailingZeros64(ahead)
		} else { // top level only: wrap around
			dist = bits.TrailingZeros64(occ) + slotsPerLevel - c
		}
		return l, (c + dist) % slotsPerLevel, (q + int64(dist)) * w.gran[l], true
	}
	return 0, 0, 0, false
}

// enter moves cur to x, which must not lie past the earliest non-empty slot,
// and cascades every higher-level slot that x has just entered: its entries
// are placed again relative to the new cur, on lower levels.
func (w *Wheel) enter(x int64) {
	w.cur = x
	for l := w.levels - 1; l >= 1; l-- {
		s := int((x / w.gran[l]) % slotsPerLevel)
		if w.occupied[l]&(1<<s) != 0 {
			w.cascade(l, s)
		}
	}
}

// cascade empties slot s of level l and places each of its entries again.
func (w *Wheel) cascade(l, s int) {
	w.slotVisits++
	h := w.head(l, s)
	i := w.slab[h].next
	w.slab[h].next, w.slab[h].prev = h, h
	w.occupied[l] &^= 1 << s
	for i != h {
		next := w.slab[i].next
		w.place(i)
		i = next
	}
}

// expire empties slot s of level 0, appending its entries to dst.
func (w *Wheel) expire(s int, dst []Entry) []Entry {
	w.slotVisits++
	h := w.head(0, s)
	dst = w.drain(h, dst)
	w.occupied[0] &^= 1 << s
	return dst
}

// expireOverdue empties the overdue list, appending its entries to dst in
// due order.
func (w *Wheel) expireOverdue(dst []Entry) []Entry {
	h := w.overdueHead()
	if w.slab[h].next == h {
		return dst
	}
	n := len(dst)
	dst = w.drain(h, dst)
	slices.SortFunc(dst[n:], func(a, b Entry) int { return a.Due.Compare(b.Due) })
	return dst
}

// drain frees every entry of the list headed by h, appending it to dst.
func (w *Wheel) drain(h int32, dst []Entry) []Entry {
	i := w.slab[h].next
	for i != h {
		e := w.slab[i]
		dst = append(dst, Entry{ID: e.id, Due: time.Unix(0, e.due).UTC()})
		delete(w.index, e.id)
		w.release(i)
		i = e.next
	}
	w.slab[h].next, w.slab[h].prev = h, h
	return dst
}

// insert links entry i, whose tick is set, where it belongs: the overdue
// list if its tick has already expired, else its wheel slot.
func (w *Wheel) insert(i int32) {
	e := &w.slab[i]
	if e.tick >= w.cur {
		w.place(i)
		return
	}
	h := w.overdueHead()
	if w.slab[h].next == h || e.due < w.minDue {
		w.minDue = e.due
	}
	w.link(i, h)
}

// place links entry i (tick >= cur) into its slot: on the lowest level l
// whose enclosing slot of level l+1 also holds cur, or on the top level.
func (w *Wheel) place(i int32) {
	t := w.slab[i].tick
	l := 0
	for l < w.levels-1 && t/w.gran[l+1] != w.cur/w.gran[l+1] {
		l++
	}
	s := int((t / w.gran[l]) % slotsPerLevel)
	w.link(i, w.head(l, s))
	w.occupied[l] |= 1 << s
}

func (w *Wheel) head(l, s int) int32 { return int32(l*slotsPerLevel + s) }

func (w *Wheel) overdueHead() int32 { return w.sentinels - 1 }

// link appends entry i to the list headed by h.
func (w *Wheel) link(i, h int32) {
	p := w.slab[h].prev
	w.slab[i].prev, w.slab[i].next = p, h
	w.slab[p].next = i
	w.slab[h].prev = i
}

// unlink takes entry i out of its list, clearing the slot's occupancy bit
// when the list becomes empty.
func (w *Wheel) unlink(i int32) {
	n, p := w.slab[i].next, w.slab[i].prev
	w.slab[p].next = n
	w.slab[n].prev = p
	if n == p && n < w.overdueHead() { // only the head is left
		w.occupied[int(n)/slotsPerLevel] &^= 1 << (int(n) % slotsPerLevel)
	}
}

func (w *Wheel) alloc() int32 {
	if i := w.free; i != nilIndex {
		w.free = w.slab[i].next
		return i
	}
	if len(w.slab) >= math.MaxInt32 {
		panic("wheel: Add: more than 2^31 entries")
	}
	w.slab = append(w.slab, entry{})
	return int32(len(w.slab) - 1)
}

func (w *Wheel) release(i int32) {
	w.slab[i] = entry{next: w.free}
	w.free = i
}

// ceilTick returns the first tick boundary at or after t.
func (w *Wheel) ceilTick(t time.Time) int64 {
	return ceilDiv(int64(t.Sub(w.origin)), int64(w.tick))
}

// floorTick returns the last tick boundary at or before t, clamped to
// maxTick.
func (w *Wheel) floorTick(t time.Time) int64 {
	ns, tick := int64(t.Sub(w.origin)), int64(w.tick)
	q := ns / tick
	if ns < 0 && ns%tick != 0 {
		q--
	}
	return min(q, maxTick)
}

// tickTime returns the wall time of tick t, saturating far in the future.
func (w *Wheel) tickTime(t int64) time.Time {
	if t > math.MaxInt64/int64(w.tick) {
		return w.origin.Add(math.MaxInt64)
	}
	return w.origin.Add(time.Duration(t) * w.tick)
}

// ceilDiv returns ⌈a/b⌉ for b > 0.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a > 0 && a%b != 0 {
		q++
	}
	return q
}
