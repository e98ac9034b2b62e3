package demo

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/axsched/ax"
)

// cancelGrace is how long after the cancelled task's due time the script checks that
// it did not fire: several wheel ticks.
const cancelGrace = 250 * time.Millisecond

// script plays the users: some pay before their timeout, one cancels their order.
// It runs on its own goroutine; done is closed when it has played every action, and
// err is set (before done) if one of them failed.
type script struct {
	*timeline
	r *run
}

// timeline is the users' actions of a plan in time order, played on their own
// goroutine by a play function: done is closed when every action was played (or ctx
// ended, or stop was called), and err is set before it if one failed.
type timeline struct {
	actions []action
	cancel  context.CancelFunc
	done    chan struct{}
	err     error
}

// newTimeline lays out p's actions: each payment at its fraction of the order's
// timeout, the cancellation at 30% of it, and its check cancelGrace after the timeout.
func newTimeline(p *plan, created map[string]time.Time) *timeline {
	tl := &timeline{done: make(chan struct{})}
	for id, frac := range p.payAt {
		at := created[id].Add(time.Duration(frac * float64(p.timeout[id])))
		tl.actions = append(tl.actions, action{at: at, kind: pay, id: id})
	}
	id := p.cancelled
	tl.actions = append(tl.actions,
		action{at: created[id].Add(p.timeout[id] * 3 / 10), kind: cancelOrder, id: id},
		action{at: created[id].Add(p.timeout[id] + cancelGrace), kind: checkCancelled, id: id})
	sort.SliceStable(tl.actions, func(i, j int) bool { return tl.actions[i].at.Before(tl.actions[j].at) })
	return tl
}

// start plays the actions in time order with play on a new goroutine, until they are
// done, ctx ends or stop is called.
func (tl *timeline) start(ctx context.Context, play func(context.Context, action) error) {
	ctx, tl.cancel = context.WithCancel(ctx)
	go func() {
		defer close(tl.done)
		timer := time.NewTimer(0)
		defer timer.Stop()
		<-timer.C
		for _, a := range tl.actions {
			timer.Reset(max(time.Until(a.at), 0))
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			if err := play(ctx, a); err != nil {
				if ctx.Err() == nil {
					tl.err = err
				}
				return
			}
		}
	}()
}

// stop ends the timeline and waits for its goroutine.
func (tl *timeline) stop() {
	tl.cancel()
	<-tl.done
}

type actionKind int

const (
	pay actionKind = iota
	cancelOrder
	checkCancelled
)

type action struct {
	at   time.Time
	kind actionKind
	id   string
}

func newScript(r *run, created map[string]time.Time) *script {
	return &script{timeline: newTimeline(r.plan, created), r: r}
}

// start plays the script (see timeline.start).
func (sc *script) start(ctx context.Context) { sc.timeline.start(ctx, sc.play) }

func (sc *script) play(ctx context.Context, a action) error {
	r := sc.r
	switch a.kind {
	case pay:
		// UPDATE orders SET status='paid' WHERE id=? AND status='unpaid'
		if r.orders.transition(a.id, unpaid, paid, "") {
			r.tally.update(func(tl *tally) { tl.paid++ })
			return nil
		}
		o, _ := r.orders.get(a.id)
		r.out.line("order %s: payment refused, the order is already %s (%s)", a.id, o.Status, o.Reason)
	case cancelOrder:
		if !r.orders.transition(a.id, unpaid, closed, "cancelled by user") {
			o, _ := r.orders.get(a.id)
			return fmt.Errorf("demo: order %s: the user could not cancel it, it is %s", a.id, o.Status)
		}
		err := r.s.Cancel(ctx, TaskName, a.id)
		if err != nil {
			return fmt.Errorf("demo: order %s: cancel its timeout: %w", a.id, err)
		}
		r.tally.settle(func(tl *tally) { tl.cancelled++ })
		r.out.line("order %s: the user cancelled it; s.Cancel(%q, %q): its timeout (due in %s) must never fire",
			a.id, TaskName, a.id, secs(time.Until(r.due[a.id])))
	case checkCancelled:
		t, err := r.s.Lookup(ctx, TaskName, a.id)
		if err != nil {
			return fmt.Errorf("demo: order %s: %w", a.id, err)
		}
		fired := r.tally.snapshot().cancelledFired
		if t.Status != ax.Cancelled || fired > 0 {
			return fmt.Errorf("demo: order %s: cancelled timeout: task is %s and fired %d times, want CANCELLED and never",
				a.id, t.Status, fired)
		}
		r.out.line("order %s: its timeout was due %s ago and did not fire: task is %s", a.id,
			secs(time.Since(r.due[a.id])), t.Status)
	default:
		return errors.New("demo: unknown action")
	}
	return nil
}
