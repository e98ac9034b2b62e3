package execute

import (
	"context"
	"fmt"
	"time"

	"github.com/axsched/ax/internal/observe"
)

// Stop ends the executor, in the reverse order of the work: no new starts, claimed
// tasks handed back, running handlers awaited and their results written — with
// heartbeats going on until then, so that no other scheduler takes them for orphans
// — then the heartbeats stop. All of it is bounded by ctx: when ctx ends first, the
// handlers' contexts are cancelled, stop returns ctx.Err() at once, and in the
// background the results of handlers that return within a second are written (one
// attempt each); recovery takes whatever is left.
func (e *Executor) Stop(ctx context.Context) error {
	e.Quiesce()
	handlers := make(chan struct{})
	go func() {
		<-e.starterDone // no handler is added after the starter ends
		e.handlers.Wait()
		close(handlers)
	}()
	done := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		case <-ctx.Done():
			return false
		}
	}
	if !done(e.handedBack) || !done(handlers) {
		e.hardStop(handlers)
		return ctx.Err()
	}
	close(e.finished)
	if !done(e.finisherDone) {
		e.hardStop(handlers)
		return ctx.Err()
	}
	close(e.hbQuit)
	// Everything is written; a heartbeat call still in flight ends by itself
	// (StoreTimeout) and need not be waited for past ctx.
	ended := done(e.heartbeaterDone)
	e.cancelBase()
	if !ended {
		return ctx.Err()
	}
	if n := e.unwritten.Load(); n > 0 {
		return fmt.Errorf("%d results or hand-backs could not be written; recovery takes them", n)
	}
	return nil
}

// Quiesce stops starting tasks: the claimed ones not started are handed back, in the
// background (Stop waits for it within its context), and whatever is dispatched from
// now on is handed back at once. Running handlers go on. Stop quiesces first;
// calling Quiesce earlier stops new starts while the scheduling loop winds down.
func (e *Executor) Quiesce() {
	e.quiesce.Do(func() {
		e.mu.Lock()
		e.stopping = true
		pending := e.pending
		e.pending = nil
		queued := e.queued
		e.queued = nil
		e.mu.Unlock()
		e.release(queued)
		close(e.quit)
		go func() {
			defer close(e.handedBack)
			if len(pending) > 0 {
				e.handBack(pending, observe.Stopping, "scheduler stopping")
			}
		}()
	})
}

// hardStop ends what stop could not wait for: it cancels the handlers, stops the
// heartbeats and lets the finisher write, once, the results of the handlers that
// return within a second; its goroutines end by themselves.
func (e *Executor) hardStop(handlers <-chan struct{}) {
	e.cancelBase()
	close(e.abandon)
	close(e.hbQuit)
	go func() {
		select {
		case <-handlers:
		case <-time.After(time.Second):
		}
		select {
		case <-e.finished:
		default:
			close(e.finished)
		}
	}()
}
