package ax

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/store"
)

// Limits on names and keys, in bytes.
const (
	MaxNameLen = 200
	MaxKeyLen  = 500
)

// The range of due times accepted: every store represents them exactly.
var (
	minDue = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	maxDue = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
)

const (
	maxAhead         = 100 * 365 * 24 * time.Hour
	maxStoredBackoff = 1000
)

// Delay submits a task to run d from now (d >= 0). It returns the stored task, or
// the existing task with ErrDuplicate when (name, key) is taken. With WithTx the task
// is written inside the caller's transaction.
//
// Concurrent Delay and At calls are coalesced into multi-row inserts; each returns
// only when its own row is durable.
func (s *Scheduler) Delay(ctx context.Context, name, key string, d time.Duration, opts ...TaskOption) (*Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, errorf("ax: delay %q/%q: %w", name, key, err)
	}
	if d < 0 {
		return nil, errorf("ax: delay %q/%q: delay %v is negative: %w", name, key, d, ErrInvalid)
	}
	if d > maxAhead {
		return nil, errorf("ax: delay %q/%q: delay %v is beyond %v: %w", name, key, d, maxAhead, ErrInvalid)
	}
	return s.submit(ctx, "delay", name, key, s.clock.Now().Add(d), opts)
}

// At submits a task to run at a time; a time in the past runs it at once. It returns
// the stored task, or the existing task with ErrDuplicate when (name, key) is taken.
// With WithTx the task is written inside the caller's transaction.
func (s *Scheduler) At(ctx context.Context, name, key string, at time.Time, opts ...TaskOption) (*Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, errorf("ax: at %q/%q: %w", name, key, err)
	}
	if err := validDue(at); err != nil {
		return nil, errorf("ax: at %q/%q: %w", name, key, err)
	}
	return s.submit(ctx, "at", name, key, at, opts)
}

// TaskSpec is one task for SubmitMany.
type TaskSpec struct {
	Name, Key string
	DueAt     time.Time
	Payload   []byte       // overrides a WithPayload among the options when not nil
	Options   []TaskOption // per-task options, applied after SubmitMany's
}

// SubmitMany submits many tasks in one store transaction (or in the caller's, with
// WithTx among opts). opts apply to every spec, then each spec's own Options. It
// returns one task per spec, in order. If any spec is invalid it returns ErrInvalid
// naming it and writes nothing. Specs whose (name, key) exists get the existing task
// in their place, and the returned error wraps ErrDuplicate; the others are written.
func (s *Scheduler) SubmitMany(ctx context.Context, specs []TaskSpec, opts ...TaskOption) ([]*Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, errorf("ax: submit many: %w", err)
	}
	common := collect(opts)
	nts := make([]store.NewTask, len(specs))
	for i, sp := range specs {
		o := common // read only: a spec with options or a payload of its own gets its copy
		if len(sp.Options) > 0 || sp.Payload != nil {
			o = collect(opts)
			add(o, sp.Options)
			if sp.Payload != nil {
				o.payload, o.hasPayload = sp.Payload, true
			}
			if o.hasTx != common.hasTx || o.tx != common.tx {
				o.invalid("Tx", "differs between specs: give WithTx to SubmitMany, not to a spec")
			}
		}
		err := validDue(sp.DueAt)
		if err == nil {
			nts[i], err = s.newTask(sp.Name, sp.Key, sp.DueAt, o)
		}
		if err != nil {
			return nil, errorf("ax: submit many: spec %d (%q/%q): %w", i, sp.Name, sp.Key, err)
		}
	}
	if len(nts) == 0 {
		return []*Task{}, nil
	}
	if tr := s.traceOf(ctx); tr != "" {
		for i := range nts {
			nts[i].Trace = tr
		}
	}
	res, err := s.insert(ctx, common, nts, true)
	s.refillUnless(common.hasTx, err)
	if err != nil {
		return nil, errorf("ax: submit many: %w", err)
	}
	out := make([]*Task, len(res))
	dups := 0
	for i, r := range res {
		out[i] = taskOf(r.Task)
		if r.Err != nil {
			dups++
		}
	}
	common.unlessRolledBack(ctx, func() { s.schedule(common.hasTx, res) })
	if dups > 0 {
		return out, errorf("ax: submit many: %d of %d tasks exist: %w", dups, len(res), ErrDuplicate)
	}
	return out, nil
}

func (s *Scheduler) submit(ctx context.Context, op, name, key string, due time.Time, opts []TaskOption) (*Task, error) {
	o := collect(opts)
	nt, err := s.newTask(name, key, due, o)
	if err != nil {
		return nil, errorf("ax: %s %q/%q: %w", op, name, key, err)
	}
	nt.Trace = s.traceOf(ctx)
	var r store.Inserted
	if o.hasTx {
		var res []store.Inserted
		if res, err = s.insert(ctx, o, []store.NewTask{nt}, true); err == nil {
			r = res[0]
		}
	} else {
		r, err = s.inserts.Insert(ctx, s.kown, nt)
		s.refillUnless(false, err)
	}
	if err != nil {
		return nil, errorf("ax: %s %q/%q: %w", op, name, key, err)
	}
	if r.Err != nil {
		return taskOf(r.Task), &TaskStateError{Op: fmt.Sprintf("%s %q/%q", op, name, key), Task: taskOf(r.Task), Err: r.Err}
	}
	o.unlessRolledBack(ctx, func() { s.schedule(o.hasTx, []store.Inserted{r}) })
	return taskOf(r.Task), nil
}

// insert writes tasks in the store's transaction, or in the caller's with WithTx.
// own: the caller hands what it wrote to the running loop (schedule), so the store's
// transaction writes through s.own, whose signal that loop ignores.
func (s *Scheduler) insert(ctx context.Context, o *options, nts []store.NewTask, own bool) ([]store.Inserted, error) {
	st := s.st
	if own {
		st = s.own
	}
	return inTxOr(ctx, s, o, func(tx store.Tx) ([]store.Inserted, error) { return tx.Insert(ctx, nts) },
		func() ([]store.Inserted, error) { return st.Insert(ctx, nts) })
}

// refillUnless has the running loop refill at once after an insert through s.own
// failed (err), unless it was in the caller's transaction (inTx): the transaction may
// have committed all the same (an answer lost, or a read after the commit failed),
// and its signal, marked, wakes no refill of this loop.
func (s *Scheduler) refillUnless(inTx bool, err error) {
	if err == nil || inTx {
		return
	}
	if r := s.current(); r != nil {
		r.refillNow()
	}
}

// schedule hands newly written tasks to a running scheduler's wheel. A task written in a
// caller's transaction is not visible until the commit: the scheduling loop keeps trying its
// claim for a while once it is due.
func (s *Scheduler) schedule(inTx bool, res []store.Inserted) {
	s.obs.Submitted(s.clock.Now(), res)
	r := s.current()
	if r == nil {
		return
	}
	dues := make([]store.Due, 0, len(res))
	for _, in := range res {
		if in.Err == nil {
			if inTx {
				r.watch(in.Task.ID, in.Task.DueAt)
			}
			dues = append(dues, store.Due{ID: in.Task.ID, DueAt: in.Task.DueAt})
		}
	}
	r.add(dues...) // one lock and one wake-up for the whole batch
}

// newTask validates a submission and resolves its options: per-task values win, then
// the handler's defaults when it is registered here, then the package defaults.
func (s *Scheduler) newTask(name, key string, due time.Time, o *options) (store.NewTask, error) {
	return s.buildTask(s.handler(name), name, key, due, o)
}

// buildTask is newTask with the handler registered under name (nil if none) given:
// for callers that hold s.mu.
func (s *Scheduler) buildTask(hd *handler, name, key string, due time.Time, o *options) (store.NewTask, error) {
	if err := validName(name); err != nil {
		return store.NewTask{}, err
	}
	if err := validKey(key); err != nil {
		return store.NewTask{}, err
	}
	if len(o.errs) > 0 {
		return store.NewTask{}, errors.Join(o.errs...)
	}
	if len(o.payload) > s.cfg.MaxPayload {
		return store.NewTask{}, fmt.Errorf("Payload of %d bytes exceeds MaxPayload %d: %w", len(o.payload), s.cfg.MaxPayload, ErrInvalid)
	}
	if o.overlap != nil && o.taskKey == nil {
		return store.NewTask{}, fmt.Errorf("Overlap %q without WithTaskKey: %w", *o.overlap, ErrInvalid)
	}
	nt := store.NewTask{
		Name: name, Key: key, Payload: o.payload, DueAt: due.UTC().Truncate(time.Microsecond),
		MaxRetry: DefaultMaxRetry, OwnerService: s.cfg.OwnerService,
	}
	unique := UniqueLive
	if hd != nil {
		nt.MaxRetry, unique = hd.maxRetry, hd.unique
	}
	if o.unique != nil {
		unique = *o.unique
	}
	nt.KeyHold, nt.KeyUntil = unique.keyHold(s.clock.Now())
	if o.maxRetry != nil {
		nt.MaxRetry = *o.maxRetry
	}
	if o.timeout != nil {
		nt.Timeout = *o.timeout
	}
	if o.owner != nil {
		nt.OwnerService = *o.owner
	}
	if o.taskKey != nil {
		nt.TaskKey, nt.Overlap = *o.taskKey, OverlapQueue
		if o.overlap != nil {
			nt.Overlap = *o.overlap
		}
	}
	if o.hasBackoff {
		if nt.MaxRetry > maxStoredBackoff {
			return store.NewTask{}, fmt.Errorf("Backoff with MaxRetry %d: a per-task backoff stores one delay per retry, at most %d: %w", nt.MaxRetry, maxStoredBackoff, ErrInvalid)
		}
		nt.Backoff = make([]time.Duration, nt.MaxRetry)
		for i := range nt.Backoff {
			nt.Backoff[i] = max(o.backoff(i+1), 0)
		}
	}
	return nt, nil
}

func validDue(at time.Time) error {
	if at.Before(minDue) || at.After(maxDue) {
		return fmt.Errorf("due time %v is outside [%v, %v]: %w", at, minDue.Format(time.DateOnly), maxDue.Format(time.DateOnly), ErrInvalid)
	}
	return nil
}

func validName(name string) error {
	return validText("Name", name, MaxNameLen)
}

func validKey(key string) error {
	return validText("Key", key, MaxKeyLen)
}

func validText(field, v string, limit int) error {
	switch {
	case v == "":
		return fmt.Errorf("%s is empty: %w", field, ErrInvalid)
	case len(v) > limit:
		return fmt.Errorf("%s is %d bytes, longer than %d: %w", field, len(v), limit, ErrInvalid)
	case !utf8.ValidString(v):
		return fmt.Errorf("%s is not valid UTF-8: %w", field, ErrInvalid)
	case strings.ContainsRune(v, 0):
		return fmt.Errorf("%s contains a NUL byte: %w", field, ErrInvalid)
	}
	return nil
}
