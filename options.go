package ax

import (
	"fmt"
	"time"

	"github.com/axsched/ax/store"
)

// Options are typed by what they configure, so that an option given where it has no
// meaning does not compile:
//
//	option         Handle  Delay, At, SubmitMany  Cron, Every
//	WithMaxRetry     ✓            ✓                  ✓   (RunOption)
//	WithBackoff      ✓            ✓                  ✓   (RunOption)
//	WithTimeout      ✓            ✓                  ✓   (RunOption)
//	WithPayload                   ✓                  ✓   (ContentOption)
//	WithOwner                     ✓                  ✓   (ContentOption)
//	WithOverlap                   ✓                  ✓   (ContentOption)
//	WithUnique       ✓            ✓                      (UniqueOption)
//	WithMaxSnoozes   ✓
//	WithConcurrency  ✓
//	WithRate         ✓
//	WithKeyConcurrency ✓
//	WithKeyRate      ✓
//	WithActor        (Cancel, PauseName, ResumeName, SetConcurrency, SetRate, SetKeyConcurrency, SetKeyRate)
//	WithTx                        ✓
//	WithTaskKey                   ✓
//	WithTimeZone                                     ✓   (Cron only)
//	WithMisfire                                      ✓
//
// On a handler an option is the default for its tasks; on a task it overrides the
// handler's default; on a schedule it applies to every occurrence. A bad value (a
// negative MaxRetry, say) is ErrInvalid from the call that received it; on Handle,
// which returns nothing, it panics, like an invalid registration.

// HandlerOption configures a handler (Handle, HandleFunc): the defaults for its tasks.
type HandlerOption interface {
	apply(o *options)
	handlerOption()
}

// TaskOption configures one task (Delay, At, SubmitMany, TaskSpec.Options).
type TaskOption interface {
	apply(o *options)
	taskOption()
}

// ScheduleOption configures a schedule (Cron, Every) and its occurrences.
type ScheduleOption interface {
	apply(o *options)
	scheduleOption()
}

// RunOption says how a task runs (retries, backoff, timeout). It is a HandlerOption,
// a TaskOption and a ScheduleOption.
type RunOption struct{ set func(o *options) }

func (r RunOption) apply(o *options) { r.set(o) }
func (RunOption) handlerOption()     {}
func (RunOption) taskOption()        {}
func (RunOption) scheduleOption()    {}

// ContentOption says what a task carries (payload, owner, overlap policy). It is a
// TaskOption and a ScheduleOption.
type ContentOption struct{ set func(o *options) }

func (c ContentOption) apply(o *options) { c.set(o) }
func (ContentOption) taskOption()        {}
func (ContentOption) scheduleOption()    {}

// handlerOnly is a HandlerOption that nothing else takes.
type handlerOnly func(o *options)

func (f handlerOnly) apply(o *options) { f(o) }
func (handlerOnly) handlerOption()     {}

// taskOnly is a TaskOption that nothing else takes.
type taskOnly func(o *options)

func (f taskOnly) apply(o *options) { f(o) }
func (taskOnly) taskOption()        {}

// ActionOption configures a call on a task or schedule that exists (Get, Cancel,
// Trigger, Reschedule, Retry, PauseSchedule, ResumeSchedule, TriggerSchedule) or on
// the audit log (Audit): WithTx is the one there is.
type ActionOption interface {
	apply(o *options)
	actionOption()
}

// TxOption is WithTx's option: a TaskOption, an ActionOption and a CancelOption.
type TxOption func(o *options)

func (f TxOption) apply(o *options) { f(o) }
func (TxOption) taskOption()        {}
func (TxOption) actionOption()      {}
func (TxOption) cancelOption()      {}

// CancelOption configures Cancel: WithTx and WithActor.
type CancelOption interface {
	apply(o *options)
	cancelOption()
}

// ActorOption is WithActor's option: a CancelOption and a NameOption.
type ActorOption func(o *options)

func (f ActorOption) apply(o *options) { f(o) }
func (ActorOption) cancelOption()      {}
func (ActorOption) nameOption()        {}

// WithActor names who acts — an operator, a service: who asks Cancel to cancel a task
// (recorded in the task's CancelledBy and in the error of an execution it stops), or
// who pauses or resumes a task name (NameState.ChangedBy). Defaults to the
// scheduler's Config.Node. Empty, over 200 bytes, not UTF-8 or holding a NUL is
// ErrInvalid.
func WithActor(actor string) ActorOption {
	return ActorOption(func(o *options) {
		if actor == "" || len(actor) > store.MaxCancelledBy || !store.CleanText(actor) {
			o.invalid("Actor", "%q must be 1 to %d bytes of UTF-8 without NUL", actor, store.MaxCancelledBy)
			return
		}
		o.actor = &actor
	})
}

// scheduleOnly is a ScheduleOption that nothing else takes.
type scheduleOnly func(o *options)

func (f scheduleOnly) apply(o *options) { f(o) }
func (scheduleOnly) scheduleOption()    {}

// options collects what Options set; nil pointers mean "not given".
type options struct {
	payload     []byte
	hasPayload  bool
	maxRetry    *int
	maxSnoozes  *int
	concurrency *int
	rate        *rateLimit
	keyConc     *int
	keyRate     *rateLimit
	actor       *string
	backoff     func(attempt int) time.Duration
	hasBackoff  bool
	timeout     *time.Duration
	owner       *string
	tx          any
	hasTx       bool
	taskKey     *string
	unique      *Unique
	overlap     *OverlapPolicy
	misfire     *MisfirePolicy
	loc         *time.Location
	errs        []error
}

// collect applies opts, in order, to new options.
func collect[O interface{ apply(*options) }](opts []O) *options {
	o := &options{}
	add(o, opts)
	return o
}

// add applies opts, in order; nil ones are skipped.
func add[O interface{ apply(*options) }](o *options, opts []O) {
	for _, opt := range opts {
		if any(opt) != nil {
			opt.apply(o)
		}
	}
}

func (o *options) invalid(field, format string, args ...any) {
	o.errs = append(o.errs, fmt.Errorf("%s %s: %w", field, fmt.Sprintf(format, args...), ErrInvalid))
}

// WithPayload attaches bytes to a task; the handler reads them from Task.Payload.
// At most Config.MaxPayload bytes (default 1 MiB). Per task only.
func WithPayload(p []byte) ContentOption {
	return ContentOption{func(o *options) {
		o.payload = append([]byte(nil), p...)
		if p != nil && len(p) == 0 {
			o.payload = []byte{}
		}
		o.hasPayload = true
	}}
}

// WithMaxRetry sets how many business retries follow a failed first attempt
// (default DefaultMaxRetry, 5); 0 means run once. Negative is invalid.
func WithMaxRetry(n int) RunOption {
	return RunOption{func(o *options) {
		if n < 0 {
			o.invalid("MaxRetry", "is negative (%d)", n)
			return
		}
		o.maxRetry = &n
	}}
}

// WithBackoff sets the delay before business retry n (n = 1 for the first retry).
// On a handler it applies to all its tasks; on a task the delays for its MaxRetry
// retries are computed when it is submitted and stored with it, so they hold on any
// node. Default DefaultBackoff. A negative delay counts as zero.
func WithBackoff(f func(attempt int) time.Duration) RunOption {
	return RunOption{func(o *options) {
		if f == nil {
			o.invalid("Backoff", "is nil")
			return
		}
		o.backoff, o.hasBackoff = f, true
	}}
}

// WithTimeout sets the handler's deadline per execution (default DefaultTimeout,
// 30m). When it passes, the attempt counts as a business failure at once, even if the
// handler ignores its context. Zero or negative is invalid.
func WithTimeout(d time.Duration) RunOption {
	return RunOption{func(o *options) {
		if d <= 0 {
			o.invalid("Timeout", "must be positive (%v)", d)
			return
		}
		o.timeout = &d
	}}
}

// WithMaxSnoozes caps how many times one task of the handler may snooze (its handler
// returns Snooze or SnoozeUntil): the snooze after n ends the task FAILED, with an
// error that says so. Default DefaultMaxSnoozes (100); 0 fails a task at its first
// snooze. Negative is invalid. An operator's Retry starts the count again.
func WithMaxSnoozes(n int) HandlerOption {
	return handlerOnly(func(o *options) {
		if n < 0 {
			o.invalid("MaxSnoozes", "is negative (%d)", n)
			return
		}
		o.maxSnoozes = &n
	})
}

// WithConcurrency limits the handler's name to n tasks DISPATCHING or RUNNING at
// once across every scheduler of the namespace, whatever their number: the claim
// that would exceed it leaves the task waiting, due, for a slot (see SetConcurrency,
// which this stores). Start stores it, and a Handle after Start at once, so that the
// value in the code wins over one set at run time at each Start; taking the option
// out of the code leaves the stored limit as it is (SetConcurrency to 0 removes it).
// n must be 1 to MaxConcurrency.
func WithConcurrency(n int) HandlerOption {
	return handlerOnly(func(o *options) {
		if n < 1 || n > MaxConcurrency {
			o.invalid("Concurrency", "must be 1 to %d (%d)", MaxConcurrency, n)
			return
		}
		o.concurrency = &n
	})
}

// WithRate limits the handler's name to n tasks started in any window of per, across
// every scheduler of the namespace, by the store's clock: a claim that would exceed
// it leaves the task waiting, due, until the window admits it (see SetRate, which
// this stores). Start stores it, and a Handle after Start at once, as
// WithConcurrency does. n must be 1 to MaxRate, per from MinRatePer to MaxRatePer.
func WithRate(n int, per time.Duration) HandlerOption {
	return handlerOnly(func(o *options) { o.rate = o.rateLimit("Rate", n, per) })
}

// WithKeyConcurrency lets n of the handler's tasks that share a task key
// (WithTaskKey, with Overlap queue or skip) run at once, across every scheduler of
// the namespace, instead of one: "at most 2 exports per customer" (see
// SetKeyConcurrency, which this stores). Start stores it, and a Handle after Start
// at once. n must be 1 to MaxConcurrency.
func WithKeyConcurrency(n int) HandlerOption {
	return handlerOnly(func(o *options) {
		if n < 1 || n > MaxConcurrency {
			o.invalid("KeyConcurrency", "must be 1 to %d (%d)", MaxConcurrency, n)
			return
		}
		o.keyConc = &n
	})
}

// WithKeyRate limits the handler's tasks that share a task key (WithTaskKey, with
// Overlap queue or skip) to n started in any window of per, for each key, across
// every scheduler of the namespace, by the store's clock: "at most 10 syncs per
// customer a minute" (see SetKeyRate, which this stores). Start stores it, and a
// Handle after Start at once. n must be 1 to MaxRate, per from MinRatePer to
// MaxRatePer.
func WithKeyRate(n int, per time.Duration) HandlerOption {
	return handlerOnly(func(o *options) { o.keyRate = o.rateLimit("KeyRate", n, per) })
}

// rateLimit is a rate limit as WithRate or WithKeyRate gives it.
type rateLimit struct {
	n   int
	per time.Duration
}

// rateLimit returns n per per as the option field gives it, or nil, recording why,
// when n is not 1 to MaxRate or per not MinRatePer to MaxRatePer.
func (o *options) rateLimit(field string, n int, per time.Duration) *rateLimit {
	if n < 1 || n > MaxRate {
		o.invalid(field, "must be 1 to %d (%d)", MaxRate, n)
		return nil
	}
	if per < MinRatePer || per > MaxRatePer {
		o.invalid(field, "period must be %v to %v (%v)", MinRatePer, MaxRatePer, per)
		return nil
	}
	return &rateLimit{n: n, per: per}
}

// WithOwner records which service submitted the task (owner_service), overriding
// Config.OwnerService. Per task only.
func WithOwner(service string) ContentOption {
	return ContentOption{func(o *options) { o.owner = &service }}
}

// WithTx makes the call write inside tx, a transaction the caller owns or one of
// InTx's: Delay, At and SubmitMany write their tasks in it, Cancel its cancellation,
// Trigger its trigger, and so on. They commit or roll back with tx. See
// "Transactions" in the package doc for the rules.
func WithTx(tx any) TxOption {
	return TxOption(func(o *options) {
		if tx == nil {
			o.invalid("Tx", "is nil")
			return
		}
		o.tx, o.hasTx = tx, true
	})
}

// WithTaskKey makes key a mutual-exclusion key for the task: while another task with
// the same key is DISPATCHING or RUNNING, the task does not start; WithOverlap says
// what it does instead (default OverlapQueue: it waits). The check is part of the
// store's claiming write, so it holds across any number of schedulers. Per task
// (Delay, At, SubmitMany); a schedule's occurrences always have the schedule's name
// as their key. At most MaxKeyLen bytes.
func WithTaskKey(key string) TaskOption {
	return taskOnly(func(o *options) {
		if err := validText("TaskKey", key, MaxKeyLen); err != nil {
			o.errs = append(o.errs, err)
			return
		}
		o.taskKey = &key
	})
}

// Unique says how long a task's business key (Name, Key) stays taken once the task
// has finished (WithUnique). A task holds its key while SCHEDULED, DISPATCHING or
// RUNNING, whatever its Unique.
//
// While the key is taken, submitting it again returns the task with ErrDuplicate.
// Once it is free, the submit creates a new task with a new id. The old task is marked
// Superseded; it keeps its row and its history (Get, Tasks) until retention removes it.
//
// The default, UniqueLive, frees the key of a task that SUCCEEDED, was CANCELLED or
// was SKIPPED. It keeps the key of a FAILED task, which an operator may still Retry.
//
// A submit may be repeated because its first attempt's outcome was unknown (a network
// error at commit). The repeat can then create a second task if the first one has
// already finished. A UniqueFor window longer than the caller's retries rules that out.
type Unique int64

// How long a finished task keeps its business key.
const (
	// UniqueLive: SUCCEEDED, CANCELLED and SKIPPED free the key; FAILED keeps it.
	// The default.
	UniqueLive Unique = 0
	// UniqueActive: every finished state frees the key, FAILED too (a superseded
	// FAILED task can no longer be retried).
	UniqueActive Unique = -1
	// UniqueForever: the key stays taken as long as the task's row exists. A
	// schedule's occurrences always hold their keys so.
	UniqueForever Unique = -2
)

// UniqueFor is UniqueLive, and besides keeps the key taken for d after the task was
// submitted, whatever its status: a deduplication window. d must be positive.
func UniqueFor(d time.Duration) Unique {
	if d <= 0 {
		return Unique(minUnique - 1) // refused by WithUnique
	}
	return Unique(d)
}

// minUnique is the smallest valid Unique.
const minUnique = UniqueForever

// keyHold returns the store's hold for u and, for a window, the time the key is
// kept until for a task submitted at now.
func (u Unique) keyHold(now time.Time) (store.KeyHold, time.Time) {
	switch {
	case u == UniqueActive:
		return store.HoldActive, time.Time{}
	case u == UniqueForever:
		return store.HoldForever, time.Time{}
	case u > 0:
		return store.HoldLive, now.Add(time.Duration(u))
	}
	return store.HoldLive, time.Time{}
}

// KeyHold is how a stored task keeps its business key once finished (Task.KeyHold):
// HoldLive, HoldActive or HoldForever, what UniqueLive, UniqueActive (and UniqueFor)
// and UniqueForever store.
type KeyHold = store.KeyHold

// The stored key holds.
const (
	HoldLive    KeyHold = ""
	HoldActive  KeyHold = "active"
	HoldForever KeyHold = "forever"
)

// UniqueOption is WithUnique's option: a HandlerOption (the default for the
// handler's tasks submitted through this scheduler) and a TaskOption.
type UniqueOption func(o *options)

func (f UniqueOption) apply(o *options) { f(o) }
func (UniqueOption) handlerOption()     {}
func (UniqueOption) taskOption()        {}

// WithUnique says how long the task's business key stays taken once it has finished
// (see Unique). On Handle it is the default for the handler's tasks submitted
// through a scheduler where the handler is registered; on a task it overrides it.
// Not for schedules: an occurrence keeps its key for good.
func WithUnique(u Unique) UniqueOption {
	return func(o *options) {
		if u < minUnique {
			o.invalid("Unique", "%d is not UniqueLive, UniqueActive, UniqueForever or UniqueFor of a positive duration", u)
			return
		}
		o.unique = &u
	}
}

// OverlapPolicy says what a task with a task key does when it comes due while
// another task with the same key is DISPATCHING or RUNNING.
type OverlapPolicy = store.OverlapPolicy

// The overlap policies (WithOverlap).
const (
	// OverlapSkip: the task becomes SKIPPED, with the reason (the key and the task
	// holding it) in LastError. The default for schedules.
	OverlapSkip OverlapPolicy = "skip"
	// OverlapQueue: the task waits, SCHEDULED, and starts as soon as the key is
	// free; waiting tasks start one at a time in due order. The default for a task
	// with WithTaskKey.
	OverlapQueue OverlapPolicy = "queue"
	// OverlapAllow: the key is ignored; tasks run concurrently.
	OverlapAllow OverlapPolicy = "allow"
)

// WithOverlap sets the overlap policy of a schedule (Cron, Every) or of a task with
// WithTaskKey.
func WithOverlap(p OverlapPolicy) ContentOption {
	return ContentOption{func(o *options) {
		if !p.Valid() {
			o.invalid("Overlap", "%q is not OverlapSkip, OverlapQueue or OverlapAllow", p)
			return
		}
		o.overlap = &p
	}}
}

// MisfirePolicy says what a schedule does with the slots it missed while no
// scheduler was running.
type MisfirePolicy = store.MisfirePolicy

// The misfire policies (WithMisfire).
const (
	// MisfireFireOnce: the missed slots collapse into one occurrence, fired at once.
	// The default.
	MisfireFireOnce MisfirePolicy = "fire_once"
	// MisfireSkip: the missed slots are dropped; the schedule waits for its next
	// slot.
	MisfireSkip MisfirePolicy = "skip"
	// MisfireCatchUp: each missed slot fires, oldest first, up to Config.MaxCatchUp
	// (default 100, the most recent ones); they run one after another, even under
	// OverlapSkip.
	MisfireCatchUp MisfirePolicy = "catch_up"
)

// WithMisfire sets a schedule's misfire policy (Cron, Every).
func WithMisfire(p MisfirePolicy) ScheduleOption {
	return scheduleOnly(func(o *options) {
		if !p.Valid() {
			o.invalid("Misfire", "%q is not MisfireFireOnce, MisfireSkip or MisfireCatchUp", p)
			return
		}
		o.misfire = &p
	})
}

// WithTimeZone sets the time zone a Cron spec is evaluated in (default UTC). It has
// no meaning for Every, whose slots are fixed instants.
func WithTimeZone(loc *time.Location) ScheduleOption {
	return scheduleOnly(func(o *options) {
		if loc == nil {
			o.invalid("TimeZone", "is nil")
			return
		}
		o.loc = loc
	})
}
