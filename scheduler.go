package ax

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/axsched/ax/elect"
	"github.com/axsched/ax/internal/clock"
	"github.com/axsched/ax/internal/dispatch"
	"github.com/axsched/ax/internal/execute"
	"github.com/axsched/ax/internal/insert"
	"github.com/axsched/ax/internal/leadership"
	"github.com/axsched/ax/internal/nodes"
	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/internal/periodic"
	"github.com/axsched/ax/internal/recovery"
	"github.com/axsched/ax/internal/retention"
	"github.com/axsched/ax/internal/route"
	"github.com/axsched/ax/internal/stats"
	"github.com/axsched/ax/internal/storecall"
	"github.com/axsched/ax/remote"
	"github.com/axsched/ax/store"
)

// Scheduler runs tasks: it persists them in its Store, hands them to their handlers
// when they are due, retries failures and recovers from crashes. Its methods are safe
// for concurrent use.
type Scheduler struct {
	cfg   Config
	st    Store // for calls made for the caller, bounded by the caller's context
	kst   Store // for the scheduler's own calls, each bounded by StoreTimeout
	log   *slog.Logger
	clock *clock.Clock
	obs   *observe.Queue // nil without Config.Observer

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
	maxRetry int
	unique   Unique
	exec     *execute.Handler // Run, Timeout, Backoff
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

// unblock tells the current term's loop that task keys are free.
func (r *running) unblock(keys []string) {
	if l := r.currentLoop(); l != nil {
		l.Unblock(keys)
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
		cfg:       cfg,
		st:        st,
		kst:       storecall.Bounded(st, cfg.StoreTimeout),
		log:       cfg.Logger,
		clock:     clock.New(),
		obs:       newObserverQueue(cfg.Observer),
		lifecycle: make(chan struct{}, 1),
		handlers:  make(map[string]*handler),

		periodics: make(map[string]*registered),
		// Signed and verified by the store-corrected clock, so that replicas whose
		// hosts' clocks disagree still agree on the signing window.
		client: remote.NewClient(signer, cfg.Cluster.RequestTimeout, func() time.Time { return s.clock.Now() }),
	}
	s.server = remote.NewServer(cfg.Namespace, cfg.Node, remoteExecutor{s}, verifier, cfg.Logger)
	return s, nil
}

// ExecutorHandler returns this replica's executor endpoint, to be served at
// Config.Cluster.Advertise: POST /ax/v1/dispatch, by which the leader hands it claimed
// tasks (signed with Cluster.Secret, and refused below the highest fencing token it has
// seen); POST /ax/v1/released, by which a leader that resigned tells this replica to
// campaign at once (signed the same way); and GET /ax/v1/health, answered at once,
// apart from any task. Without a
// Secret it serves only connections to a loopback address. Tasks dispatched to a
// scheduler that is not started are answered busy.
func (s *Scheduler) ExecutorHandler() http.Handler { return s.server }

// remoteExecutor is the executor as the dispatch endpoint sees it.
type remoteExecutor struct{ s *Scheduler }

// Take starts, through this replica's executor, the tasks it has handlers and free slots
// for; each token's tasks come from a Source that stops being valid once a higher
// token is seen.
func (x remoteExecutor) Take(token int64, tasks []store.Task, valid func() error) []remote.Outcome {
	out := make([]remote.Outcome, len(tasks))
	r := x.s.current()
	if r == nil {
		for i := range out {
			out[i] = remote.Busy
		}
		return out
	}
	var (
		offer []store.Task
		at    []int // offer[k] is tasks[at[k]]
	)
	for i, t := range tasks {
		if x.s.handler(t.Name) == nil {
			out[i] = remote.Unhandled
			continue
		}
		offer, at = append(offer, t), append(at, i)
	}
	// The slots are taken under the executor's lock: concurrent dispatches never
	// take more than fits.
	src := &execute.Source{Valid: valid, Fence: store.Fence{Namespace: x.s.cfg.Namespace, Token: token}}
	rest := r.exec.Offer(src, offer, 0)
	for k := range offer {
		out[at[k]] = remote.Accepted
		if k >= len(offer)-len(rest) {
			out[at[k]] = remote.Busy
		}
	}
	return out
}

// Released wakes this replica's campaign, through its elector when it can be woken
// (elect.Waker): the leader released its lease. Electors that hear releases by
// themselves (elect/redis: a publish) need no waking.
func (x remoteExecutor) Released(token int64) {
	if w, ok := x.s.cfg.Elector.(elect.Waker); ok && x.s.cfg.canLead() {
		w.Wake()
	}
}

// Epoch returns the fencing epoch the store recorded for the namespace: without a
// cluster secret, the endpoint takes no token above it.
func (x remoteExecutor) Epoch(ctx context.Context) (int64, error) {
	l, ok := x.s.st.(store.Leaser)
	if !ok {
		return 0, fmt.Errorf("ax: %T records no epoch (store.Leaser): %w", x.s.st, ErrUnsupported)
	}
	ctx, cancel := context.WithTimeout(ctx, x.s.cfg.StoreTimeout)
	defer cancel()
	info, err := l.Lease(ctx, x.s.cfg.Namespace)
	if err != nil {
		return 0, err
	}
	return info.Epoch, nil
}

// Load returns the executor's running handlers and free slots.
func (x remoteExecutor) Load() (running, free int) {
	if r := x.s.current(); r != nil {
		return r.exec.Load()
	}
	return 0, 0
}

// inNamespace returns the view of st for namespace ns: st itself for the default
// namespace of a store without namespaces, which cannot hold another.
func inNamespace(st Store, ns string) (Store, error) {
	n, ok := st.(store.Namespaced)
	switch {
	case ok:
		v, err := n.InNamespace(ns)
		if err != nil {
			return nil, errorf("ax: config: Namespace: %w", err)
		}
		return v, nil
	case ns == DefaultNamespace:
		return st, nil
	default:
		return nil, errorf("ax: config: Namespace %q: %T keeps no namespaces apart (store.Namespaced): %w", ns, st, ErrInvalid)
	}
}

// Handle registers h for tasks named name, with opts as the defaults for those tasks
// (WithMaxRetry, WithBackoff, WithTimeout). It may be called before or after Start;
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
		Timeout: DefaultTimeout, Backoff: DefaultBackoff,
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
	if o.unique != nil {
		hd.unique = *o.unique
	}
	s.mu.Lock()
	_, replaced := s.handlers[name]
	s.handlers[name] = hd
	if !replaced {
		s.names = slices.Sorted(maps.Keys(s.handlers))
	}
	s.mu.Unlock()
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
		OnKeysFree:     r.unblock,
		OnRetry:        func(d store.Due) { r.add(d) },
	})
	return r
}

// termExecutor is the executor as one term's scheduling loop sees it: every task
// dispatched comes from the term's Source.
type termExecutor struct {
	exec *execute.Executor
	src  *execute.Source
}

func (t termExecutor) Dispatch(tasks []store.Task) bool { return t.exec.Dispatch(t.src, tasks) }

// Reserve, Launch and ClaimFailed have the claim start the tasks this process runs
// (dispatch.Starter).
func (t termExecutor) Reserve(n int) (store.StartOn, int, bool) { return t.exec.Reserve(n) }

func (t termExecutor) Launch(started []store.Task, k int, sent time.Time) {
	t.exec.Launch(t.src, started, k, sent)
}

func (t termExecutor) ClaimFailed(claims []store.Claim, k int, sent time.Time) {
	t.exec.ClaimFailed(t.src, claims, k, sent)
}

// term is one term's leader-only parts: the scheduling loop (with its wheel, filled
// afresh), recovery, schedule firing, and the task counts for the observer. Without an
// elector there is one term, as long as the scheduler runs, with the zero fence.
type term struct {
	s      *Scheduler
	r      *running
	t      leadership.Term
	st     store.Store // s.kst; under a lease, ending the term when a write is fenced
	loop   *dispatch.Loop
	src    *execute.Source
	router *route.Router // under a lease: the dispatch to this and the other replicas
}

// newTerm assembles a term's parts and makes its loop the current one, so that tasks
// submitted from now on reach its wheel; ctx ends with the term.
func (s *Scheduler) newTerm(ctx context.Context, r *running, t leadership.Term) *term {
	st := s.kst
	if t.Fence.Token != 0 {
		st = leadership.Guard(s.kst, t.End, func(component string) {
			s.obs.Send(observe.Event{Kind: observe.FenceRejected, At: s.clock.Now(), Reason: component})
		})
	}
	var notifier store.Notifier
	if n, ok := s.st.(store.Notifier); ok && !s.hooks.noNotify {
		notifier = n
	}
	var loop *dispatch.Loop
	src := &execute.Source{Done: func(n int) { loop.Done(n) }, Valid: t.Valid, Fence: t.Fence}
	var exec dispatch.Executor = termExecutor{exec: r.exec, src: src}
	var router *route.Router
	if t.Fence.Token != 0 {
		router = route.New(ctx, route.Config{
			Namespace: s.cfg.Namespace, Local: s.cfg.Node, Advertised: s.cfg.Cluster.Advertise != "",
			Token: t.Fence.Token, Policy: route.Policy(s.cfg.Cluster.Routing),
			Exec: r.exec, Src: src, Client: s.client,
			LocalHandles: func(name string) bool { return s.handler(name) != nil },
			Fenced:       func(err error) { t.End(err) },
			Registry:     s.registry() != nil,
			Nodes:        s.liveNodes,
			BusyFor:      s.cfg.DispatchTimeout / 2,
			Observe:      s.obs, Now: s.clock.Now, Log: s.log,
		})
		exec = router
	}
	loop = dispatch.New(dispatch.Config{
		Store: st, Fence: t.Fence, Valid: t.Valid, Notifier: notifier, Clock: s.clock, Log: s.log, Observe: s.obs,
		Executor: exec,
		Tick:     s.cfg.Tick, Window: s.cfg.Window, RefillInterval: s.cfg.RefillInterval,
		Capacity:   s.cfg.Concurrency + store.MaxBatch,
		AfterClaim: s.hooks.afterClaim,
	})
	r.setLoop(loop)
	return &term{s: s, r: r, t: t, st: st, loop: loop, src: src, router: router}
}

// run runs the term's parts until ctx ends, and returns once they have stopped and the
// tasks they claimed but did not start are handed back. rows are the schedules as
// Start read them; nil: read them now.
func (tm *term) run(ctx context.Context, rows []store.Schedule) {
	s, r, t, st, loop := tm.s, tm.r, tm.t, tm.st, tm.loop
	reg := s.registry()
	if reg != nil && tm.router != nil {
		s.refreshNodes(ctx, reg, tm.router) // before the loop's first claims are routed
	}
	var wg sync.WaitGroup
	loop.Run(ctx, &wg)
	wg.Go(func() {
		recovery.Run(ctx, recovery.Config{
			Store: st, Fence: t.Fence, Clock: s.clock, Log: s.log, Observe: s.obs, Stats: r.stats,
			OrphanAfter: s.cfg.OrphanAfter, DispatchTimeout: s.cfg.DispatchTimeout, MaxDispatchRetries: s.cfg.MaxDispatchRetries,
			Backoff:   func(t *store.Task, n int) time.Duration { return execute.RetryDelay(t, n, s.execHandler) },
			Requeued:  loop.Add,
			KeysFreed: loop.Unblock,
		})
	})
	wg.Go(func() {
		if rows == nil {
			var err error
			if rows, err = s.kst.Schedules(ctx); err != nil && ctx.Err() == nil {
				s.log.LogAttrs(ctx, slog.LevelWarn, "ax: read schedules; firing re-reads them", slog.Any("err", err))
			}
		}
		periodic.Fire(ctx, periodic.Config{
			Store: st, Fence: t.Fence, Clock: s.clock, Log: s.log, Observe: s.obs,
			RefillInterval: s.cfg.RefillInterval, MaxCatchUp: s.cfg.MaxCatchUp,
			Registered: s.periodicList, Occurrence: s.occurrence, Fired: loop.Add, Reload: r.reload,
		}, rows)
	})
	if s.obs != nil {
		wg.Go(func() { s.obs.ReportCounts(ctx, s.kst, s.clock.Now, s.cfg.StatsInterval, s.log) })
	}
	if p, ok := s.st.(store.Pruner); ok && !s.cfg.Retention.Off {
		cfg := retention.Config{
			Store: p, Now: s.clock.Now, Log: s.log, Observe: s.obs, Timeout: s.cfg.StoreTimeout,
			Rules: s.cfg.Retention.rules(), Interval: s.cfg.Retention.Interval, Pause: s.cfg.Retention.Pause,
			Batch: store.MaxPrune, AuditAge: max(s.cfg.Retention.Audit, 0),
			Stats: s.st, StatsAge: max(s.cfg.Retention.Stats, 0),
		}
		if a, ok := s.st.(store.Auditor); ok {
			cfg.Audit = a
		}
		if h, ok := s.st.(store.SlotHistory); ok {
			cfg.Gaps, cfg.GapAge = h, s.cfg.Retention.gapAge()
		}
		if l := s.leadershipLog(); l != nil && t.Fence.Token != 0 { // a history is kept under an Elector only
			cfg.History, cfg.Namespace = l, s.cfg.Namespace
			cfg.HistoryAge, cfg.HistoryRows = retainLeadershipAge, retainLeadershipRows
		}
		wg.Go(func() { retention.Run(ctx, cfg) })
	}
	if reg != nil {
		wg.Go(func() { nodes.Expire(ctx, reg, s.cfg.HeartbeatInterval, s.log) })
		if tm.router != nil {
			wg.Go(func() { nodes.Follow(ctx, reg, s.cfg.HeartbeatInterval, tm.router.SetNodes, s.log) })
		}
	}
	if tm.router != nil {
		wg.Go(func() { tm.router.Probe(ctx, time.Second) })
	}
	if t.Remaining != nil && s.obs != nil {
		wg.Go(func() { s.reportLease(ctx, t) })
	}
	wg.Wait()
	if tm.router != nil {
		tm.router.Wait()
	}
	r.setLoop(nil)
	r.exec.Withdraw(tm.src)
}

// liveNodes reads the replicas registered and alive; none without a registry.
func (s *Scheduler) liveNodes(ctx context.Context) ([]store.NodeInfo, error) {
	reg := s.registry()
	if reg == nil {
		return nil, nil
	}
	return reg.Nodes(ctx, nodes.AliveFor(s.cfg.HeartbeatInterval))
}

// refreshNodes reads the live replicas into router once.
func (s *Scheduler) refreshNodes(ctx context.Context, reg store.NodeRegistry, router *route.Router) {
	ns, err := reg.Nodes(ctx, nodes.AliveFor(s.cfg.HeartbeatInterval))
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "ax: read the live nodes", slog.Any("err", err))
		return
	}
	router.SetNodes(ns)
}

// clockInterval is how often the store's clock offset is re-measured, so that drift
// between the hosts' clocks does not accumulate.
const clockInterval = time.Minute

// runParts starts the clock's re-measurement and the leader-only parts (a term): at
// once without an Elector, for each won lease with one, never when the scheduler may
// not lead. All end with ctx.
func (s *Scheduler) runParts(ctx context.Context, r *running, rows []store.Schedule) {
	switch {
	case s.cfg.Elector == nil && s.cfg.canLead():
		tm := s.newTerm(ctx, r, leadership.Term{})
		r.wg.Go(func() { tm.run(ctx, rows) })
	case s.cfg.canLead():
		r.wg.Go(func() {
			leadership.Run(ctx, leadership.Config{
				Elector: s.cfg.Elector, Store: s.kst, Namespace: s.cfg.Namespace, Candidate: s.cfg.Node, Log: s.log,
				Run: func(ctx context.Context, t leadership.Term) {
					s.newTerm(ctx, r, t).run(ctx, nil)
				},
				Changed: s.roleChanged,
				Ping: func(ctx context.Context) error {
					_, err := s.kst.Now(ctx)
					return err
				},
				StoreDown: s.cfg.StoreTimeout,
				Released:  s.announceRelease,
				History:   s.leadershipLog(),
				EndReason: historyReason,
			})
		})
	}
	if reg := s.registry(); reg != nil {
		started := s.clock.Now() // kept by every refresh (a zero StartedAt is "now" to the registry)
		r.wg.Go(func() {
			nodes.Keep(ctx, nodes.Config{Registry: reg, Info: func() store.NodeInfo { return s.nodeInfo(r, started) }, Interval: s.cfg.HeartbeatInterval, Log: s.log,
				Refreshed: s.learnEpoch})
		})
	}
	if !s.hooks.localClock {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			s.clock.Follow(ctx, s.kst, clockInterval, func(offset, rtt time.Duration, err error) {
				if err != nil {
					s.log.LogAttrs(ctx, slog.LevelWarn, "ax: measure the store's clock", slog.Any("err", err))
					return
				}
				s.clockMeasured(ctx, offset, rtt)
			})
		}()
	}
}

// releaseNoticeTimeout bounds the notices a leader sends when it releases its lease.
const releaseNoticeTimeout = time.Second

// announceRelease tells every other live replica with an executor endpoint that the
// lease under f was released, so that a standby campaigns at once instead of at its
// elector's next attempt (an SQL lease's fallback poll can be seconds away). Best
// effort: a replica not told campaigns on its own schedule.
func (s *Scheduler) announceRelease(ctx context.Context, f store.Fence) {
	ctx, cancel := context.WithTimeout(ctx, releaseNoticeTimeout)
	defer cancel()
	ns, err := s.liveNodes(ctx)
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelDebug, "ax: release notice: read the live nodes", slog.Any("err", err))
		return
	}
	var wg sync.WaitGroup
	for _, n := range ns {
		if n.Name == s.cfg.Node || n.Advertise == "" {
			continue
		}
		wg.Go(func() {
			err := s.client.Released(ctx, n.Advertise, remote.ReleasedNotice{Namespace: s.cfg.Namespace, Node: n.Name, Token: f.Token})
			if err != nil {
				s.log.LogAttrs(ctx, slog.LevelDebug, "ax: release notice", slog.String("to", n.Name), slog.Any("err", err))
			}
		})
	}
	wg.Wait()
}

// reportLease sends the lease's remaining time every second of the term, and zero at
// its end.
func (s *Scheduler) reportLease(ctx context.Context, t leadership.Term) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		s.obs.Send(observe.Event{Kind: observe.LeaseState, At: s.clock.Now(), Epoch: t.Fence.Token, Lease: max(t.Remaining(), 0)})
		select {
		case <-ctx.Done():
			s.obs.Send(observe.Event{Kind: observe.LeaseState, At: s.clock.Now(), Epoch: t.Fence.Token})
			return
		case <-tick.C:
		}
	}
}

// registry returns the store's node registry, each call bounded by StoreTimeout, or
// nil when the store keeps none.
func (s *Scheduler) registry() store.NodeRegistry {
	reg, ok := s.st.(store.NodeRegistry)
	if !ok {
		return nil
	}
	return storecall.Registry(reg, s.cfg.StoreTimeout)
}

// nodeInfo is this replica's row in the node registry.
func (s *Scheduler) nodeInfo(r *running, started time.Time) store.NodeInfo {
	s.mu.Lock()
	names := make([]string, 0, len(s.handlers))
	for name := range s.handlers {
		names = append(names, name)
	}
	s.mu.Unlock()
	slices.Sort(names)
	running, _ := r.exec.Load()
	return store.NodeInfo{Name: s.cfg.Node, Advertise: s.cfg.Cluster.Advertise, Handlers: names, Capacity: s.cfg.Concurrency, InFlight: running,
		StartedAt: started, ClockOffset: s.clock.Offset()}
}

// learnEpoch raises the executor endpoint's highest token to the epoch the store
// recorded for the namespace, so that it refuses an older leader within a heartbeat of
// a newer one's election, whether or not the newer one has dispatched here yet.
func (s *Scheduler) learnEpoch(ctx context.Context) {
	if epoch, err := (remoteExecutor{s}).Epoch(ctx); err == nil {
		s.server.Raise(epoch)
	}
}

// roleChanged reports a change of this scheduler's role under its Elector.
func (s *Scheduler) roleChanged(leader bool, f store.Fence, cause error) {
	if leader {
		s.server.Raise(f.Token)
	}
	e := observe.Event{Kind: observe.Leadership, At: s.clock.Now(), Leader: leader, Epoch: f.Token}
	if !leader {
		e.Reason = endReason(cause)
	}
	s.obs.Send(e)
}

// endReason names why a term ended, for EventLeadership.
func endReason(cause error) string {
	switch {
	case errors.Is(cause, store.ErrFenced), errors.Is(cause, remote.ErrFenced):
		return "fenced"
	case errors.Is(cause, leadership.ErrStopping):
		return "stopping"
	case errors.Is(cause, leadership.ErrStoreDown):
		return "store_down"
	case errors.Is(cause, elect.ErrResigned):
		return "resigned"
	default:
		return "lost"
	}
}

// historyReason words why a term ended for its "ended" change in the leadership
// history: endReason's word, then, when it says more, the cause.
func historyReason(cause error) string {
	why := endReason(cause)
	switch {
	case cause == nil:
		return why
	case why == "stopping" || why == "resigned":
		return why
	}
	return strings.ReplaceAll(why, "_", " ") + ": " + strings.TrimPrefix(cause.Error(), "ax: ")
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

// Get returns the task with this id, or ErrNotFound. With WithTx it reads in the
// caller's transaction, which sees its own uncommitted changes.
func (s *Scheduler) Get(ctx context.Context, id int64, opts ...ActionOption) (*Task, error) {
	o := collect(opts)
	if id <= 0 {
		o.errs = append(o.errs, fmt.Errorf("id is not positive: %w", ErrInvalid))
	}
	if err := errors.Join(o.errs...); err != nil {
		return nil, errorf("ax: get task %d: %w", id, err)
	}
	t, err := inTxOr(s, o, func(txs store.TxStore, tx any) (*store.Task, error) { return txs.GetTx(ctx, tx, id) },
		func() (*store.Task, error) { return s.st.Get(ctx, id) })
	if err != nil {
		return nil, errorf("ax: get task %d: %w", id, err)
	}
	return taskOf(t), nil
}

// Lookup returns the newest task with this name and key — the one holding the key,
// if any (see Unique) — or ErrNotFound.
func (s *Scheduler) Lookup(ctx context.Context, name, key string) (*Task, error) {
	if err := errors.Join(validName(name), validKey(key)); err != nil {
		return nil, errorf("ax: lookup %q/%q: %w", name, key, err)
	}
	t, err := s.st.Lookup(ctx, name, key)
	if err != nil {
		return nil, errorf("ax: lookup %q/%q: %w", name, key, err)
	}
	return taskOf(t), nil
}

// Executions returns the task's executions, oldest first, or ErrNotFound.
func (s *Scheduler) Executions(ctx context.Context, id int64) ([]Execution, error) {
	if id <= 0 {
		return nil, errorf("ax: executions of task %d: id is not positive: %w", id, ErrInvalid)
	}
	es, err := s.st.Executions(ctx, id)
	if err != nil {
		return nil, errorf("ax: executions of task %d: %w", id, err)
	}
	return executionsOf(es), nil
}

// Cancel cancels the SCHEDULED task (name, key): it becomes CANCELLED and never runs
// (and, by default, frees its key: see Unique). A task that is dispatching, running
// or finished is ErrNotCancellable; a missing
// one ErrNotFound. With WithTx the cancellation is part of the caller's transaction:
// it holds if, and only if, the transaction commits.
func (s *Scheduler) Cancel(ctx context.Context, name, key string, opts ...ActionOption) error {
	if err := ctx.Err(); err != nil {
		return errorf("ax: cancel %q/%q: %w", name, key, err)
	}
	o := collect(opts)
	if err := errors.Join(append(o.errs, validName(name), validKey(key))...); err != nil {
		return errorf("ax: cancel %q/%q: %w", name, key, err)
	}
	op := fmt.Sprintf("cancel %q/%q", name, key)
	t, err := inTxOr(s, o, func(txs store.TxStore, tx any) (*store.Task, error) { return txs.CancelTx(ctx, tx, name, key) },
		func() (*store.Task, error) { return s.st.Cancel(ctx, name, key) })
	if err != nil {
		return s.refused(op, t, err, ErrNotCancellable)
	}
	o.onCommit(ctx, func() { // rolled back, the task would still be due: leave it in the wheel
		if r := s.current(); r != nil {
			r.remove(t.ID)
		}
	})
	return nil
}

// Trigger runs a SCHEDULED or FAILED task now, bypassing its due time (manual
// compensation): it is claimed with a new execution id, TriggeredAt is recorded, and
// this process executes it. From FAILED it gets one more attempt. A task that is
// dispatching or running, or Superseded, is ErrNotTriggerable.
//
// A scheduler that would not run the task itself — not started, or without its
// handler (an operations node, ax serve) — hands it over instead, on a store that
// writes in transactions (store.TxStore; every SQL store): the task becomes SCHEDULED
// and due now, TriggeredAt recorded (from FAILED with one more attempt), and the
// scheduler that runs its handler claims it at once if it is this one's leader, else
// within its refill interval. On the memory store a scheduler that is not started is
// ErrNotRunning.
//
// With WithTx the trigger is part of the caller's transaction: the task becomes
// SCHEDULED and due now (TriggeredAt recorded, from FAILED with one more attempt) if,
// and only if, the transaction commits, and runs right after the commit on this
// scheduler if it is started, else on whichever claims it; its key's overlap rule
// applies at that claim, as for any due task. The scheduler need not be started.
//
// In a transaction of InTx's, on a started scheduler that has the task's handler,
// Trigger claims as without a transaction — the task is DISPATCHING under a new
// execution id inside the transaction, a held key refuses it at once — and this
// scheduler runs it right after the commit (if it is stopping by then, the claim is
// handed back, and the task runs under another execution when it is claimed again).
// Elsewhere in InTx it hands the task over as with a caller's transaction.
func (s *Scheduler) Trigger(ctx context.Context, id int64, opts ...ActionOption) error {
	if err := ctx.Err(); err != nil {
		return errorf("ax: trigger task %d: %w", id, err)
	}
	o := collect(opts)
	if id <= 0 {
		o.errs = append(o.errs, fmt.Errorf("id is not positive: %w", ErrInvalid))
	}
	if err := errors.Join(o.errs...); err != nil {
		return errorf("ax: trigger task %d: %w", id, err)
	}
	r := s.current()
	if o.hasTx && (joined(ctx, o.tx) == nil || !s.runsHandlerOf(ctx, r, id, o)) {
		_, err := s.triggerTx(ctx, id, o)
		return err
	}
	_, isTx := s.st.(store.TxStore)
	if !o.hasTx && isTx && !s.runsHandlerOf(ctx, r, id, o) {
		_, err := s.triggerTx(ctx, id, o) // for the scheduler that runs its handler: due now
		return err
	}
	if r == nil {
		return errorf("ax: trigger task %d: %w", id, lifecycleError("the scheduler is not started"))
	}
	_, err := s.claimTrigger(ctx, r, id, o)
	return err
}

// claimTrigger claims task id for this scheduler, r its running parts, and
// dispatches it: at once, or after the commit of an InTx transaction (o's).
func (s *Scheduler) claimTrigger(ctx context.Context, r *running, id int64, o *options) (*store.Task, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return nil, errorf("ax: trigger task %d: %w", id, err)
	}
	execID := u.String()
	t, err := inTxOr(s, o, func(txs store.TxStore, tx any) (*store.Task, error) { return txs.ClaimTriggerTx(ctx, tx, id, execID) },
		func() (*store.Task, error) { return s.st.Trigger(ctx, id, execID) })
	if err != nil {
		if t != nil && errors.Is(err, ErrNotTriggerable) {
			return nil, &TaskStateError{Op: "trigger", Task: taskOf(t), Err: err} // it names the task
		}
		return nil, errorf("ax: trigger task %d: %w", id, err)
	}
	var dispatched bool
	o.onCommit(ctx, func() {
		r.remove(id)
		s.obs.Claimed(s.clock.Now(), []store.Task{*t})
		s.log.LogAttrs(ctx, slog.LevelInfo, "ax: task triggered", observe.TaskAttrs(t)...)
		dispatched = r.exec.Dispatch(nil, []store.Task{*t})
		if !dispatched && o.hasTx {
			s.log.LogAttrs(ctx, slog.LevelWarn, "ax: a task triggered in a transaction was not dispatched: the scheduler is stopping; it was handed back and runs when a scheduler claims it",
				observe.TaskAttrs(t)...)
		}
	})
	if !o.hasTx && !dispatched {
		return nil, errorf("ax: trigger task %d: %w", id, lifecycleError("the scheduler is stopping; the task was handed back and runs when a scheduler claims it"))
	}
	return t, nil
}

// runsHandlerOf reports whether this scheduler, r its running parts (nil: not
// started), would run task id itself: it is started and has the task's handler. The
// task is read in o's transaction, if any. When it cannot be read, it answers true,
// and the claim says what is wrong.
func (s *Scheduler) runsHandlerOf(ctx context.Context, r *running, id int64, o *options) bool {
	if r == nil {
		return false
	}
	t, err := inTxOr(s, o, func(txs store.TxStore, tx any) (*store.Task, error) { return txs.GetTx(ctx, tx, id) },
		func() (*store.Task, error) { return s.st.Get(ctx, id) })
	return err != nil || s.handler(t.Name) != nil
}

// triggerTx is Trigger inside o's transaction, or one of the store's own when o has
// none, handing the task to whichever scheduler claims it.
func (s *Scheduler) triggerTx(ctx context.Context, id int64, o *options) (*store.Task, error) {
	txs, err := s.txStore()
	if err != nil {
		return nil, errorf("ax: trigger task %d: %w", id, err)
	}
	var tx any // nil: a transaction of the store's own
	if o.hasTx {
		tx = o.tx
	}
	t, err := txs.TriggerTx(ctx, tx, id)
	if err != nil {
		if t != nil && errors.Is(err, ErrNotTriggerable) {
			return nil, &TaskStateError{Op: "trigger", Task: taskOf(t), Err: err}
		}
		return nil, errorf("ax: trigger task %d: %w", id, err)
	}
	o.unlessRolledBack(ctx, func() {
		s.log.LogAttrs(ctx, slog.LevelInfo, "ax: task triggered in a transaction", observe.TaskAttrs(t)...)
		if r := s.current(); r != nil { // claimed once the commit makes it visible
			r.watch(t.ID, t.DueAt)
			r.add(store.Due{ID: t.ID, DueAt: t.DueAt})
		}
	})
	return t, nil
}
