package execute

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/store"
)

// HandBack returns claimed tasks of src that will not be dispatched here to SCHEDULED
// as a dispatch failure (code is the observer's reason, reason their LastError), in
// one store call, and tells src they are done.
func (e *Executor) HandBack(src *Source, tasks []store.Task, code, reason string) {
	ds := make([]dispatched, len(tasks))
	for i, t := range tasks {
		ds[i] = dispatched{task: t, src: src}
	}
	e.handBack(ds, code, reason)
}

// HandBackUnhandled hands back tasks of src that no executor has a handler for, as
// dispatch failures, not business ones (the handler may be deployed later), in one
// store call; the first of each name in a minute is logged, each is observed.
func (e *Executor) HandBackUnhandled(src *Source, tasks []store.Task) {
	if len(tasks) == 0 {
		return
	}
	ds := make([]dispatched, len(tasks))
	for i, t := range tasks {
		e.unhandled(t.Name)
		ds[i] = dispatched{task: t, src: src}
	}
	e.handBackEach(ds, observe.NoHandler, func(d dispatched) string {
		return fmt.Sprintf("no executor has a handler for %q", d.task.Name)
	})
}

// unhandled reports a task that came due under a name without a handler here: a WARN
// log at most once a minute per name, and an event each time.
func (e *Executor) unhandled(name string) {
	now := time.Now()
	e.mu.Lock()
	last, seen := e.warned[name]
	warn := !seen || now.Sub(last) >= time.Minute
	if warn {
		e.warned[name] = now
	}
	e.mu.Unlock()
	e.cfg.Observe.Send(observe.Event{Kind: observe.Unhandled, At: e.cfg.Clock.Now(), Name: name})
	if warn {
		e.cfg.Log.LogAttrs(context.Background(), slog.LevelWarn, "ax: a task came due under a name no handler is registered for here; it is handed back as a dispatch failure (register one with Handle)",
			slog.String("name", name))
	}
}

// Withdraw hands back the tasks src dispatched that have not started: its lease ended.
func (e *Executor) Withdraw(src *Source) {
	e.mu.Lock()
	var mine []dispatched
	kept := e.pending[:0]
	for _, d := range e.pending {
		if d.src == src {
			mine = append(mine, d)
		} else {
			kept = append(kept, d)
		}
	}
	e.pending = kept
	e.mu.Unlock()
	if len(mine) > 0 {
		e.handBack(mine, observe.LeaseEnded, "leadership ended")
	}
}

// handBack returns claimed, unstarted tasks to SCHEDULED as a dispatch failure: code
// is the observer's reason (observe.NoHandler, …), reason the tasks' LastError.
func (e *Executor) handBack(ds []dispatched, code, reason string) {
	e.handBackEach(ds, code, func(dispatched) string { return reason })
}

// handBackEach is handBack with a LastError of each task's own, in one store call.
func (e *Executor) handBackEach(ds []dispatched, code string, reason func(dispatched) string) {
	now := e.cfg.Clock.Now()
	rq := make([]store.Requeue, len(ds))
	claimed := sourceCounts{}
	for i, d := range ds {
		rq[i] = HandBack(&d.task, reason(d), now, e.cfg.MaxDispatchRetries)
		claimed.add(d.src)
		e.cfg.Observe.Send(observe.Event{Kind: observe.DispatchFailed, At: now, Name: d.task.Name, Reason: code})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	applied, err := e.cfg.Store.Requeue(ctx, store.Fence{}, rq)
	if err != nil {
		e.cfg.Log.LogAttrs(ctx, slog.LevelError, "ax: hand back claimed tasks failed; recovery will", slog.Int("tasks", len(rq)), slog.Any("err", err))
		e.unwritten.Add(int64(len(rq)))
	}
	for i, ok := range applied {
		if ok && ds[i].task.DispatchRetries < e.cfg.MaxDispatchRetries { // SCHEDULED again: back in line at its dispatch backoff, not a refill later
			e.cfg.OnRetry(store.Due{ID: rq[i].TaskID, DueAt: rq[i].DueAt})
		}
	}
	if keys, names := Freed(len(ds), func(i int) *store.Task { return &ds[i].task }, applied); len(names) > 0 {
		e.cfg.OnFree(keys, names)
	}
	claimed.report()
}
