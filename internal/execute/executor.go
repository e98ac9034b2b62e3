package execute

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/store"
)

// Executor runs handlers for claimed tasks in this process. Tasks the loop claimed and
// started in one write (Reserve, then Launch) wait in queued for a free slot; tasks
// dispatched DISPATCHING (triggered, handed over by a leader, or claimed without a
// start) wait in pending, and for each batch of those it first records the executions
// and moves the tasks to RUNNING in one store call, then starts the handlers. Results
// and heartbeats are written in batches too, by one goroutine each, so that the
// number of store calls per task falls as load rises.
//
//	claim+start ─► queued ──────────────┐
//	dispatch ─► pending ─► starter ──Start──► handlers ─► results ─► finisher ──Finish──►
//	                                             ▲
//	                               heartbeater ──┘ (Heartbeat every HeartbeatInterval)
type Executor struct {
	cfg Config

	mu       sync.Mutex
	pending  []dispatched          // claimed, waiting for a free slot
	queued   []*execution          // started by a claim, waiting for a free slot
	reserved int                   // slots taken by claims in flight that start tasks (Reserve)
	running  map[string]*execution // by execution id, until its result is written (queued ones too)
	free     int                   // handler slots
	pace     pace                  // the prefetch's measures (under mu)
	stopping bool
	warned   map[string]time.Time // name → last WARN for a task without a handler
	wake     chan struct{}

	results  chan *execution
	handlers sync.WaitGroup // running handler goroutines

	base       context.Context // parent of handler contexts; cancelled on hard stop
	cancelBase context.CancelFunc
	quit       chan struct{} // closed when the starter must end (Stop)
	finished   chan struct{} // closed when the finisher must drain and end
	hbQuit     chan struct{} // closed when the heartbeater must end: after the results are written
	abandon    chan struct{} // closed when Stop's context ends: write once more, retry no more
	handedBack chan struct{} // closed when Quiesce has handed back the pending tasks
	quiesce    sync.Once
	unwritten  atomic.Int64 // results and hand-backs that could not be written
	// closed when each loop has ended
	starterDone, finisherDone, heartbeaterDone chan struct{}
}

type dispatched struct {
	task store.Task
	src  *Source // the loop that claimed it; nil for a triggered task
}

// execution is one running handler.
type execution struct {
	task    store.Task
	src     *Source
	ctx     context.Context // the handler's context, without its deadline
	cancel  context.CancelCauseFunc
	once    sync.Once
	err     error // the handler's result
	outcome string
	begin   time.Time // the handler's start, with the monotonic reading
	ran     time.Duration

	// Self-fencing (Config.SelfFenceAfter): the start of the last request that
	// stamped this execution alive in the store (Start, then each Heartbeat), and
	// the timer that cancels the handler's context when it gets too old.
	beatMu   sync.Mutex
	beat     time.Time
	fence    *time.Timer
	returned bool // the handler returned: the timer stays stopped
	fenced   atomic.Bool
}

// ErrSelfFenced is the cause (context.Cause) of a handler's context cancelled by
// self-fencing: no heartbeat reached the store within Config.SelfFenceAfter.
var ErrSelfFenced = errors.New("self-fenced: no heartbeat reached the store in time")

// errMovedOn is the cause of a handler's context cancelled because a heartbeat found
// its task no longer RUNNING with its execution (orphaned and taken over, say): its
// result would be discarded.
var errMovedOn = errors.New("the task moved on: this execution is no longer its own")

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
			append(observe.TaskAttrs(&x.task), slog.Duration("bound", e.cfg.SelfFenceAfter))...)
	}
}

// released reports whether Stop interrupted the execution: it runs again without
// using a retry.
func (x *execution) released() bool { return x.outcome == observe.Released }

// New returns an executor for cfg; Start starts it.
func New(cfg Config) *Executor {
	if cfg.OnKeysFree == nil {
		cfg.OnKeysFree = func([]string) {}
	}
	if cfg.OnRetry == nil {
		cfg.OnRetry = func(store.Due) {}
	}
	if cfg.OnRoom == nil {
		cfg.OnRoom = func() {}
	}
	if cfg.Handlers == nil {
		cfg.Handlers = func() []string { return nil }
	}
	base, cancel := context.WithCancel(context.Background())
	return &Executor{
		cfg:        cfg,
		running:    make(map[string]*execution),
		warned:     make(map[string]time.Time),
		free:       cfg.Concurrency,
		wake:       make(chan struct{}, 1),
		results:    make(chan *execution, 4*cfg.Concurrency),
		base:       base,
		cancelBase: cancel,
		quit:       make(chan struct{}),
		finished:   make(chan struct{}),
		hbQuit:     make(chan struct{}),
		abandon:    make(chan struct{}),
		handedBack: make(chan struct{}),

		starterDone:     make(chan struct{}),
		finisherDone:    make(chan struct{}),
		heartbeaterDone: make(chan struct{}),
	}
}

// Start starts the executor's goroutines.
func (e *Executor) Start() {
	go func() { defer close(e.starterDone); e.starter() }()
	go func() { defer close(e.finisherDone); e.finisher() }()
	go func() { defer close(e.heartbeaterDone); e.heartbeater() }()
}

// Offer takes, of tasks claimed by src, as many as fit — running and pending
// executions together at most Concurrency + queue — and returns the ones it did not
// take, in order. The room is taken under the executor's lock, so concurrent offers
// never take more than fits. A stopping executor hands everything back, as Dispatch does.
func (e *Executor) Offer(src *Source, tasks []store.Task, queue int) (rest []store.Task) {
	e.mu.Lock()
	if e.stopping {
		e.mu.Unlock()
		e.Dispatch(src, tasks)
		return nil
	}
	room := max(e.cfg.Concurrency+queue-len(e.running)-len(e.pending), 0)
	n := min(room, len(tasks))
	for _, t := range tasks[:n] {
		e.pending = append(e.pending, dispatched{task: t, src: src})
	}
	e.mu.Unlock()
	if n > 0 {
		e.signal()
	}
	return tasks[n:]
}

// Slots returns how many handlers the executor runs at once (Config.Concurrency).
func (e *Executor) Slots() int { return e.cfg.Concurrency }

// Load returns the handlers running (their results not yet written) and the slots
// free for new tasks: Concurrency less the running and the pending ones.
func (e *Executor) Load() (running, free int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.running), max(e.cfg.Concurrency-len(e.running)-len(e.pending), 0)
}

// HandBack returns claimed tasks of src that will not be dispatched here to SCHEDULED
// as a dispatch failure (code is the observer's reason, reason their LastError), in
// one store call, and tells src they are done.
func (e *Executor) HandBack(src *Source, tasks []store.Task, code, reason string) {
	ds := make([]dispatched, len(tasks))
	for i, t := range tasks {
		ds[i] = dispatched{task: t, src: src}
	}
	e.handBack(ds, code, reason)
}

func (e *Executor) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Dispatch accepts tasks claimed by src (nil: triggered, counted by no loop). It does
// not wait for handlers; it calls the store only to hand back, in one batch, what it
// cannot take (no handler, stopping). It returns false when the executor is stopping:
// everything was handed back.
func (e *Executor) Dispatch(src *Source, tasks []store.Task) (accepted bool) {
	if len(tasks) == 0 {
		return true
	}
	e.mu.Lock()
	if e.stopping {
		e.mu.Unlock()
		e.HandBack(src, tasks, observe.Stopping, "scheduler stopping")
		return false
	}
	var unroutable []store.Task
	for _, t := range tasks {
		if e.cfg.Handler(t.Name) == nil {
			unroutable = append(unroutable, t)
			continue
		}
		e.pending = append(e.pending, dispatched{task: t, src: src})
	}
	e.mu.Unlock()
	e.signal()
	e.HandBackUnhandled(src, unroutable)
	return true
}

// HandBackUnhandled hands back tasks of src that no executor has a handler for, as
// dispatch failures, not business ones (the handler may be deployed later), in one
// store call; the first of each name in a minute is logged, each is observed.
func (e *Executor) HandBackUnhandled(src *Source, tasks []store.Task) {
	if len(tasks) == 0 {
		return
	}
	ds := make([]dispatched, len(tasks))
	for i, t := range tasks {
		e.unhandled(t.Name)
		ds[i] = dispatched{task: t, src: src}
	}
	e.handBackEach(ds, observe.NoHandler, func(d dispatched) string {
		return fmt.Sprintf("no executor has a handler for %q", d.task.Name)
	})
}

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
	x := &execution{task: *t, src: src}
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

// Withdraw hands back the tasks src dispatched that have not started: its lease ended.
func (e *Executor) Withdraw(src *Source) {
	e.mu.Lock()
	var mine []dispatched
	kept := e.pending[:0]
	for _, d := range e.pending {
		if d.src == src {
			mine = append(mine, d)
		} else {
			kept = append(kept, d)
		}
	}
	e.pending = kept
	e.mu.Unlock()
	if len(mine) > 0 {
		e.handBack(mine, observe.LeaseEnded, "leadership ended")
	}
}

// unhandled reports a task that came due under a name without a handler here: a WARN
// log at most once a minute per name, and an event each time.
func (e *Executor) unhandled(name string) {
	now := time.Now()
	e.mu.Lock()
	last, seen := e.warned[name]
	warn := !seen || now.Sub(last) >= time.Minute
	if warn {
		e.warned[name] = now
	}
	e.mu.Unlock()
	e.cfg.Observe.Send(observe.Event{Kind: observe.Unhandled, At: e.cfg.Clock.Now(), Name: name})
	if warn {
		e.cfg.Log.LogAttrs(context.Background(), slog.LevelWarn, "ax: a task came due under a name no handler is registered for here; it is handed back as a dispatch failure (register one with Handle)",
			slog.String("name", name))
	}
}

// ownStart resolves a Duplicate answer to a retried Start: if the record is this
// node's own, the earlier attempt committed but its answer was lost on the way back,
// and the handler has not run — run it now rather than leave the task to orphan
// recovery.
func (e *Executor) ownStart(d dispatched, r store.StartResult) store.StartResult {
	if r.Execution == nil || r.Execution.Node != e.cfg.Node || r.Execution.Status != store.Running {
		return r
	}
	t, err := e.cfg.Store.Get(context.Background(), d.task.ID)
	if err != nil || t.Status != store.Running || t.ExecutionID != d.task.ExecutionID {
		return r
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
	t := &x.task
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
	case err != nil && x.fenced.Load():
		// Counted as the orphaned attempt it would have become: a retry, not a
		// release, so that a task cannot loop on it.
		err = fmt.Errorf("self-fenced: no heartbeat reached the store for %v: %w", e.cfg.SelfFenceAfter, err)
		outcome = observe.Failed
	case err != nil && errors.Is(e.base.Err(), context.Canceled):
		outcome = observe.Released // stopped: runs again without using a retry
	case err != nil:
		outcome = observe.Failed
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
		select {
		case e.results <- x:
		case <-e.finisherDone: // abandoned at a hard stop: recovery takes it
		}
	})
}

// finisher writes results in batches: it takes what has queued up while the previous
// write was in flight, up to MaxBatch. When results were waiting as the previous write
// returned (the handlers return faster than results are written), a write that would
// carry less than half a batch first lingers for more, for at most as long as the
// previous write took and maxLinger: a write costs the store much the same for 20
// results as for 100 (PostgreSQL: 0.6 ms of CPU a statement, 12 µs a result), and a
// result waits at most one write longer to be recorded. Handlers do not wait for it:
// their slots are free already. A result that finds the finisher idle is written at
// once, and Stop ends a wait at once.
func (e *Executor) finisher() {
	batch := make([]*execution, 0, store.MaxBatch)
	var took time.Duration // the previous write's
	for {
		batch = batch[:0]
		waiting := true
		select {
		case x := <-e.results:
			batch = append(batch, x)
		default:
			waiting = false
			select {
			case x := <-e.results:
				batch = append(batch, x)
			case <-e.finished:
				select {
				case x := <-e.results:
					batch = append(batch, x)
				default:
					return
				}
			}
		}
	fill:
		for len(batch) < store.MaxBatch {
			select {
			case x := <-e.results:
				batch = append(batch, x)
			default:
				break fill
			}
		}
		if waiting && len(batch) < store.MaxBatch/2 {
			batch = e.linger(batch, min(took, maxLinger))
		}
		start := time.Now()
		e.finish(batch)
		took = time.Since(start)
	}
}

// maxLinger bounds how long the finisher waits for more results to write with the
// ones it has (see finisher).
const maxLinger = 5 * time.Millisecond

// linger adds to batch the results that arrive within d, until it holds half a batch
// or Stop begins.
func (e *Executor) linger(batch []*execution, d time.Duration) []*execution {
	if d <= 0 {
		return batch
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for len(batch) < store.MaxBatch/2 {
		select {
		case x := <-e.results:
			batch = append(batch, x)
		case <-t.C:
			return batch
		case <-e.finished:
			return batch
		}
	}
	return batch
}

func (e *Executor) finish(batch []*execution) {
	now := e.cfg.Clock.Now()
	results := make([]store.Finish, len(batch))
	for i, x := range batch {
		results[i] = Result(&x.task, x.err, x.released(), now, e.backoff)
	}
	var applied []bool
	ambiguous := false // an earlier attempt failed: it may have committed
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		var err error
		if applied, err = e.cfg.Store.Finish(context.Background(), store.Fence{}, results); err == nil {
			if ambiguous {
				e.ownFinish(results, applied)
			}
			break
		}
		ambiguous = true
		// Keep the executions in the running set so that heartbeats keep them
		// alive while the store is unreachable; give up when the store is closed or
		// on a hard stop: orphan recovery takes over.
		e.cfg.Log.LogAttrs(context.Background(), slog.LevelError, "ax: record results failed", slog.Int("tasks", len(batch)), slog.Any("err", err))
		if errors.Is(err, store.ErrClosed) {
			e.forget(batch)
			return
		}
		select {
		case <-e.abandon:
			e.forget(batch)
			return
		case <-time.After(wait):
		}
	}
	loopDone := sourceCounts{}
	for i, x := range batch {
		f := results[i]
		attrs := append(observe.TaskAttrs(&x.task), slog.String("result", string(f.Status)))
		switch {
		case !applied[i]:
			e.cfg.Log.LogAttrs(context.Background(), slog.LevelWarn, "ax: result discarded, execution superseded", attrs...)
		case f.Status == store.Succeeded:
			e.cfg.Log.LogAttrs(context.Background(), slog.LevelDebug, "ax: task succeeded", attrs...)
		case f.Status == store.Scheduled:
			e.cfg.Log.LogAttrs(context.Background(), slog.LevelInfo, "ax: task will be retried", append(attrs, slog.Time("due_at", f.DueAt), slog.String("err", f.Error))...)
		default:
			e.cfg.Log.LogAttrs(context.Background(), slog.LevelWarn, "ax: task failed", append(attrs, slog.String("err", f.Error))...)
		}
		if applied[i] {
			e.cfg.Observe.Send(observe.Event{Kind: observe.Finished, At: now, Name: x.task.Name, Outcome: x.outcome, Duration: x.ran})
			e.cfg.Stats.Record(now, &x.task, x.outcome, f.Status == store.Scheduled && !x.released())
			if f.Status == store.Scheduled && !x.released() {
				e.cfg.Observe.Send(observe.Event{Kind: observe.RetryScheduled, At: now, Name: x.task.Name, Due: f.DueAt})
			}
		}
		if applied[i] && f.Status == store.Scheduled {
			e.cfg.OnRetry(store.Due{ID: f.TaskID, DueAt: f.DueAt})
		}
		e.mu.Lock()
		delete(e.running, x.task.ExecutionID)
		e.mu.Unlock()
		loopDone.add(x.src)
	}
	if freed := FreedKeys(len(batch), func(i int) *store.Task { return &batch[i].task }, applied); len(freed) > 0 {
		e.cfg.OnKeysFree(freed)
	}
	loopDone.report()
}

// ownFinish resolves the results a retried Finish answers as not applied: if the
// task holds this execution's outcome already, the earlier attempt committed but its
// answer was lost on the way back. (Recovery writes an orphan's outcome under the
// same execution id, but never SUCCEEDED, and with its own LastError.)
func (e *Executor) ownFinish(results []store.Finish, applied []bool) {
	for i, f := range results {
		if applied[i] {
			continue
		}
		t, err := e.cfg.Store.Get(context.Background(), f.TaskID)
		if err == nil && t.ExecutionID == f.ExecutionID && t.Status == f.Status &&
			(f.Status == store.Succeeded || t.LastError == f.Error) {
			applied[i] = true
		}
	}
}

// forget drops executions whose results could not be written: recovery takes them.
func (e *Executor) forget(batch []*execution) {
	e.unwritten.Add(int64(len(batch)))
	e.mu.Lock()
	for _, x := range batch {
		delete(e.running, x.task.ExecutionID)
	}
	e.mu.Unlock()
}

// Result turns an execution's result into the task's next state: SUCCEEDED, a
// business retry (SCHEDULED, Attempt+1, after backoff(t, Attempt+1)), FAILED when
// retries are exhausted, or, for an execution released at shutdown, SCHEDULED now
// without using a retry.
func Result(t *store.Task, err error, released bool, now time.Time, backoff func(t *store.Task, n int) time.Duration) store.Finish {
	f := store.Finish{TaskID: t.ID, ExecutionID: t.ExecutionID}
	switch {
	case err == nil:
		f.Status = store.Succeeded
	case released:
		f.Status, f.Attempt, f.DueAt = store.Scheduled, t.Attempt, now
		f.Error = "released: scheduler stopped during the execution: " + err.Error()
	case t.Attempt >= t.MaxRetry:
		f.Status, f.Error = store.Failed, err.Error()
	default:
		next := t.Attempt + 1
		f.Status, f.Attempt, f.Error = store.Scheduled, next, err.Error()
		f.DueAt = now.Add(backoff(t, next))
	}
	return f
}

func (e *Executor) backoff(t *store.Task, n int) time.Duration {
	return RetryDelay(t, n, e.cfg.Handler)
}

// RetryDelay is the delay before business retry n of t: the delays stored with the
// task, else its handler's (looked up by handler), else DefaultBackoff.
func RetryDelay(t *store.Task, n int, handler func(name string) *Handler) time.Duration {
	if n-1 < len(t.Backoff) {
		return t.Backoff[n-1]
	}
	if hd := handler(t.Name); hd != nil && hd.Backoff != nil {
		return max(hd.Backoff(n), 0)
	}
	return DefaultBackoff(n)
}

// heartbeater stamps every running execution alive each HeartbeatInterval, in one
// batched call, and cancels the handlers whose task has moved on (orphaned by
// another node, for instance): their results would be discarded anyway.
func (e *Executor) heartbeater() {
	ticker := time.NewTicker(e.cfg.HeartbeatInterval)
	defer ticker.Stop()
	for {
		select {
		case <-e.hbQuit:
			return
		case <-ticker.C:
		}
		e.mu.Lock()
		xs := make([]*execution, 0, len(e.running))
		for _, x := range e.running {
			xs = append(xs, x)
		}
		e.mu.Unlock()
		if len(xs) == 0 {
			continue
		}
		refs := make([]store.ExecRef, len(xs))
		for i, x := range xs {
			refs[i] = store.ExecRef{TaskID: x.task.ID, ExecutionID: x.task.ExecutionID}
			// A tick late by more than the bound (the process was paused) fences
			// before the request, whatever it answers.
			if bound := e.cfg.SelfFenceAfter; bound > 0 && x.stale(bound) {
				e.selfFence(x)
			}
		}
		sent := time.Now()
		alive, err := e.cfg.Store.Heartbeat(context.Background(), refs)
		if err != nil {
			e.cfg.Log.LogAttrs(e.base, slog.LevelError, "ax: heartbeat failed", slog.Int("executions", len(refs)), slog.Any("err", err))
			continue
		}
		for i, ok := range alive {
			switch {
			case !ok:
				xs[i].cancel(errMovedOn)
			case xs[i].beaten(sent, e.cfg.SelfFenceAfter):
				e.selfFence(xs[i])
			}
		}
	}
}

// handBack returns claimed, unstarted tasks to SCHEDULED as a dispatch failure: code
// is the observer's reason (observe.NoHandler, …), reason the tasks' LastError.
func (e *Executor) handBack(ds []dispatched, code, reason string) {
	e.handBackEach(ds, code, func(dispatched) string { return reason })
}

// handBackEach is handBack with a LastError of each task's own, in one store call.
func (e *Executor) handBackEach(ds []dispatched, code string, reason func(dispatched) string) {
	now := e.cfg.Clock.Now()
	rq := make([]store.Requeue, len(ds))
	claimed := sourceCounts{}
	for i, d := range ds {
		rq[i] = HandBack(&d.task, reason(d), now, e.cfg.MaxDispatchRetries)
		claimed.add(d.src)
		e.cfg.Observe.Send(observe.Event{Kind: observe.DispatchFailed, At: now, Name: d.task.Name, Reason: code})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	applied, err := e.cfg.Store.Requeue(ctx, store.Fence{}, rq)
	if err != nil {
		e.cfg.Log.LogAttrs(ctx, slog.LevelError, "ax: hand back claimed tasks failed; recovery will", slog.Int("tasks", len(rq)), slog.Any("err", err))
		e.unwritten.Add(int64(len(rq)))
	}
	for i, ok := range applied {
		if ok && ds[i].task.DispatchRetries < e.cfg.MaxDispatchRetries { // SCHEDULED again: back in line at its dispatch backoff, not a refill later
			e.cfg.OnRetry(store.Due{ID: rq[i].TaskID, DueAt: rq[i].DueAt})
		}
	}
	if freed := FreedKeys(len(ds), func(i int) *store.Task { return &ds[i].task }, applied); len(freed) > 0 {
		e.cfg.OnKeysFree(freed)
	}
	claimed.report()
}

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
