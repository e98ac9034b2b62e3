package ax

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/axsched/ax/store"
)

// Scheduler runs tasks: it persists them in its Store, hands them to their handlers
// when they are due, retries failures and recovers from crashes. Its methods are safe
// for concurrent use.
type Scheduler struct {
	cfg   Config
	st    Store
	log   *slog.Logger
	clock *clock

	mu        sync.Mutex
	handlers  map[string]*handler
	periodics map[string]*periodic // Cron, Every
	state     runState
	run       *running // set while started
	inserts   coalescer

	hooks testHooks
}

// testHooks let tests stop the scheduler at chosen points (a crash between claim and
// start, for instance). Nil hooks are skipped.
type testHooks struct {
	afterClaim func([]store.Task) // on the claimer goroutine, before dispatch
	// localClock: trust the local clock, never measure the store's. A synctest
	// bubble's fake clock then drives scheduling against a real database, whose
	// own clock is years ahead (so everything the bubble schedules is due for it).
	localClock bool
	// noNotify: do not listen to store notifications. A goroutine waiting on a
	// socket keeps a synctest bubble's clock from advancing.
	noNotify bool
}

type runState int

const (
	stateNew runState = iota
	stateStarted
	stateStopped
)

// handler is a registered handler and its defaults for its tasks.
type handler struct {
	h        Handler
	maxRetry int
	backoff  func(attempt int) time.Duration
	timeout  time.Duration
}

// running holds the goroutines of a started scheduler.
type running struct {
	cancel context.CancelFunc // stops the leader, refill and inspector
	wg     sync.WaitGroup
	leader *leader
	exec   *executor
}

// New returns a Scheduler for cfg. Zero fields take their defaults; a bad field is
// ErrInvalid naming it. New does no I/O: Start does.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Scheduler{
		cfg:      cfg,
		st:       cfg.Store,
		log:      cfg.Logger,
		clock:    newClock(),
		handlers: make(map[string]*handler),

		periodics: make(map[string]*periodic),
	}, nil
}

// Handle registers h for tasks named name, with opts as the defaults for those tasks
// (WithMaxRetry, WithBackoff, WithTimeout). Registering a name twice replaces the
// handler. An empty name, a nil handler or a per-task option panics, like
// http.Handle: these are programming errors.
func (s *Scheduler) Handle(name string, h Handler, opts ...Option) {
	if err := validName(name); err != nil {
		panic(err)
	}
	if h == nil {
		panic(fmt.Sprintf("ax: Handle(%q): nil handler", name))
	}
	o := collect(opts)
	if len(o.errs) > 0 {
		panic(errors.Join(o.errs...))
	}
	if o.hasPayload || o.owner != nil || o.hasTx || o.taskKey != nil {
		panic(fmt.Sprintf("ax: Handle(%q): WithPayload, WithOwner, WithTx and WithTaskKey are per-task options", name))
	}
	if o.overlap != nil || o.misfire != nil || o.loc != nil {
		panic(fmt.Sprintf("ax: Handle(%q): WithOverlap, WithMisfire and WithTimeZone are options of a schedule (Cron, Every) or a task", name))
	}
	hd := &handler{h: h, maxRetry: DefaultMaxRetry, backoff: DefaultBackoff, timeout: DefaultTimeout}
	if o.maxRetry != nil {
		hd.maxRetry = *o.maxRetry
	}
	if o.hasBackoff {
		hd.backoff = o.backoff
	}
	if o.timeout != nil {
		hd.timeout = *o.timeout
	}
	s.mu.Lock()
	s.handlers[name] = hd
	s.mu.Unlock()
}

// HandleFunc registers f for tasks named name; see Handle.
func (s *Scheduler) HandleFunc(name string, f func(ctx context.Context, t *Task) error, opts ...Option) {
	if f == nil {
		panic(fmt.Sprintf("ax: HandleFunc(%q): nil func", name))
	}
	s.Handle(name, HandlerFunc(f), opts...)
}

func (s *Scheduler) handler(name string) *handler {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handlers[name]
}

// Start measures the store's clock offset, loads the tasks due within the window and
// starts scheduling and executing. ctx bounds the start-up work only; the scheduler
// runs until Stop. A Scheduler starts once: after Stop, create a new one.
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case stateStarted:
		return fmt.Errorf("ax: start: already started: %w", ErrNotRunning)
	case stateStopped:
		return fmt.Errorf("ax: start: a stopped scheduler cannot start again, create a new one: %w", ErrNotRunning)
	}
	if !s.hooks.localClock {
		offset, rtt, err := s.clock.measure(ctx, s.st, 5)
		if err != nil {
			return fmt.Errorf("ax: start: read the store's clock: %w", err)
		}
		s.log.LogAttrs(ctx, slog.LevelDebug, "ax: clock measured", slog.Duration("offset", offset), slog.Duration("rtt", rtt))
	}
	rows, err := s.registerSchedules(ctx)
	if err != nil {
		return fmt.Errorf("ax: start: register schedules: %w", err)
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &running{cancel: cancel}
	r.exec = newExecutor(s)
	r.leader = newLeader(s, r.exec)
	r.leader.afterClaim = s.hooks.afterClaim
	r.exec.start()
	r.leader.start(runCtx, &r.wg, rows)
	s.run = r
	s.state = stateStarted
	s.log.LogAttrs(ctx, slog.LevelInfo, "ax: scheduler started", slog.String("node", s.cfg.Node))
	return nil
}

// Stop stops claiming tasks, hands back the ones claimed but not started, and waits
// for running handlers until ctx ends. Handlers still running then see their context
// cancelled; those that return within a second are recorded as released (their task
// runs again without using a retry); the others stay RUNNING and are retried as
// orphans after OrphanAfter. Stop returns ctx's error in that case, nil otherwise.
func (s *Scheduler) Stop(ctx context.Context) error {
	s.mu.Lock()
	if s.state != stateStarted {
		s.mu.Unlock()
		return fmt.Errorf("ax: stop: not started: %w", ErrNotRunning)
	}
	r := s.run
	s.state = stateStopped
	s.run = nil
	s.mu.Unlock()

	r.cancel()
	loops := make(chan struct{})
	go func() { r.wg.Wait(); close(loops) }()
	select {
	case <-loops:
	case <-ctx.Done():
		// A store call that ignores cancellation holds a loop; the executor still
		// stops within ctx, and the loop ends when its call returns.
	}
	err := r.exec.stop(ctx)
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "ax: scheduler stopped", slog.String("node", s.cfg.Node))
	if err != nil {
		return fmt.Errorf("ax: stop: %w", err)
	}
	return nil
}

func (s *Scheduler) current() *running {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run
}

// Get returns the task with this id, or ErrNotFound.
func (s *Scheduler) Get(ctx context.Context, id int64) (*Task, error) {
	if id <= 0 {
		return nil, fmt.Errorf("ax: get: id %d is not positive: %w", id, ErrInvalid)
	}
	return s.st.Get(ctx, id)
}

// Lookup returns the task with this name and key, or ErrNotFound.
func (s *Scheduler) Lookup(ctx context.Context, name, key string) (*Task, error) {
	if err := errors.Join(validName(name), validKey(key)); err != nil {
		return nil, fmt.Errorf("ax: lookup: %w", err)
	}
	return s.st.Lookup(ctx, name, key)
}

// Executions returns the task's executions, oldest first, or ErrNotFound.
func (s *Scheduler) Executions(ctx context.Context, id int64) ([]Execution, error) {
	if id <= 0 {
		return nil, fmt.Errorf("ax: executions: id %d is not positive: %w", id, ErrInvalid)
	}
	return s.st.Executions(ctx, id)
}

// Cancel cancels the SCHEDULED task (name, key): it becomes CANCELLED and never runs.
// A task that is dispatching, running or finished is ErrNotCancellable; a missing
// one ErrNotFound.
func (s *Scheduler) Cancel(ctx context.Context, name, key string) error {
	if err := errors.Join(validName(name), validKey(key)); err != nil {
		return fmt.Errorf("ax: cancel: %w", err)
	}
	t, err := s.st.Cancel(ctx, name, key)
	if err != nil {
		return err
	}
	if r := s.current(); r != nil {
		r.leader.remove(t.ID)
	}
	return nil
}

// Trigger runs a SCHEDULED or FAILED task now, bypassing its due time (manual
// compensation): it is claimed with a new execution id, TriggeredAt is recorded, and
// this process executes it. From FAILED it gets one more attempt. A task that is
// dispatching or running is ErrNotTriggerable. The scheduler must be started
// (ErrNotRunning otherwise).
func (s *Scheduler) Trigger(ctx context.Context, id int64) error {
	if id <= 0 {
		return fmt.Errorf("ax: trigger: id %d is not positive: %w", id, ErrInvalid)
	}
	r := s.current()
	if r == nil {
		return fmt.Errorf("ax: trigger task %d: %w", id, ErrNotRunning)
	}
	execID, err := uuid.NewV7()
	if err != nil {
		return fmt.Errorf("ax: trigger task %d: %w", id, err)
	}
	t, err := s.st.Trigger(ctx, id, execID.String())
	if err != nil {
		return err
	}
	r.leader.remove(id)
	s.log.LogAttrs(ctx, slog.LevelInfo, "ax: task triggered", taskAttrs(t)...)
	r.exec.dispatch([]store.Task{*t}, false)
	return nil
}

func taskAttrs(t *Task) []slog.Attr {
	return []slog.Attr{
		slog.Int64("task_id", t.ID), slog.String("execution_id", t.ExecutionID),
		slog.String("name", t.Name), slog.String("key", t.Key), slog.Int("attempt", t.Attempt),
		slog.String("owner_service", t.OwnerService),
	}
}
