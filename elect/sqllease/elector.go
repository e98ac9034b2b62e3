package sqllease

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/axsched/ax/elect"
	"github.com/axsched/ax/elect/internal/held"
	"github.com/axsched/ax/store"
)

// Elector is an elect.Elector on a store.Leaser. Create it with New; it is safe for
// concurrent use and starts no goroutine of its own (each held Lease runs one renewer until
// it ends).
type Elector struct {
	leaser    store.Leaser
	namespace string
	ttl       time.Duration
	timing    held.Timing
	poll      time.Duration
	log       *slog.Logger

	mu       sync.Mutex
	released chan struct{} // closed, and replaced, when a lease of this Elector is released
}

var _ elect.Elector = (*Elector)(nil)

// minWait is the shortest pause between two acquire attempts.
const minWait = 2 * time.Millisecond

// New returns an Elector of the election named by WithNamespace on l: a store (every
// store is a store.Leaser). An invalid option (a TTL below MinTTL, an empty namespace,
// a poll interval below 2ms) is an error wrapping store.ErrInvalid.
func New(l store.Leaser, opts ...Option) (*Elector, error) {
	c := config{namespace: DefaultNamespace, ttl: DefaultTTL}
	for _, o := range opts {
		o(&c)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if c.poll == 0 {
		c.poll = min(MaxPollInterval, c.ttl/2)
	}
	return &Elector{
		leaser:    l,
		namespace: c.namespace,
		ttl:       c.ttl,
		timing:    held.NewTiming(c.ttl),
		poll:      c.poll,
		log:       c.logger.With("namespace", c.namespace),
		released:  make(chan struct{}),
	}, nil
}

// Namespace returns the election's name (WithNamespace).
func (e *Elector) Namespace() string { return e.namespace }

// releases returns the channel closed at this Elector's next release.
func (e *Elector) releases() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.released
}

var _ elect.Waker = (*Elector)(nil)

// Wake makes this Elector's waiting campaigns try to acquire at once: another process
// announced that it released the lease (see elect.Waker). A Resign through this Elector
// wakes them by itself.
func (e *Elector) Wake() { e.wake() }

// wake tells this Elector's waiting campaigns that the lease was released.
func (e *Elector) wake() {
	e.mu.Lock()
	defer e.mu.Unlock()
	close(e.released)
	e.released = make(chan struct{})
}

// candidateOf returns the candidate part of a holder value.
func candidateOf(holder string) string {
	_, cand, _ := strings.Cut(holder, " ")
	return cand
}

// Leader reports the current holder; a lease that expired or was released is nobody's.
func (e *Elector) Leader(ctx context.Context) (elect.State, error) {
	info, err := e.leaser.Lease(ctx, e.namespace)
	if err != nil {
		return elect.State{}, fmt.Errorf("ax: sql lease: read leader: %w", err)
	}
	if info.Remaining <= 0 || info.Epoch == 0 {
		return elect.State{}, nil
	}
	return elect.State{Holder: candidateOf(info.Holder), Token: info.Epoch, Remaining: info.Remaining}, nil
}

// Campaign blocks until candidate holds the lease or ctx ends. Between attempts it waits
// until the current lease's remaining time (in the database's clock) runs out, at most the
// fallback poll (WithPollInterval), and wakes early when a lease of this Elector is released.
// An attempt that wins returns the lease even if ctx ended while it was under way.
func (e *Elector) Campaign(ctx context.Context, candidate string) (elect.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	holder := held.CampaignID() + " " + candidate
	for {
		released := e.releases() // before the attempt, so that a release after it is heard
		start := time.Now()
		actx, cancel := held.AcquireContext(ctx, e.ttl)
		info, ok, err := e.leaser.AcquireLease(actx, e.namespace, holder, e.ttl)
		cancel()
		if err == nil && ok {
			// Won, even if ctx ended during the call: ctx bounds the wait only, and a lease
			// left unrenewed in the store would stall the election for a TTL.
			return e.newLease(ctx, candidate, info.Epoch, holder, start), nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		wait := e.poll
		switch {
		case err != nil:
			e.log.WarnContext(ctx, "ax: sql lease: acquire failed", "candidate", candidate, "err", err)
		case info.Holder == holder && info.Remaining > 0:
			// An earlier attempt took the lease but its answer was lost: confirm it.
			start = time.Now()
			actx, cancel := held.AcquireContext(ctx, e.ttl)
			ok, err := e.leaser.RenewLease(actx, e.namespace, holder, info.Epoch, e.ttl)
			cancel()
			if err == nil && ok {
				return e.newLease(ctx, candidate, info.Epoch, holder, start), nil
			}
			wait = minWait
		default:
			wait = min(wait, max(info.Remaining, 0))
		}
		if _, err := held.Pause(ctx, max(wait, minWait), released); err != nil {
			return nil, err
		}
	}
}

// newLease keeps the lease won by a request that started at start.
func (e *Elector) newLease(ctx context.Context, candidate string, tok int64, holder string, start time.Time) elect.Lease {
	return held.Start(ctx, "sql lease", e.log, e.timing, held.Backend{
		Renew: func(ctx context.Context) (bool, error) {
			return e.leaser.RenewLease(ctx, e.namespace, holder, tok, e.ttl)
		},
		Release: func(ctx context.Context) (bool, error) {
			return e.leaser.ReleaseLease(ctx, e.namespace, holder, tok)
		},
		Released: e.wake,
	}, candidate, holder, tok, start)
}
