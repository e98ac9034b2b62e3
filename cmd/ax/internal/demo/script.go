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
	r       *run
	actions []action
	cancel  context.CancelFunc
	done    chan struct{}
	err     error
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
	sc := &script{r: r, done: make(chan struct{})}
	for id, frac := range r.plan.payAt {
		at := created[id].Add(time.Duration(frac * float64(r.plan.timeout[id])))
		sc.actions = append(sc.actions, action{at: at, kind: pay, id: id})
	}
	id := r.plan.cancelled
	sc.actions = append(sc.actions,
		action{at: created[id].Add(r.plan.timeout[id] * 3 / 10), kind: cancelOrder, id: id},
		action{at: created[id].Add(r.plan.timeout[id] + cancelGrace), kind: checkCancelled, id: id})
	sort.SliceStable(sc.actions, func(i, j int) bool { return sc.actions[i].at.Before(sc.actions[j].at) })
	return sc
}

// start plays the actions in time order on a new goroutine, until they are done, ctx
// ends or stop is called.
func (sc *script) start(ctx context.Context) {
	ctx, sc.cancel = context.WithCancel(ctx)
	go sc.run(ctx)
}

func (sc *script) run(ctx context.Context) {
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
			sc.err = err
			return
		}
	}
}

// stop ends the script and waits for its goroutine.
func (sc *script) stop() {
	sc.cancel()
	<-sc.done
}

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
