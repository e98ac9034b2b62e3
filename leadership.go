package ax

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/axsched/ax/elect"
	"github.com/axsched/ax/internal/leadership"
	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/remote"
	"github.com/axsched/ax/store"
)

// LeadershipChange is one change of the leader of a namespace, as its store records
// it (LeadershipHistory): a term that began (Kind LeadershipAcquired) or ended (Kind
// LeadershipEnded).
type LeadershipChange struct {
	Epoch int64  // the term's fencing epoch: strictly increasing from term to term
	Node  string // the leader's Config.Node
	// Holder is the leader as its Elector named the lease: unique to one campaign, so
	// that two terms of one Node (restarted between them) can be told apart.
	Holder string
	Kind   string
	At     time.Time // when the store recorded it, by the store's clock
	// Reason says why. For LeadershipAcquired: how the term before ended, as far as
	// the history knows — its leader's recorded end, or none (its lease was not released: the
	// leader crashed, froze or lost its store). For LeadershipEnded: the cause its
	// leader saw — stopping, resigned, lost (the lease), fenced (by a newer leader),
	// store down — with the error, if any.
	Reason string
}

// The kinds of a LeadershipChange.
const (
	LeadershipAcquired = "acquired" // a term began: its leader recorded its epoch in the store
	LeadershipEnded    = "ended"    // a term ended, as its leader recorded
)

// MaxLeadershipHistory is the most changes one LeadershipHistory call returns.
const MaxLeadershipHistory = 100

// How much of the leadership history retention keeps (unless Retention.Off): the
// newest changes of the namespace, and none older than the age.
const (
	retainLeadershipRows = 1000
	retainLeadershipAge  = 90 * 24 * time.Hour
)

// LeadershipHistory returns the newest n changes of the leader of the scheduler's
// namespace, newest first: by epoch, a term's end before its start. n is 1 to
// MaxLeadershipHistory.
//
// The history is in the store, written by the leaders of every replica under an
// Elector. So any scheduler reads it: started or not, leader or not, and an operations
// node that never leads too. It survives restarts. A term's start is recorded with its
// fence: a leader never writes under an epoch the history lacks. A term's end is
// recorded by its leader, best effort, before it resigns. Unless Retention is Off, the
// leader keeps the newest 1,000 changes and none older than 90 days.
//
// Without an Elector there are no terms, and no history. n out of range is ErrInvalid.
func (s *Scheduler) LeadershipHistory(ctx context.Context, n int) ([]LeadershipChange, error) {
	rows, err := s.st.LeadershipHistory(ctx, s.cfg.Namespace, n)
	if err != nil {
		return nil, errorf("ax: leadership history: %w", err)
	}
	out := make([]LeadershipChange, len(rows))
	for i, c := range rows {
		out[i] = LeadershipChange{Epoch: c.Epoch, Node: elect.Candidate(c.Holder), Holder: c.Holder, Kind: c.Kind, At: c.At, Reason: c.Reason}
	}
	return out, nil
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
