// Package memory is an in-memory [store.Store] for tests.
//
//	st := memory.New()
//
// It keeps everything in maps and slices behind one mutex, starts no goroutines and does
// no I/O, and reads the time with [time.Now] — so inside a [testing/synctest] bubble it
// follows the bubble's fake clock. Tasks and executions are copied on the way in and on
// the way out: a caller never aliases the store's state.
//
// Nothing is durable: closing the store, or dropping it, loses everything.
//
// DESIGN.md, beside this file, has the design notes: the indexes that keep Refill's
// cost in proportion to what it returns.
package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// Store is an in-memory [store.Store]. The zero value is not usable; call [New]. It is
// safe for concurrent use by several goroutines. It is the view of one namespace
// (store.DefaultNamespace as created; see InNamespace) of state all views share.
type Store struct {
	*state
	ns string
}

// state is what every view of one store shares, behind one mutex.
type state struct {
	mu      sync.Mutex
	closed  bool
	lastID  int64 // the last task id handed out
	lastSeq int64 // the last sequence number handed out
	rows    map[int64]*row
	keys    map[nameKey]int64
	execs   map[string]*store.Execution // by execution id: unique across the store
	changes []change                    // seq order (see DESIGN.md)
	window  []dueKey                    // SCHEDULED rows in (DueAt, ID) order
	skew    time.Duration               // WithClockSkew

	schedules  map[nameKey]*store.Schedule // key unused
	leases     map[string]*leaseRow        // by namespace (lease.go)
	nodes      map[nameKey]*store.NodeInfo // key unused (nodes.go)
	audit      []auditRow                  // id order (audit.go)
	lastAudit  int64
	stats      map[statsKey]store.MinuteStats // (stats.go)
	gaps       []gapRow                       // recording order (slots.go)
	lastGap    int64
	leadership map[string][]store.LeadershipChange // by namespace (leadership.go)
}

var _ store.Store = (*Store)(nil)

type row struct {
	ns    string
	task  store.Task
	seq   int64    // the sequence number of the last write that left it SCHEDULED
	execs []string // its execution ids, oldest first
}

// nameKey names a row of one namespace: a task by (name, key), a schedule or a node by name.
type nameKey struct{ ns, name, key string }

type change struct{ seq, id int64 }

type dueKey struct {
	at time.Time
	id int64
}

func (a dueKey) compare(b dueKey) int {
	if c := a.at.Compare(b.at); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{ns: store.DefaultNamespace, state: &state{
		rows:  make(map[int64]*row),
		keys:  make(map[nameKey]int64),
		execs: make(map[string]*store.Execution),

		schedules:  make(map[nameKey]*store.Schedule),
		leases:     make(map[string]*leaseRow),
		nodes:      make(map[nameKey]*store.NodeInfo),
		stats:      make(map[statsKey]store.MinuteStats),
		leadership: make(map[string][]store.LeadershipChange),
	}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Option configures a Store.
type Option func(*Store)

// WithClockSkew makes the store's clock run d ahead of time.Now (behind, for a
// negative d), like a database server whose clock differs from the application
// host's: Now, the stamps and the Claim's "due" check all read it.
func WithClockSkew(d time.Duration) Option {
	return func(s *Store) { s.skew = d }
}

// InNamespace returns the view of namespace ns. See [store.Store.InNamespace].
func (s *Store) InNamespace(ns string) (store.Store, error) {
	if err := store.CheckNamespace(ns); err != nil {
		return nil, fmt.Errorf("ax: namespace: %w", err)
	}
	return &Store{state: s.state, ns: ns}, nil
}

// mine returns the row with id if it is in this view's namespace; the caller holds s.mu.
func (s *Store) mine(id int64) (*row, bool) {
	r, ok := s.rows[id]
	if !ok || r.ns != s.ns {
		return nil, false
	}
	return r, true
}

// lock checks ctx, takes the mutex and checks that the store is open. On success the
// caller owns s.mu and must unlock it.
func (s *Store) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	return nil
}

// now is the store's clock: UTC, without a monotonic reading.
func (s *Store) now() time.Time { return time.Now().Add(s.skew).Round(0).UTC() }

// utc normalises a time passed in: UTC, without a monotonic reading.
func utc(t time.Time) time.Time { return t.Round(0).UTC() }

// Now returns the current time in UTC.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	if err := s.lock(ctx); err != nil {
		return time.Time{}, fmt.Errorf("ax: read store time: %w", err)
	}
	defer s.mu.Unlock()
	return s.now(), nil
}

// Insert writes new SCHEDULED tasks. See [store.Store.Insert].
func (s *Store) Insert(ctx context.Context, tasks []store.NewTask) ([]store.Inserted, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: insert tasks: %w", err)
	}
	defer s.mu.Unlock()
	for i, nt := range tasks {
		if err := validNewTask(nt); err != nil {
			return nil, fmt.Errorf("ax: insert tasks: task %d: %w", i, err)
		}
	}
	return s.insert(tasks), nil
}

// insert writes validated tasks; the caller holds s.mu.
func (s *Store) insert(tasks []store.NewTask) []store.Inserted {
	now := s.now()
	out := make([]store.Inserted, len(tasks))
	for i, nt := range tasks {
		k := nameKey{s.ns, nt.Name, nt.Key}
		if id, ok := s.keys[k]; ok { // the newest task of the key
			old := &s.rows[id].task
			if !old.KeyHold.Frees(old.Status, old.KeyUntil, now) {
				out[i] = store.Inserted{
					Task: copyTask(old),
					Err:  fmt.Errorf("ax: insert task %q/%q: %w", nt.Name, nt.Key, store.ErrDuplicate),
				}
				continue
			}
			old.Superseded = true
		}
		s.lastID++
		r := &row{ns: s.ns, task: store.Task{
			ID:           s.lastID,
			Name:         nt.Name,
			Key:          nt.Key,
			Payload:      slices.Clone(nt.Payload),
			Status:       store.Scheduled,
			DueAt:        utc(nt.DueAt),
			MaxRetry:     nt.MaxRetry,
			OwnerService: nt.OwnerService,
			Timeout:      nt.Timeout,
			Backoff:      slices.Clone(nt.Backoff),
			TaskKey:      nt.TaskKey,
			Overlap:      nt.Overlap,
			KeyHold:      nt.KeyHold,
			KeyUntil:     utc(nt.KeyUntil).Truncate(time.Microsecond),
			CreatedAt:    now,
			UpdatedAt:    now,
		}}
		s.rows[r.task.ID] = r
		s.keys[k] = r.task.ID
		s.schedule(r)
		out[i] = store.Inserted{Task: copyTask(&r.task)}
	}
	return out
}

func validNewTask(nt store.NewTask) error {
	if err := driverkit.CheckNewTask(nt); err != nil {
		return err
	}
	switch {
	case nt.MaxRetry < 0:
		return fmt.Errorf("negative max retry %d: %w", nt.MaxRetry, store.ErrInvalid)
	case nt.Timeout < 0:
		return fmt.Errorf("negative timeout %v: %w", nt.Timeout, store.ErrInvalid)
	}
	for i, d := range nt.Backoff {
		if d < 0 {
			return fmt.Errorf("negative backoff %v at %d: %w", d, i, store.ErrInvalid)
		}
	}
	return nil
}

// Get returns the task with this id. See [store.Store.Get].
func (s *Store) Get(ctx context.Context, id int64) (*store.Task, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: get task %d: %w", id, err)
	}
	defer s.mu.Unlock()
	r, ok := s.mine(id)
	if !ok {
		return nil, fmt.Errorf("ax: get task %d: %w", id, store.ErrNotFound)
	}
	return copyTask(&r.task), nil
}

// Lookup returns the task with this name and key. See [store.Store.Lookup].
func (s *Store) Lookup(ctx context.Context, name, key string) (*store.Task, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: look up task %q/%q: %w", name, key, err)
	}
	defer s.mu.Unlock()
	id, ok := s.keys[nameKey{s.ns, name, key}]
	if !ok {
		return nil, fmt.Errorf("ax: look up task %q/%q: %w", name, key, store.ErrNotFound)
	}
	return copyTask(&s.rows[id].task), nil
}

// Executions returns the task's executions, oldest first. See [store.Store.Executions].
func (s *Store) Executions(ctx context.Context, taskID int64) ([]store.Execution, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: list executions of task %d: %w", taskID, err)
	}
	defer s.mu.Unlock()
	r, ok := s.mine(taskID)
	if !ok {
		return nil, fmt.Errorf("ax: list executions of task %d: %w", taskID, store.ErrNotFound)
	}
	out := make([]store.Execution, 0, len(r.execs))
	for _, id := range r.execs {
		out = append(out, *s.execs[id])
	}
	return out, nil
}

// Cancel moves the task (name, key) from SCHEDULED to CANCELLED. See [store.Store.Cancel].
func (s *Store) Cancel(ctx context.Context, name, key string) (*store.Task, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: cancel task %q/%q: %w", name, key, err)
	}
	defer s.mu.Unlock()
	id, ok := s.keys[nameKey{s.ns, name, key}]
	if !ok {
		return nil, fmt.Errorf("ax: cancel task %q/%q: %w", name, key, store.ErrNotFound)
	}
	r := s.rows[id]
	if r.task.Status != store.Scheduled {
		return driverkit.Refusal(fmt.Sprintf("ax: cancel task %q/%q", name, key), copyTask(&r.task), store.ErrNotCancellable)
	}
	now := s.now()
	s.unschedule(r)
	r.task.Status = store.Cancelled
	r.task.FinishedAt = now
	r.task.UpdatedAt = now
	return copyTask(&r.task), nil
}

// Reschedule moves the SCHEDULED task (name, key) to be due at at. See
// [store.Store.Reschedule].
func (s *Store) Reschedule(ctx context.Context, name, key string, at time.Time) (*store.Task, error) {
	op := fmt.Sprintf("ax: reschedule task %q/%q", name, key)
	if at.IsZero() {
		return nil, fmt.Errorf("%s: zero due time: %w", op, store.ErrInvalid)
	}
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer s.mu.Unlock()
	id, ok := s.keys[nameKey{s.ns, name, key}]
	if !ok {
		return nil, fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	r := s.rows[id]
	if r.task.Status != store.Scheduled {
		return driverkit.Refusal(op, copyTask(&r.task), store.ErrNotReschedulable)
	}
	s.unschedule(r)
	r.task.DueAt = utc(at)
	r.task.UpdatedAt = s.now()
	s.schedule(r)
	return copyTask(&r.task), nil
}

// Retry moves a FAILED task back to SCHEDULED, due now, with a fresh retry budget.
// See [store.Store.Retry].
func (s *Store) Retry(ctx context.Context, id int64) (*store.Task, error) {
	op := fmt.Sprintf("ax: retry task %d", id)
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer s.mu.Unlock()
	r, ok := s.mine(id)
	if !ok {
		return nil, fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	if r.task.Status != store.Failed || r.task.Superseded {
		return driverkit.Refusal(op, copyTask(&r.task), store.ErrNotRetryable)
	}
	now := s.now()
	r.task.Status, r.task.DueAt, r.task.UpdatedAt = store.Scheduled, now, now
	r.task.Attempt, r.task.DispatchRetries, r.task.FinishedAt = 0, 0, time.Time{}
	s.schedule(r)
	return copyTask(&r.task), nil
}

// Refill reads the changed and the entered scheduled tasks. See [store.Store.Refill]
// and [store.RefillParams]. A Limit below 1 is ErrInvalid.
func (s *Store) Refill(ctx context.Context, p store.RefillParams) (*store.RefillResult, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: refill: %w", err)
	}
	defer s.mu.Unlock()
	if p.Limit < 1 {
		return nil, fmt.Errorf("ax: refill: limit %d: %w", p.Limit, store.ErrInvalid)
	}
	to := utc(p.To)
	res := &store.RefillResult{Seq: s.lastSeq}

	if p.AfterSeq >= 0 {
		var last int64 // the sequence number of the last row returned
		i := sort.Search(len(s.changes), func(i int) bool { return s.changes[i].seq > p.AfterSeq })
		for ; i < len(s.changes); i++ {
			c := s.changes[i]
			r := s.rows[c.id]
			if r.ns != s.ns || !r.current(c) || !r.task.DueAt.Before(to) {
				continue
			}
			if len(res.Changed) == p.Limit {
				// Cut short: the caller resumes after the last row returned.
				res.More = true
				res.Seq = last
				break
			}
			res.Changed = append(res.Changed, store.Due{ID: r.task.ID, DueAt: r.task.DueAt})
			last = c.seq
		}
	}

	from := dueKey{utc(p.From), p.FromID}
	i := sort.Search(len(s.window), func(i int) bool { return s.window[i].compare(from) > 0 })
	for ; i < len(s.window) && s.window[i].at.Before(to); i++ {
		if s.rows[s.window[i].id].ns != s.ns {
			continue
		}
		if len(res.Entered) == p.Limit {
			res.More = true
			break
		}
		res.Entered = append(res.Entered, store.Due{ID: s.window[i].id, DueAt: s.window[i].at})
	}
	return res, nil
}

// current reports whether the change entry c still describes r: r is SCHEDULED and
// c is its latest write.
func (r *row) current(c change) bool {
	return r.seq == c.seq && r.task.Status == store.Scheduled
}

// Claim moves due tasks from SCHEDULED to DISPATCHING. See [store.Store.Claim]. An
// empty execution id is ErrInvalid; an id given twice is claimed at most once.
func (s *Store) Claim(ctx context.Context, fence store.Fence, claims []store.Claim) (*store.ClaimResult, error) {
	return s.ClaimStart(ctx, fence, store.StartOn{}, claims)
}

// ClaimStart is Claim that moves the tasks on can start straight to RUNNING. See
// [store.Store.ClaimStart].
func (s *Store) ClaimStart(ctx context.Context, fence store.Fence, on store.StartOn, claims []store.Claim) (*store.ClaimResult, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: claim tasks: %w", err)
	}
	defer s.mu.Unlock()
	if err := driverkit.CheckClaims(claims); err != nil {
		return nil, fmt.Errorf("ax: claim tasks: %w", err)
	}
	if err := driverkit.CheckStartOn(on); err != nil {
		return nil, fmt.Errorf("ax: claim tasks: %w", err)
	}
	if err := s.fenced(fence); err != nil {
		return nil, fmt.Errorf("ax: claim tasks: %w", err)
	}
	now := s.now()
	res := &store.ClaimResult{}
	uniq := driverkit.UniqueClaims(claims)
	startable := driverkit.Startable(on, uniq)
	var keyed []driverkit.Keyed
	execs := make(map[int64]string)
	for _, c := range uniq {
		r, ok := s.mine(c.ID)
		if !ok || r.task.Status != store.Scheduled {
			continue
		}
		if r.task.DueAt.After(now) {
			res.NotDue = append(res.NotDue, store.Due{ID: r.task.ID, DueAt: r.task.DueAt})
			continue
		}
		if serialised(&r.task) {
			keyed = append(keyed, driverkit.Keyed{ID: r.task.ID, DueAt: r.task.DueAt, TaskKey: r.task.TaskKey, Overlap: r.task.Overlap})
			execs[r.task.ID] = c.ExecutionID
			continue
		}
		s.dispatch(r, c.ExecutionID, now)
		if startable[c.ID] && slices.Contains(on.Handlers, r.task.Name) {
			s.start(r, on.Node, now)
			res.Started = append(res.Started, *copyTask(&r.task))
			continue
		}
		res.Claimed = append(res.Claimed, *copyTask(&r.task))
	}
	if len(keyed) == 0 {
		return res, nil
	}
	claim, skip, block := driverkit.ResolveKeys(keyed, s.holders(keyed))
	for _, k := range claim {
		r := s.rows[k.ID]
		s.dispatch(r, execs[k.ID], now)
		res.Claimed = append(res.Claimed, *copyTask(&r.task))
	}
	slices.SortFunc(res.Claimed, func(a, b store.Task) int { return cmp.Compare(a.ID, b.ID) })
	for _, k := range skip {
		r := s.rows[k.ID]
		s.unschedule(r)
		r.task.Status = store.Skipped
		r.task.LastError = driverkit.SkipReason(k.TaskKey, k.Holder)
		r.task.FinishedAt = now
		r.task.UpdatedAt = now
		res.Skipped = append(res.Skipped, *copyTask(&r.task))
	}
	for _, k := range block {
		res.Blocked = append(res.Blocked, store.Blocked{Due: store.Due{ID: k.ID, DueAt: k.DueAt}, TaskKey: k.TaskKey})
	}
	return res, nil
}

// dispatch moves the SCHEDULED row r to DISPATCHING with executionID.
func (s *Store) dispatch(r *row, executionID string, now time.Time) {
	s.unschedule(r)
	r.task.Status = store.Dispatching
	r.task.ExecutionID = executionID
	r.task.DispatchedAt = now
	r.task.UpdatedAt = now
}

// serialised reports whether t waits for its task key: it has one, and its Overlap is
// skip or queue.
func serialised(t *store.Task) bool { return t.TaskKey != "" && t.Overlap != store.OverlapAllow }

// holders returns, for the task keys of keyed, the lowest id of a task DISPATCHING or
// RUNNING with that key. The store keeps no index of keys: it scans, as a test store
// may.
func (s *Store) holders(keyed []driverkit.Keyed) map[string]int64 {
	want := make(map[string]bool, len(keyed))
	for _, k := range keyed {
		want[k.TaskKey] = true
	}
	held := make(map[string]int64)
	for _, r := range s.rows {
		t := &r.task
		if r.ns == s.ns && (t.Status == store.Dispatching || t.Status == store.Running) && want[t.TaskKey] {
			if id, ok := held[t.TaskKey]; !ok || t.ID < id {
				held[t.TaskKey] = t.ID
			}
		}
	}
	return held
}

// Trigger moves one task from SCHEDULED or FAILED to DISPATCHING now. See
// [store.Store.Trigger]. From FAILED it also clears FinishedAt: the task is no longer in
// a terminal state.
func (s *Store) Trigger(ctx context.Context, id int64, executionID string) (*store.Task, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: trigger task %d: %w", id, err)
	}
	defer s.mu.Unlock()
	if executionID == "" {
		return nil, fmt.Errorf("ax: trigger task %d: empty execution id: %w", id, store.ErrInvalid)
	}
	r, ok := s.mine(id)
	if !ok {
		return nil, fmt.Errorf("ax: trigger task %d: %w", id, store.ErrNotFound)
	}
	op := fmt.Sprintf("ax: trigger task %d", id)
	if r.task.Status != store.Scheduled && r.task.Status != store.Failed || r.task.Superseded {
		return driverkit.Refusal(op, copyTask(&r.task), store.ErrNotTriggerable)
	}
	if serialised(&r.task) {
		k := driverkit.Keyed{ID: r.task.ID, TaskKey: r.task.TaskKey}
		if holder, held := s.holders([]driverkit.Keyed{k})[k.TaskKey]; held {
			return driverkit.KeyHeld(op, copyTask(&r.task), holder)
		}
	}
	if r.task.Status == store.Scheduled {
		s.unschedule(r)
	} else {
		r.task.Attempt++
		r.task.FinishedAt = time.Time{}
	}
	now := s.now()
	r.task.Status = store.Dispatching
	r.task.ExecutionID = executionID
	r.task.DispatchedAt = now
	r.task.TriggeredAt = now
	r.task.UpdatedAt = now
	return copyTask(&r.task), nil
}

// MakeDue makes a SCHEDULED or FAILED task due now without claiming it. See
// [store.TaskWriter.MakeDue].
func (s *Store) MakeDue(ctx context.Context, id int64) (*store.Task, error) {
	op := fmt.Sprintf("ax: make task %d due", id)
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer s.mu.Unlock()
	r, ok := s.mine(id)
	if !ok {
		return nil, fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	if r.task.Status != store.Scheduled && r.task.Status != store.Failed || r.task.Superseded {
		return driverkit.Refusal(op, copyTask(&r.task), store.ErrNotTriggerable)
	}
	if r.task.Status == store.Scheduled {
		s.unschedule(r)
	} else {
		r.task.Attempt++
		r.task.FinishedAt = time.Time{}
	}
	now := s.now()
	r.task.Status, r.task.DueAt, r.task.TriggeredAt, r.task.UpdatedAt = store.Scheduled, now, now, now
	s.schedule(r)
	return copyTask(&r.task), nil
}

// Start records executions and moves their tasks from DISPATCHING to RUNNING. See
// [store.Store.Start], which says which inputs are ErrInvalid.
func (s *Store) Start(ctx context.Context, fence store.Fence, starts []store.StartParams) ([]store.StartResult, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: start executions: %w", err)
	}
	defer s.mu.Unlock()
	if err := driverkit.CheckStarts(starts); err != nil {
		return nil, fmt.Errorf("ax: start executions: %w", err)
	}
	if err := s.fenced(fence); err != nil {
		return nil, fmt.Errorf("ax: start executions: %w", err)
	}
	now := s.now()
	out := make([]store.StartResult, len(starts))
	for i, p := range starts {
		if e, ok := s.execs[p.ExecutionID]; ok {
			if _, mine := s.mine(e.TaskID); mine {
				out[i] = store.StartResult{Outcome: store.Duplicate, Execution: new(*e)}
			} else {
				out[i] = store.StartResult{Outcome: store.Lost} // another namespace's
			}
			continue
		}
		r, ok := s.mine(p.TaskID)
		if !ok || r.task.Status != store.Dispatching || r.task.ExecutionID != p.ExecutionID || r.task.Name != p.Name {
			out[i] = store.StartResult{Outcome: store.Lost}
			continue
		}
		e := s.start(r, p.Node, now)
		out[i] = store.StartResult{Outcome: store.Started, Task: copyTask(&r.task), Execution: new(*e)}
	}
	return out, nil
}

// start records the execution of the DISPATCHING row r on node and moves r to RUNNING.
func (s *Store) start(r *row, node string, now time.Time) *store.Execution {
	e := &store.Execution{
		ID:          r.task.ExecutionID,
		TaskID:      r.task.ID,
		Attempt:     r.task.Attempt,
		Node:        node,
		Status:      store.Running,
		DueAt:       r.task.DueAt,
		ClaimedAt:   r.task.DispatchedAt,
		StartedAt:   now,
		HeartbeatAt: now,
	}
	s.execs[e.ID] = e
	r.execs = append(r.execs, e.ID)
	r.task.Status = store.Running
	r.task.StartedAt = now
	r.task.HeartbeatAt = now
	r.task.UpdatedAt = now
	return e
}

// running returns the row of task id if it is of the view's namespace and RUNNING
// with this execution id.
func (s *Store) running(id int64, executionID string) (*row, bool) {
	r, ok := s.mine(id)
	if !ok || r.task.Status != store.Running || r.task.ExecutionID != executionID {
		return nil, false
	}
	return r, true
}

// Heartbeat stamps HeartbeatAt on running executions and their tasks. See
// [store.Store.Heartbeat]. It also stamps the task's UpdatedAt.
func (s *Store) Heartbeat(ctx context.Context, refs []store.ExecRef) ([]bool, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: heartbeat executions: %w", err)
	}
	defer s.mu.Unlock()
	now := s.now()
	out := make([]bool, len(refs))
	for i, ref := range refs {
		r, ok := s.running(ref.TaskID, ref.ExecutionID)
		if !ok {
			continue
		}
		r.task.HeartbeatAt = now
		r.task.UpdatedAt = now
		if e := s.execs[ref.ExecutionID]; e != nil {
			e.HeartbeatAt = now
		}
		out[i] = true
	}
	return out, nil
}

// Finish records the results of running executions. See [store.Store.Finish]. A
// Status other than Succeeded, Scheduled or Failed, an empty execution id, or a
// Scheduled result with a zero DueAt or a negative Attempt is ErrInvalid.
func (s *Store) Finish(ctx context.Context, fence store.Fence, results []store.Finish) ([]bool, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: finish executions: %w", err)
	}
	defer s.mu.Unlock()
	if err := driverkit.CheckFinishes(results); err != nil {
		return nil, fmt.Errorf("ax: finish executions: %w", err)
	}
	if err := s.fenced(fence); err != nil {
		return nil, fmt.Errorf("ax: finish executions: %w", err)
	}
	for i, f := range results {
		if f.Status == store.Scheduled && f.Attempt < 0 {
			return nil, fmt.Errorf("ax: finish executions: result %d: retry with negative attempt %d: %w", i, f.Attempt, store.ErrInvalid)
		}
	}
	now := s.now()
	out := make([]bool, len(results))
	for i, f := range results {
		r, ok := s.running(f.TaskID, f.ExecutionID)
		if !ok {
			continue
		}
		e := s.execs[f.ExecutionID]
		e.FinishedAt = now
		e.Error = f.Error
		r.task.UpdatedAt = now
		switch f.Status {
		case store.Succeeded:
			e.Status, e.Error = store.Succeeded, "" // a success records no error
			r.task.Status = store.Succeeded
			r.task.FinishedAt = now
		case store.Failed:
			e.Status = store.Failed
			r.task.Status = store.Failed
			r.task.FinishedAt = now
			r.task.LastError = f.Error
		case store.Scheduled:
			e.Status = store.Failed
			r.task.Status = store.Scheduled
			r.task.Attempt = f.Attempt
			r.task.DueAt = utc(f.DueAt)
			r.task.LastError = f.Error
			s.schedule(r)
		}
		out[i] = true
	}
	return out, nil
}

// Requeue hands back tasks that could not be dispatched. See [store.Store.Requeue]. A
// task that goes to FAILED also gets DispatchRetries+1, LastError and FinishedAt; its
// DueAt is unchanged. An empty execution id, a zero DueAt or a negative
// MaxDispatchRetries is ErrInvalid.
func (s *Store) Requeue(ctx context.Context, fence store.Fence, requeues []store.Requeue) ([]bool, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: requeue tasks: %w", err)
	}
	defer s.mu.Unlock()
	if err := s.fenced(fence); err != nil {
		return nil, fmt.Errorf("ax: requeue tasks: %w", err)
	}
	for _, q := range requeues {
		var err error
		switch {
		case q.ExecutionID == "":
			err = errors.New("empty execution id")
		case q.DueAt.IsZero():
			err = errors.New("zero due time")
		case q.MaxDispatchRetries < 0:
			err = fmt.Errorf("negative max dispatch retries %d", q.MaxDispatchRetries)
		}
		if err != nil {
			return nil, fmt.Errorf("ax: requeue tasks: task %d: %w: %w", q.TaskID, err, store.ErrInvalid)
		}
	}
	now := s.now()
	out := make([]bool, len(requeues))
	for i, q := range requeues {
		r, ok := s.mine(q.TaskID)
		if !ok || r.task.Status != store.Dispatching || r.task.ExecutionID != q.ExecutionID {
			continue
		}
		r.task.DispatchRetries++
		r.task.LastError = q.Error
		r.task.UpdatedAt = now
		if r.task.DispatchRetries > q.MaxDispatchRetries {
			r.task.Status = store.Failed
			r.task.FinishedAt = now
		} else {
			r.task.Status = store.Scheduled
			r.task.DueAt = utc(q.DueAt)
			s.schedule(r)
		}
		out[i] = true
	}
	return out, nil
}

// Stale lists tasks stuck in RUNNING or DISPATCHING since before a time. See
// [store.Store.Stale]. A limit below 1 is ErrInvalid.
func (s *Store) Stale(ctx context.Context, status store.Status, before time.Time, limit int) ([]store.Task, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: list stale %s tasks: %w", status, err)
	}
	defer s.mu.Unlock()
	var since func(*store.Task) time.Time
	switch status {
	case store.Running:
		since = func(t *store.Task) time.Time { return t.HeartbeatAt }
	case store.Dispatching:
		since = func(t *store.Task) time.Time { return t.DispatchedAt }
	default:
		return nil, fmt.Errorf("ax: list stale %q tasks: %w", status, store.ErrInvalid)
	}
	if limit < 1 {
		return nil, fmt.Errorf("ax: list stale %s tasks: limit %d: %w", status, limit, store.ErrInvalid)
	}
	var stale []*store.Task
	for _, r := range s.rows {
		if r.ns == s.ns && r.task.Status == status && since(&r.task).Before(before) {
			stale = append(stale, &r.task)
		}
	}
	slices.SortFunc(stale, func(a, b *store.Task) int {
		return dueKey{since(a), a.ID}.compare(dueKey{since(b), b.ID})
	})
	out := make([]store.Task, 0, min(limit, len(stale)))
	for _, t := range stale[:min(limit, len(stale))] {
		out = append(out, *copyTask(t))
	}
	return out, nil
}

// TaskStats counts the tasks per status and finds the oldest due SCHEDULED task. See
// [store.Store.TaskStats]. It scans every row, as a test store may; the oldest due
// task is the head of the window.
func (s *Store) TaskStats(ctx context.Context, now time.Time) (*store.TaskStats, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: task stats: %w", err)
	}
	defer s.mu.Unlock()
	if now.IsZero() {
		return nil, fmt.Errorf("ax: task stats: zero time: %w", store.ErrInvalid)
	}
	st := driverkit.NewTaskStats()
	for _, r := range s.rows {
		if r.ns == s.ns {
			st.Counts[r.task.Status]++
		}
	}
	for _, k := range s.window {
		if k.at.After(now) {
			break
		}
		if s.rows[k.id].ns == s.ns {
			st.OldestDue = k.at
			break
		}
	}
	return st, nil
}

// Tasks returns the tasks q selects, in its order. See [store.Store.Tasks].
func (s *Store) Tasks(ctx context.Context, q store.TaskQuery) ([]store.Task, error) {
	if err := store.CheckTaskQuery(q); err != nil {
		return nil, fmt.Errorf("ax: list tasks: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: list tasks: %w", err)
	}
	defer s.mu.Unlock()
	var out []store.Task
	for _, r := range s.rows {
		if r.ns == s.ns && driverkit.Selects(q, &r.task) && driverkit.Follows(q, &r.task) {
			out = append(out, *copyTask(&r.task))
		}
	}
	slices.SortFunc(out, func(a, b store.Task) int {
		if driverkit.Before(q, &a, &b) {
			return -1
		}
		return 1
	})
	return out[:min(len(out), q.Limit)], nil
}

// CountTasks counts the tasks per status, each count at most atMost + 1. See
// [store.Store.CountTasks].
func (s *Store) CountTasks(ctx context.Context, atMost int64) (map[store.Status]int64, error) {
	if err := driverkit.CheckCountCap(atMost); err != nil {
		return nil, fmt.Errorf("ax: count tasks: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: count tasks: %w", err)
	}
	defer s.mu.Unlock()
	counts := driverkit.NewTaskStats().Counts
	for _, r := range s.rows {
		if r.ns == s.ns && counts[r.task.Status] <= atMost {
			counts[r.task.Status]++
		}
	}
	return counts, nil
}

// Close marks the store closed and drops its contents. Every call after Close,
// including another Close, returns ErrClosed.
func (s *Store) Close() error {
	if err := s.lock(context.Background()); err != nil {
		return fmt.Errorf("ax: close store: %w", err)
	}
	defer s.mu.Unlock()
	s.closed = true
	s.rows, s.keys, s.execs, s.changes, s.window, s.schedules, s.leases, s.nodes = nil, nil, nil, nil, nil, nil, nil, nil
	s.leadership = nil
	return nil
}

// schedule gives r, which a write just left SCHEDULED, a new sequence number and puts
// it in the window. r must not be in the window already.
func (s *Store) schedule(r *row) {
	s.lastSeq++
	r.seq = s.lastSeq
	s.changes = append(s.changes, change{seq: r.seq, id: r.task.ID})
	k := dueKey{r.task.DueAt, r.task.ID}
	i, _ := slices.BinarySearchFunc(s.window, k, dueKey.compare)
	s.window = slices.Insert(s.window, i, k)
	// Compact the change log when stale entries outnumber the scheduled rows.
	if len(s.changes) > 2*len(s.window)+1024 {
		s.changes = slices.DeleteFunc(s.changes, func(c change) bool { return !s.rows[c.id].current(c) })
	}
}

// unschedule takes r, which is SCHEDULED and about to leave that state, out of the
// window. Its change entry goes stale by itself.
func (s *Store) unschedule(r *row) {
	k := dueKey{r.task.DueAt, r.task.ID}
	if i, ok := slices.BinarySearchFunc(s.window, k, dueKey.compare); ok {
		s.window = slices.Delete(s.window, i, i+1)
	}
}

// copyTask returns a deep copy of t, keeping nil slices nil and empty ones empty.
func copyTask(t *store.Task) *store.Task {
	c := *t
	c.Payload = slices.Clone(t.Payload)
	c.Backoff = slices.Clone(t.Backoff)
	return &c
}

// RegisterSchedules upserts schedule definitions. See [store.Store.RegisterSchedules].
func (s *Store) RegisterSchedules(ctx context.Context, defs []store.ScheduleDef) ([]store.Schedule, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: register schedules: %w", err)
	}
	defer s.mu.Unlock()
	if err := driverkit.CheckScheduleDefs(defs); err != nil {
		return nil, fmt.Errorf("ax: register schedules: %w", err)
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
		sc.Overlap, sc.Misfire, sc.Payload = d.Overlap, d.Misfire, slices.Clone(d.Payload)
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
	if err := driverkit.CheckFire(p); err != nil {
		return nil, fmt.Errorf("ax: %w", err)
	}
	for i, nt := range p.Tasks {
		if err := validNewTask(nt); err != nil {
			return nil, fmt.Errorf("ax: fire schedule %q: task %d: %w", p.Name, i, err)
		}
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

// Prune deletes finished tasks with their executions. See [store.Pruner].
func (s *Store) Prune(ctx context.Context, p store.PruneParams) (int, error) {
	if err := driverkit.CheckPrune(p); err != nil {
		return 0, fmt.Errorf("ax: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return 0, fmt.Errorf("ax: prune: %w", err)
	}
	defer s.mu.Unlock()
	var finished []*row
	for _, r := range s.rows {
		if r.ns == s.ns && r.task.Status == p.Status {
			finished = append(finished, r)
		}
	}
	slices.SortFunc(finished, func(a, b *row) int {
		if c := a.task.FinishedAt.Compare(b.task.FinishedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.task.ID, b.task.ID)
	})
	beyond := 0 // the oldest rows past the KeepNewest newest
	if p.KeepNewest > 0 {
		beyond = max(len(finished)-p.KeepNewest, 0)
	}
	n, now := 0, s.now()
	gone := map[int64]bool{}
	for i, r := range finished {
		if n == p.Limit || i >= beyond && (p.Before.IsZero() || !r.task.FinishedAt.Before(p.Before)) {
			break
		}
		if !r.task.KeyUntil.IsZero() && now.Before(r.task.KeyUntil) {
			continue // it holds its key for a UniqueFor window still
		}
		s.delete(r)
		gone[r.task.ID] = true
		n++
	}
	if n > 0 { // the change log must not name rows that are gone
		s.changes = slices.DeleteFunc(s.changes, func(c change) bool { return gone[c.id] })
	}
	return n, nil
}

// delete removes a row and its executions; the caller holds s.mu. The business key
// goes to the newest task of the key that is left, if any.
func (s *Store) delete(r *row) {
	for _, id := range r.execs {
		delete(s.execs, id)
	}
	delete(s.rows, r.task.ID)
	k := nameKey{r.ns, r.task.Name, r.task.Key}
	if s.keys[k] != r.task.ID {
		return
	}
	delete(s.keys, k)
	for id, o := range s.rows {
		if o.ns == r.ns && o.task.Name == r.task.Name && o.task.Key == r.task.Key && id > s.keys[k] {
			s.keys[k] = id
		}
	}
}
