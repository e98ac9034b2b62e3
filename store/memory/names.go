package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/axsched/ax/store"
)

// PauseName pauses the task name. See [store.NameKeeper.PauseName].
func (s *Store) PauseName(ctx context.Context, name, by string) (*store.NameState, error) {
	return s.setPaused(ctx, "pause", name, by, true)
}

// ResumeName resumes the task name and stamps its SCHEDULED tasks for the refill.
// See [store.NameKeeper.ResumeName].
func (s *Store) ResumeName(ctx context.Context, name, by string) (*store.NameState, error) {
	return s.setPaused(ctx, "resume", name, by, false)
}

func (s *Store) setPaused(ctx context.Context, verb, name, by string, paused bool) (*store.NameState, error) {
	op := fmt.Sprintf("ax: %s name %q", verb, name)
	if err := checkNameState(name, by); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer s.mu.Unlock()
	k := nameKey{ns: s.ns, name: name}
	st := s.names[k]
	switch {
	case st == nil && !paused:
		return &store.NameState{Name: name}, nil
	case st == nil:
		st = &store.NameState{Name: name}
		s.names[k] = st
	case st.Paused == paused:
		c := *st
		return &c, nil
	}
	st.Paused, st.ChangedBy, st.ChangedAt = paused, by, s.now()
	if !paused {
		for _, r := range s.rows {
			if r.ns == s.ns && r.task.Name == name && r.task.Status == store.Scheduled {
				s.unschedule(r)
				s.schedule(r) // a fresh sequence number: the refill brings it back
			}
		}
	}
	c := *st
	return &c, nil
}

// SetConcurrency sets the task name's concurrency limit. See
// [store.NameKeeper.SetConcurrency].
func (s *Store) SetConcurrency(ctx context.Context, name string, n int, by string) (*store.NameState, error) {
	op := fmt.Sprintf("ax: set concurrency of name %q", name)
	if err := checkConcurrency(name, n, by); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer s.mu.Unlock()
	k := nameKey{ns: s.ns, name: name}
	st := s.names[k]
	switch {
	case st == nil && n == 0:
		return &store.NameState{Name: name}, nil
	case st == nil:
		st = &store.NameState{Name: name}
		s.names[k] = st
	case st.Concurrency == n:
		c := *st
		return &c, nil
	}
	st.Concurrency, st.ChangedBy, st.ChangedAt = n, by, s.now()
	c := *st
	return &c, nil
}

// limit returns the task name's concurrency limit in the view's namespace, 0 for
// none. The caller holds the lock.
func (s *Store) limit(name string) int {
	if st := s.names[nameKey{ns: s.ns, name: name}]; st != nil {
		return st.Concurrency
	}
	return 0
}

// Names returns the state of every name of the view's namespace ever paused or
// limited.
func (s *Store) Names(ctx context.Context) ([]store.NameState, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: list names: %w", err)
	}
	defer s.mu.Unlock()
	out := []store.NameState{}
	for k, st := range s.names {
		if k.ns == s.ns {
			out = append(out, *st)
		}
	}
	slices.SortFunc(out, func(a, b store.NameState) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// paused reports whether the task name is paused in the view's namespace. The caller
// holds the lock.
func (s *Store) paused(name string) bool {
	st := s.names[nameKey{ns: s.ns, name: name}]
	return st != nil && st.Paused
}
