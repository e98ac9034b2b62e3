package ax

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/axsched/ax/internal/clock"
	"github.com/axsched/ax/internal/dispatch"
	"github.com/axsched/ax/internal/execute"
	"github.com/axsched/ax/internal/insert"
	"github.com/axsched/ax/internal/lograte"
	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/internal/stats"
	"github.com/axsched/ax/internal/storecall"
	"github.com/axsched/ax/remote"
	"github.com/axsched/ax/store"
)

// Scheduler runs tasks: it persists them in its Store, hands them to their handlers
// when they are due, retries failures and recovers from crashes. Its methods are safe
// for concurrent use.
type Scheduler struct {
	cfg Config
	st  Store // for calls made for the caller, bounded by the caller's context
	kst Store // for the scheduler's own calls, each bounded by StoreTimeout
	// own and kown are st and kst for the inserts whose tasks the scheduler hands its
	// running loop itself (Delay, At, SubmitMany): views whose signal the loop knows
	// for its own and refills for no more (store.Marker), where the store has them.
	own, kown Store
	log       *slog.Logger
	clock     *clock.Clock
	// clockNudge asks the clock's follower to measure the store's clock again now
	// (refreshed: the store failed a call).
	clockNudge chan struct{}
	obs        *observe.Queue // nil without Config.Observer

	// lifecycle is held by Start and Stop while they run (a semaphore, not s.mu, so
	// that Start's store I/O holds up no other method).
	lifecycle chan struct{}

	mu        sync.Mutex
	handlers  map[string]*handler
	names     []string               // the keys of handlers, sorted; replaced, never changed in place
	periodics map[string]*registered // Cron, Every
	state     runState
	run       *running // set while started
	inserts   insert.Coalescer
	// schedTrace is what Config.Tracer said of Start's context: the trace the
	// schedules this scheduler stores carry to their occurrences.
	schedTrace string
	badTraces  *lograte.Limiter // of the warnings about a Tracer's bad texts

	// The executor endpoint (ExecutorHandler) and the leader's client of the others'.
	server *remote.Server
	client *remote.Client

	hooks testHooks
}

// testHooks let tests stop the scheduler at chosen points (a crash between claim and
// start, for instance). Nil hooks are skipped.
type testHooks struct {
	afterClaim func(claimed, started []store.Task) // on the claimer goroutine, before dispatch
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
	stateNew      runState = iota
	stateStarting          // Start is doing its I/O
	stateStarted
	stateStopped
)

// handler is a registered handler, its defaults for its tasks, and what the
// executor runs.
type handler struct {
	maxRetry    int
	unique      Unique
	concurrency int              // WithConcurrency; 0: none set in the code
	rate        *rateLimit       // WithRate; nil: none set in the code
	keyConc     int              // WithKeyConcurrency; 0: none set in the code
	keyRate     *rateLimit       // WithKeyRate; nil: none set in the code
	exec        *execute.Handler // Run, Timeout, Backoff
}

// running holds the parts of a started scheduler.
type running struct {
	cancel context.CancelFunc // ends the campaign, the term's parts and the clock's follower
	wg     sync.WaitGroup
	exec   *execute.Executor
	stats  *stats.Aggregator // this node's executions per minute, written to the store
	reload chan struct{}     // re-read the schedules now

	mu   sync.Mutex
	loop *dispatch.Loop // the current term's scheduling loop; nil while not leading
}

// current returns the scheduling loop of the current term, or nil.
func (r *running) currentLoop() *dispatch.Loop {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.loop
}

// setLoop makes l the current term's loop (nil: the term ended).
func (r *running) setLoop(l *dispatch.Loop) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loop = l
}

// add puts tasks in the current term's wheel; without a term the leader finds them
// by its refill.
func (r *running) add(dues ...store.Due) {
	if l := r.currentLoop(); l != nil {
		l.Add(dues...)
	}
}

// remove takes a task out of the current term's wheel.
func (r *running) remove(id int64) {
	if l := r.currentLoop(); l != nil {
		l.Remove(id)
	}
}

// watch has the current term's loop look out for a task written in a caller's
// transaction.
func (r *running) watch(id int64, due time.Time) {
	if l := r.currentLoop(); l != nil {
		l.Watch(id, due)
	}
}

// wake tells the current term's loop that the executor has room to start tasks.
func (r *running) wake() {
	if l := r.currentLoop(); l != nil {
		l.Wake()
	}
}

// offer has the current term's loop offer at once the tasks it parked for slots of
// name.
func (r *running) offer(name string) {
	if l := r.currentLoop(); l != nil {
		l.Offer(name)
	}
}

// refillNow has the current term's loop refill at once.
func (r *running) refillNow() {
	if l := r.currentLoop(); l != nil {
		l.RefillNow()
	}
}

// unblock tells the current term's loop that task keys and slots of names are free.
func (r *running) unblock(keys, names []string) {
	if l := r.currentLoop(); l != nil {
		l.Unblock(keys, names)
	}
}

// reloadSchedules makes the firing re-read the schedules now (registered, paused,
// resumed, deleted).
func (r *running) reloadSchedules() {
	select {
	case r.reload <- struct{}{}:
	default:
	}
}

// New returns a Scheduler for cfg. Zero fields take their defaults; a bad field is
// ErrInvalid naming it. New does no I/O: Start does.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	st, err := inNamespace(cfg.Store, cfg.Namespace)
	if err != nil {
		return nil, err
	}
	own := st
	if m, ok := st.(store.Marker); ok {
		if own, err = m.Marked(uuid.NewString()); err != nil {
			return nil, errorf("ax: config: Store: marked view: %w", err)
		}
	}
	var (
		signer   *remote.Signer
		verifier *remote.Verifier
	)
	s := &Scheduler{}
	if len(cfg.Cluster.Secret) > 0 {
		if signer, err = remote.NewSigner(cfg.Cluster.Secret); err == nil {
			verifier, err = remote.NewVerifier(cfg.Cluster.Secret, remote.WithLogger(cfg.Logger),
				remote.WithClock(func() time.Time { return s.clock.Now() }))
		}
		if err != nil {
			return nil, errorf("ax: config: Cluster.Secret: %w: %w", err, ErrInvalid)
		}
	}
	*s = Scheduler{
		cfg:        cfg,
		st:         st,
		kst:        storecall.Bounded(st, cfg.StoreTimeout),
		own:        own,
		kown:       storecall.Bounded(own, cfg.StoreTimeout),
		log:        cfg.Logger,
		clock:      clock.New(),
		clockNudge: make(chan struct{}, 1),
		obs:        newObserverQueue(cfg.Observer),
		lifecycle:  make(chan struct{}, 1),
		handlers:   make(map[string]*handler),
		badTraces:  newBadTraceLimiter(),

		periodics: make(map[string]*registered),
		// Signed and verified by the store-corrected clock, so that replicas whose
		// hosts' clocks disagree still agree on the signing window.
		client: remote.NewClient(signer, cfg.Cluster.RequestTimeout, func() time.Time { return s.clock.Now() }),
	}
	s.server = remote.NewServer(cfg.Namespace, cfg.Node, remoteExecutor{s}, verifier, cfg.Logger)
	return s, nil
}

// inNamespace returns the view of st for namespace ns.
func inNamespace(st Store, ns string) (Store, error) {
	v, err := st.InNamespace(ns)
	if err != nil {
		return nil, errorf("ax: config: Namespace: %w", err)
	}
	return v, nil
}

// Handle registers h for tasks named name, with opts as the defaults for those tasks
// (WithMaxRetry, WithBackoff, WithTimeout, WithMaxSnoozes), and WithConcurrency,
// WithRate, WithKeyConcurrency and WithKeyRate, limits for the name stored for every
// scheduler (see SetConcurrency, SetRate, SetKeyConcurrency, SetKeyRate). It may be called before or after Start;
// registering a name twice replaces the handler. An empty name, a nil handler or an
// invalid option value panics, like http.Handle: these are programming errors.
func (s *Scheduler) Handle(name string, h Handler, opts ...HandlerOption) {
	if err := validName(name); err != nil {
		panic(errorf("ax: handle: %w", err))
	}
	if h == nil {
		panic(fmt.Sprintf("ax: Handle(%q): nil handler", name))
	}
	o := collect(opts)
	if len(o.errs) > 0 {
		panic(errorf("ax: handle %q: %w", name, errors.Join(o.errs...)))
	}
	hd := &handler{maxRetry: DefaultMaxRetry, exec: &execute.Handler{
		Run:     func(ctx context.Context, t *store.Task) error { return h.Handle(ctx, taskOf(t)) },
		Timeout: DefaultTimeout, Backoff: DefaultBackoff, MaxSnoozes: DefaultMaxSnoozes,
	}}
	if o.maxRetry != nil {
		hd.maxRetry = *o.maxRetry
	}
	if o.hasBackoff {
		hd.exec.Backoff = o.backoff
	}
	if o.timeout != nil {
		hd.exec.Timeout = *o.timeout
	}
	if o.maxSnoozes != nil {
		hd.exec.MaxSnoozes = *o.maxSnoozes
	}
	if o.unique != nil {
		hd.unique = *o.unique
	}
	if o.concurrency != nil {
		hd.concurrency = *o.concurrency
	}
	hd.rate, hd.keyRate = o.rate, o.keyRate
	if o.keyConc != nil {
		hd.keyConc = *o.keyConc
	}
	s.mu.Lock()
	_, replaced := s.handlers[name]
	s.handlers[name] = hd
	if !replaced {
		s.names = slices.Sorted(maps.Keys(s.handlers))
	}
	started := s.run != nil
	s.mu.Unlock()
	if started && hd.limited() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StoreTimeout)
		defer cancel()
		if err := s.storeLimitsOf(ctx, name, hd); err != nil {
			s.log.LogAttrs(ctx, slog.LevelError, "ax: store the limits of a handler registered after Start; the next Start stores them",
				slog.String("name", name), slog.Any("err", err))
		}
	}
}

// HandleFunc registers f for tasks named name; see Handle.
func (s *Scheduler) HandleFunc(name string, f func(ctx context.Context, t *Task) error, opts ...HandlerOption) {
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

// handlerNames returns the names with a handler here, for claims that start tasks.
// Asked before every claim, it reads the list Handle keeps rather than build one.
func (s *Scheduler) handlerNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.names
}

// execHandler is the executor's handler lookup.
func (s *Scheduler) execHandler(name string) *execute.Handler {
	if hd := s.handler(name); hd != nil {
		return hd.exec
	}
	return nil
}

// Start measures the store's clock offset, stores the registered schedules, loads the
// tasks due within the window and starts scheduling and executing. ctx bounds the
// start-up work only; the scheduler runs until Stop. Start holds no lock across its
// store calls: other methods (Delay, Handle, Schedules, …) do not wait for it.
//
// A Scheduler starts once. Start on a started scheduler is an error that says it is
// already started; after Stop, create a new Scheduler. Both errors wrap
// ErrNotRunning.
func (s *Scheduler) Start(ctx context.Context) error {
	select {
	case s.lifecycle <- struct{}{}:
	case <-ctx.Done():
		return errorf("ax: start: %w", ctx.Err())
	}
	defer func() { <-s.lifecycle }()
	schedTrace := s.traceOf(ctx)
	s.mu.Lock()
	switch s.state {
	case stateStarted:
		s.mu.Unlock()
		return errorf("ax: start: %w", lifecycleError("already started"))
	case stateStopped:
		s.mu.Unlock()
		return errorf("ax: start: %w", lifecycleError("the scheduler was stopped and cannot start again; create a new one with New"))
	}
	s.state = stateStarting
	s.schedTrace = schedTrace
	s.mu.Unlock()

	rows, err := s.startIO(ctx)
	if err != nil {
		s.mu.Lock()
		s.state = stateNew
		s.mu.Unlock()
		return err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := s.assemble(cancel)
	s.obs.Start()
	s.mu.Lock()
	s.run = r
	s.state = stateStarted
	s.mu.Unlock()
	r.exec.Start()
	r.stats.Start()
	s.runParts(runCtx, r, rows)
	s.log.LogAttrs(ctx, slog.LevelInfo, "ax: scheduler started", slog.String("node", s.cfg.Node))
	return nil
}

// assemble builds the parts of a started scheduler, each given what it needs: the
// executor runs what the scheduling loop claims, and tells it what finished.
func (s *Scheduler) assemble(cancel context.CancelFunc) *running {
	r := &running{cancel: cancel, reload: make(chan struct{}, 1)}
	r.stats = stats.New(stats.Config{Store: s.st, Node: s.cfg.Node, Log: s.log,
		Interval: s.cfg.ExecutionStatsInterval, Timeout: s.cfg.StoreTimeout})
	r.exec = execute.New(execute.Config{
		Store: s.kst, Clock: s.clock, Log: s.log, Observe: s.obs, Stats: r.stats,
		Node: s.cfg.Node, Concurrency: s.cfg.Concurrency,
		HeartbeatInterval: s.cfg.HeartbeatInterval, MaxDispatchRetries: s.cfg.MaxDispatchRetries,
		SelfFenceAfter: s.cfg.selfFenceAfter(),
		Handler:        s.execHandler,
		Handlers:       s.handlerNames,
		OnRoom:         r.wake,
		OnFree:         r.unblock,
		OnRetry:        func(d store.Due) { r.add(d) },
		Trace:          s.spanStarter(),
	})
	return r
}

// clockMeasured reports a measurement of the store's clock.
func (s *Scheduler) clockMeasured(ctx context.Context, offset, rtt time.Duration) {
	s.obs.Send(observe.Event{Kind: observe.ClockOffset, At: s.clock.Now(), Offset: offset})
	s.log.LogAttrs(ctx, slog.LevelDebug, "ax: clock measured", slog.Duration("offset", offset), slog.Duration("rtt", rtt))
}

// startIO is Start's store work: the clock, then the schedules.
func (s *Scheduler) startIO(ctx context.Context) ([]store.Schedule, error) {
	if d := clock.SkewFrom(ctx); d != 0 {
		s.clock.Skew(d) // a test's host whose clock is off (internal/clock.WithSkew)
	}
	if !s.hooks.localClock {
		offset, rtt, err := s.clock.Measure(ctx, s.kst, 5)
		if err != nil {
			return nil, errorf("ax: start: read the store's clock: %w", err)
		}
		s.clockMeasured(ctx, offset, rtt)
	}
	if err := s.storeLimits(ctx); err != nil {
		return nil, errorf("ax: start: store concurrency limits: %w", err)
	}
	rows, err := s.registerSchedules(ctx)
	if err != nil {
		return nil, errorf("ax: start: register schedules: %w", err)
	}
	return rows, nil
}

// Stop stops claiming tasks, hands back the ones claimed but not started, and waits
// until the running handlers have returned and their results are written, or until
// ctx ends. Meanwhile the executions it waits for are kept alive by heartbeats, so
// that no other scheduler re-runs them. It returns nil when everything was written,
// ctx.Err() when ctx ended first: then the handlers still running see their context
// cancelled, and those that return within a second are recorded, in the background,
// as released (their task runs again without using a retry). Whatever could not be
// written (a handler that ignores its context, an unreachable store) is left to
// recovery on any scheduler: an orphan after OrphanAfter, a stuck claim after
// DispatchTimeout. Nothing is lost.
//
// Stop on a scheduler that is stopped, stopping or was never started returns nil at
// once.
func (s *Scheduler) Stop(ctx context.Context) error {
	select {
	case s.lifecycle <- struct{}{}:
		// Free: taken whatever ctx says (a select of both could pick ctx.Done() and
		// fail a Stop that has nothing to wait for).
	default:
		select {
		case s.lifecycle <- struct{}{}:
		case <-ctx.Done():
			return errorf("ax: stop: %w", ctx.Err())
		}
	}
	s.mu.Lock()
	r := s.run
	s.state = stateStopped
	s.run = nil
	s.mu.Unlock()
	<-s.lifecycle
	if r == nil {
		return nil
	}

	r.cancel()
	r.exec.Quiesce() // no new starts while the loops wind down
	loops := make(chan struct{})
	go func() { r.wg.Wait(); close(loops) }()
	select {
	case <-loops:
	case <-ctx.Done():
		// A loop is in a store call (bounded by StoreTimeout); the executor still
		// stops within ctx, and the loop ends when its call returns.
	}
	err := r.exec.Stop(ctx)
	r.stats.Stop(ctx) // the results written until now; a failure is logged
	s.client.Close()
	s.obs.Close(ctx)
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "ax: scheduler stopped", slog.String("node", s.cfg.Node))
	if err != nil {
		return errorf("ax: stop: %w", err)
	}
	return nil
}

func (s *Scheduler) current() *running {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run
}
