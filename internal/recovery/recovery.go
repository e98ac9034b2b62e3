// Package recovery finds the work that a lost or stalled scheduler left behind and
// puts it back in line:
//   - RUNNING tasks whose heartbeat is older than OrphanAfter (their executor died or
//     is cut off): the execution counts as a failed attempt, retried or FAILED, by the
//     same rules as a handler's error (execute.Result);
//   - DISPATCHING tasks claimed longer than DispatchTimeout ago (the scheduler died
//     between claim and start): handed back to SCHEDULED as a dispatch failure, or
//     FAILED when dispatch retries are exhausted (execute.HandBack).
//
// Both are conditional writes on the execution id, so a late result or start from the
// old execution changes nothing, and any number of schedulers may recover at once.
//
// Run blocks until its context ends; it starts no goroutine.
package recovery

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/axsched/ax/internal/clock"
	"github.com/axsched/ax/internal/execute"
	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/internal/stats"
	"github.com/axsched/ax/store"
)

// Store is what recovery asks of the store: the stale tasks, and their end or
// hand-back.
type Store interface {
	Stale(ctx context.Context, status store.Status, before time.Time, limit int) ([]store.Task, error)
	Finish(ctx context.Context, fence store.Fence, results []store.Finish) ([]bool, error)
	Requeue(ctx context.Context, fence store.Fence, requeues []store.Requeue) ([]bool, error)
}

// Config is what recovery needs.
type Config struct {
	Store              Store       // each call bounded by a timeout of its own
	Fence              store.Fence // carried by every write: the lease's token, or zero without an elector
	Clock              *clock.Clock
	Log                *slog.Logger
	Observe            *observe.Queue
	Stats              *stats.Aggregator // counts the orphans; nil: not counted
	OrphanAfter        time.Duration
	DispatchTimeout    time.Duration
	MaxDispatchRetries int
	// Backoff is the delay before business retry n of a task (execute.RetryDelay).
	Backoff func(t *store.Task, n int) time.Duration
	// Requeued is told of each task put back in line, at its new due time.
	Requeued func(...store.Due)
	// Freed is told the task keys that recovered tasks stopped holding, and their
	// names (execute.Freed).
	Freed func(keys, names []string)
}

// Run recovers until ctx ends: at once, then every quarter of min(OrphanAfter,
// DispatchTimeout), between 10ms and 30s.
func Run(ctx context.Context, cfg Config) {
	every := min(cfg.OrphanAfter, cfg.DispatchTimeout) / 4
	every = min(max(every, 10*time.Millisecond), 30*time.Second)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if err := Once(ctx, cfg); err != nil && ctx.Err() == nil {
			cfg.Log.LogAttrs(ctx, slog.LevelError, "ax: recovery failed", slog.Any("err", err))
		}
		timer.Reset(every)
	}
}

// Once recovers what is stale now, in batches, until nothing is.
func Once(ctx context.Context, cfg Config) error {
	for {
		now := cfg.Clock.Now()
		orphans, err := cfg.Store.Stale(ctx, store.Running, now.Add(-cfg.OrphanAfter), store.MaxBatch)
		if err != nil {
			return fmt.Errorf("find orphans: %w", err)
		}
		if len(orphans) == 0 {
			break
		}
		results := make([]store.Finish, len(orphans))
		for i := range orphans {
			t := &orphans[i]
			cause := fmt.Errorf("orphaned: no heartbeat since %s (node lost or stalled)", t.HeartbeatAt.Format(time.RFC3339Nano))
			results[i] = execute.Result(t, cause, false, now, cfg.Backoff)
		}
		applied, err := cfg.Store.Finish(ctx, cfg.Fence, results)
		if err != nil {
			return fmt.Errorf("recover orphans: %w", err)
		}
		for i, ok := range applied {
			if !ok {
				continue
			}
			cfg.Log.LogAttrs(ctx, slog.LevelWarn, "ax: orphaned execution recovered",
				append(observe.TaskAttrs(&orphans[i]), slog.String("result", string(results[i].Status)))...)
			name := orphans[i].Name
			cfg.Observe.Send(observe.Event{Kind: observe.OrphanRecovered, At: now, Name: name})
			cfg.Observe.Send(observe.Event{Kind: observe.Finished, At: now, Name: name, Outcome: observe.Orphaned})
			// A task whose cancel was requested ended CANCELLED (see store.Finish).
			again := results[i].Status == store.Scheduled && orphans[i].CancelRequestedAt.IsZero()
			cfg.Stats.Record(now, &orphans[i], observe.Orphaned, again)
			if again {
				cfg.Observe.Send(observe.Event{Kind: observe.RetryScheduled, At: now, Name: name, Due: results[i].DueAt})
				cfg.Requeued(store.Due{ID: results[i].TaskID, DueAt: results[i].DueAt})
			}
		}
		cfg.Freed(execute.Freed(len(orphans), func(i int) *store.Task { return &orphans[i] }, applied))
		if len(orphans) < store.MaxBatch {
			break
		}
	}
	for {
		now := cfg.Clock.Now()
		stuck, err := cfg.Store.Stale(ctx, store.Dispatching, now.Add(-cfg.DispatchTimeout), store.MaxBatch)
		if err != nil {
			return fmt.Errorf("find stuck claims: %w", err)
		}
		if len(stuck) == 0 {
			return nil
		}
		rq := make([]store.Requeue, len(stuck))
		reason := fmt.Sprintf("not started within %v of the claim", cfg.DispatchTimeout)
		for i := range stuck {
			rq[i] = execute.HandBack(&stuck[i], reason, now, cfg.MaxDispatchRetries)
		}
		applied, err := cfg.Store.Requeue(ctx, cfg.Fence, rq)
		if err != nil {
			return fmt.Errorf("hand back stuck claims: %w", err)
		}
		for i, ok := range applied {
			if ok {
				cfg.Log.LogAttrs(ctx, slog.LevelWarn, "ax: stuck claim handed back", observe.TaskAttrs(&stuck[i])...)
				cfg.Observe.Send(observe.Event{Kind: observe.StuckClaimHandedBack, At: now, Name: stuck[i].Name})
				cfg.Observe.Send(observe.Event{Kind: observe.DispatchFailed, At: now, Name: stuck[i].Name, Reason: observe.Stuck})
				cfg.Requeued(store.Due{ID: rq[i].TaskID, DueAt: rq[i].DueAt})
			}
		}
		cfg.Freed(execute.Freed(len(stuck), func(i int) *store.Task { return &stuck[i] }, applied))
		if len(stuck) < store.MaxBatch {
			return nil
		}
	}
}
