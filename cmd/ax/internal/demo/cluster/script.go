package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/cmd/ax/internal/demo"
)

// clusterScript plays the users of the cluster scenario from the parent: some pay
// before their timeout (a conditional UPDATE of demo_orders), one cancels their
// order (the UPDATE, then s.Cancel on the front end's scheduler). It runs on its own
// goroutine; done is closed when it has played every action, and err is set (before
// done) if one of them failed.
type clusterScript struct {
	*demo.Timeline
	c    *cluster
	paid atomic.Int64
}

func newClusterScript(c *cluster, created map[string]time.Time) *clusterScript {
	return &clusterScript{Timeline: demo.NewTimeline(c.plan, created), c: c}
}

// start plays the script (see Timeline.Start).
func (sc *clusterScript) start(ctx context.Context) { sc.Timeline.Start(ctx, sc.play) }

func (sc *clusterScript) play(ctx context.Context, a demo.Action) error {
	c := sc.c
	switch a.Kind {
	case demo.Pay:
		ok, err := c.biz.transition(ctx, a.ID, demo.Unpaid, demo.Paid, "")
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		if ok {
			sc.paid.Add(1)
			return nil
		}
		o, err := c.biz.order(ctx, a.ID)
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		c.out.Line("order %s: payment refused, the order is already %s (%s)", a.ID, o.Status, o.Reason)
	case demo.CancelOrder:
		ok, err := c.biz.transition(ctx, a.ID, demo.Unpaid, demo.Closed, "cancelled by user")
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		if !ok {
			return fmt.Errorf("demo: order %s: the user could not cancel it", a.ID)
		}
		if err := c.client.Cancel(ctx, demo.TaskName, a.ID); err != nil {
			return fmt.Errorf("demo: order %s: cancel its timeout: %w", a.ID, err)
		}
		c.out.Line("order %s: the user cancelled it; s.Cancel(%q, %q): its timeout (due in %s) must never fire, on any replica",
			a.ID, demo.TaskName, a.ID, demo.Secs(time.Until(c.due[a.ID])))
	case demo.CheckCancelled:
		t, err := c.client.Lookup(ctx, demo.TaskName, a.ID)
		if err != nil {
			return fmt.Errorf("demo: order %s: %w", a.ID, err)
		}
		n, err := c.biz.runsOf(ctx, demo.TaskName, a.ID)
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		if t.Status != ax.Cancelled || n > 0 {
			return fmt.Errorf("demo: order %s: cancelled timeout: task is %s and ran %d times, want CANCELLED and never",
				a.ID, t.Status, n)
		}
		c.out.Line("order %s: its timeout was due %s ago and did not fire: task is %s", a.ID,
			demo.Secs(time.Since(c.due[a.ID])), t.Status)
	default:
		return errors.New("demo: unknown action")
	}
	return nil
}
