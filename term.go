package ax

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/axsched/ax/internal/dispatch"
	"github.com/axsched/ax/internal/execute"
	"github.com/axsched/ax/internal/leadership"
	"github.com/axsched/ax/internal/nodes"
	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/internal/periodic"
	"github.com/axsched/ax/internal/recovery"
	"github.com/axsched/ax/internal/retention"
	"github.com/axsched/ax/internal/route"
	"github.com/axsched/ax/store"
)

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
				EndReason: historyReason,
			})
		})
	}
	started := s.clock.Now() // kept by every refresh (a zero StartedAt is "now" to the registry)
	r.wg.Go(func() {
		nodes.Keep(ctx, nodes.Config{Registry: s.kst, Info: func() store.NodeInfo { return s.nodeInfo(r, started) }, Interval: s.cfg.HeartbeatInterval, Log: s.log,
			Refreshed: s.refreshed})
	})
	if !s.hooks.localClock {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			s.clock.Follow(ctx, s.kst, clockInterval, s.clockNudge, func(offset, rtt time.Duration, err error) {
				if err != nil {
					s.log.LogAttrs(ctx, slog.LevelWarn, "ax: measure the store's clock", slog.Any("err", err))
					return
				}
				s.clockMeasured(ctx, offset, rtt)
			})
		}()
	}
}

// term is one term's leader-only parts: the scheduling loop (with its wheel, filled
// afresh), recovery, schedule firing, and the task counts for the observer. Without an
// elector there is one term, as long as the scheduler runs, with the zero fence.
type term struct {
	s      *Scheduler
	r      *running
	t      leadership.Term
	st     leadership.Fenced // s.kst; under a lease, ending the term when a write is fenced
	loop   *dispatch.Loop
	src    *execute.Source
	router *route.Router // under a lease: the dispatch to this and the other replicas
}

// newTerm assembles a term's parts and makes its loop the current one, so that tasks
// submitted from now on reach its wheel; ctx ends with the term.
func (s *Scheduler) newTerm(ctx context.Context, r *running, t leadership.Term) *term {
	var st leadership.Fenced = s.kst
	if t.Fence.Token != 0 {
		st = leadership.Guard(s.kst, t.End, func(component string) {
			s.obs.Send(observe.Event{Kind: observe.FenceRejected, At: s.clock.Now(), Reason: component})
		})
	}
	var notifier store.Notifier
	if !s.hooks.noNotify {
		if n, ok := s.own.(store.Notifier); ok { // s.own's Listen tells this scheduler's inserts
			notifier = n
		} else if n, ok := s.st.(store.Notifier); ok {
			notifier = n
		}
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
	if tm.router != nil {
		s.refreshNodes(ctx, tm.router) // before the loop's first claims are routed
	}
	var wg sync.WaitGroup
	wg.Go(func() { loop.Run(ctx) })
	wg.Go(func() {
		recovery.Run(ctx, recovery.Config{
			Store: st, Fence: t.Fence, Clock: s.clock, Log: s.log, Observe: s.obs, Stats: r.stats,
			OrphanAfter: s.cfg.OrphanAfter, DispatchTimeout: s.cfg.DispatchTimeout, MaxDispatchRetries: s.cfg.MaxDispatchRetries,
			Backoff:  func(t *store.Task, n int) time.Duration { return execute.RetryDelay(t, n, s.execHandler) },
			Requeued: loop.Add,
			Freed:    loop.Unblock,
		})
	})
	wg.Go(func() {
		if rows == nil {
			var err error
			if rows, err = s.kst.Schedules(ctx); err != nil && ctx.Err() == nil {
				s.log.LogAttrs(ctx, slog.LevelWarn, "ax: read schedules; firing re-reads them", slog.Any("err", err))
			}
		}
		periodic.Run(ctx, periodic.Config{
			Store: st, Fence: t.Fence, Clock: s.clock, Log: s.log, Observe: s.obs,
			RefillInterval: s.cfg.RefillInterval, MaxCatchUp: s.cfg.MaxCatchUp,
			Registered: s.periodicList, Occurrence: s.occurrence, Fired: loop.Add, Reload: r.reload,
		}, rows)
	})
	if s.obs != nil {
		wg.Go(func() { s.obs.ReportCounts(ctx, s.kst, s.clock.Now, s.cfg.StatsInterval, loop.Waiting, s.log) })
	}
	if !s.cfg.Retention.Off {
		cfg := retention.Config{
			Store: s.st, Now: s.clock.Now, Log: s.log, Observe: s.obs, Timeout: s.cfg.StoreTimeout,
			Rules: s.cfg.Retention.rules(), Interval: s.cfg.Retention.Interval, Pause: s.cfg.Retention.Pause,
			Batch: store.MaxPrune, AuditAge: max(s.cfg.Retention.Audit, 0),
			StatsAge: max(s.cfg.Retention.Stats, 0), GapAge: s.cfg.Retention.gapAge(),
		}
		if t.Fence.Token != 0 { // a history is kept under an Elector only
			cfg.Namespace, cfg.HistoryAge, cfg.HistoryRows = s.cfg.Namespace, retainLeadershipAge, retainLeadershipRows
		}
		wg.Go(func() { retention.Run(ctx, cfg) })
	}
	wg.Go(func() { nodes.Expire(ctx, s.kst, s.cfg.HeartbeatInterval, s.log) })
	if tm.router != nil {
		wg.Go(func() { nodes.Follow(ctx, s.kst, s.cfg.HeartbeatInterval, tm.router.SetNodes, s.log) })
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
