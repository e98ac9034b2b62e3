package execute

import (
	"context"
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

// New returns an executor for cfg; Start starts it.
func New(cfg Config) *Executor {
	if cfg.OnFree == nil {
		cfg.OnFree = func(keys, names []string) {}
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
