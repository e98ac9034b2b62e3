package ax

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/axsched/ax/store"
)

// Limits on names and keys, in bytes.
const (
	MaxNameLen = 200
	MaxKeyLen  = 500
)

// Scheduler runs tasks: it persists them in its Store, hands them to their handlers
// when they are due, retries failures and recovers from crashes. Its methods are safe
// for concurrent use.
type Scheduler struct {
	cfg   Config
	st    Store
	log   *slog.Logger
	clock *clock

	mu       sync.Mutex
	handlers map[string]*handler
	state    runState
	run      *running // set while started

	hooks testHooks
}

// testHooks let tests stop the scheduler at chosen points (a crash between claim and
// start, for instance). Nil hooks are skipped.
type testHooks struct {
	afterClaim func([]store.Task) // on the claimer goroutine, before dispatch
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
	if o.hasPayload || o.owner != nil {
		panic(fmt.Sprintf("ax: Handle(%q): WithPayload and WithOwner are per-task options", name))
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
	offset, rtt, err := s.clock.measure(ctx, s.st, 5)
	if err != nil {
		return fmt.Errorf("ax: start: read the store's clock: %w", err)
	}
	s.log.LogAttrs(ctx, slog.LevelDebug, "ax: clock measured", slog.Duration("offset", offset), slog.Duration("rtt", rtt))

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &running{cancel: cancel}
	r.exec = newExecutor(s)
	r.leader = newLeader(s, r.exec)
	r.leader.afterClaim = s.hooks.afterClaim
	r.exec.start()
	r.leader.start(runCtx, &r.wg)
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

// Delay submits a task to run d from now (d >= 0). It returns the stored task, or
// the existing task with ErrDuplicate when (name, key) is taken.
func (s *Scheduler) Delay(ctx context.Context, name, key string, d time.Duration, opts ...Option) (*Task, error) {
	if d < 0 {
		return nil, fmt.Errorf("ax: delay %q/%q: delay %v is negative: %w", name, key, d, ErrInvalid)
	}
	if d > maxAhead {
		return nil, fmt.Errorf("ax: delay %q/%q: delay %v is beyond %v: %w", name, key, d, maxAhead, ErrInvalid)
	}
	return s.submit(ctx, "delay", name, key, s.clock.now().Add(d), opts)
}

// At submits a task to run at a time; a time in the past runs it at once. It returns
// the stored task, or the existing task with ErrDuplicate when (name, key) is taken.
func (s *Scheduler) At(ctx context.Context, name, key string, at time.Time, opts ...Option) (*Task, error) {
	if at.Before(minDue) || at.After(maxDue) {
		return nil, fmt.Errorf("ax: at %q/%q: time %v is outside [%v, %v]: %w", name, key, at, minDue.Format(time.DateOnly), maxDue.Format(time.DateOnly), ErrInvalid)
	}
	return s.submit(ctx, "at", name, key, at, opts)
}

// The range of due times accepted: every store represents them exactly.
var (
	minDue = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	maxDue = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
)

const maxAhead = 100 * 365 * 24 * time.Hour

func (s *Scheduler) submit(ctx context.Context, op, name, key string, due time.Time, opts []Option) (*Task, error) {
	nt, err := s.newTask(name, key, due, opts)
	if err != nil {
		return nil, fmt.Errorf("ax: %s %q/%q: %w", op, name, key, err)
	}
	res, err := s.st.Insert(ctx, []store.NewTask{nt})
	if err != nil {
		return nil, fmt.Errorf("ax: %s %q/%q: %w", op, name, key, err)
	}
	t := res[0].Task
	if res[0].Err != nil {
		return t, fmt.Errorf("ax: %s %q/%q: task %d exists: %w", op, name, key, t.ID, res[0].Err)
	}
	if r := s.current(); r != nil {
		r.leader.add(store.Due{ID: t.ID, DueAt: t.DueAt})
	}
	return t, nil
}

// newTask validates a submission and resolves its options: per-task values win, then
// the handler's defaults when it is registered here, then the package defaults.
func (s *Scheduler) newTask(name, key string, due time.Time, opts []Option) (store.NewTask, error) {
	if err := validName(name); err != nil {
		return store.NewTask{}, err
	}
	if err := validKey(key); err != nil {
		return store.NewTask{}, err
	}
	o := collect(opts)
	if len(o.errs) > 0 {
		return store.NewTask{}, errors.Join(o.errs...)
	}
	if len(o.payload) > s.cfg.MaxPayload {
		return store.NewTask{}, fmt.Errorf("Payload of %d bytes exceeds MaxPayload %d: %w", len(o.payload), s.cfg.MaxPayload, ErrInvalid)
	}
	nt := store.NewTask{
		Name: name, Key: key, Payload: o.payload, DueAt: due.UTC().Truncate(time.Microsecond),
		MaxRetry: DefaultMaxRetry, OwnerService: s.cfg.OwnerService,
	}
	if hd := s.handler(name); hd != nil {
		nt.MaxRetry = hd.maxRetry
	}
	if o.maxRetry != nil {
		nt.MaxRetry = *o.maxRetry
	}
	if o.timeout != nil {
		nt.Timeout = *o.timeout
	}
	if o.owner != nil {
		nt.OwnerService = *o.owner
	}
	if o.hasBackoff {
		if nt.MaxRetry > maxStoredBackoff {
			return store.NewTask{}, fmt.Errorf("Backoff with MaxRetry %d: a per-task backoff stores one delay per retry, at most %d: %w", nt.MaxRetry, maxStoredBackoff, ErrInvalid)
		}
		nt.Backoff = make([]time.Duration, nt.MaxRetry)
		for i := range nt.Backoff {
			nt.Backoff[i] = max(o.backoff(i+1), 0)
		}
	}
	return nt, nil
}

const maxStoredBackoff = 1000

func validName(name string) error {
	return validText("Name", name, MaxNameLen)
}

func validKey(key string) error {
	return validText("Key", key, MaxKeyLen)
}

func validText(field, v string, limit int) error {
	switch {
	case v == "":
		return fmt.Errorf("%s is empty: %w", field, ErrInvalid)
	case len(v) > limit:
		return fmt.Errorf("%s is %d bytes, longer than %d: %w", field, len(v), limit, ErrInvalid)
	case !utf8.ValidString(v):
		return fmt.Errorf("%s is not valid UTF-8: %w", field, ErrInvalid)
	case strings.ContainsRune(v, 0):
		return fmt.Errorf("%s contains a NUL byte: %w", field, ErrInvalid)
	}
	return nil
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
