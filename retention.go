package ax

import (
	"fmt"
	"time"

	"github.com/axsched/ax/internal/retention"
	"github.com/axsched/ax/store"
)

// Retention says how long finished tasks are kept (Config.Retention). Stores that do
// not implement store.Pruner keep everything.
//
// Every Interval, the leader deletes the finished tasks past their outcome's limits,
// with their executions; without an Elector, each scheduler does. It deletes in
// batches of at most 1,000 tasks, Pause apart, oldest first. It never deletes a live
// task (SCHEDULED, DISPATCHING, RUNNING). Nor does it delete one that leaves its
// status while being deleted, such as a FAILED task being retried. A deleted task's
// business key is free again, whatever its Unique.
//
// The gaps of schedules (ScheduleSlots: the slots no occurrence was written for) are
// kept as long as the longest-kept outcome's tasks (For). A slot older than that is
// thus accounted for by this rule. If one of those outcomes is KeepForever, the gaps
// are kept for good.
type Retention struct {
	// Succeeded, Failed and Cancelled (CANCELLED and SKIPPED tasks) are the limits
	// of each outcome. Defaults: 7 days, 30 days and 7 days, no row limit.
	Succeeded Keep
	Failed    Keep
	Cancelled Keep
	// Audit is how long the records of the admin API's audit log are kept. Defaults
	// to 90 days; KeepForever keeps them all.
	Audit time.Duration
	// Stats is how long the per-minute execution statistics (Scheduler.Stats) are
	// kept. Defaults to DefaultRetainStats (48h); KeepForever keeps them all.
	Stats time.Duration
	// Interval is how often a round runs. Defaults to DefaultRetentionInterval (1m).
	Interval time.Duration
	// Pause is the pause between two batches of a round, which leaves the store to
	// the scheduler's own writes. Defaults to DefaultRetentionPause (50ms).
	Pause time.Duration
	// Off turns retention off: nothing is deleted.
	Off bool
}

// Keep is how long the finished tasks of one outcome are kept (Retention).
type Keep struct {
	// For is their age limit, counted from FinishedAt: older ones are deleted. Zero
	// means the outcome's default; KeepForever (negative) means no age limit.
	For time.Duration
	// Rows, when positive, is how many are kept at most: beyond them, the ones that
	// finished first are deleted, whatever their age. (Each batch finds the cut by
	// reading that many index entries: keep it in the millions at most.)
	Rows int
}

// KeepForever, as Keep.For, keeps an outcome's tasks whatever their age.
const KeepForever time.Duration = -1

// The defaults of Retention.
const (
	DefaultRetainSucceeded   = 7 * 24 * time.Hour
	DefaultRetainFailed      = 30 * 24 * time.Hour
	DefaultRetainCancelled   = 7 * 24 * time.Hour
	DefaultRetainAudit       = 90 * 24 * time.Hour
	DefaultRetainStats       = 48 * time.Hour
	DefaultRetentionInterval = time.Minute
	DefaultRetentionPause    = 50 * time.Millisecond
)

func (r Retention) withDefaults() Retention {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&r.Succeeded.For, DefaultRetainSucceeded)
	def(&r.Failed.For, DefaultRetainFailed)
	def(&r.Cancelled.For, DefaultRetainCancelled)
	def(&r.Audit, DefaultRetainAudit)
	def(&r.Stats, DefaultRetainStats)
	def(&r.Interval, DefaultRetentionInterval)
	def(&r.Pause, DefaultRetentionPause)
	return r
}

func (r Retention) validate() []error {
	var errs []error
	for _, k := range []struct {
		name string
		keep Keep
	}{{"Succeeded", r.Succeeded}, {"Failed", r.Failed}, {"Cancelled", r.Cancelled}} {
		if k.keep.For < 0 && k.keep.For != KeepForever {
			errs = append(errs, fmt.Errorf("Retention.%s.For is negative (%v) but not KeepForever: %w", k.name, k.keep.For, ErrInvalid))
		}
		if k.keep.Rows < 0 {
			errs = append(errs, fmt.Errorf("Retention.%s.Rows is negative (%d): %w", k.name, k.keep.Rows, ErrInvalid))
		}
	}
	if r.Audit < 0 && r.Audit != KeepForever {
		errs = append(errs, fmt.Errorf("Retention.Audit is negative (%v) but not KeepForever: %w", r.Audit, ErrInvalid))
	}
	if r.Stats < 0 && r.Stats != KeepForever {
		errs = append(errs, fmt.Errorf("Retention.Stats is negative (%v) but not KeepForever: %w", r.Stats, ErrInvalid))
	}
	if r.Interval < 0 || r.Pause < 0 {
		errs = append(errs, fmt.Errorf("Retention.Interval %v or Pause %v is negative: %w", r.Interval, r.Pause, ErrInvalid))
	}
	return errs
}

// rules returns the store's rules for r, one per finished status.
func (r Retention) rules() []retention.Rule {
	rule := func(st store.Status, k Keep) retention.Rule {
		return retention.Rule{Status: st, Age: max(k.For, 0), Rows: k.Rows}
	}
	return []retention.Rule{
		rule(store.Succeeded, r.Succeeded), rule(store.Failed, r.Failed),
		rule(store.Cancelled, r.Cancelled), rule(store.Skipped, r.Cancelled),
	}
}

// gapAge is how long the gaps of schedules are kept: as long as the longest-kept
// outcome, 0 (for good) when one is kept whatever its age.
func (r Retention) gapAge() time.Duration {
	age := time.Duration(0)
	for _, k := range []Keep{r.Succeeded, r.Failed, r.Cancelled} {
		if k.For < 0 {
			return 0
		}
		age = max(age, k.For)
	}
	return age
}
