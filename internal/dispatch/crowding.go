package dispatch

import "time"

// crowding decides whether the wheel hands tasks out at their dues or at their ticks'
// ends (wheel.SetCoarse). At its due, each task of a sparse stream is claimed alone: a
// claim, a transaction, per task. While claims keep up that costs the store a little
// more and gains up to a tick of lateness. When tasks keep falling due while a claim
// is still out — the store, or a machine whose cores are all busy, is slower than the
// stream — claiming each alone only lengthens the queue: every claim waits for the
// CPU, and the tasks behind it wait for the claim (measured with every core busy:
// lateness p99 58–75 ms, against 18–20 ms with the tick's batches). So once
// crowdedAfter tasks fell due behind a claim out for a quarter of a tick or more
// within crowdWindow, the loop goes coarse for crowdHold — a claim per tick at most,
// as before issue 38 — and then tries dues again. A claim out for less is a claim
// keeping up: a task that falls due behind it (a task the refill brings back just as
// it is claimed, say) waits less than the claim took.
type crowding struct {
	from   time.Time // when the current count began
	behind int       // tasks that fell due while a claim was out, since from
	until  time.Time // coarse until then
}

const (
	crowdedAfter = 16
	crowdWindow  = time.Second
	crowdHold    = time.Minute
)

// coarse reports whether tasks are handed out at their ticks' ends at now.
func (c *crowding) coarse(now time.Time) bool { return now.Before(c.until) }

// fellDue counts n tasks that fell due at now while a claim was out.
func (c *crowding) fellDue(now time.Time, n int) {
	if now.Sub(c.from) >= crowdWindow {
		c.from, c.behind = now, 0
	}
	c.behind += n
	if c.behind >= crowdedAfter {
		c.until = now.Add(crowdHold)
		c.from, c.behind = now, 0
	}
}
