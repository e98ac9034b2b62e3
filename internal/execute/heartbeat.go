package execute

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/store"
)

// errMovedOn is the cause of a handler's context cancelled because a heartbeat found
// its task no longer RUNNING with its execution (orphaned and taken over, say): its
// result would be discarded.
var errMovedOn = errors.New("the task moved on: this execution is no longer its own")

// ErrCancelled is the cause of a handler's context cancelled because its task was
// cancelled while it ran (store.Cancel of a RUNNING task).
var ErrCancelled = errors.New("the task was cancelled")

// heartbeater stamps every running execution alive each HeartbeatInterval, in one
// batched call, and cancels the handlers whose task has moved on (orphaned by
// another node, for instance): their results would be discarded anyway; and those
// whose task's cancel was requested.
func (e *Executor) heartbeater() {
	ticker := time.NewTicker(e.cfg.HeartbeatInterval)
	defer ticker.Stop()
	for {
		select {
		case <-e.hbQuit:
			return
		case <-ticker.C:
		}
		e.mu.Lock()
		xs := make([]*execution, 0, len(e.running))
		for _, x := range e.running {
			xs = append(xs, x)
		}
		e.mu.Unlock()
		if len(xs) == 0 {
			continue
		}
		refs := make([]store.ExecRef, len(xs))
		for i, x := range xs {
			refs[i] = store.ExecRef{TaskID: x.task.ID, ExecutionID: x.task.ExecutionID}
			// A tick late by more than the bound (the process was paused) fences
			// before the request, whatever it answers.
			if bound := e.cfg.SelfFenceAfter; bound > 0 && x.stale(bound) {
				e.selfFence(x)
			}
		}
		sent := time.Now()
		alive, err := e.cfg.Store.Heartbeat(context.Background(), refs)
		if err != nil {
			e.cfg.Log.LogAttrs(e.base, slog.LevelError, "ax: heartbeat failed", slog.Int("executions", len(refs)), slog.Any("err", err))
			continue
		}
		for i, beat := range alive {
			switch {
			case beat == store.BeatGone:
				xs[i].cancel(errMovedOn)
			case xs[i].beaten(sent, e.cfg.SelfFenceAfter):
				e.selfFence(xs[i])
			}
			if beat == store.BeatCancel {
				e.stopCancelled(xs[i])
			}
		}
	}
}

// stopCancelled cancels the handler's context of x, whose task was cancelled while it
// ran, with ErrCancelled as the cause: its result, unless a success, ends the task
// CANCELLED (the store sees to it).
func (e *Executor) stopCancelled(x *execution) {
	if x.cancelAsked.CompareAndSwap(false, true) {
		e.cfg.Log.LogAttrs(e.base, slog.LevelInfo, "ax: cancelling a running task", observe.TaskAttrs(x.task)...)
	}
	x.cancel(ErrCancelled)
}

// Cancel stops the handler running execution executionID in this process, if one is,
// as a heartbeat answering BeatCancel would: the task's cancel has just been recorded.
func (e *Executor) Cancel(executionID string) {
	e.mu.Lock()
	x := e.running[executionID]
	e.mu.Unlock()
	if x != nil {
		e.stopCancelled(x)
	}
}
