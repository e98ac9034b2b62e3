package ax

import (
	"context"
	"time"

	"github.com/axsched/ax/elect"
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
// Without an Elector there are no terms, and no history. A store that keeps none
// (store.LeadershipLog) is ErrUnsupported; n out of range is ErrInvalid.
func (s *Scheduler) LeadershipHistory(ctx context.Context, n int) ([]LeadershipChange, error) {
	l := s.leadershipLog()
	if l == nil {
		return nil, errorf("ax: leadership history: %T: %w", s.cfg.Store, ErrUnsupported)
	}
	rows, err := l.LeadershipHistory(ctx, s.cfg.Namespace, n)
	if err != nil {
		return nil, errorf("ax: leadership history: %w", err)
	}
	out := make([]LeadershipChange, len(rows))
	for i, c := range rows {
		out[i] = LeadershipChange{Epoch: c.Epoch, Node: elect.Candidate(c.Holder), Holder: c.Holder, Kind: c.Kind, At: c.At, Reason: c.Reason}
	}
	return out, nil
}

// leadershipLog returns the store's leadership history, or nil when it keeps none.
func (s *Scheduler) leadershipLog() store.LeadershipLog {
	l, _ := s.st.(store.LeadershipLog)
	return l
}
