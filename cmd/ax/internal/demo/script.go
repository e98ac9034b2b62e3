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
// It runs on its own goroutine; Done is closed when it has played every action, and
// Err is set (before Done) if one of them failed.
type script struct {
	*Timeline
	r *run
}

// Timeline is the users' actions of a plan in time order, played on their own
// goroutine by a play function: Done is closed when every action was played (or ctx
// ended, or Stop was called), and Err is set before it if one failed.
type Timeline struct {
	actions []Action
	cancel  context.CancelFunc
	Done    chan struct{} // closed when the timeline ends
	Err     error         // why it ended early, set before Done is closed
}

// NewTimeline lays out p's actions: each payment at its fraction of the order's
// timeout, the cancellation at 30% of it, and its check cancelGrace after the timeout.
func NewTimeline(p *Plan, created map[string]time.Time) *Timeline {
	tl := &Timeline{Done: make(chan struct{})}
	for id, frac := range p.PayAt {
		at := created[id].Add(time.Duration(frac * float64(p.Timeout[id])))
		tl.actions = append(tl.actions, Action{At: at, Kind: Pay, ID: id})
	}
	id := p.Cancelled
	tl.actions = append(tl.actions,
		Action{At: created[id].Add(p.Timeout[id] * 3 / 10), Kind: CancelOrder, ID: id},
		Action{At: created[id].Add(p.Timeout[id] + cancelGrace), Kind: CheckCancelled, ID: id})
	sort.SliceStable(tl.actions, func(i, j int) bool { return tl.actions[i].At.Before(tl.actions[j].At) })
	return tl
}

// Start plays the actions in time order with play on a new goroutine, until they are
// done, ctx ends or Stop is called.
func (tl *Timeline) Start(ctx context.Context, play func(context.Context, Action) error) {
	ctx, tl.cancel = context.WithCancel(ctx)
	go func() {
		defer close(tl.Done)
		timer := time.NewTimer(0)
		defer timer.Stop()
		<-timer.C
		for _, a := range tl.actions {
			timer.Reset(max(time.Until(a.At), 0))
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			if err := play(ctx, a); err != nil {
				if ctx.Err() == nil {
					tl.Err = err
				}
				return
			}
		}
	}()
}

// Stop ends the timeline and waits for its goroutine.
func (tl *Timeline) Stop() {
	tl.cancel()
	<-tl.Done
}

// ActionKind is what a user does in an Action.
type ActionKind int

// The kinds of Action.
const (
	Pay            ActionKind = iota // the user pays the order
	CancelOrder                      // the user cancels the order, and its timeout
	CheckCancelled                   // the cancelled order's timeout did not fire
)

// Action is one step of a Timeline: at At, Kind on the order ID.
type Action struct {
	At   time.Time
	Kind ActionKind
	ID   string
}

func newScript(r *run, created map[string]time.Time) *script {
	return &script{Timeline: NewTimeline(r.plan, created), r: r}
}

// start plays the script (see Timeline.Start).
func (sc *script) start(ctx context.Context) { sc.Timeline.Start(ctx, sc.play) }

func (sc *script) play(ctx context.Context, a Action) error {
	r := sc.r
	switch a.Kind {
	case Pay:
		// UPDATE orders SET status='paid' WHERE id=? AND status='unpaid'
		if r.orders.transition(a.ID, Unpaid, Paid, "") {
			r.tally.update(func(tl *tally) { tl.paid++ })
			return nil
		}
		o, _ := r.orders.get(a.ID)
		r.out.Line("order %s: payment refused, the order is already %s (%s)", a.ID, o.Status, o.Reason)
	case CancelOrder:
		if !r.orders.transition(a.ID, Unpaid, Closed, "cancelled by user") {
			o, _ := r.orders.get(a.ID)
			return fmt.Errorf("demo: order %s: the user could not cancel it, it is %s", a.ID, o.Status)
		}
		err := r.s.Cancel(ctx, TaskName, a.ID)
		if err != nil {
			return fmt.Errorf("demo: order %s: cancel its timeout: %w", a.ID, err)
		}
		r.tally.settle(func(tl *tally) { tl.cancelled++ })
		r.out.Line("order %s: the user cancelled it; s.Cancel(%q, %q): its timeout (due in %s) must never fire",
			a.ID, TaskName, a.ID, Secs(time.Until(r.due[a.ID])))
	case CheckCancelled:
		t, err := r.s.Lookup(ctx, TaskName, a.ID)
		if err != nil {
			return fmt.Errorf("demo: order %s: %w", a.ID, err)
		}
		fired := r.tally.snapshot().cancelledFired
		if t.Status != ax.Cancelled || fired > 0 {
			return fmt.Errorf("demo: order %s: cancelled timeout: task is %s and fired %d times, want CANCELLED and never",
				a.ID, t.Status, fired)
		}
		r.out.Line("order %s: its timeout was due %s ago and did not fire: task is %s", a.ID,
			Secs(time.Since(r.due[a.ID])), t.Status)
	default:
		return errors.New("demo: unknown action")
	}
	return nil
}
