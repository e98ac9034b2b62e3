package execute

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/store"
)

func (e *Executor) starter() {
	for {
		e.mu.Lock()
		var run []*execution // started already: their handlers run now
		if k := min(len(e.queued), e.free); k > 0 && !e.stopping {
			run = append(run, e.queued[:k]...)
			e.queued = e.queued[:copy(e.queued, e.queued[k:])]
			e.free -= k
		}
		n := min(len(e.pending), e.free, store.MaxBatch)
		var batch []dispatched
		if n > 0 && !e.stopping {
			batch = append(batch, e.pending[:n]...)
			e.pending = e.pending[:copy(e.pending, e.pending[n:])]
			e.free -= n
		}
		room := e.roomLocked() // the queue or the slots changed: the loop may claim again
		e.mu.Unlock()
		if room {
			e.cfg.OnRoom()
		}
		for _, x := range run {
			if e.expired(x) {
				e.mu.Lock()
				e.free++
				e.mu.Unlock()
				go e.notRun(x, errSuperseded)
				e.signal()
				continue
			}
			go e.run(x) // counted in e.handlers since its Reserve
		}
		if len(batch) == 0 {
			if len(run) > 0 {
				continue
			}
			select {
			case <-e.quit:
				return
			case <-e.wake:
			}
			continue
		}
		e.startBatch(batch)
	}
}

// startBatch starts a batch in one Start per fence (the store checks one per call):
// tasks of two leaders' terms meet in a batch only around a change of leader.
func (e *Executor) startBatch(batch []dispatched) {
	var fences []store.Fence
	groups := map[store.Fence][]dispatched{}
	for _, d := range batch {
		f := d.src.fence()
		if _, ok := groups[f]; !ok {
			fences = append(fences, f)
		}
		groups[f] = append(groups[f], d)
	}
	for _, f := range fences {
		e.startGroup(f, groups[f])
	}
}

// startGroup records the executions of batch, claimed under fence, as started and runs
// their handlers; the sources' validity is asked right before.
func (e *Executor) startGroup(fence store.Fence, batch []dispatched) {
	if batch = e.dropInvalid(batch); len(batch) == 0 {
		return
	}
	var (
		ambiguous bool      // an earlier attempt failed: it may have committed
		first     time.Time // the start of the first attempt: the earliest a start can be stamped
		// What an unanswered attempt recorded, of tasks a later attempt did not start
		// (fenced, or their lease ended meanwhile): they run as if it had answered.
		own    []dispatched
		ownRes []store.StartResult
	)
	keepRecorded := func(tasks []dispatched) (rest []dispatched) {
		rest, o, r := e.startedEarlier(tasks)
		own, ownRes = append(own, o...), append(ownRes, r...)
		return rest
	}
	defer func() {
		if len(own) > 0 {
			e.launch(own, ownRes, first, false)
		}
	}()
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		params := make([]store.StartParams, len(batch))
		for i, d := range batch {
			params[i] = store.StartParams{TaskID: d.task.ID, ExecutionID: d.task.ExecutionID, Name: d.task.Name, Node: e.cfg.Node}
		}
		sent := time.Now()
		if first.IsZero() {
			first = sent
		}
		res, err := e.cfg.Store.Start(context.Background(), fence, params)
		if err == nil {
			beat := sent
			if ambiguous {
				beat = first // a start resolved as this executor's own may date from then
			}
			e.launch(batch, res, beat, ambiguous)
			return
		}
		if errors.Is(err, store.ErrFenced) {
			// A newer leader recorded itself: this call wrote nothing, and these claims
			// of the older one must never start. Handed back, the new leader runs them —
			// except those an earlier, unanswered attempt started: it committed before
			// the raise (which waits for fenced writes), so they are this executor's own.
			if ambiguous {
				batch = keepRecorded(batch)
			}
			if len(batch) > 0 {
				e.cfg.Log.LogAttrs(e.base, slog.LevelWarn, "ax: executions not started: claimed by a leader the store has fenced",
					slog.Int("tasks", len(batch)), slog.Any("err", err))
				e.giveBack(batch, observe.Fenced, "claimed by a fenced leader: "+err.Error())
			}
			return
		}
		if errors.Is(err, store.ErrInvalid) {
			// The store refused the call as it is: no retry can pass. Nothing was
			// written, and the hand-back applies only to a task that is DISPATCHING
			// with the execution id given.
			e.cfg.Log.LogAttrs(e.base, slog.LevelError, "ax: start executions refused as invalid; handed back", slog.Int("tasks", len(batch)), slog.Any("err", err))
			e.giveBack(batch, observe.Refused, "start refused: "+err.Error())
			return
		}
		ambiguous = true
		// The tasks stay DISPATCHING in the store; if this goes on past
		// DispatchTimeout recovery hands them back and Start answers Lost.
		e.cfg.Log.LogAttrs(e.base, slog.LevelError, "ax: start executions failed", slog.Int("tasks", len(batch)), slog.Any("err", err))
		if errors.Is(err, store.ErrClosed) {
			e.giveBack(batch, observe.Stopping, "store closed") // no retry can succeed; recovery takes them
			return
		}
		select {
		case <-e.quit:
			e.giveBack(batch, observe.Stopping, "scheduler stopping")
			return
		case <-time.After(wait):
		}
		// The lease may have ended while the store did not answer: what is no longer
		// valid is not started by the next attempt, and handed back unless the
		// unanswered attempt recorded it here.
		valid, invalid, reason := splitInvalid(batch)
		if len(invalid) > 0 {
			if rest := keepRecorded(invalid); len(rest) > 0 {
				e.giveBack(rest, observe.LeaseEnded, "claimed under a lease that ended: "+reason.Error())
			}
		}
		if batch = valid; len(batch) == 0 {
			return
		}
	}
}

// launch runs the handlers of the tasks of batch that res says were started, their
// executions stamped no earlier than beat; the others free their slots. ambiguous:
// an earlier attempt may have recorded them, so a Duplicate may be this executor's own.
func (e *Executor) launch(batch []dispatched, res []store.StartResult, beat time.Time, ambiguous bool) {
	gone := sourceCounts{}
	for i, r := range res {
		d := batch[i]
		if ambiguous && r.Outcome == store.Duplicate {
			r = e.ownStart(d, r)
			res[i] = r
		}
		if r.Outcome != store.Started {
			e.cfg.Log.LogAttrs(e.base, slog.LevelWarn, "ax: execution not started", append(observe.TaskAttrs(&d.task),
				slog.String("reason", map[store.StartOutcome]string{store.Duplicate: "duplicate delivery", store.Lost: "task moved on"}[r.Outcome]))...)
			gone.add(d.src)
			continue
		}
		x := e.newExecution(r.Task, d.src, beat)
		e.mu.Lock()
		e.running[x.task.ExecutionID] = x
		e.mu.Unlock()
		e.handlers.Add(1)
		go e.run(x)
	}
	if unstarted := len(batch) - countStarted(res); unstarted > 0 {
		e.mu.Lock()
		e.free += unstarted
		e.mu.Unlock()
		e.signal()
	}
	gone.report()
}

// newExecution returns the execution of t, started in the store by a request sent at
// beat, with its self-fencing timer running.
func (e *Executor) newExecution(t *store.Task, src *Source, beat time.Time) *execution {
	x := &execution{task: t, src: src}
	x.ctx, x.cancel = context.WithCancelCause(e.base)
	x.beat = beat
	if bound := e.cfg.SelfFenceAfter; bound > 0 {
		x.fence = time.AfterFunc(bound-time.Since(beat), func() { e.selfFence(x) })
	}
	return x
}

// giveBack frees the slots of tasks that will not start here and hands them back.
func (e *Executor) giveBack(tasks []dispatched, code, reason string) {
	e.mu.Lock()
	e.free += len(tasks)
	e.mu.Unlock()
	e.handBack(tasks, code, reason)
	e.signal()
}

// splitInvalid splits batch by whether each task's source is still valid, with the
// reason of one that is not.
func splitInvalid(batch []dispatched) (valid, invalid []dispatched, reason error) {
	for _, d := range batch {
		if err := d.src.valid(); err != nil {
			invalid, reason = append(invalid, d), err
			continue
		}
		valid = append(valid, d)
	}
	return valid, invalid, reason
}

// dropInvalid hands back the tasks of batch whose source is no longer valid (its lease
// ended: another leader may be running them already) and returns the others.
func (e *Executor) dropInvalid(batch []dispatched) []dispatched {
	valid, invalid, reason := splitInvalid(batch)
	if len(invalid) > 0 {
		e.giveBack(invalid, observe.LeaseEnded, "claimed under a lease that ended: "+reason.Error())
	}
	return valid
}

// ownStart resolves a Duplicate answer to a retried Start: if the record is this
// node's own, the earlier attempt committed but its answer was lost on the way back,
// and the handler has not run — run it now rather than leave the task to orphan
// recovery, once a write confirms the task is still this execution's (see confirm).
func (e *Executor) ownStart(d dispatched, r store.StartResult) store.StartResult {
	if r.Execution == nil || r.Execution.Node != e.cfg.Node || r.Execution.Status != store.Running {
		return r
	}
	t, err := e.cfg.Store.Get(context.Background(), d.task.ID)
	if err != nil || t.Status != store.Running || t.ExecutionID != d.task.ExecutionID {
		return r
	}
	if own, _, err := e.confirm([]store.Task{*t}); err != nil || len(own) == 0 {
		return r // left to orphan recovery, or moved on already
	}
	return store.StartResult{Outcome: store.Started, Task: t, Execution: r.Execution}
}

// startedEarlier splits batch into the tasks whose execution an earlier attempt did not
// record (rest) and those whose execution is recorded (own), with their results as a
// Start would give them: Started when it is this executor's and still RUNNING.
func (e *Executor) startedEarlier(batch []dispatched) (rest, own []dispatched, res []store.StartResult) {
	for _, d := range batch {
		execs, err := e.cfg.Store.Executions(context.Background(), d.task.ID)
		if err != nil { // once more: a task recorded but taken for not is left to orphan recovery
			execs, err = e.cfg.Store.Executions(context.Background(), d.task.ID)
		}
		var rec *store.Execution
		for i := range execs {
			if execs[i].ID == d.task.ExecutionID {
				rec = &execs[i]
			}
		}
		if err != nil || rec == nil {
			rest = append(rest, d)
			continue
		}
		// Recorded, and running here (Started), or not any more (Duplicate: it moved on,
		// there is nothing to hand back).
		own, res = append(own, d), append(res, e.ownStart(d, store.StartResult{Outcome: store.Duplicate, Execution: rec}))
	}
	return rest, own, res
}

func countStarted(res []store.StartResult) int {
	n := 0
	for _, r := range res {
		if r.Outcome == store.Started {
			n++
		}
	}
	return n
}
