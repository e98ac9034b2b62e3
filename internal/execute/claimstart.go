package execute

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/store"
)

// The scheduling loop claims the tasks this executor runs and starts them in the same
// write (store.ClaimStart): Reserve takes room for them before the claim, Launch
// queues what the claim started, and the handlers run as slots free. The room is the
// free slots plus a prefetch sized by throughput (see pace): tasks started ahead of a
// free slot, so that the next slot to free finds a task instead of waiting for a claim
// round trip. A prefetched task is RUNNING in the store, heartbeated like the others;
// at Stop it is released (SCHEDULED again at once, its attempt unchanged) without its
// handler having run.

// pace measures what sizes the prefetch: how fast handlers return and how long a claim
// takes. Its fields are under the executor's mu.
type pace struct {
	done     int           // handlers returned since since
	since    time.Time     // the start of the current rate sample
	rate     float64       // handlers returned per second, smoothed
	rtt      time.Duration // a claim's round trip, smoothed
	prefetch int           // tasks to start ahead of free slots
	told     bool          // OnRoom was called since the last Reserve
}

// rateSample is the shortest span over which the return rate is measured.
const rateSample = 100 * time.Millisecond

// update folds the returns since the last sample into the rate and sizes the prefetch:
// four times what the handlers get through in one claim round trip, at most a batch.
// With less, the room for a claim was too small to fill it: at 20 handlers on
// PostgreSQL, twice made claims of 50 tasks (a claim costs the server 0.85 ms of CPU
// and 18 µs a task), four times 80.
func (p *pace) update(now time.Time) {
	if p.since.IsZero() {
		p.since = now
		return
	}
	span := now.Sub(p.since)
	if span < rateSample {
		return
	}
	sample := float64(p.done) / span.Seconds()
	p.rate = (p.rate + sample) / 2
	p.done, p.since = 0, now
	p.prefetch = min(store.MaxBatch, int(math.Ceil(4*p.rate*p.rtt.Seconds())))
}

// claimed folds one claim's round trip into rtt.
func (p *pace) claimed(rtt time.Duration) {
	if p.rtt == 0 {
		p.rtt = rtt
		return
	}
	p.rtt = (3*p.rtt + rtt) / 4
}

// roomAndLimit returns the tasks a claim could start now and the least worth a claim
// while work is waiting for slots: a quarter of the whole (slots and prefetch), so
// that a busy executor is fed in batches rather than a write per freed slot.
func (e *Executor) roomAndLimit() (room, least int) {
	room = e.free + e.pace.prefetch - len(e.queued) - len(e.pending) - e.reserved
	least = 1
	if len(e.queued)+len(e.pending)+e.reserved > 0 {
		least = max(1, (e.cfg.Concurrency+e.pace.prefetch)/4)
	}
	return room, least
}

// roomLocked reports whether OnRoom should be told: Reserve would take room now, and
// it was not told so since the last Reserve. e.mu is held.
func (e *Executor) roomLocked() bool {
	if e.stopping || e.pace.told {
		return false
	}
	if room, least := e.roomAndLimit(); room < least {
		return false
	}
	e.pace.told = true
	return true
}

// Reserve takes room for up to n tasks that a claim will start itself, and returns
// what the claim may start (on: this node and its handlers' names) and how many (k),
// to be given to Launch, or to ClaimFailed, with the claim's answer. wait reports
// that the claim should not be sent now: there is too little room (OnRoom says when
// there is), or the executor is stopping. Without handlers it reserves nothing and
// does not ask the claim to wait: what is claimed is dispatched, handed back, as before.
func (e *Executor) Reserve(n int) (on store.StartOn, k int, wait bool) {
	names := e.cfg.Handlers()
	if len(names) == 0 {
		return store.StartOn{}, 0, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopping {
		return store.StartOn{}, 0, true
	}
	e.pace.told = false
	e.pace.update(time.Now())
	room, least := e.roomAndLimit()
	if room < least || n <= 0 {
		return store.StartOn{}, 0, true
	}
	k = min(n, room)
	e.reserved += k
	e.handlers.Add(k) // each a handler to come, or given back: Stop waits for them
	return store.StartOn{Node: e.cfg.Node, Handlers: names}, k, false
}

// Launch takes the tasks a claim sent at sent started for src (store.ClaimStart), of
// reserved tasks Reserve made room for: they queue for a free slot, and their handlers
// run in the order given. The room they did not use is given back; with a zero sent,
// the claim was not sent, and all of it is. A stopping executor releases them at once
// (their handlers never run).
func (e *Executor) Launch(src *Source, started []store.Task, reserved int, sent time.Time) {
	e.launchStarted(src, started, reserved, sent, !sent.IsZero())
}

// launchStarted is Launch; measured: sent began a claim whose round trip sizes the
// prefetch (not a failed one, whose tasks were read back and confirmed at sent).
func (e *Executor) launchStarted(src *Source, started []store.Task, reserved int, sent time.Time, measured bool) {
	e.mu.Lock()
	e.reserved -= reserved
	if measured {
		e.pace.claimed(time.Since(sent))
	}
	xs := make([]*execution, len(started))
	for i := range started {
		xs[i] = e.newExecution(&started[i], src, sent)
		e.running[xs[i].task.ExecutionID] = xs[i]
	}
	stopping := e.stopping
	if !stopping {
		e.queued = append(e.queued, xs...)
	}
	room := e.roomLocked()
	e.mu.Unlock()
	if d := len(started) - reserved; d != 0 {
		e.handlers.Add(d) // the room not used (a claim never starts more than it reserved)
	}
	if stopping {
		e.release(xs)
	}
	e.signal()
	if room {
		e.cfg.OnRoom()
	}
}

// ClaimFailed takes the answer of a claim that failed, sent at sent, of reserved tasks
// Reserve made room for. The claim may have committed all the same (its answer was
// lost): the tasks it asked to start are read, in the background, and those it did
// start, once a write confirms them (confirm), run here, as Launch runs them — rather
// than wait, RUNNING with no handler, for orphan recovery (they are not heartbeated
// meanwhile: one found late self-fences as it would have). A read or a confirmation
// that fails is tried again, with a backoff, until Stop; recovery takes what is left
// then. src is told Done for the tasks asked to start that are not running here.
func (e *Executor) ClaimFailed(src *Source, claims []store.Claim, reserved int, sent time.Time) {
	if reserved == 0 {
		return
	}
	go func() {
		found, beat := e.claimedAfterAll(claims)
		if beat.IsZero() {
			beat = sent
		}
		e.launchStarted(src, found, reserved, beat, false)
		if n := reserved - len(found); n > 0 && src != nil && src.Done != nil {
			src.Done(n) // the others were not claimed, or are left to recovery
		}
	}()
}

// claimedAfterAll returns the tasks of claims asked to start that a failed claim
// started after all, confirmed by a write sent at beat (zero: none found). It tries
// until the store answers both the reads and the write, or Stop, and then returns none.
func (e *Executor) claimedAfterAll(claims []store.Claim) (found []store.Task, beat time.Time) {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		found = found[:0]
		var err error
		for _, c := range claims {
			if !c.Start {
				continue
			}
			var t *store.Task
			t, err = e.cfg.Store.Get(context.Background(), c.ID)
			if errors.Is(err, store.ErrNotFound) {
				err = nil
				continue
			}
			if err != nil {
				break
			}
			if t.Status == store.Running && t.ExecutionID == c.ExecutionID {
				found = append(found, *t)
			}
		}
		if err == nil {
			if found, beat, err = e.confirm(found); err == nil {
				return found, beat
			}
		}
		select { // the store is out of reach, or refuses writes: look again, until Stop
		case <-e.quit:
			return nil, time.Time{}
		case <-time.After(wait):
		}
	}
}

// confirm stamps alive, in one write sent at beat, the executions of tasks that a read
// found RUNNING under them after a claim or start whose answer was lost, and returns
// those the store confirmed its own. A read is not enough to run a handler: it may
// come from a server that holds a commit the cluster never will — a primary cut off
// from its standbys and about to be demoted (a zombie), or demoted already and not yet
// rewound — while a newer primary runs the task. Such a server refuses the write
// (read-only) or never answers it (the commit waits for a standby); a task that moved
// on answers it Gone. An error: nothing is confirmed, try again later.
func (e *Executor) confirm(tasks []store.Task) (own []store.Task, beat time.Time, err error) {
	if len(tasks) == 0 {
		return nil, time.Time{}, nil
	}
	refs := make([]store.ExecRef, len(tasks))
	for i, t := range tasks {
		refs[i] = store.ExecRef{TaskID: t.ID, ExecutionID: t.ExecutionID}
	}
	beat = time.Now()
	alive, err := e.cfg.Store.Heartbeat(context.Background(), refs)
	if err != nil {
		return nil, time.Time{}, err
	}
	for i, b := range alive {
		if b != store.BeatGone { // a cancel asked meanwhile: the heartbeater stops it
			own = append(own, tasks[i])
		}
	}
	return own, beat, nil
}

// errReleased is the result of a task started by a claim whose handler never ran:
// the executor stopped first.
var errReleased = errors.New("the scheduler stopped before the handler ran")

// release reports executions started by a claim, whose handlers never ran, as
// released: their tasks become SCHEDULED at once, their attempt unchanged. It reports
// in the background: the results queue may be full while the store is out of reach,
// and Stop, which waits for them within its context, must not wait longer.
func (e *Executor) release(xs []*execution) {
	if len(xs) == 0 {
		return
	}
	go func() {
		for _, x := range xs {
			e.notRun(x, errReleased)
		}
	}()
}

// notRun reports an execution started by a claim whose handler is not run as released
// with err, and gives back its count in e.handlers (taken by Reserve).
func (e *Executor) notRun(x *execution, err error) {
	x.begin = time.Now()
	x.stopFence()
	x.cancel(nil)
	e.report(x, err, observe.Released)
	e.handlers.Done()
}

// errSuperseded is the result of a task started by a claim whose handler is not run
// because, while it waited for a slot, a heartbeat found it moved on, or none reached
// the store for SelfFenceAfter: it may have been declared orphaned and run elsewhere.
// Its Finish applies only if it did not move on: then it runs again, as released.
var errSuperseded = errors.New("not run: while it waited for a slot, its execution was superseded or not stamped alive in time")

// expired reports whether a queued execution must not run its handler (errSuperseded).
func (e *Executor) expired(x *execution) bool {
	if x.ctx.Err() != nil || x.fenced.Load() {
		return true
	}
	bound := e.cfg.SelfFenceAfter
	return bound > 0 && x.stale(bound)
}
