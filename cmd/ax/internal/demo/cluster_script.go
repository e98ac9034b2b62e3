package demo

import (
	"context"
	"errors"
	"fmt"
	"sort"
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
	c       *cluster
	actions []action
	cancel  context.CancelFunc
	done    chan struct{}
	err     error
	paid    atomic.Int64
}

func newClusterScript(c *cluster, created map[string]time.Time) *clusterScript {
	sc := &clusterScript{c: c, done: make(chan struct{})}
	p := c.plan
	for id, frac := range p.payAt {
		at := created[id].Add(time.Duration(frac * float64(p.timeout[id])))
		sc.actions = append(sc.actions, action{at: at, kind: pay, id: id})
	}
	id := p.cancelled
	sc.actions = append(sc.actions,
		action{at: created[id].Add(p.timeout[id] * 3 / 10), kind: cancelOrder, id: id},
		action{at: created[id].Add(p.timeout[id] + cancelGrace), kind: checkCancelled, id: id})
	sort.SliceStable(sc.actions, func(i, j int) bool { return sc.actions[i].at.Before(sc.actions[j].at) })
	return sc
}

func (sc *clusterScript) start(ctx context.Context) {
	ctx, sc.cancel = context.WithCancel(ctx)
	go sc.run(ctx)
}

func (sc *clusterScript) run(ctx context.Context) {
	defer close(sc.done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for _, a := range sc.actions {
		timer.Reset(max(time.Until(a.at), 0))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if err := sc.play(ctx, a); err != nil {
			if ctx.Err() == nil {
				sc.err = err
			}
			return
		}
	}
}

// stop ends the script and waits for its goroutine.
func (sc *clusterScript) stop() {
	sc.cancel()
	<-sc.done
}

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
