package execute

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/store"
)

// execution is one running handler.
type execution struct {
	task    *store.Task // as the claim read it, shared with its other readers: never written
	src     *Source
	ctx     context.Context // the handler's context, without its deadline
	cancel  context.CancelCauseFunc
	once    sync.Once
	err     error // the handler's result
	outcome string
	end     func(error) // ends the execution's span (Config.Trace); nil: none
	begin   time.Time   // the handler's start, with the monotonic reading
	ran     time.Duration

	// Self-fencing (Config.SelfFenceAfter): the start of the last request that
	// stamped this execution alive in the store (Start, then each Heartbeat), and
	// the timer that cancels the handler's context when it gets too old.
	beatMu   sync.Mutex
	beat     time.Time
	fence    *time.Timer
	returned bool // the handler returned: the timer stays stopped
	fenced   atomic.Bool

	cancelAsked atomic.Bool // its task's cancel was requested: the context is cancelled
}

// released reports whether Stop interrupted the execution: it runs again without
// using a retry.
func (x *execution) released() bool { return x.outcome == observe.Released }

// run calls the handler. The result is reported once: when the handler returns, or
// when its deadline passes, whichever is first.
func (e *Executor) run(x *execution) {
	defer e.handlers.Done()
	defer func() {
		e.mu.Lock()
		e.free++
		e.pace.done++
		room := e.roomLocked()
		e.mu.Unlock()
		e.signal()
		if room {
			e.cfg.OnRoom()
		}
	}()
	t := x.task
	e.cfg.Observe.Started(e.cfg.Clock.Now(), t)
	hd := e.cfg.Handler(t.Name) // dispatch checked it is registered; handlers are never removed
	if hd == nil {
		// Start checks the stored name against the one dispatched, so this cannot
		// happen; if it does, the attempt fails rather than the process.
		x.begin = time.Now()
		x.stopFence()
		x.cancel(nil)
		e.report(x, fmt.Errorf("no handler registered for %q here", t.Name), observe.Failed)
		return
	}
	timeout := hd.Timeout
	if t.Timeout > 0 {
		timeout = t.Timeout
	}
	defer x.cancel(nil)
	var ctx context.Context
	ctx, cancel := context.WithTimeout(x.ctx, timeout)
	defer cancel()
	if e.cfg.SelfFenceAfter > 0 {
		ctx = fenceContext{Context: ctx, e: e, x: x}
	}
	if e.cfg.Trace != nil {
		ctx, x.end = e.cfg.Trace(ctx, t) // before the timer, which may report first
	}
	x.begin = time.Now()
	timer := time.AfterFunc(timeout, func() {
		e.report(x, fmt.Errorf("timeout: handler still running after %v", timeout), observe.TimedOut)
	})
	defer timer.Stop()
	task := *t // the handler gets its own copy
	err, panicked := call(ctx, hd.Run, &task)
	x.stopFence() // from here on nothing fences it: its outcome is decided
	outcome := observe.Succeeded
	switch {
	case panicked:
		outcome = observe.Panicked
	case err != nil && x.cancelAsked.Load():
		outcome = observe.Cancelled // the store ends it CANCELLED
	case err != nil && x.fenced.Load():
		// Counted as the orphaned attempt it would have become: a retry, not a
		// release, so that a task cannot loop on it.
		err = fmt.Errorf("self-fenced: no heartbeat reached the store for %v: %w", e.cfg.SelfFenceAfter, err)
		outcome = observe.Failed
	case err != nil:
		outcome = classify(err, errors.Is(e.base.Err(), context.Canceled))
	}
	e.report(x, err, outcome)
}

// call runs the handler, turning a panic into an error that keeps the stack.
func call(ctx context.Context, run func(context.Context, *store.Task) error, t *store.Task) (err error, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			err, panicked = fmt.Errorf("panic: %v\n%s", r, debug.Stack()), true
		}
	}()
	return run(ctx, t), false
}

func (e *Executor) report(x *execution, err error, outcome string) {
	x.once.Do(func() {
		x.err, x.outcome, x.ran = err, outcome, time.Since(x.begin)
		if x.end != nil {
			if outcome == observe.Snoozed {
				x.end(nil) // not a failure: the handler asked to run later
			} else {
				x.end(err)
			}
		}
		select {
		case e.results <- x:
		case <-e.finisherDone: // abandoned at a hard stop: recovery takes it
		}
	})
}
