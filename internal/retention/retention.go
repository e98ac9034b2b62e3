// Package retention deletes finished tasks once they are older than their outcome's
// limit, or beyond its number of rows, with their executions: the leader's bounded
// history (ax.Config.Retention). It works in small steps — at most Batch tasks per
// store call, a pause between calls — so that it never holds many locks or much of
// the write-ahead log at a time, and the store's claims and writes go on beside it:
// the rows it deletes are finished ones, which nothing else writes.
//
// Run blocks until its context ends; it starts no goroutine.
package retention

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/store"
)

// Rule is how long the finished tasks of one status are kept.
type Rule struct {
	Status store.Status
	Age    time.Duration // deleted once finished longer ago than this; 0: no age limit
	Rows   int           // when positive, at most this many are kept, the newest
}

// Config is what retention needs.
type Config struct {
	Store    store.Pruner
	Now      func() time.Time // the store-corrected clock
	Log      *slog.Logger
	Observe  *observe.Queue
	Rules    []Rule
	AuditAge time.Duration // audit records older than this are deleted; 0: none
	StatsAge time.Duration // statistics of minutes older than this are deleted; 0: none
	GapAge   time.Duration // gaps that ended longer ago than this are deleted; 0: none
	// Namespace's leadership history loses the changes older than HistoryAge (when
	// positive) and beyond the newest HistoryRows (when positive).
	Namespace   string
	HistoryAge  time.Duration
	HistoryRows int
	Interval    time.Duration // between rounds
	Pause       time.Duration // between two calls of a round
	Batch       int           // tasks per call, at most store.MaxPrune
	// Timeout bounds each store call, so that a store that stops answering holds the
	// round no longer than that; 0: only ctx bounds them.
	Timeout time.Duration
}

// Run runs a round at once and then every Interval until ctx ends.
func Run(ctx context.Context, cfg Config) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if _, err := Once(ctx, cfg); err != nil && ctx.Err() == nil {
			cfg.Log.LogAttrs(ctx, slog.LevelWarn, "ax: retention: prune failed; the next round tries again", slog.Any("err", err))
		}
		timer.Reset(cfg.Interval)
	}
}

// Once runs one round: for each rule, then for the gaps of schedules, the audit log,
// the statistics, the claim times per task key and the leadership history, calls until one deletes less than a
// batch, pausing between calls. It returns how many rows it deleted.
func Once(ctx context.Context, cfg Config) (int, error) {
	total := 0
	for _, r := range cfg.Rules {
		if r.Age <= 0 && r.Rows <= 0 {
			continue
		}
		p := store.PruneParams{Status: r.Status, KeepNewest: r.Rows, Limit: cfg.Batch}
		if r.Age > 0 {
			p.Before = cfg.Now().Add(-r.Age)
		}
		n, err := drain(ctx, cfg, strings.ToLower(string(r.Status)), func(ctx context.Context) (int, error) { return cfg.Store.Prune(ctx, p) })
		if total += n; err != nil {
			return total, err
		}
	}
	for _, o := range []struct {
		reason string
		age    time.Duration
		prune  func(ctx context.Context, before time.Time) (int, error)
	}{
		{observe.PrunedSlotGaps, cfg.GapAge, func(ctx context.Context, before time.Time) (int, error) {
			return cfg.Store.PruneSlotGaps(ctx, before, cfg.Batch)
		}},
		{observe.PrunedAudit, cfg.AuditAge, func(ctx context.Context, before time.Time) (int, error) {
			return cfg.Store.PruneAudit(ctx, before, cfg.Batch)
		}},
		{observe.PrunedStats, cfg.StatsAge, func(ctx context.Context, before time.Time) (int, error) {
			return cfg.Store.PruneStats(ctx, before, cfg.Batch)
		}},
	} {
		if o.age <= 0 {
			continue
		}
		before := cfg.Now().Add(-o.age)
		n, err := drain(ctx, cfg, o.reason, func(ctx context.Context) (int, error) { return o.prune(ctx, before) })
		if total += n; err != nil {
			return total, err
		}
	}
	// The claim times kept per task key for rates per key: whatever their age, none
	// that no window can reach is kept.
	n, err := drain(ctx, cfg, observe.PrunedKeyStarts, func(ctx context.Context) (int, error) {
		return cfg.Store.PruneKeyStarts(ctx, cfg.Batch)
	})
	if total += n; err != nil {
		return total, err
	}
	if cfg.HistoryAge > 0 || cfg.HistoryRows > 0 {
		var before time.Time
		if cfg.HistoryAge > 0 {
			before = cfg.Now().Add(-cfg.HistoryAge)
		}
		n, err := drain(ctx, cfg, observe.PrunedLeadership, func(ctx context.Context) (int, error) {
			return cfg.Store.PruneLeadership(ctx, cfg.Namespace, before, max(cfg.HistoryRows, 0), cfg.Batch)
		})
		if total += n; err != nil {
			return total, err
		}
	}
	return total, nil
}

// drain calls batch until it deletes less than cfg.Batch rows, Pause apart, each
// call bounded by cfg.Timeout, reporting each batch's rows as EventPruned with
// reason; it returns how many.
func drain(ctx context.Context, cfg Config, reason string, batch func(context.Context) (int, error)) (int, error) {
	total := 0
	for {
		n, err := bounded(ctx, cfg.Timeout, batch)
		if n > 0 {
			total += n
			cfg.Observe.Send(observe.Event{Kind: observe.Pruned, At: cfg.Now(), Count: n, Reason: reason})
		}
		if err != nil || n < cfg.Batch {
			return total, err
		}
		if err := sleep(ctx, cfg.Pause); err != nil {
			return total, err
		}
	}
}

// bounded calls f with ctx bounded by timeout, when positive.
func bounded(ctx context.Context, timeout time.Duration, f func(context.Context) (int, error)) (int, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return f(ctx)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
