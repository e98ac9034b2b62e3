// Package storecount wraps a [store.Store] to count the calls made to it, per
// method, and to act before each one: a test adds a network round trip, blocks a
// call or fails it; `ax bench` counts what an idle scheduler asks of its store.
//
// It is the one call-counting store wrapper of the module, for the root package's
// tests and for cmd/ax's bench alike.
package storecount

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/axsched/ax/store"
)

// Store is a [store.Store] that counts every call made to it and passes it on to the
// store it wraps. It implements each method of every role itself rather than
// embedding the wrapped store, so that a method added to a role fails to compile
// here instead of going uncounted.
//
// As a store.Store it implements none of the optional interfaces (store.Notifier,
// store.Transactor), whatever the wrapped store implements: a scheduler given it sees
// a plain store. [Store.WithOptionalInterfaces] keeps them.
//
// A Store is safe for concurrent use.
type Store struct {
	// Before, when set, is called before each call is passed on, with the call's
	// context (context.Background() for Close and InNamespace, which take none) and
	// its method name: the names of the roles' methods, e.g. "Insert", and "Listen",
	// "Bind", "InTx" and "Tx." followed by a bound transaction's method, e.g.
	// "Tx.Insert". It may sleep (a network
	// database's round trip), block, or fail the call: a non-nil error is returned as
	// the call's error, and the call does not reach the wrapped store. It runs on the
	// caller's goroutine, after the call is counted. Set it before the store is used.
	// A namespace's view (InNamespace) counts into, and calls the Before of, the
	// Store it came from.
	Before func(ctx context.Context, method string) error

	inner    store.Store
	root     *Store // the Store a view counts into: itself, unless it is a view
	optional bool   // WithOptionalInterfaces's: its views keep them too

	mu         sync.Mutex
	calls      map[string]int
	refillRows int
}

var _ store.Store = (*Store)(nil)

// New returns a Store that wraps inner, with every count at zero.
func New(inner store.Store) *Store {
	s := &Store{inner: inner, calls: map[string]int{}}
	s.root = s
	return s
}

// Counts is a snapshot of a Store's counts.
type Counts struct {
	// Calls holds the number of calls per method name, failed calls included
	// (those Before failed too). A method never called is absent.
	Calls map[string]int
	// RefillRows is the number of rows, Changed and Entered, that successful
	// Refill calls returned.
	RefillRows int
}

// Total returns the number of calls to all methods.
func (c Counts) Total() int {
	n := 0
	for _, v := range c.Calls {
		n += v
	}
	return n
}

// Snapshot returns a copy of the counts so far.
func (s *Store) Snapshot() Counts {
	r := s.root
	r.mu.Lock()
	defer r.mu.Unlock()
	return Counts{Calls: maps.Clone(r.calls), RefillRows: r.refillRows}
}

// WithOptionalInterfaces returns s as a store.Store that also implements each of
// store.Notifier and store.Transactor that the wrapped store implements (and
// store.Marker, where it implements all three), so that a
// scheduler given it behaves as with the wrapped store (it listens for
// notifications; WithTx works). Listen, Bind, InTx and the bound transactions'
// methods are counted, and pass through Before, like the other methods.
//
// The namespaces' views it returns (InNamespace) keep them too, so that a scheduler,
// which works on its namespace's view, sees them.
func (s *Store) WithOptionalInterfaces() store.Store {
	s = &Store{inner: s.inner, root: s.root, optional: true}
	n, isNotifier := s.inner.(store.Notifier)
	tx, isTransactor := s.inner.(store.Transactor)
	m, isMarker := s.inner.(store.Marker)
	switch {
	case isMarker && isNotifier && isTransactor: // PostgreSQL's
		return struct {
			*Store
			notifier
			transactor
			marker
		}{s, notifier{s, n}, transactor{s, tx}, marker{s, m}}
	case isNotifier && isTransactor:
		return struct {
			*Store
			notifier
			transactor
		}{s, notifier{s, n}, transactor{s, tx}}
	case isNotifier:
		return struct {
			*Store
			notifier
		}{s, notifier{s, n}}
	case isTransactor:
		return struct {
			*Store
			transactor
		}{s, transactor{s, tx}}
	}
	return s
}

type notifier struct {
	s     *Store
	inner store.Notifier
}

func (n notifier) Listen(ctx context.Context, f func(store.Signal)) error {
	if err := n.s.before(ctx, "Listen"); err != nil {
		return err
	}
	return n.inner.Listen(ctx, f)
}

type marker struct {
	s     *Store
	inner store.Marker
}

// Marked counts the call and returns the marked view, counted into the same Store,
// with its optional interfaces.
func (m marker) Marked(mark string) (store.Store, error) {
	if err := m.s.before(context.Background(), "Marked"); err != nil {
		return nil, err
	}
	v, err := m.inner.Marked(mark)
	if err != nil {
		return nil, err
	}
	return (&Store{inner: v, root: m.s.root}).WithOptionalInterfaces(), nil
}

type transactor struct {
	s     *Store
	inner store.Transactor
}

func (t transactor) Bind(ctx context.Context, tx any) (store.Tx, error) {
	if err := t.s.before(ctx, "Bind"); err != nil {
		return nil, err
	}
	v, err := t.inner.Bind(ctx, tx)
	if err != nil {
		return nil, err
	}
	return countedTx{t.s, v}, nil
}

func (t transactor) InTx(ctx context.Context, fn func(tx store.Tx) error) error {
	if err := t.s.before(ctx, "InTx"); err != nil {
		return err
	}
	return t.inner.InTx(ctx, func(tx store.Tx) error { return fn(countedTx{t.s, tx}) })
}

// countedTx is a bound transaction whose calls are counted as "Tx." and the method's
// name.
type countedTx struct {
	s     *Store
	inner store.Tx
}

// Raw returns the wrapped view's transaction; it is not counted.
func (t countedTx) Raw() any { return t.inner.Raw() }

// Complete counts the call and passes it on.
func (t countedTx) Complete(ctx context.Context, ref store.ExecRef) (bool, error) {
	if err := t.s.before(ctx, "Tx.Complete"); err != nil {
		return false, err
	}
	return t.inner.Complete(ctx, ref)
}

// Insert counts the call and passes it on.
func (t countedTx) Insert(ctx context.Context, tasks []store.NewTask) ([]store.Inserted, error) {
	if err := t.s.before(ctx, "Tx.Insert"); err != nil {
		return nil, err
	}
	return t.inner.Insert(ctx, tasks)
}

// Cancel counts the call and passes it on.
func (t countedTx) Cancel(ctx context.Context, name, key, by string) (*store.Task, error) {
	if err := t.s.before(ctx, "Tx.Cancel"); err != nil {
		return nil, err
	}
	return t.inner.Cancel(ctx, name, key, by)
}

// Reschedule counts the call and passes it on.
func (t countedTx) Reschedule(ctx context.Context, name, key string, at time.Time) (*store.Task, error) {
	if err := t.s.before(ctx, "Tx.Reschedule"); err != nil {
		return nil, err
	}
	return t.inner.Reschedule(ctx, name, key, at)
}

// Retry counts the call and passes it on.
func (t countedTx) Retry(ctx context.Context, id int64) (*store.Task, error) {
	if err := t.s.before(ctx, "Tx.Retry"); err != nil {
		return nil, err
	}
	return t.inner.Retry(ctx, id)
}

// Trigger counts the call and passes it on.
func (t countedTx) Trigger(ctx context.Context, id int64, executionID string) (*store.Task, error) {
	if err := t.s.before(ctx, "Tx.Trigger"); err != nil {
		return nil, err
	}
	return t.inner.Trigger(ctx, id, executionID)
}

// MakeDue counts the call and passes it on.
func (t countedTx) MakeDue(ctx context.Context, id int64) (*store.Task, error) {
	if err := t.s.before(ctx, "Tx.MakeDue"); err != nil {
		return nil, err
	}
	return t.inner.MakeDue(ctx, id)
}

// Get counts the call and passes it on.
func (t countedTx) Get(ctx context.Context, id int64) (*store.Task, error) {
	if err := t.s.before(ctx, "Tx.Get"); err != nil {
		return nil, err
	}
	return t.inner.Get(ctx, id)
}

// PauseSchedule counts the call and passes it on.
func (t countedTx) PauseSchedule(ctx context.Context, name string) (*store.Schedule, error) {
	if err := t.s.before(ctx, "Tx.PauseSchedule"); err != nil {
		return nil, err
	}
	return t.inner.PauseSchedule(ctx, name)
}

// ResumeSchedule counts the call and passes it on.
func (t countedTx) ResumeSchedule(ctx context.Context, name string, next time.Time) (*store.Schedule, error) {
	if err := t.s.before(ctx, "Tx.ResumeSchedule"); err != nil {
		return nil, err
	}
	return t.inner.ResumeSchedule(ctx, name, next)
}

// Audit counts the call and passes it on.
func (t countedTx) Audit(ctx context.Context, rec store.AuditRecord) (*store.AuditRecord, error) {
	if err := t.s.before(ctx, "Tx.Audit"); err != nil {
		return nil, err
	}
	return t.inner.Audit(ctx, rec)
}

// The roles of store.Store, each method counted.

// The methods of store.Clock.

// Now counts the call and passes it on.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	if err := s.before(ctx, "Now"); err != nil {
		return time.Time{}, err
	}
	return s.inner.Now(ctx)
}

// The methods of store.TaskWriter.

// Insert counts the call and passes it on.
func (s *Store) Insert(ctx context.Context, tasks []store.NewTask) ([]store.Inserted, error) {
	if err := s.before(ctx, "Insert"); err != nil {
		return nil, err
	}
	return s.inner.Insert(ctx, tasks)
}

// Cancel counts the call and passes it on.
func (s *Store) Cancel(ctx context.Context, name, key, by string) (*store.Task, error) {
	if err := s.before(ctx, "Cancel"); err != nil {
		return nil, err
	}
	return s.inner.Cancel(ctx, name, key, by)
}

// Reschedule counts the call and passes it on.
func (s *Store) Reschedule(ctx context.Context, name, key string, at time.Time) (*store.Task, error) {
	if err := s.before(ctx, "Reschedule"); err != nil {
		return nil, err
	}
	return s.inner.Reschedule(ctx, name, key, at)
}

// Retry counts the call and passes it on.
func (s *Store) Retry(ctx context.Context, id int64) (*store.Task, error) {
	if err := s.before(ctx, "Retry"); err != nil {
		return nil, err
	}
	return s.inner.Retry(ctx, id)
}

// Trigger counts the call and passes it on.
func (s *Store) Trigger(ctx context.Context, id int64, executionID string) (*store.Task, error) {
	if err := s.before(ctx, "Trigger"); err != nil {
		return nil, err
	}
	return s.inner.Trigger(ctx, id, executionID)
}

// MakeDue counts the call and passes it on.
func (s *Store) MakeDue(ctx context.Context, id int64) (*store.Task, error) {
	if err := s.before(ctx, "MakeDue"); err != nil {
		return nil, err
	}
	return s.inner.MakeDue(ctx, id)
}

// The methods of store.TaskReader.

// Get counts the call and passes it on.
func (s *Store) Get(ctx context.Context, id int64) (*store.Task, error) {
	if err := s.before(ctx, "Get"); err != nil {
		return nil, err
	}
	return s.inner.Get(ctx, id)
}

// Lookup counts the call and passes it on.
func (s *Store) Lookup(ctx context.Context, name, key string) (*store.Task, error) {
	if err := s.before(ctx, "Lookup"); err != nil {
		return nil, err
	}
	return s.inner.Lookup(ctx, name, key)
}

// Executions counts the call and passes it on.
func (s *Store) Executions(ctx context.Context, taskID int64) ([]store.Execution, error) {
	if err := s.before(ctx, "Executions"); err != nil {
		return nil, err
	}
	return s.inner.Executions(ctx, taskID)
}

// Tasks counts the call and passes it on.
func (s *Store) Tasks(ctx context.Context, q store.TaskQuery) ([]store.Task, error) {
	if err := s.before(ctx, "Tasks"); err != nil {
		return nil, err
	}
	return s.inner.Tasks(ctx, q)
}

// CountTasks counts the call and passes it on.
func (s *Store) CountTasks(ctx context.Context, atMost int64) (map[store.Status]int64, error) {
	if err := s.before(ctx, "CountTasks"); err != nil {
		return nil, err
	}
	return s.inner.CountTasks(ctx, atMost)
}

// TaskStats counts the call and passes it on.
func (s *Store) TaskStats(ctx context.Context, now time.Time) (*store.TaskStats, error) {
	if err := s.before(ctx, "TaskStats"); err != nil {
		return nil, err
	}
	return s.inner.TaskStats(ctx, now)
}

// The methods of store.Queue.

// Claim counts the call and passes it on.
func (s *Store) Claim(ctx context.Context, fence store.Fence, claims []store.Claim) (*store.ClaimResult, error) {
	if err := s.before(ctx, "Claim"); err != nil {
		return nil, err
	}
	return s.inner.Claim(ctx, fence, claims)
}

// ClaimStart counts the call and passes it on.
func (s *Store) ClaimStart(ctx context.Context, fence store.Fence, on store.StartOn, claims []store.Claim) (*store.ClaimResult, error) {
	if err := s.before(ctx, "ClaimStart"); err != nil {
		return nil, err
	}
	return s.inner.ClaimStart(ctx, fence, on, claims)
}

// Start counts the call and passes it on.
func (s *Store) Start(ctx context.Context, fence store.Fence, starts []store.StartParams) ([]store.StartResult, error) {
	if err := s.before(ctx, "Start"); err != nil {
		return nil, err
	}
	return s.inner.Start(ctx, fence, starts)
}

// Heartbeat counts the call and passes it on.
func (s *Store) Heartbeat(ctx context.Context, refs []store.ExecRef) ([]store.Beat, error) {
	if err := s.before(ctx, "Heartbeat"); err != nil {
		return nil, err
	}
	return s.inner.Heartbeat(ctx, refs)
}

// Finish counts the call and passes it on.
func (s *Store) Finish(ctx context.Context, fence store.Fence, results []store.Finish) ([]bool, error) {
	if err := s.before(ctx, "Finish"); err != nil {
		return nil, err
	}
	return s.inner.Finish(ctx, fence, results)
}

// Requeue counts the call and passes it on.
func (s *Store) Requeue(ctx context.Context, fence store.Fence, requeues []store.Requeue) ([]bool, error) {
	if err := s.before(ctx, "Requeue"); err != nil {
		return nil, err
	}
	return s.inner.Requeue(ctx, fence, requeues)
}

// Stale counts the call and passes it on.
func (s *Store) Stale(ctx context.Context, status store.Status, before time.Time, limit int) ([]store.Task, error) {
	if err := s.before(ctx, "Stale"); err != nil {
		return nil, err
	}
	return s.inner.Stale(ctx, status, before, limit)
}

// The methods of store.ScheduleKeeper.

// RegisterSchedules counts the call and passes it on.
func (s *Store) RegisterSchedules(ctx context.Context, defs []store.ScheduleDef) ([]store.Schedule, error) {
	if err := s.before(ctx, "RegisterSchedules"); err != nil {
		return nil, err
	}
	return s.inner.RegisterSchedules(ctx, defs)
}

// PauseName counts the call and passes it on.
func (s *Store) PauseName(ctx context.Context, name, by string) (*store.NameState, error) {
	if err := s.before(ctx, "PauseName"); err != nil {
		return nil, err
	}
	return s.inner.PauseName(ctx, name, by)
}

// ResumeName counts the call and passes it on.
func (s *Store) ResumeName(ctx context.Context, name, by string) (*store.NameState, error) {
	if err := s.before(ctx, "ResumeName"); err != nil {
		return nil, err
	}
	return s.inner.ResumeName(ctx, name, by)
}

// SetConcurrency counts the call and passes it on.
func (s *Store) SetConcurrency(ctx context.Context, name string, n int, by string) (*store.NameState, error) {
	if err := s.before(ctx, "SetConcurrency"); err != nil {
		return nil, err
	}
	return s.inner.SetConcurrency(ctx, name, n, by)
}

// SetRate counts the call and passes it on.
func (s *Store) SetRate(ctx context.Context, name string, n int, per time.Duration, by string) (*store.NameState, error) {
	if err := s.before(ctx, "SetRate"); err != nil {
		return nil, err
	}
	return s.inner.SetRate(ctx, name, n, per, by)
}

// SetKeyConcurrency counts the call and passes it on.
func (s *Store) SetKeyConcurrency(ctx context.Context, name string, n int, by string) (*store.NameState, error) {
	if err := s.before(ctx, "SetKeyConcurrency"); err != nil {
		return nil, err
	}
	return s.inner.SetKeyConcurrency(ctx, name, n, by)
}

// Names counts the call and passes it on.
func (s *Store) Names(ctx context.Context) ([]store.NameState, error) {
	if err := s.before(ctx, "Names"); err != nil {
		return nil, err
	}
	return s.inner.Names(ctx)
}

// Schedules counts the call and passes it on.
func (s *Store) Schedules(ctx context.Context) ([]store.Schedule, error) {
	if err := s.before(ctx, "Schedules"); err != nil {
		return nil, err
	}
	return s.inner.Schedules(ctx)
}

// PauseSchedule counts the call and passes it on.
func (s *Store) PauseSchedule(ctx context.Context, name string) (*store.Schedule, error) {
	if err := s.before(ctx, "PauseSchedule"); err != nil {
		return nil, err
	}
	return s.inner.PauseSchedule(ctx, name)
}

// DeleteSchedule counts the call and passes it on.
func (s *Store) DeleteSchedule(ctx context.Context, name string) (int, error) {
	if err := s.before(ctx, "DeleteSchedule"); err != nil {
		return 0, err
	}
	return s.inner.DeleteSchedule(ctx, name)
}

// ResumeSchedule counts the call and passes it on.
func (s *Store) ResumeSchedule(ctx context.Context, name string, next time.Time) (*store.Schedule, error) {
	if err := s.before(ctx, "ResumeSchedule"); err != nil {
		return nil, err
	}
	return s.inner.ResumeSchedule(ctx, name, next)
}

// FireSchedule counts the call and passes it on.
func (s *Store) FireSchedule(ctx context.Context, p store.FireParams) (*store.FireResult, error) {
	if err := s.before(ctx, "FireSchedule"); err != nil {
		return nil, err
	}
	return s.inner.FireSchedule(ctx, p)
}

// The methods of store.SlotHistory.

// SlotGaps counts the call and passes it on.
func (s *Store) SlotGaps(ctx context.Context, name string, from, to time.Time, limit int) ([]store.SlotGap, error) {
	if err := s.before(ctx, "SlotGaps"); err != nil {
		return nil, err
	}
	return s.inner.SlotGaps(ctx, name, from, to, limit)
}

// TasksByKeys counts the call and passes it on.
func (s *Store) TasksByKeys(ctx context.Context, name string, keys []string) ([]store.Task, error) {
	if err := s.before(ctx, "TasksByKeys"); err != nil {
		return nil, err
	}
	return s.inner.TasksByKeys(ctx, name, keys)
}

// TasksByKeyRange counts the call and passes it on.
func (s *Store) TasksByKeyRange(ctx context.Context, name, from, before string, limit int) ([]store.Task, error) {
	if err := s.before(ctx, "TasksByKeyRange"); err != nil {
		return nil, err
	}
	return s.inner.TasksByKeyRange(ctx, name, from, before, limit)
}

// The methods of store.Fencer.

// RaiseFence counts the call and passes it on.
func (s *Store) RaiseFence(ctx context.Context, namespace, holder string, token int64) (store.Fence, error) {
	if err := s.before(ctx, "RaiseFence"); err != nil {
		return store.Fence{}, err
	}
	return s.inner.RaiseFence(ctx, namespace, holder, token)
}

// EndLeadership counts the call and passes it on.
func (s *Store) EndLeadership(ctx context.Context, namespace, holder string, epoch int64, reason string) error {
	if err := s.before(ctx, "EndLeadership"); err != nil {
		return err
	}
	return s.inner.EndLeadership(ctx, namespace, holder, epoch, reason)
}

// LeadershipHistory counts the call and passes it on.
func (s *Store) LeadershipHistory(ctx context.Context, namespace string, n int) ([]store.LeadershipChange, error) {
	if err := s.before(ctx, "LeadershipHistory"); err != nil {
		return nil, err
	}
	return s.inner.LeadershipHistory(ctx, namespace, n)
}

// The methods of store.Leaser.

// AcquireLease counts the call and passes it on.
func (s *Store) AcquireLease(ctx context.Context, namespace, holder string, ttl time.Duration) (store.LeaseInfo, bool, error) {
	if err := s.before(ctx, "AcquireLease"); err != nil {
		return store.LeaseInfo{}, false, err
	}
	return s.inner.AcquireLease(ctx, namespace, holder, ttl)
}

// RenewLease counts the call and passes it on.
func (s *Store) RenewLease(ctx context.Context, namespace, holder string, epoch int64, ttl time.Duration) (bool, error) {
	if err := s.before(ctx, "RenewLease"); err != nil {
		return false, err
	}
	return s.inner.RenewLease(ctx, namespace, holder, epoch, ttl)
}

// ReleaseLease counts the call and passes it on.
func (s *Store) ReleaseLease(ctx context.Context, namespace, holder string, epoch int64) (bool, error) {
	if err := s.before(ctx, "ReleaseLease"); err != nil {
		return false, err
	}
	return s.inner.ReleaseLease(ctx, namespace, holder, epoch)
}

// Lease counts the call and passes it on.
func (s *Store) Lease(ctx context.Context, namespace string) (store.LeaseInfo, error) {
	if err := s.before(ctx, "Lease"); err != nil {
		return store.LeaseInfo{}, err
	}
	return s.inner.Lease(ctx, namespace)
}

// The methods of store.NodeRegistry.

// RegisterNode counts the call and passes it on.
func (s *Store) RegisterNode(ctx context.Context, n store.NodeInfo) error {
	if err := s.before(ctx, "RegisterNode"); err != nil {
		return err
	}
	return s.inner.RegisterNode(ctx, n)
}

// Nodes counts the call and passes it on.
func (s *Store) Nodes(ctx context.Context, aliveWithin time.Duration) ([]store.NodeInfo, error) {
	if err := s.before(ctx, "Nodes"); err != nil {
		return nil, err
	}
	return s.inner.Nodes(ctx, aliveWithin)
}

// RemoveNode counts the call and passes it on.
func (s *Store) RemoveNode(ctx context.Context, name string) error {
	if err := s.before(ctx, "RemoveNode"); err != nil {
		return err
	}
	return s.inner.RemoveNode(ctx, name)
}

// ExpireNodes counts the call and passes it on.
func (s *Store) ExpireNodes(ctx context.Context, deadFor time.Duration) (int, error) {
	if err := s.before(ctx, "ExpireNodes"); err != nil {
		return 0, err
	}
	return s.inner.ExpireNodes(ctx, deadFor)
}

// The methods of store.Auditor.

// Audit counts the call and passes it on.
func (s *Store) Audit(ctx context.Context, rec store.AuditRecord) (*store.AuditRecord, error) {
	if err := s.before(ctx, "Audit"); err != nil {
		return nil, err
	}
	return s.inner.Audit(ctx, rec)
}

// AuditLog counts the call and passes it on.
func (s *Store) AuditLog(ctx context.Context, q store.AuditQuery) ([]store.AuditRecord, error) {
	if err := s.before(ctx, "AuditLog"); err != nil {
		return nil, err
	}
	return s.inner.AuditLog(ctx, q)
}

// The methods of store.StatsKeeper.

// WriteStats counts the call and passes it on.
func (s *Store) WriteStats(ctx context.Context, rows []store.MinuteStats) error {
	if err := s.before(ctx, "WriteStats"); err != nil {
		return err
	}
	return s.inner.WriteStats(ctx, rows)
}

// Stats counts the call and passes it on.
func (s *Store) Stats(ctx context.Context, since time.Time) ([]store.MinuteStats, error) {
	if err := s.before(ctx, "Stats"); err != nil {
		return nil, err
	}
	return s.inner.Stats(ctx, since)
}

// The methods of store.Pruner.

// Prune counts the call and passes it on.
func (s *Store) Prune(ctx context.Context, p store.PruneParams) (int, error) {
	if err := s.before(ctx, "Prune"); err != nil {
		return 0, err
	}
	return s.inner.Prune(ctx, p)
}

// PruneAudit counts the call and passes it on.
func (s *Store) PruneAudit(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := s.before(ctx, "PruneAudit"); err != nil {
		return 0, err
	}
	return s.inner.PruneAudit(ctx, before, limit)
}

// SetKeyRate counts the call and passes it on.
func (s *Store) SetKeyRate(ctx context.Context, name string, n int, per time.Duration, by string) (*store.NameState, error) {
	if err := s.before(ctx, "SetKeyRate"); err != nil {
		return nil, err
	}
	return s.inner.SetKeyRate(ctx, name, n, per, by)
}

// PruneKeyStarts counts the call and passes it on.
func (s *Store) PruneKeyStarts(ctx context.Context, limit int) (int, error) {
	if err := s.before(ctx, "PruneKeyStarts"); err != nil {
		return 0, err
	}
	return s.inner.PruneKeyStarts(ctx, limit)
}

// PruneStats counts the call and passes it on.
func (s *Store) PruneStats(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := s.before(ctx, "PruneStats"); err != nil {
		return 0, err
	}
	return s.inner.PruneStats(ctx, before, limit)
}

// PruneSlotGaps counts the call and passes it on.
func (s *Store) PruneSlotGaps(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := s.before(ctx, "PruneSlotGaps"); err != nil {
		return 0, err
	}
	return s.inner.PruneSlotGaps(ctx, before, limit)
}

// PruneLeadership counts the call and passes it on.
func (s *Store) PruneLeadership(ctx context.Context, namespace string, before time.Time, keepNewest, limit int) (int, error) {
	if err := s.before(ctx, "PruneLeadership"); err != nil {
		return 0, err
	}
	return s.inner.PruneLeadership(ctx, namespace, before, keepNewest, limit)
}

func (s *Store) before(ctx context.Context, method string) error {
	r := s.root
	r.mu.Lock()
	r.calls[method]++
	r.mu.Unlock()
	if r.Before != nil {
		return r.Before(ctx, method)
	}
	return nil
}

// Refill counts the call and the rows it returned, and passes it on.
func (s *Store) Refill(ctx context.Context, p store.RefillParams) (*store.RefillResult, error) {
	if err := s.before(ctx, "Refill"); err != nil {
		return nil, err
	}
	r, err := s.inner.Refill(ctx, p)
	if err == nil && r != nil {
		s.root.mu.Lock()
		s.root.refillRows += len(r.Changed) + len(r.Entered)
		s.root.mu.Unlock()
	}
	return r, err
}

// InNamespace returns a counting view of the wrapped store's namespace ns, which
// counts into s, with the optional interfaces when s was given them.
func (s *Store) InNamespace(ns string) (store.Store, error) {
	if err := s.before(context.Background(), "InNamespace"); err != nil {
		return nil, err
	}
	v, err := s.inner.InNamespace(ns)
	if err != nil {
		return nil, err
	}
	view := &Store{inner: v, root: s.root}
	if s.optional {
		return view.WithOptionalInterfaces(), nil
	}
	return view, nil
}

// Close counts the call and passes it on.
func (s *Store) Close() error {
	if err := s.before(context.Background(), "Close"); err != nil {
		return err
	}
	return s.inner.Close()
}
