package execute

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/store"
)

// finisher writes results in batches: it takes what has queued up while the previous
// write was in flight, up to MaxBatch. When results were waiting as the previous write
// returned (the handlers return faster than results are written), a write that would
// carry less than half a batch first lingers for more, for at most as long as the
// previous write took and maxLinger: a write costs the store much the same for 20
// results as for 100 (PostgreSQL: 0.6 ms of CPU a statement, 12 µs a result), and a
// result waits at most one write longer to be recorded. Handlers do not wait for it:
// their slots are free already. A result that finds the finisher idle is written at
// once, and Stop ends a wait at once.
func (e *Executor) finisher() {
	batch := make([]*execution, 0, store.MaxBatch)
	var took time.Duration // the previous write's
	for {
		batch = batch[:0]
		waiting := true
		select {
		case x := <-e.results:
			batch = append(batch, x)
		default:
			waiting = false
			select {
			case x := <-e.results:
				batch = append(batch, x)
			case <-e.finished:
				select {
				case x := <-e.results:
					batch = append(batch, x)
				default:
					return
				}
			}
		}
	fill:
		for len(batch) < store.MaxBatch {
			select {
			case x := <-e.results:
				batch = append(batch, x)
			default:
				break fill
			}
		}
		if waiting && len(batch) < store.MaxBatch/2 {
			batch = e.linger(batch, min(took, maxLinger))
		}
		start := time.Now()
		e.finish(batch)
		took = time.Since(start)
	}
}

// maxLinger bounds how long the finisher waits for more results to write with the
// ones it has (see finisher).
const maxLinger = 5 * time.Millisecond

// linger adds to batch the results that arrive within d, until it holds half a batch
// or Stop begins.
func (e *Executor) linger(batch []*execution, d time.Duration) []*execution {
	if d <= 0 {
		return batch
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for len(batch) < store.MaxBatch/2 {
		select {
		case x := <-e.results:
			batch = append(batch, x)
		case <-t.C:
			return batch
		case <-e.finished:
			return batch
		}
	}
	return batch
}

func (e *Executor) finish(batch []*execution) {
	now := e.cfg.Clock.Now()
	results := make([]store.Finish, len(batch))
	for i, x := range batch {
		results[i] = e.result(x, now)
	}
	var applied []bool
	ambiguous := false // an earlier attempt failed: it may have committed
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		var err error
		if applied, err = e.cfg.Store.Finish(context.Background(), store.Fence{}, results); err == nil {
			e.ownFinish(results, applied, ambiguous)
			break
		}
		ambiguous = true
		// Keep the executions in the running set so that heartbeats keep them
		// alive while the store is unreachable; give up when the store is closed or
		// on a hard stop: orphan recovery takes over.
		e.cfg.Log.LogAttrs(context.Background(), slog.LevelError, "ax: record results failed", slog.Int("tasks", len(batch)), slog.Any("err", err))
		if errors.Is(err, store.ErrClosed) {
			e.forget(batch)
			return
		}
		select {
		case <-e.abandon:
			e.forget(batch)
			return
		case <-time.After(wait):
		}
	}
	loopDone := sourceCounts{}
	for i, x := range batch {
		f := results[i]
		e.logFinish(x, f, applied[i])
		if applied[i] {
			outcome := x.outcome
			if outcome == observe.Snoozed && !f.Snooze {
				outcome = observe.Failed // snoozed past its cap
			}
			retried := f.Status == store.Scheduled && !x.released() && !f.Snooze && outcome != observe.Cancelled
			e.cfg.Observe.Send(observe.Event{Kind: observe.Finished, At: now, Name: x.task.Name, Outcome: outcome, Duration: x.ran})
			e.cfg.Stats.Record(now, x.task, outcome, retried)
			if retried {
				e.cfg.Observe.Send(observe.Event{Kind: observe.RetryScheduled, At: now, Name: x.task.Name, Due: f.DueAt})
			}
		}
		if applied[i] && f.Status == store.Scheduled && x.outcome != observe.Cancelled {
			e.cfg.OnRetry(store.Due{ID: f.TaskID, DueAt: f.DueAt})
		}
		e.mu.Lock()
		delete(e.running, x.task.ExecutionID)
		e.mu.Unlock()
		loopDone.add(x.src)
	}
	if keys, names := Freed(len(batch), func(i int) *store.Task { return batch[i].task }, applied); len(names) > 0 {
		e.cfg.OnFree(keys, names)
	}
	loopDone.report()
}

// logFinish logs what became of execution x's result f, applied or not. The
// attributes are built only when the logger takes the record: a success is a Debug
// record, and building its attributes was a tenth of a drain's allocations.
func (e *Executor) logFinish(x *execution, f store.Finish, applied bool) {
	var (
		level slog.Level
		msg   string
		more  [2]slog.Attr // what the record adds to the task's attributes
		n     int
	)
	switch {
	case !applied:
		level, msg = slog.LevelWarn, "ax: result discarded, execution superseded"
	case f.Status == store.Succeeded:
		level, msg = slog.LevelDebug, "ax: task succeeded"
	case x.outcome == observe.Cancelled:
		level, msg, more[0], n = slog.LevelInfo, "ax: task cancelled while it ran", slog.String("err", f.Error), 1
	case f.Snooze:
		level, msg, more[0], n = slog.LevelDebug, "ax: task snoozed", slog.Time("due_at", f.DueAt), 1
	case f.Status == store.Scheduled:
		level, msg, more, n = slog.LevelInfo, "ax: task will be retried", [2]slog.Attr{slog.Time("due_at", f.DueAt), slog.String("err", f.Error)}, 2
	default:
		level, msg, more[0], n = slog.LevelWarn, "ax: task failed", slog.String("err", f.Error), 1
	}
	ctx := context.Background()
	if !e.cfg.Log.Enabled(ctx, level) {
		return
	}
	attrs := append(observe.TaskAttrs(x.task), slog.String("result", string(f.Status)))
	e.cfg.Log.LogAttrs(ctx, level, msg, append(attrs, more[:n]...)...)
}

// ownFinish resolves the results Finish answers as not applied although the task may
// hold them already: every one, when an earlier attempt of the call failed (it may
// have committed, its answer lost on the way back), and a success otherwise (the
// handler finished its task in its own transaction: Tx.Complete). (Recovery writes an
// orphan's outcome under the same execution id, but never SUCCEEDED, and with its
// own LastError.)
func (e *Executor) ownFinish(results []store.Finish, applied []bool, ambiguous bool) {
	for i, f := range results {
		if applied[i] || !ambiguous && f.Status != store.Succeeded {
			continue
		}
		t, err := e.cfg.Store.Get(context.Background(), f.TaskID)
		if err == nil && t.ExecutionID == f.ExecutionID && t.Status == f.Status &&
			(f.Status == store.Succeeded || t.LastError == f.Error) {
			applied[i] = true
		}
	}
}

// forget drops executions whose results could not be written: recovery takes them.
func (e *Executor) forget(batch []*execution) {
	e.unwritten.Add(int64(len(batch)))
	e.mu.Lock()
	for _, x := range batch {
		delete(e.running, x.task.ExecutionID)
	}
	e.mu.Unlock()
}

// result is the task's next state after execution x: a snooze's (Snoozed), or what
// Result makes of its error.
func (e *Executor) result(x *execution, now time.Time) store.Finish {
	if x.outcome == observe.Snoozed {
		most := 0
		if hd := e.cfg.Handler(x.task.Name); hd != nil {
			most = hd.MaxSnoozes
		}
		return Snoozed(x.task, x.err, now, most)
	}
	return Result(x.task, x.err, x.released(), now, e.backoff)
}

// Result turns an execution's result into the task's next state: SUCCEEDED, a
// business retry (SCHEDULED, Attempt+1, after backoff(t, Attempt+1)), FAILED when
// retries are exhausted or the error is a *PermanentError, or, for an execution
// released at shutdown, SCHEDULED now without using a retry.
func Result(t *store.Task, err error, released bool, now time.Time, backoff func(t *store.Task, n int) time.Duration) store.Finish {
	f := store.Finish{TaskID: t.ID, ExecutionID: t.ExecutionID}
	var permanent *PermanentError
	switch {
	case err == nil:
		f.Status = store.Succeeded
	case released:
		f.Status, f.Attempt, f.DueAt = store.Scheduled, t.Attempt, now
		f.Error = "released: scheduler stopped during the execution: " + err.Error()
	case errors.As(err, &permanent):
		f.Status, f.Error = store.Failed, "permanent, not retried: "+err.Error()
	case t.Attempt >= t.MaxRetry:
		f.Status, f.Error = store.Failed, err.Error()
	default:
		next := t.Attempt + 1
		f.Status, f.Attempt, f.Error = store.Scheduled, next, err.Error()
		f.DueAt = now.Add(backoff(t, next))
	}
	return f
}

func (e *Executor) backoff(t *store.Task, n int) time.Duration {
	return RetryDelay(t, n, e.cfg.Handler)
}

// RetryDelay is the delay before business retry n of t: the delays stored with the
// task, else its handler's (looked up by handler), else DefaultBackoff.
func RetryDelay(t *store.Task, n int, handler func(name string) *Handler) time.Duration {
	if n-1 < len(t.Backoff) {
		return t.Backoff[n-1]
	}
	if hd := handler(t.Name); hd != nil && hd.Backoff != nil {
		return max(hd.Backoff(n), 0)
	}
	return DefaultBackoff(n)
}
