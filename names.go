package ax

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/axsched/ax/store"
)

// NameState is what operators set for a task name: whether it is paused, its
// concurrency limit (0: none), who changed it last, and when (by the store's clock;
// zero for a name never changed).
type NameState = store.NameState

// MaxConcurrency is the highest concurrency limit a task name may have.
const MaxConcurrency = store.MaxConcurrency

// The bounds of a rate limit (SetRate, WithRate): at most MaxRate starts per period,
// a period from MinRatePer to MaxRatePer.
const (
	MaxRate    = store.MaxRate
	MinRatePer = store.MinRatePer
	MaxRatePer = store.MaxRatePer
)

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

// SetRate limits the task name to n tasks started in any window of per, on every
// scheduler of the namespace, by the store's clock (n 0 removes the limit; per is
// then ignored), stored so that every replica agrees and a restart keeps it. A task
// starts, for the rate, when it is claimed: its execution's ClaimedAt. The limit is
// exact: each claim of the name's tasks reads and records the name's last n claim
// times under a lock of the name, in the claiming write. The name's other due tasks
// wait SCHEDULED, counted as late, and are claimed in due order when the window
// admits them — the store says when, so no scheduler polls for it (for a period
// over half of Config.Window, the leader asks every half window); other names are
// not held back. The claims recorded before a rate is first set do not count toward
// it. A name may have a rate and a concurrency limit at once.
//
// A WithRate in the code is stored again at each Start, over a value set here. n
// outside 0 to MaxRate, or per outside MinRatePer to MaxRatePer with n above 0, is
// ErrInvalid. WithActor names who sets it (default Config.Node).
func (s *Scheduler) SetRate(ctx context.Context, name string, n int, per time.Duration, opts ...NameOption) (*NameState, error) {
	if n < 0 || n > MaxRate || n > 0 && (per < MinRatePer || per > MaxRatePer) {
		return nil, errorf("ax: set rate of name %q: %d per %v, want 0 to %d per %v to %v: %w", name, n, per, MaxRate, MinRatePer, MaxRatePer, ErrInvalid)
	}
	return s.setName(ctx, "set rate of", name, opts, func(ctx context.Context, name, by string) (*store.NameState, error) {
		return s.st.SetRate(ctx, name, n, per, by)
	})
}

// storeLimits stores the limits of the handlers registered with WithConcurrency,
// WithRate, WithKeyConcurrency and WithKeyRate (Start).
func (s *Scheduler) storeLimits(ctx context.Context) error {
	s.mu.Lock()
	hs := make(map[string]*handler)
	for name, h := range s.handlers {
		if h.limited() {
			hs[name] = h
		}
	}
	s.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(hs)) {
		if err := s.storeLimitsOf(ctx, name, hs[name]); err != nil {
			return err
		}
	}
	return nil
}

// limited reports whether h was registered with a limit for its name.
func (h *handler) limited() bool {
	return h.concurrency > 0 || h.rate != nil || h.keyConc > 0 || h.keyRate != nil
}

// storeLimitsOf stores the limits h was registered with for name.
func (s *Scheduler) storeLimitsOf(ctx context.Context, name string, h *handler) error {
	if h.concurrency > 0 {
		if _, err := s.st.SetConcurrency(ctx, name, h.concurrency, s.cfg.Node); err != nil {
			return fmt.Errorf("name %q: %w", name, err)
		}
	}
	if h.rate != nil {
		if _, err := s.st.SetRate(ctx, name, h.rate.n, h.rate.per, s.cfg.Node); err != nil {
			return fmt.Errorf("name %q: %w", name, err)
		}
	}
	if h.keyConc > 0 {
		if _, err := s.st.SetKeyConcurrency(ctx, name, h.keyConc, s.cfg.Node); err != nil {
			return fmt.Errorf("name %q: %w", name, err)
		}
	}
	if h.keyRate != nil {
		if _, err := s.st.SetKeyRate(ctx, name, h.keyRate.n, h.keyRate.per, s.cfg.Node); err != nil {
			return fmt.Errorf("name %q: %w", name, err)
		}
	}
	return nil
}

// SetKeyRate limits the task name's tasks that share a task key (with Overlap queue
// or skip) to n started in any window of per, for each key, on every scheduler of the
// namespace, by the store's clock (n 0 removes the limit; per is then ignored): "at
// most 10 syncs per customer a minute". It is SetRate per key: exact in the same way,
// each claim reading and recording the key's last n claim times for the name under a
// lock of the key, in the claiming write. A key's waiting tasks hold back neither the
// name's other keys nor its tasks without a key, which the limit does not concern.
// The claim times are kept per name and key until no window reaches them (retention
// deletes them a day after the key's last claim). A name may have every limit at
// once.
//
// A WithKeyRate in the code is stored again at each Start, over a value set here. n
// outside 0 to MaxRate, or per outside MinRatePer to MaxRatePer with n above 0, is
// ErrInvalid. WithActor names who sets it (default Config.Node).
func (s *Scheduler) SetKeyRate(ctx context.Context, name string, n int, per time.Duration, opts ...NameOption) (*NameState, error) {
	if n < 0 || n > MaxRate || n > 0 && (per < MinRatePer || per > MaxRatePer) {
		return nil, errorf("ax: set key rate of name %q: %d per %v, want 0 to %d per %v to %v: %w", name, n, per, MaxRate, MinRatePer, MaxRatePer, ErrInvalid)
	}
	return s.setName(ctx, "set key rate of", name, opts, func(ctx context.Context, name, by string) (*store.NameState, error) {
		return s.st.SetKeyRate(ctx, name, n, per, by)
	})
}

// SetKeyConcurrency lets n of the task name's tasks that share a task key run at
// once on every scheduler of the namespace (n of 0 or 1 restores the rule of one),
// stored so that every replica agrees. A key's tasks of other names count among its
// holders; each name admits its own n. The check is part of the claiming write, as
// for every task key. A WithKeyConcurrency in the code is stored again at each
// Start. n outside 0 to MaxConcurrency is ErrInvalid. WithActor names who sets it
// (default Config.Node).
func (s *Scheduler) SetKeyConcurrency(ctx context.Context, name string, n int, opts ...NameOption) (*NameState, error) {
	if n < 0 || n > MaxConcurrency {
		return nil, errorf("ax: set key concurrency of name %q: %d, want 0 to %d: %w", name, n, MaxConcurrency, ErrInvalid)
	}
	return s.setName(ctx, "set key concurrency of", name, opts, func(ctx context.Context, name, by string) (*store.NameState, error) {
		return s.st.SetKeyConcurrency(ctx, name, n, by)
	})
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
