package ax

import (
	"context"
	"log/slog"
	"time"

	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/store"
)

// The leader's periodic side: it materialises each schedule's occurrences as tasks a
// little ahead of their slots (fireAhead), through the store's compare-and-set on the
// schedule's NextFireAt, so that an occurrence is written once however many
// schedulers share the store and however often they restart. From then on an
// occurrence is an ordinary task with the schedule's name as its task key: the wheel
// fires it, and the claim applies the overlap policy.

// reloadSchedules makes the firing loop re-read the schedules now (a pause or resume).
func (l *leader) reloadSchedules() {
	select {
	case l.schedulesChanged <- struct{}{}:
	default:
	}
}

// fireSchedules runs the periodic side until ctx ends. rows are the schedules as
// Start stored them.
func (l *leader) fireSchedules(ctx context.Context, rows []store.Schedule) {
	s := l.s
	cur := make(map[string]store.Schedule, len(rows))
	for _, r := range rows {
		cur[r.Name] = r
	}
	ps := s.periodicList()
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
		case <-l.schedulesChanged:
			reload = true
		}
		if reload {
			ps = s.periodicList() // registered or deleted since
		}
		if len(ps) == 0 {
			// Nothing registered here: nothing to read until Cron or Every.
			reload = false
			timer.Reset(time.Hour)
			continue
		}
		// Re-read now and then, to see pauses, resumes and other schedulers' progress.
		if reload || time.Since(lastLoad) >= s.cfg.RefillInterval {
			rows, err := s.kst.Schedules(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				s.log.LogAttrs(ctx, slog.LevelError, "ax: read schedules failed", slog.Any("err", err))
				timer.Reset(time.Second)
				continue
			}
			clear(cur)
			for _, r := range rows {
				cur[r.Name] = r
			}
			reload, lastLoad = false, time.Now()
			ps = s.periodicList()
		}
		wait := s.cfg.RefillInterval
		for _, p := range ps {
			row, ok := cur[p.name]
			if !ok || row.Paused {
				continue
			}
			if row.Spec != p.spec.String() || row.TimeZone != p.loc.String() {
				// Another version of the code registered it since (a rolling deploy):
				// the last registration owns its timing; do not mix cadences.
				if !mismatched[p.name] {
					s.log.LogAttrs(ctx, slog.LevelWarn, "ax: schedule registered with another spec by another scheduler; not firing it here",
						slog.String("schedule", p.name), slog.String("stored_spec", row.Spec), slog.String("stored_time_zone", row.TimeZone),
						slog.String("spec", p.spec.String()), slog.String("time_zone", p.loc.String()))
					mismatched[p.name] = true
				}
				continue
			}
			delete(mismatched, p.name)
			now := s.clock.Now()
			if !row.NextFireAt.After(now.Add(fireAhead)) {
				next, applied, err := l.fire(ctx, p, &row, now)
				switch {
				case err != nil:
					if ctx.Err() != nil {
						return
					}
					s.log.LogAttrs(ctx, slog.LevelError, "ax: materialise schedule failed", slog.String("schedule", p.name), slog.Any("err", err))
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
				cur[p.name] = row
			}
			wait = min(wait, row.NextFireAt.Sub(s.clock.Now())-fireAhead)
		}
		timer.Reset(max(wait, 0))
	}
}

// fire materialises the occurrences of p due by now+fireAhead, from the stored row.
// It returns the schedule's new NextFireAt, and whether this call applied.
func (l *leader) fire(ctx context.Context, p *periodic, row *store.Schedule, now time.Time) (time.Time, bool, error) {
	s := l.s
	slots, caught, next := p.plan(row.NextFireAt, now, s.misfireGrace(), s.cfg.MaxCatchUp)
	missed := caught >= 0
	tasks := make([]store.NewTask, len(slots))
	for i, slot := range slots {
		nt, err := s.occurrence(p, slot)
		if err != nil {
			return time.Time{}, false, err
		}
		if i < caught && p.misfire == MisfireCatchUp && nt.Overlap == OverlapSkip {
			// Catching up means running each missed slot: they are all due at
			// once, so under skip all but the first would be skipped. They queue.
			nt.Overlap = OverlapQueue
		}
		tasks[i] = nt
	}
	fp := store.FireParams{Name: p.name, Expect: row.NextFireAt, Next: next, Tasks: tasks}
	if len(slots) > 0 {
		fp.Last = slots[len(slots)-1]
	}
	res, err := s.kst.FireSchedule(ctx, fp)
	if err != nil || !res.Applied {
		return time.Time{}, false, err
	}
	if missed {
		s.log.LogAttrs(ctx, slog.LevelWarn, "ax: schedule missed slots while no scheduler ran",
			slog.String("schedule", p.name), slog.Time("missed_since", row.NextFireAt),
			slog.String("misfire", string(p.misfire)), slog.Int("fired", len(slots)))
	}
	l.observeFire(p, row.NextFireAt, now, len(slots), caught, next)
	s.obs.Submitted(s.clock.Now(), res.Inserted)
	dues := make([]store.Due, 0, len(res.Inserted))
	for _, in := range res.Inserted {
		if in.Err == nil {
			dues = append(dues, store.Due{ID: in.Task.ID, DueAt: in.Task.DueAt})
		}
	}
	l.add(dues...)
	return next, true, nil
}

// occurrence is the task of p's occurrence at slot.
func (s *Scheduler) occurrence(p *periodic, slot time.Time) (store.NewTask, error) {
	return s.occurrenceOf(s.handler(p.name), p, slot)
}

// occurrenceLocked is occurrence for a caller that holds s.mu.
func (s *Scheduler) occurrenceLocked(p *periodic, slot time.Time) (store.NewTask, error) {
	return s.occurrenceOf(s.handlers[p.name], p, slot)
}

func (s *Scheduler) occurrenceOf(hd *handler, p *periodic, slot time.Time) (store.NewTask, error) {
	nt, err := s.buildTask(hd, p.name, occurrenceKey(slot), slot, p.opts)
	if err != nil {
		return store.NewTask{}, err
	}
	nt.TaskKey, nt.Overlap = p.name, p.overlap
	return nt, nil
}

// misfireGrace is how late a slot may be materialised and still count as on time.
// Occurrences are normally written fireAhead before their slot; a scheduler may see
// a resume by another process, or recover from a store error, up to a refill
// interval late. A slot found later than that was missed (the schedulers were down),
// and the misfire policy decides.
func (s *Scheduler) misfireGrace() time.Duration {
	return max(time.Second, s.cfg.RefillInterval+fireAhead)
}

// occurrenceKey is the business key of a schedule's occurrence: its slot, so that
// the (name, key) uniqueness of tasks makes each occurrence exist once.
func occurrenceKey(slot time.Time) string {
	return slot.UTC().Format(time.RFC3339Nano)
}

// blockedRetry is how often the leader retries tasks waiting for a task key that a
// task of another process holds; keys freed in this process retry them at once.
// The tasks waiting for one key are retried together, in one claim, so that the
// store starts the earliest.
const blockedRetry = time.Second

// block remembers tasks a claim left waiting for their key, and schedules their
// retry: with the others waiting for the key, or at once if a local holder freed the
// key while the claim was in flight (after free number claimFrees).
func (l *leader) block(bs []store.Blocked, claimFrees uint64) {
	now := l.s.clock.Now()
	l.mu.Lock()
	for _, b := range bs {
		l.blocked[b.ID] = b.TaskKey
		at, ok := l.keyRetry[b.TaskKey]
		if !ok || !at.After(now) {
			at = now.Add(blockedRetry)
			l.keyRetry[b.TaskKey] = at
		}
		if l.keyFreed[b.TaskKey] > claimFrees {
			at = now
		}
		l.incoming = append(l.incoming, store.Due{ID: b.ID, DueAt: at})
	}
	l.mu.Unlock()
	l.signal()
}

// unblock retries at once, together, the tasks waiting for keys that were just freed
// here.
func (l *leader) unblock(keys []string) {
	if len(keys) == 0 {
		return
	}
	now := l.s.clock.Now()
	l.mu.Lock()
	freed := make(map[string]bool, len(keys))
	l.frees++
	for _, k := range keys {
		freed[k] = true
		l.keyFreed[k] = l.frees
		delete(l.keyRetry, k)
	}
	n := 0
	for id, k := range l.blocked {
		if freed[k] {
			l.incoming = append(l.incoming, store.Due{ID: id, DueAt: now})
			delete(l.blocked, id)
			n++
		}
	}
	if len(l.keyFreed) > 1024 { // only frees during a claim in flight matter (see block)
		for k, n := range l.keyFreed {
			if l.frees-n > 1024 {
				delete(l.keyFreed, k)
			}
		}
	}
	l.mu.Unlock()
	if n > 0 {
		l.signal()
	}
}

// settled forgets the waiting tasks a claim asked for: it took them, skipped them,
// found them gone, or left them blocked again (block remembers those anew).
func (l *leader) settled(ids []int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.blocked) == 0 {
		return
	}
	for _, id := range ids {
		delete(l.blocked, id)
	}
}

// maxMisfireCount bounds how many dropped slots one outage reports to the observer:
// counting them walks the schedule.
const maxMisfireCount = 10_000

// observeFire reports a fire: on-time slots dispatched, missed ones fired (caught up)
// and missed ones dropped (misfired).
func (l *leader) observeFire(p *periodic, from, now time.Time, fired, caught int, next time.Time) {
	s := l.s
	if s.obs == nil {
		return
	}
	onTime := fired
	if caught >= 0 {
		onTime = fired - caught
		missed := 0
		late := now.Add(-s.misfireGrace())
		for t := from; t.Before(late) && !t.Equal(neverAgain) && missed < maxMisfireCount; t = p.next(t) {
			missed++
		}
		if caught > 0 {
			s.obs.Send(observe.Event{Kind: observe.ScheduleFired, At: now, Schedule: p.name, Result: observe.CaughtUp, Count: caught, Due: next})
		}
		if missed > caught {
			s.obs.Send(observe.Event{Kind: observe.ScheduleFired, At: now, Schedule: p.name, Result: observe.Misfired, Count: missed - caught, Due: next})
		}
	}
	s.obs.Send(observe.Event{Kind: observe.ScheduleFired, At: now, Schedule: p.name, Result: observe.Dispatched, Count: onTime, Due: next})
}
