package elect

import (
	"context"
	"errors"
	"strings"
	"time"
)

// Elector chooses one leader among the candidates of one election (one namespace of one
// backend). Its methods are safe for concurrent use.
type Elector interface {
	// Campaign blocks until candidate holds the lease, or until ctx ends (it then returns
	// ctx.Err()). ctx bounds the wait only: an acquire request that wins as ctx ends still
	// returns its Lease (rather than leave it held, unrenewed, in the backend), and the
	// returned Lease stays held, renewed in the background, until Resign, or until a
	// renewal cannot be confirmed in time — then Lease.Context is cancelled before the
	// lease can have expired in the backend. Values of ctx are carried into Lease.Context.
	// candidate names the holder in State.Holder; two campaigns with the same name are
	// still distinct holders.
	Campaign(ctx context.Context, candidate string) (Lease, error)

	// Leader reports the current holder, its token and the lease's remaining time. A zero
	// State.Holder means that nobody holds the lease.
	Leader(ctx context.Context) (State, error)
}

// Namespaced is implemented by electors whose election has a name (elect/redis,
// elect/sqllease: WithNamespace): the scheduler refuses one whose name differs from its
// Config.Namespace, since it fences the leader it elects in its own namespace.
type Namespaced interface {
	Namespace() string
}

// Waker is implemented by electors whose standbys can be told that the lease was
// released elsewhere (elect/sqllease: a database cannot tell them). Wake makes the
// campaigns waiting now try again at once; it grants nothing, the backend decides. The
// scheduler calls it on a leader's release notice (remote.ReleasedNotice). It must not
// block.
type Waker interface {
	Wake()
}

// Lease is leadership held by one campaign. Its methods are safe for concurrent use.
type Lease interface {
	// Token returns the fencing token: strictly greater than the token of every earlier
	// holder of the same election, within the limits the backend's package documents.
	Token() int64

	// Holder returns the value the backend records as this lease's holder: unique to this
	// campaign (an id, a space, the candidate name; see Candidate). The scheduler records
	// the new leader under it in the store's fence (store.Store.RaiseFence), which thereby
	// recognises a lease the store recorded itself (elect/sqllease).
	Holder() string

	// Remaining returns the time until this holder stops acting on the lease unless a
	// renewal succeeds first: the lease's deadline, counted on the monotonic clock from
	// the start of the last successful acquire or renew request (the backend's expiry
	// less a safety margin); zero or less once the lease has ended.
	Remaining() time.Duration

	// Context returns a context cancelled when leadership is lost (context.Cause is ErrLost)
	// or resigned (context.Cause is ErrResigned). Every leader-only goroutine should run
	// under it. Its Err also compares the time with the lease's deadline, on the monotonic
	// clock, at every call: a process resumed from a pause longer than the lease finds it
	// lost at its first check, before any timer has run. Check Err itself, not a context
	// derived from it, before an act that needs the lease.
	Context() context.Context

	// Resign cancels Context, stops the renewals and releases the lease with a
	// compare-and-delete, so that a waiting candidate may acquire it at once. It returns
	// ErrLost if the lease had already been lost (nothing is released then: a newer holder's
	// lease is never touched). Calls after the first return the first call's result, except
	// that a call whose ctx ended before the release could complete returns ctx.Err(), and
	// one whose release failed returns that error: either may be retried.
	Resign(ctx context.Context) error
}

// Candidate returns the candidate's name in a Lease's Holder value, as the electors of
// this module write it: the name after a campaign id and, before that, an optional
// decimal token, each followed by a space ("<id> <name>" for elect/sqllease,
// "<token> <id> <name>" for elect/redis). A value without a space is returned whole.
func Candidate(holder string) string {
	rest := holder
	if tok, after, ok := strings.Cut(rest, " "); ok && tok != "" && strings.Trim(tok, "0123456789") == "" {
		rest = after
	}
	if _, name, ok := strings.Cut(rest, " "); ok {
		return name
	}
	return rest
}

// State is a snapshot of an election.
type State struct {
	// Holder is the candidate name of the current holder; empty when nobody holds the lease.
	Holder string
	// Token is the holder's fencing token; zero when nobody holds the lease.
	Token int64
	// Remaining is the time until the lease expires unless renewed, as the backend counts it.
	Remaining time.Duration
}

var (
	// ErrLost is the cause of a Lease's Context when its renewal could not be confirmed in
	// time or the backend no longer records it as the holder; Resign returns it then too.
	ErrLost = errors.New("ax: leadership lost")

	// ErrResigned is the cause of a Lease's Context after Resign.
	ErrResigned = errors.New("ax: leadership resigned")
)
