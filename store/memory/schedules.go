package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/axsched/ax/store"
)

// RegisterSchedules upserts schedule definitions. See [store.Store.RegisterSchedules].
func (s *Store) RegisterSchedules(ctx context.Context, defs []store.ScheduleDef) ([]store.Schedule, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: register schedules: %w", err)
	}
	defer s.mu.Unlock()
	if err := checkScheduleDefs(defs); err != nil {
		return nil, fmt.Errorf("ax: %w", err)
	}
	now := s.now()
	out := make([]store.Schedule, len(defs))
	for i, d := range defs {
		sc, ok := s.schedules[nameKey{ns: s.ns, name: d.Name}]
		if !ok {
			sc = &store.Schedule{Name: d.Name, CreatedAt: now}
			s.schedules[nameKey{ns: s.ns, name: d.Name}] = sc
		}
		if !ok || sc.Spec != d.Spec || sc.TimeZone != d.TimeZone {
			sc.Spec, sc.TimeZone, sc.NextFireAt = d.Spec, d.TimeZone, utc(d.NextFireAt)
		}
		sc.Overlap, sc.Misfire, sc.Payload, sc.Trace = d.Overlap, d.Misfire, slices.Clone(d.Payload), d.Trace
		sc.UpdatedAt = now
		out[i] = copySchedule(sc)
	}
	return out, nil
}

// Schedules returns every schedule by name. See [store.Store.Schedules].
func (s *Store) Schedules(ctx context.Context) ([]store.Schedule, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: list schedules: %w", err)
	}
	defer s.mu.Unlock()
	out := make([]store.Schedule, 0, len(s.schedules))
	for k, sc := range s.schedules {
		if k.ns == s.ns {
			out = append(out, copySchedule(sc))
		}
	}
	slices.SortFunc(out, func(a, b store.Schedule) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// PauseSchedule pauses a schedule and cancels its pending occurrences. See
// [store.Store.PauseSchedule].
func (s *Store) PauseSchedule(ctx context.Context, name string) (*store.Schedule, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: pause schedule %q: %w", name, err)
	}
	defer s.mu.Unlock()
	sc, ok := s.schedules[nameKey{ns: s.ns, name: name}]
	if !ok {
		return nil, fmt.Errorf("ax: pause schedule %q: %w", name, store.ErrNotFound)
	}
	if sc.Paused {
		c := copySchedule(sc)
		return &c, nil
	}
	now := s.now()
	sc.Paused, sc.UpdatedAt = true, now
	s.cancelOccurrences(name, now)
	c := copySchedule(sc)
	return &c, nil
}

// DeleteSchedule removes a schedule and cancels its pending occurrences. See
// [store.Store.DeleteSchedule].
func (s *Store) DeleteSchedule(ctx context.Context, name string) (int, error) {
	if err := s.lock(ctx); err != nil {
		return 0, fmt.Errorf("ax: delete schedule %q: %w", name, err)
	}
	defer s.mu.Unlock()
	if name == "" {
		return 0, fmt.Errorf("ax: delete schedule: empty name: %w", store.ErrInvalid)
	}
	if _, ok := s.schedules[nameKey{ns: s.ns, name: name}]; !ok {
		return 0, fmt.Errorf("ax: delete schedule %q: %w", name, store.ErrNotFound)
	}
	delete(s.schedules, nameKey{ns: s.ns, name: name})
	return s.cancelOccurrences(name, s.now()), nil
}

// cancelOccurrences cancels the SCHEDULED occurrences of schedule name at now and
// returns how many; the caller holds s.mu.
func (s *Store) cancelOccurrences(name string, now time.Time) int {
	n := 0
	for _, r := range s.rows {
		if t := &r.task; r.ns == s.ns && t.Status == store.Scheduled && t.Name == name && t.TaskKey == name {
			s.unschedule(r)
			t.Status, t.FinishedAt, t.UpdatedAt = store.Cancelled, now, now
			n++
		}
	}
	return n
}

// ResumeSchedule resumes a paused schedule at next. See [store.Store.ResumeSchedule].
func (s *Store) ResumeSchedule(ctx context.Context, name string, next time.Time) (*store.Schedule, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: resume schedule %q: %w", name, err)
	}
	defer s.mu.Unlock()
	sc, ok := s.schedules[nameKey{ns: s.ns, name: name}]
	if !ok {
		return nil, fmt.Errorf("ax: resume schedule %q: %w", name, store.ErrNotFound)
	}
	if next.IsZero() {
		return nil, fmt.Errorf("ax: resume schedule %q: zero next fire time: %w", name, store.ErrInvalid)
	}
	if sc.Paused {
		if sc.NextFireAt.Before(next) {
			s.recordGaps(name, []store.SlotGap{{From: sc.NextFireAt, Until: next, Why: store.GapPaused, Result: store.PausedResult}})
		}
		sc.Paused, sc.NextFireAt, sc.UpdatedAt = false, utc(next), s.now()
	}
	c := copySchedule(sc)
	return &c, nil
}

// FireSchedule advances a schedule and inserts its occurrences. See
// [store.Store.FireSchedule].
func (s *Store) FireSchedule(ctx context.Context, p store.FireParams) (*store.FireResult, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: fire schedule %q: %w", p.Name, err)
	}
	defer s.mu.Unlock()
	if err := checkFire(p); err != nil {
		return nil, fmt.Errorf("ax: %w", err)
	}
	if err := s.fenced(p.Fence); err != nil {
		return nil, fmt.Errorf("ax: fire schedule %q: %w", p.Name, err)
	}
	sc, ok := s.schedules[nameKey{ns: s.ns, name: p.Name}]
	if !ok || sc.Paused || !sc.NextFireAt.Equal(p.Expect) || (p.Spec != "" && (sc.Spec != p.Spec || sc.TimeZone != p.TimeZone)) {
		return &store.FireResult{}, nil
	}
	sc.NextFireAt, sc.UpdatedAt = utc(p.Next), s.now()
	if !p.Last.IsZero() {
		sc.LastFireAt = utc(p.Last)
	}
	s.recordGaps(p.Name, p.Gaps)
	return &store.FireResult{Applied: true, Inserted: s.insert(p.Tasks)}, nil
}

func copySchedule(sc *store.Schedule) store.Schedule {
	c := *sc
	c.Payload = slices.Clone(sc.Payload)
	return c
}
