package ax

import (
	"context"
	"log/slog"
	"time"

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
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-l.schedulesChanged:
			reload = true
		}
		// Re-read now and then, to see pauses, resumes and other schedulers' progress.
		if reload || time.Since(lastLoad) >= s.cfg.RefillInterval {
			rows, err := s.st.Schedules(ctx)
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
		}
		wait := s.cfg.RefillInterval
		for _, p := range ps {
			row, ok := cur[p.name]
			if !ok || row.Paused {
				continue
			}
			now := s.clock.now()
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
					// Another scheduler got there first, or the schedule was paused.
					reload, wait = true, 0
					continue
				}
				row.NextFireAt = next
				cur[p.name] = row
			}
			wait = min(wait, row.NextFireAt.Sub(s.clock.now())-fireAhead)
		}
		timer.Reset(max(wait, 0))
	}
}

// fire materialises the occurrences of p due by now+fireAhead, from the stored row.
// It returns the schedule's new NextFireAt, and whether this call applied.
func (l *leader) fire(ctx context.Context, p *periodic, row *store.Schedule, now time.Time) (time.Time, bool, error) {
	s := l.s
	slots, missed, next := p.plan(row.NextFireAt, now, s.cfg.MaxCatchUp)
	tasks := make([]store.NewTask, len(slots))
	for i, slot := range slots {
		nt, err := s.newTask(p.name, occurrenceKey(slot), slot, p.opts)
		if err != nil {
			return time.Time{}, false, err
		}
		nt.TaskKey, nt.Overlap = p.name, p.overlap
		tasks[i] = nt
	}
	fp := store.FireParams{Name: p.name, Expect: row.NextFireAt, Next: next, Tasks: tasks}
	if len(slots) > 0 {
		fp.Last = slots[len(slots)-1]
	}
	res, err := s.st.FireSchedule(ctx, fp)
	if err != nil || !res.Applied {
		return time.Time{}, false, err
	}
	if missed {
		s.log.LogAttrs(ctx, slog.LevelWarn, "ax: schedule missed slots while no scheduler ran",
			slog.String("schedule", p.name), slog.Time("missed_since", row.NextFireAt),
			slog.String("misfire", string(p.misfire)), slog.Int("fired", len(slots)))
	}
	dues := make([]store.Due, 0, len(res.Inserted))
	for _, in := range res.Inserted {
		if in.Err == nil {
			dues = append(dues, store.Due{ID: in.Task.ID, DueAt: in.Task.DueAt})
		}
	}
	l.add(dues...)
	return next, true, nil
}

// occurrenceKey is the business key of a schedule's occurrence: its slot, so that
// the (name, key) uniqueness of tasks makes each occurrence exist once.
func occurrenceKey(slot time.Time) string {
	return slot.UTC().Format(time.RFC3339Nano)
}

// blockedRetry is how often the leader retries tasks waiting for a task key that a
// task of another process holds; keys freed in this process retry them at once.
const blockedRetry = time.Second

// block remembers tasks a claim left waiting for their key, and retries them after
// blockedRetry.
func (l *leader) block(bs []store.Blocked) {
	retry := l.s.clock.now().Add(blockedRetry)
	l.mu.Lock()
	for _, b := range bs {
		ids := l.blocked[b.TaskKey]
		if ids == nil {
			ids = make(map[int64]bool)
			l.blocked[b.TaskKey] = ids
		}
		ids[b.ID] = true
		l.incoming = append(l.incoming, store.Due{ID: b.ID, DueAt: retry})
	}
	l.mu.Unlock()
	l.signal()
}

// unblock retries at once the tasks waiting for keys that were just freed here.
func (l *leader) unblock(keys []string) {
	now := l.s.clock.now()
	l.mu.Lock()
	n := 0
	for _, k := range keys {
		for id := range l.blocked[k] {
			l.incoming = append(l.incoming, store.Due{ID: id, DueAt: now})
			n++
		}
		delete(l.blocked, k)
	}
	l.mu.Unlock()
	if n > 0 {
		l.signal()
	}
}

// settled forgets waiting tasks that a claim took or skipped.
func (l *leader) settled(res *store.ClaimResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.blocked) == 0 {
		return
	}
	for _, ts := range [][]store.Task{res.Claimed, res.Skipped} {
		for _, t := range ts {
			if ids := l.blocked[t.TaskKey]; ids != nil {
				delete(ids, t.ID)
				if len(ids) == 0 {
					delete(l.blocked, t.TaskKey)
				}
			}
		}
	}
}
