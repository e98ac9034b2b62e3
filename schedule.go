package ax

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/axsched/ax/internal/cronspec"
	"github.com/axsched/ax/store"
)

// Schedule is a periodic task as stored (Scheduler.Schedules).
type Schedule struct {
	Name     string        // the schedule's name: its handler's name and its occurrences' task key
	Spec     string        // the cron spec, or "@every <interval>" for Every
	TimeZone string        // the IANA zone the spec is evaluated in, e.g. "UTC"
	Overlap  OverlapPolicy // what an occurrence does while the previous one still runs
	Misfire  MisfirePolicy // what the schedule does with slots missed while down
	Paused   bool          // PauseSchedule: no occurrence is materialised until ResumeSchedule
	// Dormant: stored, but not registered (Cron, Every) in this scheduler, so this
	// scheduler does not fire it — typically a schedule removed from the code.
	Dormant bool
	// NextFireAt is the next slot not yet materialised as a task; occurrences are
	// written a couple of seconds ahead of their slot.
	NextFireAt time.Time
	// LastFireAt is the slot of the last occurrence materialised; zero before the
	// first.
	LastFireAt time.Time
}

// periodic is a schedule registered in this process.
type periodic struct {
	name    string
	spec    cronspec.Spec
	loc     *time.Location
	overlap OverlapPolicy
	misfire MisfirePolicy
	opts    *options // payload, retries, backoff, timeout, owner of each occurrence
}

// Cron registers a periodic task: the handler registered under name (Handle) runs at
// every slot of spec, a cron expression with 5 fields (minute hour day-of-month
// month day-of-week) or 6 (a leading seconds field), or a descriptor (@hourly,
// @daily, @weekly, @monthly, @yearly, @every 2m). Options: WithTimeZone (default
// UTC), WithOverlap (default OverlapSkip), WithMisfire (default MisfireFireOnce),
// and for the occurrences WithPayload, WithMaxRetry, WithBackoff, WithTimeout,
// WithOwner. NextFireTimes previews the slots.
//
// Cron may be called before or after Start. Before, Start stores the schedule
// (ax_schedules); after, Cron stores it at once (within Config.StoreTimeout) and it
// fires from its next slot. A new schedule's first slot is the first strictly after
// the moment it is stored: a slot exactly then does not fire. Registering a name
// again replaces its definition; a changed spec or time zone restarts the schedule
// from its next slot. The handler must be registered first when the scheduler is
// started (Start checks it otherwise). An invalid spec or option, a spec no date
// satisfies ("0 0 30 2 *") or a time zone without an IANA name (time.FixedZone) is
// ErrInvalid naming the problem, and registers nothing.
func (s *Scheduler) Cron(name, spec string, opts ...ScheduleOption) error {
	sp, err := parseCron(spec)
	if err != nil {
		return errorf("ax: cron %q: %w", name, err)
	}
	return s.register("cron", name, sp, opts)
}

// parseCron parses a Cron spec, refusing one that never fires.
func parseCron(spec string) (cronspec.Spec, error) {
	sp, err := cronspec.Parse(spec)
	if err != nil {
		return cronspec.Spec{}, err
	}
	if sp.Never() {
		return cronspec.Spec{}, errorf("cron spec %q: no date satisfies it: %w", spec, ErrInvalid)
	}
	return sp, nil
}

// NextFireTimes returns the next n fire times of a Cron spec strictly after from,
// in loc (nil means UTC), by the rules the scheduler fires by (time zones and DST
// as the README's "Periodic tasks" describes). The times are in UTC. It needs no
// scheduler: use it to preview or test a spec. A spec Cron would refuse is
// ErrInvalid; n outside [1, 10000] too.
func NextFireTimes(spec string, loc *time.Location, from time.Time, n int) ([]time.Time, error) {
	if n < 1 || n > 10_000 {
		return nil, errorf("ax: next fire times of %q: n %d is outside [1, 10000]: %w", spec, n, ErrInvalid)
	}
	if loc == nil {
		loc = time.UTC
	}
	sp, err := parseCron(spec)
	if err == nil {
		err = validZone(loc)
	}
	if err != nil {
		return nil, errorf("ax: next fire times of %q: %w", spec, err)
	}
	p := &periodic{spec: sp, loc: loc}
	out := make([]time.Time, 0, n)
	for t := p.next(from); len(out) < n && !t.Equal(neverAgain); t = p.next(t) {
		out = append(out, t)
	}
	return out, nil
}

// validZone refuses a time zone that cannot be stored by name and restored the same:
// time.FixedZone's names ("IST") are not IANA names, and time.Local differs from
// host to host.
func validZone(loc *time.Location) error {
	name := loc.String()
	if loc == time.Local || name == "Local" {
		return fmt.Errorf("TimeZone Local is this host's zone, which other hosts may not share: load an IANA zone with time.LoadLocation: %w", ErrInvalid)
	}
	stored, err := time.LoadLocation(name)
	if err != nil {
		return fmt.Errorf("TimeZone %q is not an IANA zone name (a time.FixedZone?), so it could not be restored: load one with time.LoadLocation: %w", name, ErrInvalid)
	}
	// A fixed zone may share its name with an IANA zone whose offsets differ
	// (FixedZone("CET", 3600) has no summer time): compare a few years of offsets.
	t := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	for range 20 * 12 {
		_, a := t.In(loc).Zone()
		_, b := t.In(stored).Zone()
		if a != b {
			return fmt.Errorf("TimeZone %q differs from the IANA zone of that name (a time.FixedZone?), so it could not be restored: load one with time.LoadLocation: %w", name, ErrInvalid)
		}
		t = t.AddDate(0, 1, 0)
	}
	return nil
}

// Every registers a periodic task that runs the handler registered under name at a
// fixed interval: at the instants 1970-01-01T00:00:00Z + k×interval, so every node
// and every restart agrees on the slots (Every(2*time.Minute) fires at :00, :02, …).
// interval is at least a second and a whole number of seconds. Options and
// registration as for Cron, except WithTimeZone, which has no meaning here.
func (s *Scheduler) Every(name string, interval time.Duration, opts ...ScheduleOption) error {
	sp, err := cronspec.Every(interval)
	if err != nil {
		return errorf("ax: every %q: %w", name, err)
	}
	if o := collect(opts); o.loc != nil {
		return errorf("ax: every %q: WithTimeZone has no meaning for an interval: %w", name, ErrInvalid)
	}
	return s.register("every", name, sp, opts)
}

func (s *Scheduler) register(op, name string, sp cronspec.Spec, opts []ScheduleOption) error {
	if err := validName(name); err != nil {
		return errorf("ax: %s %q: %w", op, name, err)
	}
	o := collect(opts)
	if len(o.errs) > 0 {
		return errorf("ax: %s %q: %w", op, name, errors.Join(o.errs...))
	}
	if len(o.payload) > s.cfg.MaxPayload {
		return errorf("ax: %s %q: Payload of %d bytes exceeds MaxPayload %d: %w", op, name, len(o.payload), s.cfg.MaxPayload, ErrInvalid)
	}
	p := &periodic{name: name, spec: sp, loc: time.UTC, overlap: OverlapSkip, misfire: MisfireFireOnce, opts: o}
	if o.loc != nil {
		if err := validZone(o.loc); err != nil {
			return errorf("ax: %s %q: %w", op, name, err)
		}
		p.loc = o.loc
	}
	if o.overlap != nil {
		p.overlap = *o.overlap
	}
	if o.misfire != nil {
		p.misfire = *o.misfire
	}
	o.loc, o.overlap, o.misfire = nil, nil, nil // schedule options, not task options
	s.mu.Lock()
	if s.state == stateStopped {
		s.mu.Unlock()
		return errorf("ax: %s %q: the scheduler is stopped: %w", op, name, ErrNotRunning)
	}
	if s.state == stateNew {
		s.periodics[name] = p
		s.mu.Unlock()
		return nil
	}
	// Started (or starting): store it now.
	defs, err := s.scheduleDefsLocked([]*periodic{p})
	s.mu.Unlock()
	if err != nil {
		return errorf("ax: %s %q: %w", op, name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StoreTimeout)
	defer cancel()
	if _, err := s.kst.RegisterSchedules(ctx, defs); err != nil {
		return errorf("ax: %s %q: store the schedule: %w", op, name, err)
	}
	s.mu.Lock()
	s.periodics[name] = p
	s.mu.Unlock()
	if r := s.current(); r != nil {
		r.leader.reloadSchedules()
	}
	return nil
}

// DeleteSchedule removes a stored schedule and cancels its occurrences not yet
// started (one running is left to finish): the way to retire a schedule, a dormant
// one especially. A scheduler that still registers it (Cron, Every) stores it again
// at its next Start; this scheduler forgets it at once. An unknown name is
// ErrNotFound.
func (s *Scheduler) DeleteSchedule(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return errorf("ax: delete schedule %q: %w", name, err)
	}
	if err := validName(name); err != nil {
		return errorf("ax: delete schedule %q: %w", name, err)
	}
	cancelled, err := s.st.DeleteSchedule(ctx, name)
	if err != nil {
		return errorf("ax: delete schedule %q: %w", name, err)
	}
	s.mu.Lock()
	delete(s.periodics, name)
	s.mu.Unlock()
	if r := s.current(); r != nil {
		r.leader.reloadSchedules()
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "ax: schedule deleted", slog.String("schedule", name), slog.Int("occurrences_cancelled", cancelled))
	return nil
}

// registerSchedules stores the registered schedules (Start) and returns the stored
// rows. A new schedule starts at its first slot after now.
func (s *Scheduler) registerSchedules(ctx context.Context) ([]store.Schedule, error) {
	s.mu.Lock()
	defs, err := s.scheduleDefsLocked(s.sortedPeriodics())
	s.mu.Unlock()
	if err != nil || len(defs) == 0 {
		return nil, err
	}
	return s.kst.RegisterSchedules(ctx, defs)
}

// scheduleDefsLocked turns registered schedules into the definitions the store keeps;
// the caller holds s.mu.
func (s *Scheduler) scheduleDefsLocked(ps []*periodic) ([]store.ScheduleDef, error) {
	now := s.clock.Now()
	defs := make([]store.ScheduleDef, len(ps))
	for i, p := range ps {
		if s.handlers[p.name] == nil {
			return nil, fmt.Errorf("schedule %q has no handler: register one with Handle: %w", p.name, ErrInvalid)
		}
		// An occurrence the options cannot make (a per-task backoff beyond its
		// limit, say) fails here, not silently at every slot.
		if _, err := s.occurrenceLocked(p, now); err != nil {
			return nil, fmt.Errorf("schedule %q: %w", p.name, err)
		}
		defs[i] = store.ScheduleDef{
			Name: p.name, Spec: p.spec.String(), TimeZone: p.loc.String(), Overlap: p.overlap, Misfire: p.misfire,
			Payload: p.opts.payload, NextFireAt: p.next(now),
		}
	}
	return defs, nil
}

// periodicList returns the registered schedules, by name.
func (s *Scheduler) periodicList() []*periodic {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sortedPeriodics()
}

// sortedPeriodics returns the registered schedules by name (the order in which the
// store locks their rows); the caller holds s.mu.
func (s *Scheduler) sortedPeriodics() []*periodic {
	ps := make([]*periodic, 0, len(s.periodics))
	for _, p := range s.periodics {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b *periodic) int { return strings.Compare(a.name, b.name) })
	return ps
}

// Schedules returns the stored schedules, by name, including dormant ones (stored
// by an earlier version of the code, not registered here).
func (s *Scheduler) Schedules(ctx context.Context) ([]Schedule, error) {
	rows, err := s.st.Schedules(ctx)
	if err != nil {
		return nil, errorf("ax: schedules: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Schedule, len(rows))
	for i, r := range rows {
		out[i] = Schedule{
			Name: r.Name, Spec: r.Spec, TimeZone: r.TimeZone, Overlap: r.Overlap, Misfire: r.Misfire,
			Paused: r.Paused, Dormant: s.periodics[r.Name] == nil, NextFireAt: r.NextFireAt, LastFireAt: r.LastFireAt,
		}
	}
	return out, nil
}

// PauseSchedule stops a schedule from firing, on every scheduler sharing the store,
// until ResumeSchedule; it survives restarts. Its occurrences already written and
// not yet started are cancelled; one running is left to finish. An unknown name is
// ErrNotFound.
func (s *Scheduler) PauseSchedule(ctx context.Context, name string) error {
	if _, err := s.st.PauseSchedule(ctx, name); err != nil {
		return errorf("ax: pause schedule %q: %w", name, err)
	}
	if r := s.current(); r != nil {
		r.leader.reloadSchedules()
	}
	return nil
}

// ResumeSchedule lets a paused schedule fire again from its next slot after now: the
// slots that passed while it was paused are not fired, whatever its misfire policy.
// Resuming a schedule that is not paused does nothing. An unknown name is
// ErrNotFound.
func (s *Scheduler) ResumeSchedule(ctx context.Context, name string) error {
	rows, err := s.st.Schedules(ctx)
	if err != nil {
		return errorf("ax: resume schedule %q: %w", name, err)
	}
	i := slices.IndexFunc(rows, func(r store.Schedule) bool { return r.Name == name })
	if i < 0 {
		return errorf("ax: resume schedule %q: %w", name, ErrNotFound)
	}
	p, err := storedPeriodic(&rows[i])
	if err != nil {
		return errorf("ax: resume schedule %q: %w", name, err)
	}
	now := s.clock.Now()
	if s.current() == nil {
		// Not started: the clock's offset to the store is not measured; ask the store.
		if now, err = s.st.Now(ctx); err != nil {
			return errorf("ax: resume schedule %q: %w", name, err)
		}
	}
	if _, err := s.st.ResumeSchedule(ctx, name, p.next(now)); err != nil {
		return errorf("ax: resume schedule %q: %w", name, err)
	}
	if r := s.current(); r != nil {
		r.leader.reloadSchedules()
	}
	return nil
}

// storedPeriodic rebuilds a schedule's timing from its row.
func storedPeriodic(r *store.Schedule) (*periodic, error) {
	sp, err := cronspec.Parse(r.Spec)
	if err != nil {
		return nil, err
	}
	loc, err := time.LoadLocation(r.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: %v: %w", r.TimeZone, err, ErrInvalid)
	}
	return &periodic{name: r.Name, spec: sp, loc: loc}, nil
}

// neverAgain stands for "no slot left" (a spec like "0 0 30 2 *"): the store needs a
// time, and this one is never reached.
var neverAgain = maxDue

// next returns the schedule's first slot strictly after t.
func (p *periodic) next(t time.Time) time.Time {
	n := p.spec.Next(t, p.loc)
	if n.IsZero() || n.After(neverAgain) {
		return neverAgain
	}
	return n
}

// fireAhead is how long before its slot an occurrence is written.
const fireAhead = 2 * time.Second

// plan decides what to materialise when the schedule's next unmaterialised slot is
// next and the time is now: the slots to fire, in order, and the new next slot (the
// first after now+fireAhead). Slots more than grace in the past were missed; the
// policy picks among them: FireOnce the latest, Skip none, CatchUp the latest
// maxCatchUp. caught is how many of the returned slots are missed ones, or -1 when
// none was missed.
func (p *periodic) plan(next, now time.Time, grace time.Duration, maxCatchUp int) (slots []time.Time, caught int, newNext time.Time) {
	late := now.Add(-grace)
	t := next
	caught = -1
	if t.Before(late) {
		switch p.misfire {
		case MisfireFireOnce:
			slots = p.lastSlots(next, late, 1)
		case MisfireCatchUp:
			slots = p.lastSlots(next, late, maxCatchUp)
		}
		caught = len(slots)
		t = p.next(late.Add(-time.Nanosecond))
	}
	horizon := now.Add(fireAhead)
	for !t.After(horizon) && !t.Equal(neverAgain) {
		slots = append(slots, t)
		t = p.next(t)
	}
	return slots, caught, t
}

// lastSlots returns the latest keep slots in [from, before), oldest first. It looks
// back from before over a doubling span, so its cost follows keep, not the length of
// the outage.
func (p *periodic) lastSlots(from, before time.Time, keep int) []time.Time {
	if keep <= 0 {
		return nil
	}
	for span := time.Minute; ; span *= 2 {
		start := from
		if span < before.Sub(from) {
			start = before.Add(-span)
		}
		var found []time.Time
		for t := p.next(start.Add(-time.Nanosecond)); t.Before(before) && !t.Equal(neverAgain); t = p.next(t) {
			found = append(found, t)
			if len(found) > keep {
				found = found[1:]
			}
		}
		if len(found) >= keep || start.Equal(from) {
			return found
		}
	}
}
