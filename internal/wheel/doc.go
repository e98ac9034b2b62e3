// Package wheel implements a hierarchical timing wheel (Varghese & Lauck):
// the in-memory index that makes "which tasks are due now" cheap for the
// scheduling loop (internal/dispatch).
//
// It is a pure data structure. It reads no clock, starts no goroutine and
// takes no lock; the one goroutine that owns it passes the time explicitly:
//
//	w := wheel.New(10*time.Millisecond, 5*time.Minute, start.Round(0))
//	w.Add(taskID, dueAt) // O(1); the tick dueAt falls in picks its slot
//	for {
//		next, ok := w.Next() // sleep until next, not every tick
//		...
//		expired = w.Advance(time.Now(), expired[:0]) // all due by now, in order
//	}
//
// # Layout
//
// Time is counted in ticks since the origin. Level l has 60 slots of 60^l
// ticks each, and there are as many levels as needed for 59 top-level slots
// to cover the requested span (tick 10ms, span 5m: 3 levels, 35m24s). cur is
// the first tick not yet expired. Reading a tick number t in base 60, its
// digit l is the slot t occupies on level l, and the digits of t above l say
// which turn of level l it belongs to:
//
//	tick = 10ms, cur = 1:02.37 = tick 6237 = digits [1 43 57]
//
//	level 2  60 × 36s     [ ][#][ ][ ][#][ ] ... [ ]   slots > 1, then wrap
//	                          ^cur                      (the top level is circular)
//	level 1  60 × 600ms   [ ] ... [ ][#][ ][#] ... [ ] slots > 43, same level-2 slot as cur
//	                                 ^cur
//	level 0  60 × 10ms    [ ] ... [#][ ][#] ... [ ]    slots >= 57, same level-1 slot as cur
//	                              ^cur
//	overdue               [#]→[#]                      tick < cur: handed out by the next Advance
//
// Each slot is a circular doubly linked list threaded through a slab of
// pointer-free entries (int32 next/prev indices, a free list), so a million
// pending timers are a few flat arrays the garbage collector does not scan.
// An id→slab-index map (also pointer-free) makes Add, Remove and Contains
// O(1). Each level keeps a uint64 bitmap of its non-empty slots.
//
// # Invariants
//
//  1. An entry with tick t >= cur lies on the lowest level l whose enclosing
//     level-(l+1) slot also holds cur (t/60^(l+1) == cur/60^(l+1)), or on the
//     top level, in slot (t/60^l) mod 60. So below the top, level l holds
//     only slots after cur's own (at or after, on level 0), within the same
//     turn; the top level holds entries 1 to 59 of its slots ahead of cur's.
//  2. Hence every entry on level l is due before the start of any non-empty
//     slot on a level above l, and a level-0 slot holds entries of one tick.
//  3. Entries with tick < cur (added after their tick expired) sit on the
//     overdue list; every other tick < cur has been handed out.
//  4. Bit s of a level's bitmap is set exactly when slot s is non-empty.
//
// Advance keeps these while moving cur forward: it repeatedly takes the
// earliest non-empty slot — on the lowest non-empty level, the first set
// bit at or after cur's slot — and, if it starts no later than now, either
// hands out a level-0 slot or moves cur to the start of a higher slot and
// cascades it (places its entries again, on lower levels). It never moves
// cur past a non-empty slot without visiting it, and jumps over empty
// stretches in one step, so catching up an hour of 10ms ticks costs as many
// steps as there are non-empty slots, not 360,000.
//
// Add rounds a due up to a tick boundary to place it. Advance hands out an
// entry once now reaches its due, in a tick of at most 64 entries unless the
// wheel is coarse (Next then names that due), or else once now reaches its
// rounded tick, at most one tick after its due; never before its due. The
// wheel is a cache of the task table: losing it loses nothing, and "never
// early" is finally enforced by the claim on the database.
package wheel
