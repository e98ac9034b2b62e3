// Package periodic fires schedules: it materialises each schedule's occurrences as
// tasks a little ahead of their slots (FireAhead), through the store's
// compare-and-set on the schedule's NextFireAt, so that an occurrence is written once
// however many schedulers share the store and however often they restart. From then
// on an occurrence is an ordinary task with the schedule's name as its task key: the
// scheduling loop fires it, and the claim applies the overlap policy. Slots missed
// while no scheduler ran follow the schedule's misfire policy (plan).
//
// It also holds the timing rules every part agrees on: a schedule's slots (Next), the
// key of an occurrence (OccurrenceKey) and when a slot counts as missed
// (MisfireGrace).
//
// Run blocks until its context ends; it starts no goroutine.
package periodic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/axsched/ax/internal/clock"
	"github.com/axsched/ax/internal/cronspec"
	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/store"
)

// Schedule is a schedule registered in this process: its timing and policies.
type Schedule struct {
	Name    string
	Spec    cronspec.Spec
	Loc     *time.Location
	Overlap store.OverlapPolicy
	Misfire store.MisfirePolicy
}

// Store is what firing asks of the store: the stored schedules and the fire.
type Store interface {
	Schedules(ctx context.Context) ([]store.Schedule, error)
	FireSchedule(ctx context.Context, p store.FireParams) (*store.FireResult, error)
}

// Config is what Run needs.
type Config struct {
	Store          Store       // each call bounded by a timeout of its own
	Fence          store.Fence // carried by every fire: the lease's token, or zero without an elector
	Clock          *clock.Clock
	Log            *slog.Logger
	Observe        *observe.Queue
	RefillInterval time.Duration // how often the stored schedules are re-read
	MaxCatchUp     int
	// Registered returns the schedules registered here, by name.
	Registered func() []*Schedule
	// Occurrence builds the task of p's occurrence at slot; store.ErrNotFound when p
	// is no longer registered.
	Occurrence func(p *Schedule, slot time.Time) (store.NewTask, error)
	// Fired is told the occurrences written, for the scheduling loop.
	Fired func(dues ...store.Due)
	// Reload makes Run re-read the schedules now (registered, paused, resumed,
	// deleted).
	Reload <-chan struct{}
}

// Run runs the periodic side until ctx ends. rows are the schedules as stored when
// it starts.
func Run(ctx context.Context, cfg Config, rows []store.Schedule) {
	cur := make(map[string]store.Schedule, len(rows))
	for _, r := range rows {
		cur[r.Name] = r
	}
	ps := cfg.Registered()
	timer := time.NewTimer(0)
	defer timer.Stop()
	reload := false
	lastLoad := time.Now()
	mismatched := make(map[string]bool) // logged once per change
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-cfg.Reload:
			reload = true
		}
		if reload {
			ps = cfg.Registered() // registered or deleted since
		}
		if len(ps) == 0 {
			// Nothing registered here: nothing to read until Cron or Every.
			reload = false
			timer.Reset(time.Hour)
			continue
		}
		// Re-read now and then, to see pauses, resumes and other schedulers' progress.
		if reload || time.Since(lastLoad) >= cfg.RefillInterval {
			rows, err := cfg.Store.Schedules(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				cfg.Log.LogAttrs(ctx, slog.LevelError, "ax: read schedules failed", slog.Any("err", err))
				timer.Reset(time.Second)
				continue
			}
			clear(cur)
			for _, r := range rows {
				cur[r.Name] = r
			}
			reload, lastLoad = false, time.Now()
			ps = cfg.Registered()
		}
		wait := cfg.RefillInterval
		for _, p := range ps {
			row, ok := cur[p.Name]
			if !ok || row.Paused {
				continue
			}
			if row.Spec != p.Spec.String() || row.TimeZone != p.Loc.String() {
				// Another version of the code registered it since (a rolling deploy):
				// the last registration owns its timing; do not mix cadences.
				if !mismatched[p.Name] {
					cfg.Log.LogAttrs(ctx, slog.LevelWarn, "ax: schedule registered with another spec by another scheduler; not firing it here",
						slog.String("schedule", p.Name), slog.String("stored_spec", row.Spec), slog.String("stored_time_zone", row.TimeZone),
						slog.String("spec", p.Spec.String()), slog.String("time_zone", p.Loc.String()))
					mismatched[p.Name] = true
				}
				continue
			}
			delete(mismatched, p.Name)
			now := cfg.Clock.Now()
			if !row.NextFireAt.After(now.Add(FireAhead)) {
				next, applied, err := fire(ctx, cfg, p, &row, now)
				switch {
				case err != nil && errors.Is(err, store.ErrNotFound):
					// Deleted here (DeleteSchedule) since the list was read.
					reload, wait = true, min(wait, 100*time.Millisecond)
					continue
				case err != nil:
					if ctx.Err() != nil {
						return
					}
					cfg.Log.LogAttrs(ctx, slog.LevelError, "ax: materialise schedule failed", slog.String("schedule", p.Name), slog.Any("err", err))
					wait = min(wait, time.Second)
					continue
				case !applied:
					// Another scheduler got there first, or the schedule was paused:
					// re-read shortly (not at once: should the store keep refusing,
					// this must not spin).
					reload, wait = true, min(wait, 100*time.Millisecond)
					continue
				}
				row.NextFireAt = next
				cur[p.Name] = row
			}
			wait = min(wait, row.NextFireAt.Sub(cfg.Clock.Now())-FireAhead)
		}
		timer.Reset(max(wait, 0))
	}
}

// fire materialises the occurrences of p due by now+FireAhead, from the stored row.
// It returns the schedule's new NextFireAt, and whether this call applied.
func fire(ctx context.Context, cfg Config, p *Schedule, row *store.Schedule, now time.Time) (time.Time, bool, error) {
	slots, caught, next := p.plan(row.NextFireAt, now, MisfireGrace(cfg.RefillInterval), cfg.MaxCatchUp)
	missed := caught >= 0
	tasks := make([]store.NewTask, len(slots))
	for i, slot := range slots {
		nt, err := cfg.Occurrence(p, slot)
		if err != nil {
			return time.Time{}, false, err
		}
		nt.Trace = row.Trace // the registration's: the occurrence's span links to it
		if i < caught && p.Misfire == store.MisfireCatchUp && nt.Overlap == store.OverlapSkip {
			// Catching up means running each missed slot: they are all due at
			// once, so under skip all but the first would be skipped. They queue.
			nt.Overlap = store.OverlapQueue
		}
		tasks[i] = nt
	}
	fp := store.FireParams{Name: p.Name, Expect: row.NextFireAt, Next: next, Tasks: tasks, Spec: p.Spec.String(), TimeZone: p.Loc.String(), Fence: cfg.Fence}
	if missed {
		if g, ok := p.missedGap(row.NextFireAt, slots, caught, now.Add(-MisfireGrace(cfg.RefillInterval))); ok {
			fp.Gaps = []store.SlotGap{g}
		}
	}
	if len(slots) > 0 {
		fp.Last = slots[len(slots)-1]
	}
	res, err := cfg.Store.FireSchedule(ctx, fp)
	if err != nil || !res.Applied {
		return time.Time{}, false, err
	}
	if missed {
		cfg.Log.LogAttrs(ctx, slog.LevelWarn, "ax: schedule missed slots while no scheduler ran",
			slog.String("schedule", p.Name), slog.Time("missed_since", row.NextFireAt),
			slog.String("misfire", string(p.Misfire)), slog.Int("fired", len(slots)))
	}
	observeFire(cfg, p, row.NextFireAt, now, len(slots), caught, next)
	cfg.Observe.Submitted(cfg.Clock.Now(), res.Inserted)
	dues := make([]store.Due, 0, len(res.Inserted))
	for _, in := range res.Inserted {
		if in.Err == nil {
			dues = append(dues, store.Due{ID: in.Task.ID, DueAt: in.Task.DueAt})
		}
	}
	cfg.Fired(dues...)
	return next, true, nil
}

// MisfireGrace is how late a slot may be materialised and still count as on time.
// Occurrences are normally written fireAhead before their slot; a scheduler may see
// a resume by another process, or recover from a store error, up to a refill
// interval late. A slot found later than that was missed (the schedulers were down),
// and the misfire policy decides.
func MisfireGrace(refillInterval time.Duration) time.Duration {
	return max(time.Second, refillInterval+FireAhead)
}

// OccurrenceKey is the business key of a schedule's occurrence: its slot, so that
// the (name, key) uniqueness of tasks makes each occurrence exist once.
func OccurrenceKey(slot time.Time) string {
	return slot.UTC().Format(time.RFC3339Nano)
}

// Never stands for "no slot left" (a spec like "0 0 30 2 *"): the store needs a
// time, and this one, the last due time ax accepts, is never reached.
var Never = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// Next returns the schedule's first slot strictly after t.
func (p *Schedule) Next(t time.Time) time.Time {
	n := p.Spec.Next(t, p.Loc)
	if n.IsZero() || n.After(Never) {
		return Never
	}
	return n
}

// FireAhead is how long before its slot an occurrence is written.
const FireAhead = 2 * time.Second

// plan decides what to materialise when the schedule's next unmaterialised slot is
// next and the time is now: the slots to fire, in order, and the new next slot (the
// first after now+FireAhead). Slots more than grace in the past were missed; the
// policy picks among them: FireOnce the latest, Skip none, CatchUp the latest
// maxCatchUp. caught is how many of the returned slots are missed ones, or -1 when
// none was missed.
func (p *Schedule) plan(next, now time.Time, grace time.Duration, maxCatchUp int) (slots []time.Time, caught int, newNext time.Time) {
	late := now.Add(-grace)
	t := next
	caught = -1
	if t.Before(late) {
		switch p.Misfire {
		case store.MisfireFireOnce:
			slots = p.LastSlots(next, late, 1)
		case store.MisfireCatchUp:
			slots = p.LastSlots(next, late, maxCatchUp)
		}
		caught = len(slots)
		t = p.Next(late.Add(-time.Nanosecond))
	}
	horizon := now.Add(FireAhead)
	for !t.After(horizon) && !t.Equal(Never) {
		slots = append(slots, t)
		t = p.Next(t)
	}
	return slots, caught, t
}

// missedGap returns the gap of the missed slots plan dropped, from the schedule's
// next slot from to the first slot it fired or went on from, and false when it
// dropped none. slots and caught are plan's; late is now - grace.
func (p *Schedule) missedGap(from time.Time, slots []time.Time, caught int, late time.Time) (store.SlotGap, bool) {
	until := p.Next(late.Add(-time.Nanosecond)) // the first slot on time
	if caught > 0 {
		until = slots[0] // the oldest missed slot fired
	}
	if !from.Before(until) {
		return store.SlotGap{}, false
	}
	g := store.SlotGap{Schedule: p.Name, From: from, Until: until, Why: store.GapMissed}
	switch {
	case p.Misfire == store.MisfireFireOnce && caught > 0:
		g.Result = "fired the last one"
	case p.Misfire == store.MisfireCatchUp && caught > 0:
		g.Result = fmt.Sprintf("caught up %d, the most recent", caught)
	default:
		g.Result = "skipped"
	}
	return g, true
}

// LastSlots returns the latest keep slots in [from, before), oldest first. It looks
// back from before over a doubling span, so its cost follows keep, not the length of
// the span.
func (p *Schedule) LastSlots(from, before time.Time, keep int) []time.Time {
	if keep <= 0 {
		return nil
	}
	for span := time.Minute; ; span *= 2 {
		start := from
		if span < before.Sub(from) {
			start = before.Add(-span)
		}
		var found []time.Time
		for t := p.Next(start.Add(-time.Nanosecond)); t.Before(before) && !t.Equal(Never); t = p.Next(t) {
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

// maxMisfireCount bounds how many dropped slots one outage reports to the observer:
// counting them walks the schedule.
const maxMisfireCount = 10_000

// observeFire reports a fire: on-time slots dispatched, missed ones fired (caught up)
// and missed ones dropped (misfired).
func observeFire(cfg Config, p *Schedule, from, now time.Time, fired, caught int, next time.Time) {
	if cfg.Observe == nil {
		return
	}
	onTime := fired
	if caught >= 0 {
		onTime = fired - caught
		missed := 0
		late := now.Add(-MisfireGrace(cfg.RefillInterval))
		for t := from; t.Before(late) && !t.Equal(Never) && missed < maxMisfireCount; t = p.Next(t) {
			missed++
		}
		if caught > 0 {
			cfg.Observe.Send(observe.Event{Kind: observe.ScheduleFired, At: now, Schedule: p.Name, Result: observe.CaughtUp, Count: caught, Due: next})
		}
		if missed > caught {
			cfg.Observe.Send(observe.Event{Kind: observe.ScheduleFired, At: now, Schedule: p.Name, Result: observe.Misfired, Count: missed - caught, Due: next})
		}
	}
	cfg.Observe.Send(observe.Event{Kind: observe.ScheduleFired, At: now, Schedule: p.Name, Result: observe.Dispatched, Count: onTime, Due: next})
}
