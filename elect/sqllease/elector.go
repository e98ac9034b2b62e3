package sqllease

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/axsched/ax/elect"
	"github.com/axsched/ax/store"
)

// Elector is an elect.Elector on a store.Leaser. Create it with New; it is safe for
// concurrent use and starts no goroutine of its own (each held Lease runs one renewer until
// it ends).
type Elector struct {
	leaser     store.Leaser
	namespace  string
	ttl        time.Duration
	renewEvery time.Duration
	retryEvery time.Duration
	margin     time.Duration
	poll       time.Duration
	log        *slog.Logger

	mu       sync.Mutex
	released chan struct{} // closed, and replaced, when a lease of this Elector is released
}

var _ elect.Elector = (*Elector)(nil)

// minWait is the shortest pause between two acquire attempts.
const minWait = 2 * time.Millisecond

// New returns an Elector of the election named by WithNamespace on st. It returns an error
// wrapping store.ErrInvalid if st does not implement store.Leaser or an option is invalid
// (a TTL below MinTTL, an empty namespace).
func New(st store.Store, opts ...Option) (*Elector, error) {
	l, ok := st.(store.Leaser)
	if !ok {
		return nil, fmt.Errorf("ax: sql lease: %T does not implement store.Leaser: %w", st, store.ErrInvalid)
	}
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
	return &Elector{
		leaser:     l,
		namespace:  c.namespace,
		ttl:        c.ttl,
		renewEvery: c.ttl / 3,
		retryEvery: max(c.ttl/20, 5*time.Millisecond),
		margin:     max(c.ttl/10, 5*time.Millisecond),
		poll:       min(MaxPollInterval, c.ttl/2),
		log:        c.logger.With("namespace", c.namespace),
		released:   make(chan struct{}),
	}, nil
}

// releases returns the channel closed at this Elector's next release.
func (e *Elector) releases() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.released
}

// wake tells this Elector's waiting campaigns that the lease was released.
func (e *Elector) wake() {
	e.mu.Lock()
	defer e.mu.Unlock()
	close(e.released)
	e.released = make(chan struct{})
}

// holderValue makes each campaign's holder unique, so that two electors using the same
// candidate name cannot renew or release each other's lease.
func holderValue(candidate string) string { return rand.Text()[:16] + " " + candidate }

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
// fallback poll (min(5s, TTL/2)), and wakes early when a lease of this Elector is released.
func (e *Elector) Campaign(ctx context.Context, candidate string) (elect.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	holder := holderValue(candidate)
	timer := time.NewTimer(0)
	<-timer.C
	defer timer.Stop()
	for {
		released := e.releases() // before the attempt, so that a release after it is heard
		start := time.Now()
		info, ok, err := e.leaser.AcquireLease(ctx, e.namespace, holder, e.ttl)
		wait := e.poll
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			e.log.WarnContext(ctx, "ax: sql lease: acquire failed", "candidate", candidate, "err", err)
		case ok:
			return e.newLease(ctx, candidate, info.Epoch, holder, start), nil
		case info.Holder == holder && info.Remaining > 0:
			// An earlier attempt took the lease but its answer was lost: confirm it.
			start = time.Now()
			ok, err := e.leaser.RenewLease(ctx, e.namespace, holder, info.Epoch, e.ttl)
			if err == nil && ok {
				return e.newLease(ctx, candidate, info.Epoch, holder, start), nil
			}
			wait = minWait
		default:
			wait = min(wait, max(info.Remaining, 0))
		}
		timer.Reset(max(wait, minWait))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
		case <-released:
			if !timer.Stop() {
				<-timer.C
			}
		}
	}
}

// lease is one held leadership and its renewer.
type lease struct {
	e         *Elector
	candidate string
	token     int64
	holder    string
	ctx       context.Context
	cancel    context.CancelCauseFunc
	stop      chan struct{} // closed by Resign
	done      chan struct{} // closed when the renewer returns

	mu       sync.Mutex
	deadline time.Time   // monotonic; lost when not extended by then
	expiry   *time.Timer // fires at deadline
	ended    bool        // lost or resigned
	lost     bool

	resignOnce sync.Mutex
	resigned   bool
	resignErr  error
}

func (e *Elector) newLease(ctx context.Context, candidate string, tok int64, holder string, start time.Time) *lease {
	lctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	l := &lease{
		e: e, candidate: candidate, token: tok, holder: holder,
		ctx: lctx, cancel: cancel,
		stop: make(chan struct{}), done: make(chan struct{}),
		deadline: start.Add(e.ttl - e.margin),
	}
	l.mu.Lock()
	l.expiry = time.AfterFunc(time.Until(l.deadline), l.expire)
	l.mu.Unlock()
	go l.renew(start)
	return l
}

// Token returns the lease's epoch.
func (l *lease) Token() int64 { return l.token }

// Context returns the context cancelled when the lease ends.
func (l *lease) Context() context.Context { return l.ctx }

// expire runs at the deadline: unless a renewal moved it, the lease is lost.
func (l *lease) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return
	}
	if d := time.Until(l.deadline); d > 0 {
		l.expiry.Reset(d)
		return
	}
	l.endLocked(true)
	l.e.log.Warn("ax: sql lease: leadership lost: renewal not confirmed in time", "candidate", l.candidate, "token", l.token)
}

// endLocked ends the lease with cause ErrLost or ErrResigned; l.mu is held.
func (l *lease) endLocked(lost bool) {
	if l.ended {
		return
	}
	l.ended, l.lost = true, lost
	l.expiry.Stop()
	if lost {
		l.cancel(elect.ErrLost)
	} else {
		l.cancel(elect.ErrResigned)
	}
}

// extend moves the deadline after a renewal whose request started at start.
func (l *lease) extend(start time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return
	}
	if d := start.Add(l.e.ttl - l.e.margin); d.After(l.deadline) {
		l.deadline = d
	}
}

func (l *lease) currentDeadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// renew renews the lease every TTL/3 with a conditional update, retrying failed requests
// every TTL/20 until the deadline.
func (l *lease) renew(last time.Time) {
	defer close(l.done)
	e := l.e
	timer := time.NewTimer(time.Until(last.Add(e.renewEvery)))
	defer timer.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-l.stop:
			return
		case <-timer.C:
		}
		start := time.Now()
		rctx, cancel := context.WithDeadline(l.ctx, l.currentDeadline())
		ok, err := e.leaser.RenewLease(rctx, e.namespace, l.holder, l.token, e.ttl)
		cancel()
		switch {
		case l.ctx.Err() != nil:
			return
		case err == nil && ok:
			l.extend(start)
			timer.Reset(time.Until(start.Add(e.renewEvery)))
		case err == nil:
			l.mu.Lock()
			l.endLocked(true)
			l.mu.Unlock()
			e.log.Warn("ax: sql lease: leadership lost: lease no longer held", "candidate", l.candidate, "token", l.token)
			return
		default:
			e.log.Warn("ax: sql lease: renew failed", "candidate", l.candidate, "token", l.token, "err", err)
			timer.Reset(e.retryEvery)
		}
	}
}

// Resign ends the lease and releases it with a conditional update on holder and epoch.
func (l *lease) Resign(ctx context.Context) error {
	l.resignOnce.Lock()
	defer l.resignOnce.Unlock()
	if l.resigned {
		return l.resignErr
	}
	l.mu.Lock()
	wasLost := l.ended && l.lost
	l.endLocked(false) // stop acting as leader before letting go
	l.mu.Unlock()
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	select {
	case <-l.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if wasLost {
		l.resigned, l.resignErr = true, elect.ErrLost
		return elect.ErrLost
	}
	ok, err := l.e.leaser.ReleaseLease(ctx, l.e.namespace, l.holder, l.token)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("ax: sql lease: release: %w", err)
	}
	l.resigned = true
	if !ok {
		l.resignErr = elect.ErrLost
	} else {
		l.e.wake()
	}
	return l.resignErr
}
