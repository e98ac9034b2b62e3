package ax

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/store"
)

// executor runs handlers for claimed tasks in this process. For each batch it first
// records the executions and moves the tasks to RUNNING in one store call, then
// starts the handlers; results and heartbeats are written in batches too, by one
// goroutine each, so that the number of store calls per task falls as load rises.
//
//	dispatch ─► pending ─► starter ──Start──► handlers ─► results ─► finisher ──Finish──►
//	                                             ▲
//	                               heartbeater ──┘ (Heartbeat every HeartbeatInterval)
type executor struct {
	s      *Scheduler
	onDone func(n int) // leader-claimed tasks that are finished or gone
	// onKeysFree is told the task keys that tasks of this process stopped holding
	// (finished, retried later or handed back), so that tasks waiting for them start.
	onKeysFree func(keys []string)

	mu       sync.Mutex
	pending  []dispatched          // claimed, waiting for a free slot
	running  map[string]*execution // by execution id, until its result is written
	free     int                   // handler slots
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
	// closed when each loop has ended
	starterDone, finisherDone, heartbeaterDone chan struct{}
}

type dispatched struct {
	task   store.Task
	leader bool // claimed by the leader (counted in its inflight)
}

// execution is one running handler.
type execution struct {
	task     store.Task
	leader   bool
	ctx      context.Context // the handler's context, without its deadline
	cancel   context.CancelFunc
	once     sync.Once
	err      error // the handler's result
	outcome  string
	begin    time.Time // the handler's start, with the monotonic reading
	ran      time.Duration
	released bool // interrupted by Stop: run again without using a retry
}

func newExecutor(s *Scheduler) *executor {
	base, cancel := context.WithCancel(context.Background())
	return &executor{
		s:          s,
		onDone:     func(int) {},
		onKeysFree: func([]string) {},
		running:    make(map[string]*execution),
		warned:     make(map[string]time.Time),
		free:       s.cfg.Concurrency,
		wake:       make(chan struct{}, 1),
		results:    make(chan *execution, 4*s.cfg.Concurrency),
		base:       base,
		cancelBase: cancel,
		quit:       make(chan struct{}),
		finished:   make(chan struct{}),
		hbQuit:     make(chan struct{}),
		abandon:    make(chan struct{}),

		starterDone:     make(chan struct{}),
		finisherDone:    make(chan struct{}),
		heartbeaterDone: make(chan struct{}),
	}
}

func (e *executor) start() {
	go func() { defer close(e.starterDone); e.starter() }()
	go func() { defer close(e.finisherDone); e.finisher() }()
	go func() { defer close(e.heartbeaterDone); e.heartbeater() }()
}

func (e *executor) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// dispatch accepts claimed tasks. It never blocks.
func (e *executor) dispatch(tasks []store.Task, leader bool) {
	if len(tasks) == 0 {
		return
	}
	e.mu.Lock()
	if e.stopping {
		e.mu.Unlock()
		ds := make([]dispatched, len(tasks))
		for i, t := range tasks {
			ds[i] = dispatched{task: t, leader: leader}
		}
		e.handBack(ds, observe.Stopping, "scheduler stopping")
		return
	}
	var unroutable []dispatched
	for _, t := range tasks {
		if e.s.handler(t.Name) == nil {
			unroutable = append(unroutable, dispatched{task: t, leader: leader})
			continue
		}
		e.pending = append(e.pending, dispatched{task: t, leader: leader})
	}
	e.mu.Unlock()
	e.signal()
	for _, d := range unroutable {
		// A dispatch failure, not a business one: the handler may be deployed later.
		e.unhandled(d.task.Name)
		e.handBack([]dispatched{d}, observe.NoHandler, fmt.Sprintf("no executor has a handler for %q", d.task.Name))
	}
}

func (e *executor) starter() {
	for {
		e.mu.Lock()
		n := min(len(e.pending), e.free, store.MaxBatch)
		var batch []dispatched
		if n > 0 && !e.stopping {
			batch = append(batch, e.pending[:n]...)
			e.pending = e.pending[:copy(e.pending, e.pending[n:])]
			e.free -= n
		}
		e.mu.Unlock()
		if len(batch) == 0 {
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

func (e *executor) startBatch(batch []dispatched) {
	s := e.s
	params := make([]store.StartParams, len(batch))
	for i, d := range batch {
		params[i] = store.StartParams{TaskID: d.task.ID, ExecutionID: d.task.ExecutionID, Node: s.cfg.Node}
	}
	var res []store.StartResult
	ambiguous := false // an earlier attempt failed: it may have committed
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		var err error
		if res, err = s.kst.Start(context.Background(), params); err == nil {
			break
		}
		ambiguous = true
		// The tasks stay DISPATCHING in the store; if this goes on past
		// DispatchTimeout the inspector hands them back and Start answers Lost.
		s.log.LogAttrs(e.base, slog.LevelError, "ax: start executions failed", slog.Int("tasks", len(batch)), slog.Any("err", err))
		if errors.Is(err, store.ErrClosed) {
			wait = 0 // nothing to wait for: hand them back, which fails too; recovery takes them
		}
		select {
		case <-e.quit:
			e.mu.Lock()
			e.free += len(batch)
			e.mu.Unlock()
			e.handBack(batch, observe.Stopping, "scheduler stopping")
			return
		case <-time.After(wait):
		}
	}
	gone := 0
	for i, r := range res {
		d := batch[i]
		if ambiguous && r.Outcome == store.Duplicate {
			r = e.ownStart(d, r)
			res[i] = r
		}
		if r.Outcome != store.Started {
			s.log.LogAttrs(e.base, slog.LevelWarn, "ax: execution not started", append(taskAttrs(&d.task),
				slog.String("reason", map[store.StartOutcome]string{store.Duplicate: "duplicate delivery", store.Lost: "task moved on"}[r.Outcome]))...)
			if d.leader {
				gone++
			}
			continue
		}
		x := &execution{task: *r.Task, leader: d.leader}
		x.ctx, x.cancel = context.WithCancel(e.base)
		s.obs.Started(s.clock.Now(), &x.task)
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
	if gone > 0 {
		e.onDone(gone)
	}
}

// unhandled reports a task that came due under a name without a handler here: a WARN
// log at most once a minute per name, and an event each time.
func (e *executor) unhandled(name string) {
	s := e.s
	now := time.Now()
	e.mu.Lock()
	last, seen := e.warned[name]
	if !seen || now.Sub(last) >= time.Minute {
		e.warned[name] = now
	}
	e.mu.Unlock()
	s.obs.Send(observe.Event{Kind: observe.Unhandled, At: s.clock.Now(), Name: name})
	if !seen || now.Sub(last) >= time.Minute {
		s.log.LogAttrs(context.Background(), slog.LevelWarn, "ax: a task came due under a name no handler is registered for here; it is handed back as a dispatch failure (register one with Handle)",
			slog.String("name", name))
	}
}

// ownStart resolves a Duplicate answer to a retried Start: if the record is this
// node's own, the earlier attempt committed but its answer was lost on the way back,
// and the handler has not run — run it now rather than leave the task to orphan
// recovery.
func (e *executor) ownStart(d dispatched, r store.StartResult) store.StartResult {
	if r.Execution == nil || r.Execution.Node != e.s.cfg.Node || r.Execution.Status != store.Running {
		return r
	}
	t, err := e.s.kst.Get(context.Background(), d.task.ID)
	if err != nil || t.Status != store.Running || t.ExecutionID != d.task.ExecutionID {
		return r
	}
	return store.StartResult{Outcome: store.Started, Task: t, Execution: r.Execution}
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
func (e *executor) run(x *execution) {
	defer e.handlers.Done()
	defer func() {
		e.mu.Lock()
		e.free++
		e.mu.Unlock()
		e.signal()
	}()
	s := e.s
	t := &x.task
	hd := s.handler(t.Name) // dispatch checked it is registered; handlers are never removed
	timeout := hd.timeout
	if t.Timeout > 0 {
		timeout = t.Timeout
	}
	defer x.cancel()
	ctx, cancel := context.WithTimeout(x.ctx, timeout)
	defer cancel()
	x.begin = time.Now()
	timer := time.AfterFunc(timeout, func() {
		e.report(x, fmt.Errorf("timeout: handler still running after %v", timeout), observe.TimedOut)
	})
	defer timer.Stop()
	task := *t // the handler gets its own copy
	err, panicked := call(ctx, hd.h, taskOf(&task))
	outcome := observe.Succeeded
	switch {
	case panicked:
		outcome = observe.Panicked
	case err != nil && errors.Is(e.base.Err(), context.Canceled):
		x.released, outcome = true, observe.Released
	case err != nil:
		outcome = observe.Failed
	}
	e.report(x, err, outcome)
}

// call runs the handler, turning a panic into an error that keeps the stack.
func call(ctx context.Context, h Handler, t *Task) (err error, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			err, panicked = fmt.Errorf("panic: %v\n%s", r, debug.Stack()), true
		}
	}()
	return h.Handle(ctx, t), false
}

func (e *executor) report(x *execution, err error, outcome string) {
	x.once.Do(func() {
		x.err, x.outcome, x.ran = err, outcome, time.Since(x.begin)
		select {
		case e.results <- x:
		case <-e.finisherDone: // abandoned at a hard stop: recovery takes it
		}
	})
}

// finisher writes results in batches: it takes what has queued up while the previous
// write was in flight, up to MaxBatch.
func (e *executor) finisher() {
	batch := make([]*execution, 0, store.MaxBatch)
	for {
		batch = batch[:0]
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
	fill:
		for len(batch) < store.MaxBatch {
			select {
			case x := <-e.results:
				batch = append(batch, x)
			default:
				break fill
			}
		}
		e.finish(batch)
	}
}

func (e *executor) finish(batch []*execution) {
	s := e.s
	now := s.clock.Now()
	results := make([]store.Finish, len(batch))
	for i, x := range batch {
		results[i] = s.outcome(&x.task, x.err, x.released, now)
	}
	var applied []bool
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		var err error
		if applied, err = s.kst.Finish(context.Background(), results); err == nil {
			break
		}
		// Keep the executions in the running set so that heartbeats keep them
		// alive while the store is unreachable; give up when the store is closed or
		// on a hard stop: orphan recovery takes over.
		s.log.LogAttrs(context.Background(), slog.LevelError, "ax: record results failed", slog.Int("tasks", len(batch)), slog.Any("err", err))
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
	leaderDone := 0
	for i, x := range batch {
		f := results[i]
		attrs := append(taskAttrs(&x.task), slog.String("result", string(f.Status)))
		switch {
		case !applied[i]:
			s.log.LogAttrs(context.Background(), slog.LevelWarn, "ax: result discarded, execution superseded", attrs...)
		case f.Status == store.Succeeded:
			s.log.LogAttrs(context.Background(), slog.LevelDebug, "ax: task succeeded", attrs...)
		case f.Status == store.Scheduled:
			s.log.LogAttrs(context.Background(), slog.LevelInfo, "ax: task will be retried", append(attrs, slog.Time("due_at", f.DueAt), slog.String("err", f.Error))...)
		default:
			s.log.LogAttrs(context.Background(), slog.LevelWarn, "ax: task failed", append(attrs, slog.String("err", f.Error))...)
		}
		if applied[i] {
			s.obs.Send(observe.Event{Kind: observe.Finished, At: now, Name: x.task.Name, Outcome: x.outcome, Duration: x.ran})
			if f.Status == store.Scheduled && !x.released {
				s.obs.Send(observe.Event{Kind: observe.RetryScheduled, At: now, Name: x.task.Name, Due: f.DueAt})
			}
		}
		if applied[i] && f.Status == store.Scheduled {
			if r := s.current(); r != nil {
				r.leader.add(store.Due{ID: f.TaskID, DueAt: f.DueAt})
			}
		}
		e.mu.Lock()
		delete(e.running, x.task.ExecutionID)
		e.mu.Unlock()
		if x.leader {
			leaderDone++
		}
	}
	if freed := freedKeys(len(batch), func(i int) *store.Task { return &batch[i].task }, applied); len(freed) > 0 {
		e.onKeysFree(freed)
	}
	if leaderDone > 0 {
		e.onDone(leaderDone)
	}
}

// forget drops executions whose results could not be written: recovery takes them.
func (e *executor) forget(batch []*execution) {
	e.mu.Lock()
	for _, x := range batch {
		delete(e.running, x.task.ExecutionID)
	}
	e.mu.Unlock()
}

// outcome turns an execution's result into the task's next state: SUCCEEDED, a
// business retry (SCHEDULED, Attempt+1, after the backoff), FAILED when retries are
// exhausted, or, for an execution released at shutdown, SCHEDULED now without using a
// retry.
func (s *Scheduler) outcome(t *store.Task, err error, released bool, now time.Time) store.Finish {
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
		f.DueAt = now.Add(s.backoff(t, next))
	}
	return f
}

// backoff is the delay before business retry n of t: the delays stored with the task,
// else its handler's, else DefaultBackoff.
func (s *Scheduler) backoff(t *store.Task, n int) time.Duration {
	if n-1 < len(t.Backoff) {
		return t.Backoff[n-1]
	}
	if hd := s.handler(t.Name); hd != nil {
		return max(hd.backoff(n), 0)
	}
	return DefaultBackoff(n)
}

// heartbeater stamps every running execution alive each HeartbeatInterval, in one
// batched call, and cancels the handlers whose task has moved on (orphaned by
// another node, for instance): their results would be discarded anyway.
func (e *executor) heartbeater() {
	ticker := time.NewTicker(e.s.cfg.HeartbeatInterval)
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
		}
		alive, err := e.s.kst.Heartbeat(context.Background(), refs)
		if err != nil {
			e.s.log.LogAttrs(e.base, slog.LevelError, "ax: heartbeat failed", slog.Int("executions", len(refs)), slog.Any("err", err))
			continue
		}
		for i, ok := range alive {
			if !ok {
				xs[i].cancel()
			}
		}
	}
}

// handBack returns claimed, unstarted tasks to SCHEDULED as a dispatch failure: code
// is the observer's reason (observe.NoHandler, …), reason the task's LastError.
func (e *executor) handBack(ds []dispatched, code, reason string) {
	s := e.s
	now := s.clock.Now()
	rq := make([]store.Requeue, len(ds))
	leader := 0
	for i, d := range ds {
		rq[i] = s.handBackRequeue(&d.task, reason, now)
		if d.leader {
			leader++
		}
		s.obs.Send(observe.Event{Kind: observe.DispatchFailed, At: now, Name: d.task.Name, Reason: code})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	applied, err := s.kst.Requeue(ctx, rq)
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelError, "ax: hand back claimed tasks failed; the inspector will", slog.Int("tasks", len(rq)), slog.Any("err", err))
	}
	if freed := freedKeys(len(ds), func(i int) *store.Task { return &ds[i].task }, applied); len(freed) > 0 {
		e.onKeysFree(freed)
	}
	if leader > 0 {
		e.onDone(leader)
	}
}

// stop ends the executor, in the reverse order of the work: no new starts, claimed
// tasks handed back, running handlers awaited and their results written — with
// heartbeats going on until then, so that no other scheduler takes them for orphans
// — then the heartbeats stop. All of it is bounded by ctx: when ctx ends first, the
// handlers' contexts are cancelled, stop returns ctx.Err() at once, and in the
// background the results of handlers that return within a second are written (one
// attempt each); recovery takes whatever is left.
func (e *executor) stop(ctx context.Context) error {
	e.mu.Lock()
	e.stopping = true
	pending := e.pending
	e.pending = nil
	e.mu.Unlock()
	close(e.quit)
	if len(pending) > 0 {
		e.handBack(pending, observe.Stopping, "scheduler stopping")
	}
	handlers := make(chan struct{})
	go func() {
		<-e.starterDone // no handler is added after the starter ends
		e.handlers.Wait()
		close(handlers)
	}()
	select {
	case <-handlers:
	case <-ctx.Done():
		e.hardStop(handlers)
		return ctx.Err()
	}
	close(e.finished)
	select {
	case <-e.finisherDone:
	case <-ctx.Done():
		e.hardStop(handlers)
		return ctx.Err()
	}
	close(e.hbQuit)
	<-e.heartbeaterDone // at most one heartbeat call in flight, bounded by StoreTimeout
	e.cancelBase()
	return nil
}

// hardStop ends what stop could not wait for: it cancels the handlers, stops the
// heartbeats and lets the finisher write, once, the results of the handlers that
// return within a second; its goroutines end by themselves.
func (e *executor) hardStop(handlers <-chan struct{}) {
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
