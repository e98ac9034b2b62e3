package dispatch

import "time"

// crowding decides whether the wheel hands tasks out at their dues or at their ticks'
// ends (wheel.SetCoarse). At its due, each task of a sparse stream is claimed alone: a
// claim, a transaction, per task. While claims keep up that costs the store a little
// more and gains up to a tick of lateness. When tasks keep falling due while a claim
// is still out — the store, or a machine whose cores are all busy, is slower than the
// stream — claiming each alone only lengthens the queue: every claim waits for the
// CPU, and the tasks behind it wait for the claim (measured with every core busy:
// lateness p99 58–75 ms, against 18–20 ms with the tick's batches).
//
// So the loop counts the claims that tasks fell due behind: claims that took half a
// tick or more, while a task due after they were sent was handed out. It judges a
// claim when it ends, by how long it took. (Judged instead when a task fell due, by
// how long the claim had been out then, a 6 ms claim at 250 tasks a second counted
// only if a task fell due in its last millisecond: with every core busy the loop
// stayed exact for up to three quarters of a 20-second run, lateness p99 46 ms at the
// median of fifteen runs against 31 ms forced coarse.) Once crowdedAfter of them fall
// within crowdWindow (any window: the last crowdedAfter are kept), the loop goes
// coarse for crowdHold — a claim per tick at most, as before issue 38 — and then
// tries dues again; another such claim while coarse extends the hold. Claims, not
// tasks nor wake-ups: a burst due at one instant is one claim however many tasks it
// holds, and a claim the store holds up for a while (a checkpoint's stall, a
// failover) is one however many tasks fall due behind it; neither means claims keep
// falling behind. A claim that took less than half a tick is a claim keeping up: a
// task that falls due behind it (one the refill brings back just as it is claimed,
// say) waits less than the claim took.
type crowding struct {
	behind [crowdedAfter]time.Time // when the last crowdedAfter such claims were seen, a ring
	next   int                     // where the next goes in behind
	until  time.Time               // coarse until then
}

const (
	crowdedAfter = 16
	crowdWindow  = time.Second
	crowdHold    = time.Minute
)

// coarse reports whether tasks are handed out at their ticks' ends at now.
func (c *crowding) coarse(now time.Time) bool { return now.Before(c.until) }

// claimBehind records a claim seen at now that a task fell due behind.
func (c *crowding) claimBehind(now time.Time) {
	c.behind[c.next] = now
	c.next = (c.next + 1) % crowdedAfter
	if first := c.behind[c.next]; !first.IsZero() && now.Sub(first) < crowdWindow {
		c.until = now.Add(crowdHold)
	}
}
