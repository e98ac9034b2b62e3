package demo

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/axsched/ax"
)

// clusterScript plays the users of the cluster scenario from the parent: some pay
// before their timeout (a conditional UPDATE of demo_orders), one cancels their
// order (the UPDATE, then s.Cancel on the front end's scheduler). It runs on its own
// goroutine; done is closed when it has played every action, and err is set (before
// done) if one of them failed.
type clusterScript struct {
	*timeline
	c    *cluster
	paid atomic.Int64
}

func newClusterScript(c *cluster, created map[string]time.Time) *clusterScript {
	return &clusterScript{timeline: newTimeline(c.plan, created), c: c}
}

// start plays the script (see timeline.start).
func (sc *clusterScript) start(ctx context.Context) { sc.timeline.start(ctx, sc.play) }

func (sc *clusterScript) play(ctx context.Context, a action) error {
	c := sc.c
	switch a.kind {
	case pay:
		ok, err := c.biz.transition(ctx, a.id, unpaid, paid, "")
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		if ok {
			sc.paid.Add(1)
			return nil
		}
		o, err := c.biz.order(ctx, a.id)
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		c.out.line("order %s: payment refused, the order is already %s (%s)", a.id, o.Status, o.Reason)
	case cancelOrder:
		ok, err := c.biz.transition(ctx, a.id, unpaid, closed, "cancelled by user")
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		if !ok {
			return fmt.Errorf("demo: order %s: the user could not cancel it", a.id)
		}
		if err := c.client.Cancel(ctx, TaskName, a.id); err != nil {
			return fmt.Errorf("demo: order %s: cancel its timeout: %w", a.id, err)
		}
		c.out.line("order %s: the user cancelled it; s.Cancel(%q, %q): its timeout (due in %s) must never fire, on any replica",
			a.id, TaskName, a.id, secs(time.Until(c.due[a.id])))
	case checkCancelled:
		t, err := c.client.Lookup(ctx, TaskName, a.id)
		if err != nil {
			return fmt.Errorf("demo: order %s: %w", a.id, err)
		}
		n, err := c.biz.runsOf(ctx, TaskName, a.id)
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		if t.Status != ax.Cancelled || n > 0 {
			return fmt.Errorf("demo: order %s: cancelled timeout: task is %s and ran %d times, want CANCELLED and never",
				a.id, t.Status, n)
		}
		c.out.line("order %s: its timeout was due %s ago and did not fire: task is %s", a.id,
			secs(time.Since(c.due[a.id])), t.Status)
	default:
		return errors.New("demo: unknown action")
	}
	return nil
}
