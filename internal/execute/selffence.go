package execute

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/axsched/ax/internal/observe"
)

// ErrSelfFenced is the cause (context.Cause) of a handler's context cancelled by
// self-fencing: no heartbeat reached the store within Config.SelfFenceAfter.
var ErrSelfFenced = errors.New("self-fenced: no heartbeat reached the store in time")

// beaten records that a request started at at stamped the execution alive. A stamp
// that comes more than bound after the one before it does not revive the execution:
// it was unconfirmed for longer than bound in between (the process was paused, say),
// whether or not anything looked then, so it is fenced now.
func (x *execution) beaten(at time.Time, bound time.Duration) (fence bool) {
	x.beatMu.Lock()
	defer x.beatMu.Unlock()
	if bound > 0 && at.Sub(x.beat) > bound {
		return true
	}
	if at.After(x.beat) {
		x.beat = at
	}
	if x.fence != nil && !x.returned {
		x.fence.Reset(bound - time.Since(x.beat))
	}
	return false
}

// stale reports whether the execution's last stamp in the store is older than bound, on
// the monotonic clock.
func (x *execution) stale(bound time.Duration) bool {
	x.beatMu.Lock()
	defer x.beatMu.Unlock()
	return time.Since(x.beat) > bound
}

// stopFence stops the self-fencing timer: the handler returned.
func (x *execution) stopFence() {
	x.beatMu.Lock()
	defer x.beatMu.Unlock()
	x.returned = true
	if x.fence != nil {
		x.fence.Stop()
	}
}

// fenceContext is a handler's context under self-fencing. Its Err and Done check the
// age of the execution's last stamp at each call and, when it is past the bound,
// cancel the context before they return: a handler resumed from a pause (SIGSTOP, a
// long GC) sees its context cancelled at its first check, whichever goroutine the
// runtime wakes first and however long the self-fencing warning takes to log.
type fenceContext struct {
	context.Context
	e *Executor
	x *execution
}

func (c fenceContext) Err() error {
	c.check()
	return c.Context.Err()
}

func (c fenceContext) Done() <-chan struct{} {
	c.check()
	return c.Context.Done()
}

// check fences the execution if its last stamp is older than the bound.
func (c fenceContext) check() {
	if c.Context.Err() == nil && c.x.stale(c.e.cfg.SelfFenceAfter) {
		c.e.selfFence(c.x)
	}
}

// selfFence cancels an execution whose last stamp in the store is older than
// SelfFenceAfter: it may have been declared orphaned and re-run elsewhere already, or
// will be before this process can stamp it again. The context is cancelled before
// selfFence returns, whoever calls it first (cancelling is idempotent and
// synchronous, children included); the warning is logged once, after.
func (e *Executor) selfFence(x *execution) {
	x.beatMu.Lock()
	returned := x.returned
	x.beatMu.Unlock()
	if returned { // its result waits to be written: there is nothing to cancel
		return
	}
	first := !x.fenced.Swap(true) // before the cancel: a handler that sees it returns as fenced
	x.cancel(ErrSelfFenced)
	if first {
		e.cfg.Log.LogAttrs(e.base, slog.LevelWarn, "ax: execution not stamped alive in time; cancelled its handler (self-fencing)",
			append(observe.TaskAttrs(x.task), slog.Duration("bound", e.cfg.SelfFenceAfter))...)
	}
}
