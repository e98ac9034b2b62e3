package ax

import (
	"context"
	"errors"

	"github.com/axsched/ax/store"
)

// NameState is what operators set for a task name: whether it is paused, who paused
// or resumed it last, and when (by the store's clock; zero for a name never paused).
type NameState = store.NameState

// NameOption configures PauseName and ResumeName: WithActor is the one there is.
type NameOption interface {
	apply(o *options)
	nameOption()
}

// PauseName pauses the task name on every scheduler sharing the store's namespace,
// and the pause survives restarts: from the moment it returns, no claim takes a task
// of the name. Its due tasks stay SCHEDULED — waiting, and counted as late by the
// queue lag — and its running tasks finish. Handlers of the name stay registered and
// its tasks can still be submitted; Trigger, an operator's own act, still runs one.
// Pausing a paused name changes nothing and returns its state. WithActor names who
// pauses it (default Config.Node). Schedules keep their own pause (PauseSchedule):
// a paused name's schedules still fire, and their occurrences wait with the rest.
func (s *Scheduler) PauseName(ctx context.Context, name string, opts ...NameOption) (*NameState, error) {
	return s.setName(ctx, "pause", name, opts, s.st.PauseName)
}

// ResumeName resumes a paused task name: its waiting tasks are claimed again, in due
// order, within a refill interval (at once where the store notifies: PostgreSQL).
// The store restamps each of the name's SCHEDULED tasks for the refill, a write whose
// cost grows with them. Resuming a name that is not paused changes nothing and
// returns its state.
func (s *Scheduler) ResumeName(ctx context.Context, name string, opts ...NameOption) (*NameState, error) {
	return s.setName(ctx, "resume", name, opts, s.st.ResumeName)
}

func (s *Scheduler) setName(ctx context.Context, verb, name string, opts []NameOption,
	set func(ctx context.Context, name, by string) (*store.NameState, error)) (*NameState, error) {
	o := collect(opts)
	by := s.cfg.Node
	if o.actor != nil {
		by = *o.actor
	}
	if err := errors.Join(append(o.errs, validName(name))...); err != nil {
		return nil, errorf("ax: %s name %q: %w", verb, name, err)
	}
	st, err := set(ctx, name, by)
	if err != nil {
		return nil, errorf("ax: %s name %q: %w", verb, name, err)
	}
	if r := s.current(); r != nil && verb == "resume" {
		r.refillNow() // this scheduler's loop, if it leads; the others' at their refill
	}
	return st, nil
}

// Names returns the state of every task name of the namespace ever paused, by name.
func (s *Scheduler) Names(ctx context.Context) ([]NameState, error) {
	out, err := s.st.Names(ctx)
	if err != nil {
		return nil, errorf("ax: names: %w", err)
	}
	return out, nil
}
