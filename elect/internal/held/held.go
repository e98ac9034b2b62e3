// Package held keeps a won lease for an elector: it renews it in the background and
// ends it — cancelling its context — as soon as a renewal cannot be confirmed before
// the deadline, measured on the monotonic clock from the start of the last successful
// acquire or renew request, or when the backend says the lease is no longer held. The
// electors (elect/redis, elect/sqllease) differ only in how they renew and release,
// which they pass in.
package held

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/axsched/ax/elect"
)

// Timing is how a lease is kept: its TTL, the safety margin before it, and how often
// it is renewed, and retried after a failed renewal.
type Timing struct {
	TTL, Margin, RenewEvery, RetryEvery time.Duration
	// Now, when set, replaces time.Now where the context's Err compares the time with
	// the deadline (tests: a clock that jumps as a paused process's does).
	Now func() time.Time
}

// NewTiming is the timing both electors use: renew every TTL/3, retry every TTL/20
// (at least 5ms), stop acting max(TTL/10, 5ms) before the lease can have expired.
func NewTiming(ttl time.Duration) Timing {
	return Timing{
		TTL: ttl, Margin: max(ttl/10, 5*time.Millisecond),
		RenewEvery: ttl / 3, RetryEvery: max(ttl/20, 5*time.Millisecond),
	}
}

// Backend renews and releases one lease.
type Backend struct {
	// Renew extends the lease; held is false when it is no longer this holder's.
	Renew func(ctx context.Context) (held bool, err error)
	// Release gives the lease up; released is false when it was no longer held.
	Release func(ctx context.Context) (released bool, err error)
	// Released, when set, is called after a successful release (to wake standbys).
	Released func()
}

// Lease is a held lease; it implements elect.Lease.
type Lease struct {
	name      string // for messages: "redis elector", "sql lease"
	log       *slog.Logger
	timing    Timing
	backend   Backend
	candidate string
	holder    string // the backend's holder value
	token     int64
	ctx       context.Context
	cancel    context.CancelCauseFunc
	stop      chan struct{} // closed by Resign
	done      chan struct{} // closed when the renewer returns

	mu       sync.Mutex
	deadline time.Time   // monotonic; lost when not extended by then
	expiry   *time.Timer // fires at deadline
	ended    bool        // lost or resigned
	lost     bool

	resignMu  sync.Mutex
	resigned  bool
	resignErr error
}

// Start keeps a lease won by a request that started at start. The lease's context
// carries parent's values, not its cancellation.
func Start(parent context.Context, name string, log *slog.Logger, t Timing, b Backend, candidate, holder string, token int64, start time.Time) *Lease {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	if t.Now == nil {
		t.Now = time.Now
	}
	l := &Lease{
		name: name, log: log, timing: t, backend: b, candidate: candidate, holder: holder, token: token,
		cancel: cancel, stop: make(chan struct{}), done: make(chan struct{}),
		deadline: start.Add(t.TTL - t.Margin),
	}
	l.ctx = leaseContext{Context: ctx, l: l}
	l.mu.Lock()
	l.expiry = time.AfterFunc(time.Until(l.deadline), l.expire)
	l.mu.Unlock()
	go l.renew(start)
	return l
}

// Token returns the lease's fencing token.
func (l *Lease) Token() int64 { return l.token }

// Holder returns the value the backend records as the lease's holder.
func (l *Lease) Holder() string { return l.holder }

// Remaining returns the time until the lease's deadline; zero once it has ended.
func (l *Lease) Remaining() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return 0
	}
	return l.deadline.Sub(l.timing.Now())
}

// leaseContext is a lease's context. Its Err compares the time with the deadline on the
// monotonic clock at every call, and ends the lease when it has passed: a process that
// resumes from a pause (SIGSTOP, a long GC) finds its lease lost at its first check,
// before the timer that would end it has had a chance to run.
type leaseContext struct {
	context.Context
	l *Lease
}

func (c leaseContext) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !c.l.timing.Now().Before(c.l.currentDeadline()) {
		c.l.expireAt(c.l.timing.Now())
	}
	return c.Context.Err()
}

// Context returns the context cancelled when the lease ends (cause elect.ErrLost or
// elect.ErrResigned).
func (l *Lease) Context() context.Context { return l.ctx }

// expire runs at the deadline: unless a renewal moved it, the lease is lost.
func (l *Lease) expire() { l.expireAt(time.Now()) }

// expireAt ends the lease unless its deadline is after now.
func (l *Lease) expireAt(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return
	}
	if d := l.deadline.Sub(now); d > 0 {
		l.expiry.Reset(d)
		return
	}
	l.endLocked(true)
	l.log.Warn("ax: "+l.name+": leadership lost: renewal not confirmed in time", "candidate", l.candidate, "token", l.token)
}

// endLocked ends the lease with cause ErrLost or ErrResigned; l.mu is held.
func (l *Lease) endLocked(lost bool) {
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
func (l *Lease) extend(start time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return
	}
	if d := start.Add(l.timing.TTL - l.timing.Margin); d.After(l.deadline) {
		l.deadline = d
	}
}

func (l *Lease) currentDeadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// renew renews the lease every RenewEvery, retrying failed requests every RetryEvery
// until the deadline.
func (l *Lease) renew(last time.Time) {
	defer close(l.done)
	timer := time.NewTimer(time.Until(last.Add(l.timing.RenewEvery)))
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
		ok, err := l.backend.Renew(rctx)
		cancel()
		switch {
		case l.ctx.Err() != nil:
			return
		case err == nil && ok:
			l.extend(start)
			timer.Reset(time.Until(start.Add(l.timing.RenewEvery)))
		case err == nil:
			l.mu.Lock()
			l.endLocked(true)
			l.mu.Unlock()
			l.log.Warn("ax: "+l.name+": leadership lost: lease no longer held", "candidate", l.candidate, "token", l.token)
			return
		default:
			l.log.Warn("ax: "+l.name+": renew failed", "candidate", l.candidate, "token", l.token, "err", err)
			timer.Reset(l.timing.RetryEvery)
		}
	}
}

// Resign ends the lease, then releases it. It is idempotent: later calls return the
// first one's result — except after ctx.Err() or a failed release, when a call may be
// repeated and releases again.
func (l *Lease) Resign(ctx context.Context) error {
	l.resignMu.Lock()
	defer l.resignMu.Unlock()
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
	ok, err := l.backend.Release(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("ax: %s: release: %w", l.name, err)
	}
	l.resigned = true
	if !ok {
		l.resignErr = elect.ErrLost
	} else if l.backend.Released != nil {
		l.backend.Released()
	}
	return l.resignErr
}

// CampaignID returns a random id, 16 characters, that makes one campaign's lease value
// unique, so that two electors using the same candidate name cannot renew or release
// each other's lease.
func CampaignID() string { return rand.Text()[:16] }

// AcquireContext is the context of one acquire request of a campaign under ctx: not
// cancelled when ctx is (ctx bounds the campaign's wait only — a request cancelled in
// flight may still commit, and a lease won but not answered is held, unrenewed, for a
// TTL), but bounded by ttl: a request that takes that long is given up, and what it
// may still have won expires unrenewed within a TTL of its commit. Its values are
// ctx's.
func AcquireContext(ctx context.Context, ttl time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), ttl)
}

// Pause waits between two acquire attempts of a campaign: until d has passed, wake
// yields or is closed, or ctx ends, and then it returns ctx.Err(). wakeClosed reports
// that wake was closed (a nil wake never wakes).
func Pause[T any](ctx context.Context, d time.Duration, wake <-chan T) (wakeClosed bool, err error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-timer.C:
		return false, nil
	case _, ok := <-wake:
		return !ok, nil
	}
}
