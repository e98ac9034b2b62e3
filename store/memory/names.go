package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

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
	return s.setNameInt(ctx, fmt.Sprintf("ax: set concurrency of name %q", name), name, n, by,
		func(st *store.NameState) *int { return &st.Concurrency })
}

// setNameInt sets the field of the task name's state that field returns to n (0:
// the default a name never stored has, for which none is stored), unless it has it.
func (s *Store) setNameInt(ctx context.Context, op, name string, n int, by string, field func(*store.NameState) *int) (*store.NameState, error) {
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
	case *field(st) == n:
		c := *st
		return &c, nil
	}
	*field(st), st.ChangedBy, st.ChangedAt = n, by, s.now()
	c := *st
	return &c, nil
}

// SetRate sets the task name's rate limit. See [store.NameKeeper.SetRate].
func (s *Store) SetRate(ctx context.Context, name string, n int, per time.Duration, by string) (*store.NameState, error) {
	return s.setRate(ctx, fmt.Sprintf("ax: set rate of name %q", name), name, n, per, by,
		func(st *store.NameState) (*int, *time.Duration) { return &st.Rate, &st.Per })
}

// SetKeyRate sets the task name's rate limit per task key. See
// [store.NameKeeper.SetKeyRate].
func (s *Store) SetKeyRate(ctx context.Context, name string, n int, per time.Duration, by string) (*store.NameState, error) {
	return s.setRate(ctx, fmt.Sprintf("ax: set key rate of name %q", name), name, n, per, by,
		func(st *store.NameState) (*int, *time.Duration) { return &st.KeyRate, &st.KeyPer })
}

// setRate sets the rate of the task name's state that fields returns to n per per
// (n 0: none), unless it has it.
func (s *Store) setRate(ctx context.Context, op, name string, n int, per time.Duration, by string, fields func(*store.NameState) (*int, *time.Duration)) (*store.NameState, error) {
	if err := checkRate(name, n, per, by); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if n == 0 {
		per = 0
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
	}
	rate, every := fields(st)
	if *rate == n && *every == per {
		c := *st
		return &c, nil
	}
	*rate, *every, st.ChangedBy, st.ChangedAt = n, per, by, s.now()
	if n == 0 && rate == &st.Rate {
		delete(s.starts, k) // a name's rate removed forgets its claims, as the SQL stores do
	}
	c := *st
	return &c, nil
}

// PruneKeyStarts deletes the claim times kept per task key that no window reaches.
// See [store.Pruner.PruneKeyStarts].
func (s *Store) PruneKeyStarts(ctx context.Context, limit int) (int, error) {
	if limit < 1 || limit > store.MaxPrune {
		return 0, fmt.Errorf("ax: prune key starts: limit %d: want 1 to %d: %w", limit, store.MaxPrune, store.ErrInvalid)
	}
	if err := s.lock(ctx); err != nil {
		return 0, fmt.Errorf("ax: prune key starts: %w", err)
	}
	defer s.mu.Unlock()
	before := s.now().Add(-store.MaxRatePer)
	n := 0
	for k, starts := range s.starts {
		if n < limit && k.ns == s.ns && k.key != "" && !starts[len(starts)-1].After(before) {
			delete(s.starts, k)
			n++
		}
	}
	return n, nil
}

// limited reports whether the task name has a concurrency or a rate limit, a key
// concurrency above 1 or a rate per key, in the view's namespace. The caller holds the lock.
func (s *Store) limited(name string) bool {
	st := s.names[nameKey{ns: s.ns, name: name}]
	return st != nil && (st.Concurrency > 0 || st.Rate > 0 || st.KeyConcurrency > 1 || st.KeyRate > 0)
}

// keyConcurrency returns the task name's key concurrency (0: one). The caller holds
// the lock.
func (s *Store) keyConcurrency(name string) int {
	if st := s.names[nameKey{ns: s.ns, name: name}]; st != nil {
		return st.KeyConcurrency
	}
	return 0
}

// SetKeyConcurrency sets how many of the task name's tasks sharing a key may run at
// once. See [store.NameKeeper.SetKeyConcurrency].
func (s *Store) SetKeyConcurrency(ctx context.Context, name string, n int, by string) (*store.NameState, error) {
	if n == 1 {
		n = 0 // the rule of one, stored as none
	}
	return s.setNameInt(ctx, fmt.Sprintf("ax: set key concurrency of name %q", name), name, n, by,
		func(st *store.NameState) *int { return &st.KeyConcurrency })
}

// admits returns 0 when the task name admits one more claim at now, given its tasks
// in flight (used), else the limit that holds it back and, for its rate, when the
// rate admits the next. The caller holds the lock.
func (s *Store) admits(name string, used map[string]int, now time.Time) (limit int, retryAt time.Time) {
	k := nameKey{ns: s.ns, name: name}
	st := s.names[k]
	switch {
	case st == nil:
		return 0, time.Time{}
	case st.Concurrency > 0 && used[name] >= st.Concurrency:
		return st.Concurrency, time.Time{}
	case st.Rate > 0:
		starts := s.starts[k]
		in := 0 // claims in the window [now − Per, now]
		for _, t := range starts {
			if !t.Before(now.Add(-st.Per)) {
				in++
			}
		}
		if in >= st.Rate {
			return st.Rate, starts[len(starts)-st.Rate].Add(st.Per + time.Microsecond)
		}
	}
	return 0, time.Time{}
}

// keyAdmits returns 0 when the task name's rate per task key admits one more claim
// of a task with key at now, else the rate's n and when it admits the next. The
// caller holds the lock.
func (s *Store) keyAdmits(name, key string, now time.Time) (limit int, retryAt time.Time) {
	st := s.names[nameKey{ns: s.ns, name: name}]
	if st == nil || st.KeyRate == 0 {
		return 0, time.Time{}
	}
	starts := s.starts[nameKey{ns: s.ns, name: name, key: key}]
	in := 0 // claims in the window [now − KeyPer, now]
	for _, t := range starts {
		if !t.Before(now.Add(-st.KeyPer)) {
			in++
		}
	}
	if in >= st.KeyRate {
		return st.KeyRate, starts[len(starts)-st.KeyRate].Add(st.KeyPer + time.Microsecond)
	}
	return 0, time.Time{}
}

// started records a claim of the task name at now for its rate limit, and for its
// rate per task key when key is not empty, keeping the last of each rate. The
// caller holds the lock.
func (s *Store) started(name, key string, now time.Time) {
	k := nameKey{ns: s.ns, name: name}
	st := s.names[k]
	if st == nil {
		return
	}
	if st.Rate > 0 {
		starts := append(s.starts[k], now)
		s.starts[k] = starts[max(0, len(starts)-st.Rate):]
	}
	if st.KeyRate > 0 && key != "" {
		k.key = key
		starts := append(s.starts[k], now)
		s.starts[k] = starts[max(0, len(starts)-st.KeyRate):]
	}
}

// Names returns the state of every name of the view's namespace ever paused or
// limited.
func (s *Store) Names(ctx context.Context) ([]store.NameState, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: list names: %w", err)
	}
	defer s.mu.Unlock()
	out := []store.NameState{}
	used := s.inflight()
	for k, st := range s.names {
		if k.ns == s.ns {
			c := *st
			if c.Concurrency > 0 {
				c.InFlight = used[c.Name]
			}
			out = append(out, c)
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
