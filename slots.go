package ax

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/axsched/ax/internal/periodic"
	"github.com/axsched/ax/store"
)

// SlotState is what became of one slot of a schedule (ScheduleSlots).
type SlotState string

// The states of a slot.
const (
	// SlotPending: its occurrence is SCHEDULED, or not written yet and not late.
	SlotPending SlotState = "pending"
	// SlotRunning: its occurrence is DISPATCHING or RUNNING.
	SlotRunning SlotState = "running"
	// SlotSucceeded: its occurrence succeeded.
	SlotSucceeded SlotState = "succeeded"
	// SlotFailed: its occurrence failed, its retries spent.
	SlotFailed SlotState = "failed"
	// SlotSkipped: its occurrence came due while the previous one still ran, and
	// the overlap policy (OverlapSkip) skipped it; Result holds the reason.
	SlotSkipped SlotState = "skipped"
	// SlotCancelled: its occurrence was cancelled (Cancel, or PauseSchedule and
	// DeleteSchedule, which cancel the occurrences written and not yet started).
	SlotCancelled SlotState = "cancelled"
	// SlotMissed: no scheduler fired it in time (none ran), and the misfire policy
	// did not fire it; Result says what the policy did instead ("skipped", "fired
	// the last one", "caught up 100, the most recent"), or that no scheduler has
	// come to it yet.
	SlotMissed SlotState = "missed"
	// SlotPaused: it passed while the schedule was paused.
	SlotPaused SlotState = "paused"
	// SlotPruned: it is older than the retention of finished tasks (Config.Retention)
	// and neither its occurrence nor a gap is left: retention deleted them.
	SlotPruned SlotState = "pruned"
	// SlotUnknown: nothing accounts for it. It does not happen to a slot of the
	// schedule's current spec; a slot from before the spec or time zone last changed
	// may be unknown (see ScheduleSlots).
	SlotUnknown SlotState = "unknown"
)

// Slot is one slot of a schedule, or one manual occurrence of it (TriggerSchedule),
// as ScheduleSlots reports it.
type Slot struct {
	// At is the slot's time, UTC; for a manual occurrence, when it was triggered.
	At time.Time
	// State is what became of it.
	State SlotState
	// Manual marks an occurrence of TriggerSchedule, outside the schedule's slots.
	Manual bool
	// TaskID is the id of its occurrence; 0 when there is none.
	TaskID int64
	// Attempt is the occurrence's Attempt: 0 on the first run.
	Attempt int
	// Lateness is how late its occurrence's last execution started: StartedAt −
	// DueAt (a business retry moves DueAt to the retry's time). Zero before a start.
	Lateness time.Duration
	// Result says more, in words: for Missed and Paused, what was done with the
	// slot; for Skipped and Failed, the occurrence's LastError.
	Result string
}

// MaxScheduleSlots is the most slots ScheduleSlots returns in one call.
const MaxScheduleSlots = 100

// ScheduleSlots returns the last n slots of schedule name up to now, newest first,
// each with what became of it. n is in [1, MaxScheduleSlots]. Every slot since the
// schedule was stored is accounted for:
//
//   - by its occurrence, the task keyed by the slot;
//   - by a gap the scheduler recorded when it went past the slot without one (missed,
//     paused);
//   - or by the retention rule (pruned).
//
// Slots before the schedule was stored are not shown. The manual occurrences of the
// same span (TriggerSchedule), at most n, come as extra entries marked Manual, in time
// order among the slots.
//
// The slots are computed with the schedule's current spec and time zone. After a
// change of either, the slots from before the change are those of the new spec. Those
// that are not also slots of the old spec show as SlotUnknown (or SlotPruned).
//
// ScheduleSlots reads the stored schedule, the occurrences by their keys (one index
// lookup per slot), the gaps of the span and the manual occurrences (a bounded range
// of keys). It works on a scheduler that is not started. An unknown name is
// ErrNotFound.
func (s *Scheduler) ScheduleSlots(ctx context.Context, name string, n int) ([]Slot, error) {
	if n < 1 || n > MaxScheduleSlots {
		return nil, errorf("ax: schedule slots of %q: n %d is outside [1, %d]: %w", name, n, MaxScheduleSlots, ErrInvalid)
	}
	row, err := s.storedSchedule(ctx, name)
	if err != nil {
		return nil, errorf("ax: schedule slots of %q: %w", name, err)
	}
	p, err := storedPeriodic(row)
	if err != nil {
		return nil, errorf("ax: schedule slots of %q: %w", name, err)
	}
	now, err := s.storeNow(ctx)
	if err != nil {
		return nil, errorf("ax: schedule slots of %q: %w", name, err)
	}
	now = now.UTC()
	first := p.Next(row.CreatedAt)
	var slots []time.Time
	if !first.After(now) {
		slots = p.LastSlots(first, now.Add(time.Nanosecond), n)
	}
	oldest := now
	if len(slots) > 0 {
		oldest = slots[0]
	}

	keys := make([]string, len(slots))
	for i, t := range slots {
		keys[i] = periodic.OccurrenceKey(t)
	}
	tasks, err := s.st.TasksByKeys(ctx, name, keys)
	if err != nil {
		return nil, errorf("ax: schedule slots of %q: %w", name, err)
	}
	byKey := make(map[string]*store.Task, len(tasks))
	for i := range tasks {
		if t := &tasks[i]; byKey[t.Key] == nil || t.ID > byKey[t.Key].ID {
			byKey[t.Key] = t
		}
	}
	var gaps []store.SlotGap
	if len(slots) > 0 {
		if gaps, err = s.st.SlotGaps(ctx, name, oldest, now, 2*n+2); err != nil {
			return nil, errorf("ax: schedule slots of %q: %w", name, err)
		}
	}
	manualFrom := oldest // the span of the slots; all of the schedule's life when it has fewer
	if len(slots) < n {
		manualFrom = row.CreatedAt
	}
	manual, err := s.st.TasksByKeyRange(ctx, name, manualKeyFrom(manualFrom), manualKeyBefore(now), n)
	if err != nil {
		return nil, errorf("ax: schedule slots of %q: %w", name, err)
	}

	grace := periodic.MisfireGrace(s.cfg.RefillInterval)
	prunedBefore, prunes := s.cfg.Retention.prunedBefore(now)
	out := make([]Slot, 0, len(slots)+len(manual))
	for i := len(slots) - 1; i >= 0; i-- {
		t := slots[i]
		sl := Slot{At: t}
		switch g, inGap := gapAt(gaps, t); {
		case byKey[keys[i]] != nil:
			sl = slotOf(byKey[keys[i]], t)
		case inGap && g.Why == store.GapPaused:
			sl.State, sl.Result = SlotPaused, g.Result
		case inGap:
			sl.State, sl.Result = SlotMissed, g.Result
		case !t.Before(row.NextFireAt) && row.Paused:
			sl.State, sl.Result = SlotPaused, "not fired: paused"
		case !t.Before(row.NextFireAt) && t.Before(now.Add(-grace)):
			sl.State, sl.Result = SlotMissed, "not fired yet: no scheduler has come to it"
		case !t.Before(row.NextFireAt):
			sl.State = SlotPending
		case prunes && (prunedBefore.IsZero() || t.Before(prunedBefore)):
			sl.State, sl.Result = SlotPruned, "deleted by retention"
		default:
			sl.State = SlotUnknown
		}
		out = append(out, sl)
	}
	for i := range manual {
		t := &manual[i]
		at, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(t.Key, manualPrefix))
		if err != nil {
			at = t.CreatedAt
		}
		sl := slotOf(t, at.UTC())
		sl.Manual = true
		out = append(out, sl)
	}
	slices.SortStableFunc(out, func(a, b Slot) int { return b.At.Compare(a.At) })
	return out, nil
}

// manualPrefix starts the key of a manual occurrence (TriggerSchedule).
const manualPrefix = "manual/"

// manualKeyFrom and manualKeyBefore bound the keys of the manual occurrences
// triggered from t's second on, and up to t's second included. A key is the prefix
// and the time in RFC 3339 UTC with its fraction trimmed: the keys of one second sort
// together ("…:05.5Z" < "…:05Z" byte-wise), before those of the next.
func manualKeyFrom(t time.Time) string {
	return manualPrefix + t.UTC().Truncate(time.Second).Format("2006-01-02T15:04:05")
}

func manualKeyBefore(t time.Time) string {
	return manualKeyFrom(t.Add(time.Second))
}

// gapAt returns the gap holding slot t, if any.
func gapAt(gaps []store.SlotGap, t time.Time) (store.SlotGap, bool) {
	for _, g := range gaps {
		if !t.Before(g.From) && t.Before(g.Until) {
			return g, true
		}
	}
	return store.SlotGap{}, false
}

// slotOf is the slot at t that occurrence task accounts for.
func slotOf(t *store.Task, at time.Time) Slot {
	sl := Slot{At: at, TaskID: t.ID, Attempt: t.Attempt}
	if !t.StartedAt.IsZero() {
		sl.Lateness = t.StartedAt.Sub(t.DueAt)
	}
	switch t.Status {
	case store.Scheduled:
		sl.State = SlotPending
	case store.Dispatching, store.Running:
		sl.State = SlotRunning
	case store.Succeeded:
		sl.State = SlotSucceeded
	case store.Failed:
		sl.State, sl.Result = SlotFailed, t.LastError
	case store.Skipped:
		sl.State, sl.Result = SlotSkipped, t.LastError
	case store.Cancelled:
		sl.State = SlotCancelled
	default:
		sl.State, sl.Result = SlotUnknown, fmt.Sprintf("status %s", t.Status)
	}
	return sl
}

// prunedBefore returns the time before which retention may have deleted a finished
// occurrence, and whether it deletes any: the youngest age limit's cut, or the zero
// time when a row limit may delete one of any age.
func (r Retention) prunedBefore(now time.Time) (time.Time, bool) {
	if r.Off {
		return time.Time{}, false
	}
	r = r.withDefaults()
	age, prunes := time.Duration(0), false
	for _, k := range []Keep{r.Succeeded, r.Failed, r.Cancelled} {
		if k.Rows > 0 {
			return time.Time{}, true
		}
		if k.For > 0 && (!prunes || k.For < age) {
			age, prunes = k.For, true
		}
	}
	return now.Add(-age), prunes
}
