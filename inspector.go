package ax

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/store"
)

// inspect is the leader's recovery loop. It finds
//   - RUNNING tasks whose heartbeat is older than OrphanAfter (their executor died or
//     is cut off): the execution counts as a failed attempt, retried or FAILED;
//   - DISPATCHING tasks claimed longer than DispatchTimeout ago (the leader or the
//     executor died between claim and start): handed back to SCHEDULED as a dispatch
//     failure, or FAILED when dispatch retries are exhausted.
//
// Both are conditional writes on the execution id, so a late result or start from
// the old execution changes nothing.
func (l *leader) inspect(ctx context.Context) {
	cfg := l.s.cfg
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
		if err := l.inspectOnce(ctx); err != nil && ctx.Err() == nil {
			l.s.log.LogAttrs(ctx, slog.LevelError, "ax: inspection failed", slog.Any("err", err))
		}
		timer.Reset(every)
	}
}

func (l *leader) inspectOnce(ctx context.Context) error {
	s := l.s
	for {
		now := s.clock.Now()
		orphans, err := s.kst.Stale(ctx, store.Running, now.Add(-s.cfg.OrphanAfter), store.MaxBatch)
		if err != nil {
			return errorf("ax: find orphans: %w", err)
		}
		if len(orphans) == 0 {
			break
		}
		results := make([]store.Finish, len(orphans))
		for i := range orphans {
			t := &orphans[i]
			cause := fmt.Errorf("orphaned: no heartbeat since %s (node lost or stalled)", t.HeartbeatAt.Format(time.RFC3339Nano))
			results[i] = s.outcome(t, cause, false, now)
		}
		applied, err := s.kst.Finish(ctx, results)
		if err != nil {
			return errorf("ax: recover orphans: %w", err)
		}
		for i, ok := range applied {
			if !ok {
				continue
			}
			s.log.LogAttrs(ctx, slog.LevelWarn, "ax: orphaned execution recovered",
				append(taskAttrs(&orphans[i]), slog.String("result", string(results[i].Status)))...)
			name := orphans[i].Name
			s.obs.Send(observe.Event{Kind: observe.OrphanRecovered, At: now, Name: name})
			s.obs.Send(observe.Event{Kind: observe.Finished, At: now, Name: name, Outcome: observe.Orphaned})
			if results[i].Status == store.Scheduled {
				s.obs.Send(observe.Event{Kind: observe.RetryScheduled, At: now, Name: name, Due: results[i].DueAt})
				l.add(store.Due{ID: results[i].TaskID, DueAt: results[i].DueAt})
			}
		}
		l.unblock(freedKeys(len(orphans), func(i int) *store.Task { return &orphans[i] }, applied))
		if len(orphans) < store.MaxBatch {
			break
		}
	}
	for {
		now := s.clock.Now()
		stuck, err := s.kst.Stale(ctx, store.Dispatching, now.Add(-s.cfg.DispatchTimeout), store.MaxBatch)
		if err != nil {
			return errorf("ax: find stuck claims: %w", err)
		}
		if len(stuck) == 0 {
			return nil
		}
		rq := make([]store.Requeue, len(stuck))
		reason := fmt.Sprintf("not started within %v of the claim", s.cfg.DispatchTimeout)
		for i := range stuck {
			rq[i] = s.handBackRequeue(&stuck[i], reason, now)
		}
		applied, err := s.kst.Requeue(ctx, rq)
		if err != nil {
			return errorf("ax: hand back stuck claims: %w", err)
		}
		for i, ok := range applied {
			if ok {
				s.log.LogAttrs(ctx, slog.LevelWarn, "ax: stuck claim handed back", taskAttrs(&stuck[i])...)
				s.obs.Send(observe.Event{Kind: observe.StuckClaimHandedBack, At: now, Name: stuck[i].Name})
				s.obs.Send(observe.Event{Kind: observe.DispatchFailed, At: now, Name: stuck[i].Name, Reason: observe.Stuck})
				l.add(store.Due{ID: rq[i].TaskID, DueAt: rq[i].DueAt})
			}
		}
		l.unblock(freedKeys(len(stuck), func(i int) *store.Task { return &stuck[i] }, applied))
		if len(stuck) < store.MaxBatch {
			return nil
		}
	}
}
