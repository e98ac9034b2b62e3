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
	"github.com/axsched/ax/internal/periodic"
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

// registered is a schedule registered in this process: its timing and policies, and
// the options of each occurrence (payload, retries, backoff, timeout, owner).
type registered struct {
	*periodic.Schedule
	opts *options
}

// Cron registers a periodic task: the handler registered under name (Handle) runs at
// every slot of spec. NextFireTimes previews the slots. spec is one of:
//
//   - a cron expression with 5 fields (minute hour day-of-month month day-of-week);
//   - a cron expression with 6 fields (a leading seconds field);
//   - a descriptor: @hourly, @daily, @weekly, @monthly, @yearly, @every 2m.
//
// The schedule's options are WithTimeZone (default UTC), WithOverlap (default
// OverlapSkip) and WithMisfire (default MisfireFireOnce). The occurrences' options are
// WithPayload, WithMaxRetry, WithBackoff, WithTimeout and WithOwner.
//
// Cron may be called before or after Start. Before, Start stores the schedule
// (ax_schedules). After, Cron stores it at once (within Config.StoreTimeout), and it
// fires from its next slot. A new schedule's first slot is the first strictly after
// the moment it is stored: a slot exactly then does not fire. When the scheduler is
// started, the handler must be registered first; before, Start checks it.
//
// Registering a name again replaces its definition. A changed spec or time zone
// restarts the schedule from its next slot.
//
// An invalid spec or option is ErrInvalid naming the problem, and registers nothing.
// So is a spec no date satisfies ("0 0 30 2 *"), or a time zone without an IANA name
// (time.FixedZone).
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
	p := &periodic.Schedule{Spec: sp, Loc: loc}
	out := make([]time.Time, 0, n)
	for t := p.Next(from); len(out) < n && !t.Equal(periodic.Never); t = p.Next(t) {
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
	p := &registered{Schedule: &periodic.Schedule{Name: name, Spec: sp, Loc: time.UTC, Overlap: OverlapSkip, Misfire: MisfireFireOnce}, opts: o}
	if o.loc != nil {
		if err := validZone(o.loc); err != nil {
			return errorf("ax: %s %q: %w", op, name, err)
		}
		p.Loc = o.loc
	}
	if o.overlap != nil {
		p.Overlap = *o.overlap
	}
	if o.misfire != nil {
		p.Misfire = *o.misfire
	}
	o.loc, o.overlap, o.misfire = nil, nil, nil // schedule options, not task options
	s.mu.Lock()
	if s.state == stateStopped {
		s.mu.Unlock()
		return errorf("ax: %s %q: %w", op, name, lifecycleError("the scheduler is stopped"))
	}
	if s.state == stateNew {
		s.periodics[name] = p
		s.mu.Unlock()
		return nil
	}
	// Started (or starting): store it now.
	defs, err := s.scheduleDefsLocked([]*registered{p})
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
		r.reloadSchedules()
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
		r.reloadSchedules()
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
func (s *Scheduler) scheduleDefsLocked(ps []*registered) ([]store.ScheduleDef, error) {
	now := s.clock.Now()
	defs := make([]store.ScheduleDef, len(ps))
	for i, p := range ps {
		if s.handlers[p.Name] == nil {
			return nil, fmt.Errorf("schedule %q has no handler: register one with Handle: %w", p.Name, ErrInvalid)
		}
		// An occurrence the options cannot make (a per-task backoff beyond its
		// limit, say) fails here, not silently at every slot.
		if _, err := s.occurrenceOf(s.handlers[p.Name], p, now); err != nil {
			return nil, fmt.Errorf("schedule %q: %w", p.Name, err)
		}
		defs[i] = store.ScheduleDef{
			Name: p.Name, Spec: p.Spec.String(), TimeZone: p.Loc.String(), Overlap: p.Overlap, Misfire: p.Misfire,
			Payload: p.opts.payload, NextFireAt: p.Next(now), Trace: s.schedTrace,
		}
	}
	return defs, nil
}

// periodicList returns the timing of the registered schedules, by name.
func (s *Scheduler) periodicList() []*periodic.Schedule {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.sortedPeriodics()
	ps := make([]*periodic.Schedule, len(rs))
	for i, r := range rs {
		ps[i] = r.Schedule
	}
	return ps
}

// occurrence is the task of p's occurrence at slot (for periodic.Run).
func (s *Scheduler) occurrence(p *periodic.Schedule, slot time.Time) (store.NewTask, error) {
	s.mu.Lock()
	r, hd := s.periodics[p.Name], s.handlers[p.Name]
	s.mu.Unlock()
	if r == nil {
		return store.NewTask{}, fmt.Errorf("schedule %q was deleted: %w", p.Name, ErrNotFound)
	}
	return s.occurrenceOf(hd, r, slot)
}

func (s *Scheduler) occurrenceOf(hd *handler, p *registered, slot time.Time) (store.NewTask, error) {
	nt, err := s.buildTask(hd, p.Name, periodic.OccurrenceKey(slot), slot, p.opts)
	if err != nil {
		return store.NewTask{}, err
	}
	nt.TaskKey, nt.Overlap = p.Name, p.Overlap
	nt.KeyHold, nt.KeyUntil = store.HoldForever, time.Time{} // an occurrence runs once, whatever its handler's Unique
	return nt, nil
}

// sortedPeriodics returns the registered schedules by name (the order in which the
// store locks their rows); the caller holds s.mu.
func (s *Scheduler) sortedPeriodics() []*registered {
	ps := make([]*registered, 0, len(s.periodics))
	for _, p := range s.periodics {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b *registered) int { return strings.Compare(a.Name, b.Name) })
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
// ErrNotFound. With WithTx the pause is part of the caller's transaction, as for
// Cancel; until it commits the schedule may still fire, and the occurrence it writes
// waits for the pause's lock on the schedule, then finds it paused.
func (s *Scheduler) PauseSchedule(ctx context.Context, name string, opts ...ActionOption) error {
	o := collect(opts)
	if err := errors.Join(o.errs...); err != nil {
		return errorf("ax: pause schedule %q: %w", name, err)
	}
	_, err := inTxOr(ctx, s, o, func(tx store.Tx) (*store.Schedule, error) { return tx.PauseSchedule(ctx, name) },
		func() (*store.Schedule, error) { return s.st.PauseSchedule(ctx, name) })
	if err != nil {
		return errorf("ax: pause schedule %q: %w", name, err)
	}
	o.onCommit(ctx, s.reloadSchedules)
	return nil
}

// reloadSchedules has a started scheduler's firing re-read the schedules now.
func (s *Scheduler) reloadSchedules() {
	if r := s.current(); r != nil {
		r.reloadSchedules()
	}
}

// ResumeSchedule lets a paused schedule fire again from its next slot after now: the
// slots that passed while it was paused are not fired, whatever its misfire policy.
// Resuming a schedule that is not paused does nothing. An unknown name is
// ErrNotFound. With WithTx the resume is part of the caller's transaction, as for
// Cancel.
func (s *Scheduler) ResumeSchedule(ctx context.Context, name string, opts ...ActionOption) error {
	o := collect(opts)
	if err := errors.Join(o.errs...); err != nil {
		return errorf("ax: resume schedule %q: %w", name, err)
	}
	row, err := s.storedSchedule(ctx, name)
	if err != nil {
		return errorf("ax: resume schedule %q: %w", name, err)
	}
	p, err := storedPeriodic(row)
	if err != nil {
		return errorf("ax: resume schedule %q: %w", name, err)
	}
	now, err := s.storeNow(ctx)
	if err != nil {
		return errorf("ax: resume schedule %q: %w", name, err)
	}
	next := p.Next(now)
	_, err = inTxOr(ctx, s, o, func(tx store.Tx) (*store.Schedule, error) {
		return tx.ResumeSchedule(ctx, name, next)
	}, func() (*store.Schedule, error) {
		return s.st.ResumeSchedule(ctx, name, next)
	})
	if err != nil {
		return errorf("ax: resume schedule %q: %w", name, err)
	}
	o.onCommit(ctx, s.reloadSchedules)
	return nil
}

// storedSchedule returns the stored schedule named name, or ErrNotFound. The store
// has no read of one schedule: it reads them all.
func (s *Scheduler) storedSchedule(ctx context.Context, name string) (*store.Schedule, error) {
	rows, err := s.st.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(rows, func(r store.Schedule) bool { return r.Name == name })
	if i < 0 {
		return nil, ErrNotFound
	}
	return &rows[i], nil
}

// storeNow returns the time on the store's clock: the scheduler's clock once it is
// started (its offset to the store measured), else the store's own reading.
func (s *Scheduler) storeNow(ctx context.Context) (time.Time, error) {
	if s.current() == nil {
		return s.st.Now(ctx)
	}
	return s.clock.Now(), nil
}

// storedPeriodic rebuilds a schedule's timing from its row.
func storedPeriodic(r *store.Schedule) (*periodic.Schedule, error) {
	sp, err := cronspec.Parse(r.Spec)
	if err != nil {
		return nil, err
	}
	loc, err := time.LoadLocation(r.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: %v: %w", r.TimeZone, err, ErrInvalid)
	}
	return &periodic.Schedule{Name: r.Name, Spec: sp, Loc: loc}, nil
}

// TriggerSchedule fires schedule name once, now, outside its slots: "run the nightly
// report now". It returns the occurrence, an ordinary one:
//
//   - its payload is the schedule's;
//   - its task key is the schedule's name, under the schedule's overlap policy (skip:
//     it is SKIPPED while another occurrence runs; queue: it waits);
//   - its key marks it manual: "manual/" and the time in RFC 3339 UTC;
//   - its run options (retries, backoff, timeout) are the schedule's where the
//     schedule is registered in this scheduler, else the defaults.
//
// An operations node does not know the run options: trigger from a replica that
// registers the schedule when they matter. TriggerSchedule leaves the schedule's slots
// alone, and works on a paused schedule. The scheduler that runs the handler claims
// the occurrence at once if it is this one, else within its refill interval. An
// unknown name is ErrNotFound.
//
// TriggeredAt is recorded, as for Trigger. The occurrence is first written due a minute ahead, out of any claim's reach. A
// second write makes it due now and sets TriggeredAt. So no scheduler can run it
// before it is marked.
//
// With WithTx both writes are part of the caller's transaction: the occurrence exists,
// due now, if and only if it commits.
func (s *Scheduler) TriggerSchedule(ctx context.Context, name string, acts ...ActionOption) (*Task, error) {
	o := collect(acts)
	if err := errors.Join(o.errs...); err != nil {
		return nil, errorf("ax: trigger schedule %q: %w", name, err)
	}
	sc, err := s.storedSchedule(ctx, name)
	if err != nil {
		return nil, errorf("ax: trigger schedule %q: %w", name, err)
	}
	now, err := s.storeNow(ctx)
	if err != nil {
		return nil, errorf("ax: trigger schedule %q: %w", name, err)
	}
	s.mu.Lock()
	r, hd := s.periodics[name], s.handlers[name]
	opts := &options{payload: sc.Payload}
	if r != nil {
		opts = r.opts
	}
	due := now.Add(time.Minute) // until the second write marks it manual and due now
	nt, err := s.buildTask(hd, name, manualPrefix+periodic.OccurrenceKey(now), due, opts)
	s.mu.Unlock()
	if err != nil {
		return nil, errorf("ax: trigger schedule %q: %w", name, err)
	}
	nt.TaskKey, nt.Overlap = name, sc.Overlap
	nt.KeyHold, nt.KeyUntil = store.HoldForever, time.Time{}
	nt.Trace = s.traceOf(ctx)                                // submitted by this call, not by the schedule's registration
	res, err := s.insert(ctx, o, []store.NewTask{nt}, false) // MakeDue's signal brings it
	if err != nil {
		return nil, errorf("ax: trigger schedule %q: %w", name, err)
	}
	if res[0].Err != nil {
		return taskOf(res[0].Task), &TaskStateError{Op: fmt.Sprintf("trigger schedule %q", name), Task: taskOf(res[0].Task), Err: res[0].Err}
	}
	o.unlessRolledBack(ctx, func() { s.obs.Submitted(s.clock.Now(), res) })
	id := res[0].Task.ID
	t, err := s.makeDue(ctx, id, o) // TriggeredAt: it is a manual one
	if err != nil {
		if o.hasTx {
			return nil, errorf("ax: trigger schedule %q: %w", name, err)
		}
		return nil, errorf("ax: trigger schedule %q: occurrence %d is written, due in a minute, but not marked: %w", name, id, err)
	}
	return taskOf(t), nil
}
