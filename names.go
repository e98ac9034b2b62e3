package ax

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/axsched/ax/store"
)

// NameState is what operators set for a task name: whether it is paused, its
// concurrency limit (0: none), who changed it last, and when (by the store's clock;
// zero for a name never changed).
type NameState = store.NameState

// MaxConcurrency is the highest concurrency limit a task name may have.
const MaxConcurrency = store.MaxConcurrency

// NameOption configures PauseName, ResumeName and SetConcurrency: WithActor is the one
// there is.
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

// SetConcurrency limits the task name to n tasks DISPATCHING or RUNNING at once on
// every scheduler of the namespace (0 removes the limit), stored so that every
// replica agrees and a restart keeps it. The limit is exact: each claim of the name's
// tasks counts them under a lock of the name, in the claiming write, so that no
// number of racing schedulers, failovers or recoveries exceeds it. The name's other
// due tasks wait SCHEDULED, counted as late, and are claimed in due order as slots
// free; other names are not held back. A limited name's tasks always start in two
// writes (a claim, then a start), and Trigger makes one due rather than claim it.
//
// Lowering a limit stops no running task: none of the name is claimed until fewer
// than n run. A WithConcurrency in the code is stored again at each Start, over a
// value set here. n outside 0 to MaxConcurrency is ErrInvalid. WithActor names who
// sets it (default Config.Node).
func (s *Scheduler) SetConcurrency(ctx context.Context, name string, n int, opts ...NameOption) (*NameState, error) {
	if n < 0 || n > MaxConcurrency {
		return nil, errorf("ax: set concurrency of name %q: %d, want 0 to %d: %w", name, n, MaxConcurrency, ErrInvalid)
	}
	return s.setName(ctx, "set concurrency of", name, opts, func(ctx context.Context, name, by string) (*store.NameState, error) {
		return s.st.SetConcurrency(ctx, name, n, by)
	})
}

// storeLimits stores the concurrency limits of the handlers registered with
// WithConcurrency (Start).
func (s *Scheduler) storeLimits(ctx context.Context) error {
	s.mu.Lock()
	limits := make(map[string]int)
	for name, h := range s.handlers {
		if h.concurrency > 0 {
			limits[name] = h.concurrency
		}
	}
	s.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(limits)) {
		if _, err := s.st.SetConcurrency(ctx, name, limits[name], s.cfg.Node); err != nil {
			return fmt.Errorf("name %q: %w", name, err)
		}
	}
	return nil
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
	if r := s.current(); r != nil && verb != "resume" && verb != "pause" {
		r.offer(name) // a limit raised or removed: this scheduler's parked tasks, if it leads
	}
	return st, nil
}

// Names returns the state of every task name of the namespace ever paused or
// limited, by name.
func (s *Scheduler) Names(ctx context.Context) ([]NameState, error) {
	out, err := s.st.Names(ctx)
	if err != nil {
		return nil, errorf("ax: names: %w", err)
	}
	return out, nil
}
