package ax

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/axsched/ax/elect"
	"github.com/axsched/ax/internal/execute"
	"github.com/axsched/ax/internal/nodes"
	"github.com/axsched/ax/internal/route"
	"github.com/axsched/ax/remote"
	"github.com/axsched/ax/store"
)

// ClusterState is a snapshot of the replicas of one namespace, as Scheduler.Cluster
// reads it. The namespace's past leaders are read apart, with LeadershipHistory.
type ClusterState struct {
	Namespace string
	// Leader is the Config.Node of the current leader; empty when nobody holds the
	// lease, and always without an Elector (every scheduler schedules).
	Leader string
	// IsLeader reports whether this scheduler leads now.
	IsLeader bool
	// Epoch is the fencing epoch the store recorded for the namespace: the token of the
	// latest leader, which every claim must carry. Zero before the first leader.
	Epoch int64
	// LeaseRemaining is the time until the leader's lease expires unless renewed, as the
	// elector's backend counts it.
	LeaseRemaining time.Duration
	// Nodes are the live replicas, by name: those whose registration was refreshed
	// within three HeartbeatIntervals.
	Nodes []NodeState
}

// NodeState is one replica in the executor registry.
type NodeState struct {
	Node        string   // its Config.Node
	Advertise   string   // the URL of its executor endpoint; empty: in-process only
	Handlers    []string // the task names it has handlers for, sorted
	Capacity    int      // its Concurrency
	InFlight    int      // executions running as of its last heartbeat
	StartedAt   time.Time
	HeartbeatAt time.Time // its last refresh, by the store's clock
	// ClockOffset is the store's clock minus the replica's host clock, as the replica
	// measured it last and wrote it with its refresh: positive when the host's clock
	// is behind the store's. Microsecond precision; zero before its first measurement
	// and on a store that does not keep it (rows of an older schema).
	ClockOffset time.Duration
}

// Cluster reads the state of this scheduler's namespace: the leader, its epoch and
// lease, and the live replicas. Each part comes from where it is recorded: the
// elector's backend, the store's fence, the store's node registry. It works whether
// or not the scheduler is started.
func (s *Scheduler) Cluster(ctx context.Context) (ClusterState, error) {
	if err := ctx.Err(); err != nil {
		return ClusterState{}, errorf("ax: cluster state: %w", err)
	}
	cs := ClusterState{Namespace: s.cfg.Namespace}
	if s.cfg.Elector != nil {
		st, err := s.cfg.Elector.Leader(ctx)
		if err != nil {
			return ClusterState{}, errorf("ax: cluster state: %w", err)
		}
		cs.Leader, cs.LeaseRemaining, cs.Epoch = st.Holder, st.Remaining, st.Token
		cs.IsLeader = s.leading()
	}
	info, err := s.st.Lease(ctx, s.cfg.Namespace)
	if err != nil {
		return ClusterState{}, errorf("ax: cluster state: %w", err)
	}
	cs.Epoch = max(cs.Epoch, info.Epoch)
	ns, err := s.st.Nodes(ctx, nodes.AliveFor(s.cfg.HeartbeatInterval))
	if err != nil {
		return ClusterState{}, errorf("ax: cluster state: %w", err)
	}
	for _, n := range ns {
		cs.Nodes = append(cs.Nodes, NodeState{
			Node: n.Name, Advertise: n.Advertise, Handlers: n.Handlers, Capacity: n.Capacity,
			InFlight: n.InFlight, StartedAt: n.StartedAt, HeartbeatAt: n.HeartbeatAt, ClockOffset: n.ClockOffset,
		})
	}
	return cs, nil
}

// leading reports whether a term of this scheduler's is under way.
func (s *Scheduler) leading() bool {
	r := s.current()
	return r != nil && r.currentLoop() != nil
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
	info, err := x.s.kst.Lease(ctx, x.s.cfg.Namespace)
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

// refreshed follows each refresh of this node's registration (err: its failure).
// After a success it raises the executor endpoint's highest token to the epoch the
// store recorded for the namespace, so that it refuses an older leader within a
// heartbeat of a newer one's election, whether or not the newer one has dispatched
// here yet. After a failure it has the store's clock measured again, at once and then
// every second until it answers: it may answer from another server, a failover's new
// primary, with a clock of its own.
func (s *Scheduler) refreshed(ctx context.Context, err error) {
	if err != nil {
		select {
		case s.clockNudge <- struct{}{}:
		default: // one is pending already
		}
		return
	}
	if epoch, err := (remoteExecutor{s}).Epoch(ctx); err == nil {
		s.server.Raise(epoch)
	}
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

// liveNodes reads the replicas registered and alive.
func (s *Scheduler) liveNodes(ctx context.Context) ([]store.NodeInfo, error) {
	return s.kst.Nodes(ctx, nodes.AliveFor(s.cfg.HeartbeatInterval))
}

// refreshNodes reads the live replicas into router once.
func (s *Scheduler) refreshNodes(ctx context.Context, router *route.Router) {
	ns, err := s.liveNodes(ctx)
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "ax: read the live nodes", slog.Any("err", err))
		return
	}
	router.SetNodes(ns)
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
