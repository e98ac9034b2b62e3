package ax

import (
	"context"
	"time"

	"github.com/axsched/ax/internal/nodes"
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
// elector's backend, the store's fence, the store's node registry (a store without
// one lists no nodes). It works whether or not the scheduler is started.
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
	if l, ok := s.st.(store.Leaser); ok {
		info, err := l.Lease(ctx, s.cfg.Namespace)
		if err != nil {
			return ClusterState{}, errorf("ax: cluster state: %w", err)
		}
		cs.Epoch = max(cs.Epoch, info.Epoch)
	}
	if reg, ok := s.st.(store.NodeRegistry); ok {
		ns, err := reg.Nodes(ctx, nodes.AliveFor(s.cfg.HeartbeatInterval))
		if err != nil {
			return ClusterState{}, errorf("ax: cluster state: %w", err)
		}
		for _, n := range ns {
			cs.Nodes = append(cs.Nodes, NodeState{
				Node: n.Name, Advertise: n.Advertise, Handlers: n.Handlers, Capacity: n.Capacity,
				InFlight: n.InFlight, StartedAt: n.StartedAt, HeartbeatAt: n.HeartbeatAt, ClockOffset: n.ClockOffset,
			})
		}
	}
	return cs, nil
}

// leading reports whether a term of this scheduler's is under way.
func (s *Scheduler) leading() bool {
	r := s.current()
	return r != nil && r.currentLoop() != nil
}
