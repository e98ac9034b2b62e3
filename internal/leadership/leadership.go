// Package leadership campaigns for a scheduler's elected role and runs its terms: it
// wins a lease from an elect.Elector, raises the store's fence to the lease's token
// (store.Store.RaiseFence), runs the leader-only parts under one context for the term,
// and ends the term — and every part with it — when the lease is lost, when the store
// refuses a write as fenced by a newer leader, or when the scheduler stops; then it
// records the end in the store's leadership history (the raise recorded the start),
// resigns, so that a standby takes over at once, and campaigns again.
//
// Run blocks until its context ends, the last term has ended and its lease was
// resigned.
package leadership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/elect"
	"github.com/axsched/ax/internal/clock"
	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/store"
)

// Term is one won lease, as the leader-only parts see it; Run's ctx ends with it.
type Term struct {
	// Fence is carried by every leader-only write of the term.
	Fence store.Fence
	// Valid is nil while the term lasts. It checks the lease's deadline on the
	// monotonic clock at each call (elect.Lease.Context), so ask it right before an
	// act that needs the lease: after a pause it fails before any timer has run.
	Valid func() error
	// End ends the term with a cause: a part was fenced by a newer leader.
	End func(cause error)
	// Remaining is the time left on the lease, as its holder counts it.
	Remaining func() time.Duration
}

// Store is what a term asks of the store: the fence it raises, and the end of the
// term it records.
type Store interface {
	RaiseFence(ctx context.Context, namespace, holder string, token int64) (store.Fence, error)
	EndLeadership(ctx context.Context, namespace, holder string, epoch int64, reason string) error
}

// Config is what Run needs.
type Config struct {
	Elector elect.Elector
	// Store raises the fence of each term won and records each term's end: its
	// "ended" change is appended (RaiseFence appended the "acquired" one) before the
	// lease is resigned, so that the next leader's "acquired" change can name it.
	// Best effort, bounded by endRecordTimeout: a leader that cannot reach its store
	// records no end. Each call bounded.
	Store     Store
	Namespace string
	Candidate string // this scheduler's node name
	Log       *slog.Logger
	// Run runs the leader-only parts of one term under ctx, which ends with the term,
	// and returns once they have stopped.
	Run func(ctx context.Context, t Term)
	// Changed, when set, is told of each change of role: a term began (leader, with its
	// fence) or ended (not leader, with the cause).
	Changed func(leader bool, f store.Fence, cause error)
	// Retry is the pause after a failed campaign or fence; defaults to one second.
	Retry time.Duration
	// Ping, when set, checks that the store answers: a candidate campaigns only once it
	// does, and a leader whose store has not answered for StoreDown ends its term
	// (ErrStoreDown) and resigns, so that a replica that can reach the store leads.
	Ping      func(ctx context.Context) error
	StoreDown time.Duration
	// Released, when set, is called once a term's lease was released (not lost), so
	// that the other replicas can be told to campaign at once; ctx bounds it.
	Released func(ctx context.Context, f store.Fence)
	// EndReason words a term's cause for its "ended" change; nil: the cause's text.
	EndReason func(cause error) string
}

// ErrStoreDown is the cause of a term ended because the leader's store stopped
// answering.
var ErrStoreDown = errors.New("the store has not answered")

// ErrStopping is the cause of a term ended because the scheduler is stopping.
var ErrStopping = errors.New("scheduler stopping")

// resignTimeout bounds the release of a lease at the end of a term.
const resignTimeout = 5 * time.Second

// endRecordTimeout bounds the append of a term's end to the leadership history, which
// delays the resignation: short, since a store that does not answer would hold off
// the next leader for as long.
const endRecordTimeout = time.Second

// Run campaigns and runs terms until ctx ends; it returns once the last term has ended
// and its lease was resigned.
func Run(ctx context.Context, cfg Config) {
	if cfg.Retry <= 0 {
		cfg.Retry = time.Second
	}
	for ctx.Err() == nil {
		if cfg.Ping != nil {
			if err := cfg.Ping(ctx); err != nil {
				if ctx.Err() == nil {
					cfg.Log.LogAttrs(ctx, slog.LevelWarn, "ax: not campaigning for leadership: the store does not answer", slog.Any("err", err))
					pause(ctx, cfg.Retry)
				}
				continue
			}
		}
		lease, err := cfg.Elector.Campaign(ctx, cfg.Candidate)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			cfg.Log.LogAttrs(ctx, slog.LevelWarn, "ax: campaign for leadership failed", slog.Any("err", err))
			pause(ctx, cfg.Retry)
			continue
		}
		term(ctx, cfg, lease)
	}
}

// term runs one term of a won lease and resigns it.
func term(ctx context.Context, cfg Config, lease elect.Lease) {
	var fence store.Fence // once recorded in the store
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resignTimeout)
		defer cancel()
		err := lease.Resign(rctx)
		switch {
		case err == nil && fence.Token != 0 && cfg.Released != nil:
			cfg.Released(rctx, fence)
		case err != nil && !errors.Is(err, elect.ErrLost):
			cfg.Log.LogAttrs(rctx, slog.LevelWarn, "ax: resign leadership", slog.Any("err", err))
		}
	}()
	if ctx.Err() != nil {
		return // won as the scheduler stopped: resigned at once, no term
	}
	fence, err := raise(ctx, cfg, lease)
	if err != nil {
		if ctx.Err() == nil {
			cfg.Log.LogAttrs(ctx, slog.LevelWarn, "ax: leadership won but not recorded in the store; resigning", slog.Any("err", err))
		}
		return
	}
	termCtx, end := context.WithCancelCause(lease.Context())
	defer end(nil)
	stop := context.AfterFunc(ctx, func() { end(ErrStopping) })
	defer stop()
	valid := func() error {
		if lease.Context().Err() != nil {
			return context.Cause(lease.Context())
		}
		if termCtx.Err() != nil {
			return context.Cause(termCtx)
		}
		return nil
	}
	cfg.Log.LogAttrs(ctx, slog.LevelInfo, "ax: leading", slog.String("namespace", cfg.Namespace), slog.Int64("epoch", fence.Token))
	if cfg.Changed != nil {
		cfg.Changed(true, fence, nil)
	}
	if cfg.Ping != nil && cfg.StoreDown > 0 {
		pinged := make(chan struct{})
		defer func() { <-pinged }()
		go func() { defer close(pinged); watchStore(termCtx, cfg, end) }()
	}
	cfg.Run(termCtx, Term{Fence: fence, Valid: valid, End: end, Remaining: lease.Remaining})
	cause := context.Cause(termCtx)
	if cause == nil || errors.Is(cause, context.Canceled) {
		cause = valid()
	}
	level := slog.LevelWarn
	if errors.Is(cause, ErrStopping) || errors.Is(cause, elect.ErrResigned) {
		level = slog.LevelInfo
	}
	cfg.Log.LogAttrs(ctx, level, "ax: leadership ended", slog.String("namespace", cfg.Namespace), slog.Int64("epoch", fence.Token), slog.Any("cause", cause))
	recordEnd(ctx, cfg, lease.Holder(), fence, cause)
	if cfg.Changed != nil {
		cfg.Changed(false, fence, cause)
	}
}

// recordEnd appends the end of holder's term under fence, with its cause, to the
// leadership history: best effort, bounded by endRecordTimeout, even when ctx has
// ended (the scheduler stopping is a cause worth recording).
func recordEnd(ctx context.Context, cfg Config, holder string, fence store.Fence, cause error) {
	reason := ""
	switch {
	case cfg.EndReason != nil:
		reason = cfg.EndReason(cause)
	case cause != nil:
		reason = cause.Error()
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endRecordTimeout)
	defer cancel()
	if err := cfg.Store.EndLeadership(rctx, fence.Namespace, holder, fence.Token, clip(reason)); err != nil {
		cfg.Log.LogAttrs(ctx, slog.LevelWarn, "ax: record the end of a term in the leadership history", slog.Int64("epoch", fence.Token), slog.Any("err", err))
	}
}

// clip cuts s to store.MaxLeadershipReason bytes, at a character boundary, and
// replaces what the store refuses in text (invalid UTF-8, NUL).
func clip(s string) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
	if len(s) <= store.MaxLeadershipReason {
		return s
	}
	cut := store.MaxLeadershipReason
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// watchStore pings the store every second of the term and ends it once no ping has
// succeeded for cfg.StoreDown.
func watchStore(ctx context.Context, cfg Config, end func(error)) {
	lastOK := time.Now()
	clock.Every(ctx, min(time.Second, cfg.StoreDown/3), func() {
		pctx, cancel := context.WithTimeout(ctx, cfg.StoreDown)
		begin := time.Now()
		err := cfg.Ping(pctx)
		cancel()
		switch {
		case err == nil:
			lastOK = begin
		case ctx.Err() != nil: // the term ended meanwhile
		case time.Since(lastOK) >= cfg.StoreDown:
			end(fmt.Errorf("%w for %v: %w", ErrStoreDown, time.Since(lastOK).Round(time.Millisecond), err)) // ends ctx, and so the loop
		}
	})
}

// raise records the lease in the store's fence, retrying while the lease lasts.
func raise(ctx context.Context, cfg Config, lease elect.Lease) (store.Fence, error) {
	for {
		if err := lease.Context().Err(); err != nil {
			return store.Fence{}, fmt.Errorf("lease ended before it was recorded: %w", context.Cause(lease.Context()))
		}
		f, err := cfg.Store.RaiseFence(lease.Context(), cfg.Namespace, lease.Holder(), lease.Token())
		if err == nil {
			return f, nil
		}
		if errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrClosed) || ctx.Err() != nil {
			return store.Fence{}, err
		}
		cfg.Log.LogAttrs(ctx, slog.LevelWarn, "ax: record leadership in the store", slog.Any("err", err))
		pause(lease.Context(), min(cfg.Retry, 100*time.Millisecond))
	}
}

// pause waits for d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Fenced is what a term writes under its fence: the kernel's path and the schedules.
type Fenced interface {
	store.Queue
	store.ScheduleKeeper
}

// Guard returns st with each fenced write's ErrFenced answer ending the term: the store
// has recorded a newer leader, so this one steps down at once rather than at its next
// renewal. rejected, when set, is told the operation refused. Every method is spelled
// out, so that a method added to either role fails to compile here rather than go
// unguarded.
func Guard(st Fenced, end func(cause error), rejected func(op string)) Fenced {
	return guarded{st: st, end: end, rejected: rejected}
}

type guarded struct {
	st       Fenced
	end      func(error)
	rejected func(op string)
}

func (g guarded) check(op string, err error) {
	if errors.Is(err, store.ErrFenced) {
		if g.rejected != nil {
			g.rejected(op)
		}
		g.end(err)
	}
}

// The fenced writes.

func (g guarded) Claim(ctx context.Context, f store.Fence, claims []store.Claim) (*store.ClaimResult, error) {
	res, err := g.st.Claim(ctx, f, claims)
	g.check(observe.FencedClaim, err)
	return res, err
}

func (g guarded) ClaimStart(ctx context.Context, f store.Fence, on store.StartOn, claims []store.Claim) (*store.ClaimResult, error) {
	res, err := g.st.ClaimStart(ctx, f, on, claims)
	g.check(observe.FencedClaim, err)
	return res, err
}

func (g guarded) Finish(ctx context.Context, f store.Fence, results []store.Finish) ([]bool, error) {
	res, err := g.st.Finish(ctx, f, results)
	g.check(observe.FencedRecovery, err)
	return res, err
}

func (g guarded) Requeue(ctx context.Context, f store.Fence, requeues []store.Requeue) ([]bool, error) {
	res, err := g.st.Requeue(ctx, f, requeues)
	g.check(observe.FencedRecovery, err)
	return res, err
}

func (g guarded) FireSchedule(ctx context.Context, p store.FireParams) (*store.FireResult, error) {
	res, err := g.st.FireSchedule(ctx, p)
	g.check(observe.FencedSchedule, err)
	return res, err
}

// The rest, which carry no fence or are the executor's (Start: a stale claim's start
// is the executor's to drop, not the term's to end), passed on.

func (g guarded) Refill(ctx context.Context, p store.RefillParams) (*store.RefillResult, error) {
	return g.st.Refill(ctx, p)
}

func (g guarded) Start(ctx context.Context, f store.Fence, starts []store.StartParams) ([]store.StartResult, error) {
	return g.st.Start(ctx, f, starts)
}

func (g guarded) Heartbeat(ctx context.Context, refs []store.ExecRef) ([]store.Beat, error) {
	return g.st.Heartbeat(ctx, refs)
}

func (g guarded) Stale(ctx context.Context, status store.Status, before time.Time, limit int) ([]store.Task, error) {
	return g.st.Stale(ctx, status, before, limit)
}

func (g guarded) RegisterSchedules(ctx context.Context, defs []store.ScheduleDef) ([]store.Schedule, error) {
	return g.st.RegisterSchedules(ctx, defs)
}

func (g guarded) Schedules(ctx context.Context) ([]store.Schedule, error) {
	return g.st.Schedules(ctx)
}

func (g guarded) PauseSchedule(ctx context.Context, name string) (*store.Schedule, error) {
	return g.st.PauseSchedule(ctx, name)
}

func (g guarded) DeleteSchedule(ctx context.Context, name string) (int, error) {
	return g.st.DeleteSchedule(ctx, name)
}

func (g guarded) ResumeSchedule(ctx context.Context, name string, next time.Time) (*store.Schedule, error) {
	return g.st.ResumeSchedule(ctx, name, next)
}
