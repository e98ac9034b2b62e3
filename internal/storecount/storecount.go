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
// store it wraps. It implements each method of store.Store itself rather than
// embedding the wrapped store, so that a method added to the interface fails to
// compile here instead of going uncounted.
//
// As a store.Store it implements none of the optional interfaces (store.Notifier,
// store.TxStore), whatever the wrapped store implements: a scheduler given it sees a
// plain store. [Store.WithOptionalInterfaces] keeps them.
//
// A Store is safe for concurrent use.
type Store struct {
	// Before, when set, is called before each call is passed on, with the call's
	// context (context.Background() for Close) and its method name, e.g. "Insert" —
	// the names of store.Store's methods, and "Listen", "InsertTx", "CancelTx" and "TriggerTx". It may sleep
	// (a network database's round trip), block, or fail the call: a non-nil error is
	// returned as the call's error, and the call does not reach the wrapped store.
	// It runs on the caller's goroutine, after the call is counted. Set it before the
	// store is used.
	Before func(ctx context.Context, method string) error

	inner store.Store

	mu         sync.Mutex
	calls      map[string]int
	refillRows int
}

var _ store.Store = (*Store)(nil)

// New returns a Store that wraps inner, with every count at zero.
func New(inner store.Store) *Store {
	return &Store{inner: inner, calls: map[string]int{}}
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
	s.mu.Lock()
	defer s.mu.Unlock()
	return Counts{Calls: maps.Clone(s.calls), RefillRows: s.refillRows}
}

// WithOptionalInterfaces returns s as a store.Store that also implements each of
// store.Notifier and store.TxStore that the wrapped store implements, so that a
// scheduler given it behaves as with the wrapped store (it listens for
// notifications; WithTx works). Listen and the TxStore methods are counted, and pass
// through Before, like the other methods.
func (s *Store) WithOptionalInterfaces() store.Store {
	n, isNotifier := s.inner.(store.Notifier)
	tx, isTxStore := s.inner.(store.TxStore)
	switch {
	case isNotifier && isTxStore:
		return struct {
			*Store
			notifier
			txStore
		}{s, notifier{s, n}, txStore{s, tx}}
	case isNotifier:
		return struct {
			*Store
			notifier
		}{s, notifier{s, n}}
	case isTxStore:
		return struct {
			*Store
			txStore
		}{s, txStore{s, tx}}
	}
	return s
}

type notifier struct {
	s     *Store
	inner store.Notifier
}

func (n notifier) Listen(ctx context.Context, f func()) error {
	if err := n.s.before(ctx, "Listen"); err != nil {
		return err
	}
	return n.inner.Listen(ctx, f)
}

type txStore struct {
	s     *Store
	inner store.TxStore
}

func (t txStore) InsertTx(ctx context.Context, tx any, tasks []store.NewTask) ([]store.Inserted, error) {
	if err := t.s.before(ctx, "InsertTx"); err != nil {
		return nil, err
	}
	return t.inner.InsertTx(ctx, tx, tasks)
}

func (t txStore) CancelTx(ctx context.Context, tx any, name, key string) (*store.Task, error) {
	if err := t.s.before(ctx, "CancelTx"); err != nil {
		return nil, err
	}
	return t.inner.CancelTx(ctx, tx, name, key)
}

func (t txStore) TriggerTx(ctx context.Context, tx any, id int64) (*store.Task, error) {
	if err := t.s.before(ctx, "TriggerTx"); err != nil {
		return nil, err
	}
	return t.inner.TriggerTx(ctx, tx, id)
}

func (t txStore) ClaimTriggerTx(ctx context.Context, tx any, id int64, executionID string) (*store.Task, error) {
	if err := t.s.before(ctx, "ClaimTriggerTx"); err != nil {
		return nil, err
	}
	return t.inner.ClaimTriggerTx(ctx, tx, id, executionID)
}

func (t txStore) RescheduleTx(ctx context.Context, tx any, name, key string, at time.Time) (*store.Task, error) {
	if err := t.s.before(ctx, "RescheduleTx"); err != nil {
		return nil, err
	}
	return t.inner.RescheduleTx(ctx, tx, name, key, at)
}

func (t txStore) RetryTx(ctx context.Context, tx any, id int64) (*store.Task, error) {
	if err := t.s.before(ctx, "RetryTx"); err != nil {
		return nil, err
	}
	return t.inner.RetryTx(ctx, tx, id)
}

func (t txStore) PauseScheduleTx(ctx context.Context, tx any, name string) (*store.Schedule, error) {
	if err := t.s.before(ctx, "PauseScheduleTx"); err != nil {
		return nil, err
	}
	return t.inner.PauseScheduleTx(ctx, tx, name)
}

func (t txStore) ResumeScheduleTx(ctx context.Context, tx any, name string, next time.Time) (*store.Schedule, error) {
	if err := t.s.before(ctx, "ResumeScheduleTx"); err != nil {
		return nil, err
	}
	return t.inner.ResumeScheduleTx(ctx, tx, name, next)
}

func (t txStore) GetTx(ctx context.Context, tx any, id int64) (*store.Task, error) {
	if err := t.s.before(ctx, "GetTx"); err != nil {
		return nil, err
	}
	return t.inner.GetTx(ctx, tx, id)
}

func (t txStore) AuditTx(ctx context.Context, tx any, rec store.AuditRecord) (*store.AuditRecord, error) {
	if err := t.s.before(ctx, "AuditTx"); err != nil {
		return nil, err
	}
	return t.inner.AuditTx(ctx, tx, rec)
}

func (t txStore) InTx(ctx context.Context, fn func(tx any) error) error {
	if err := t.s.before(ctx, "InTx"); err != nil {
		return err
	}
	return t.inner.InTx(ctx, fn)
}

// before counts a call to method and runs the Before hook.
func (s *Store) before(ctx context.Context, method string) error {
	s.mu.Lock()
	s.calls[method]++
	s.mu.Unlock()
	if s.Before != nil {
		return s.Before(ctx, method)
	}
	return nil
}

// Now counts the call and passes it on.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	if err := s.before(ctx, "Now"); err != nil {
		return time.Time{}, err
	}
	return s.inner.Now(ctx)
}

// Insert counts the call and passes it on.
func (s *Store) Insert(ctx context.Context, tasks []store.NewTask) ([]store.Inserted, error) {
	if err := s.before(ctx, "Insert"); err != nil {
		return nil, err
	}
	return s.inner.Insert(ctx, tasks)
}

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

// Cancel counts the call and passes it on.
func (s *Store) Cancel(ctx context.Context, name, key string) (*store.Task, error) {
	if err := s.before(ctx, "Cancel"); err != nil {
		return nil, err
	}
	return s.inner.Cancel(ctx, name, key)
}

// Refill counts the call, passes it on, and counts the rows a successful one
// returns.
func (s *Store) Refill(ctx context.Context, p store.RefillParams) (*store.RefillResult, error) {
	if err := s.before(ctx, "Refill"); err != nil {
		return nil, err
	}
	r, err := s.inner.Refill(ctx, p)
	if err == nil && r != nil {
		s.mu.Lock()
		s.refillRows += len(r.Changed) + len(r.Entered)
		s.mu.Unlock()
	}
	return r, err
}

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

// Trigger counts the call and passes it on.
func (s *Store) Trigger(ctx context.Context, id int64, executionID string) (*store.Task, error) {
	if err := s.before(ctx, "Trigger"); err != nil {
		return nil, err
	}
	return s.inner.Trigger(ctx, id, executionID)
}

// Start counts the call and passes it on.
func (s *Store) Start(ctx context.Context, fence store.Fence, starts []store.StartParams) ([]store.StartResult, error) {
	if err := s.before(ctx, "Start"); err != nil {
		return nil, err
	}
	return s.inner.Start(ctx, fence, starts)
}

// Heartbeat counts the call and passes it on.
func (s *Store) Heartbeat(ctx context.Context, refs []store.ExecRef) ([]bool, error) {
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

// RaiseFence counts the call and passes it on.
func (s *Store) RaiseFence(ctx context.Context, namespace, holder string, token int64) (store.Fence, error) {
	if err := s.before(ctx, "RaiseFence"); err != nil {
		return store.Fence{}, err
	}
	return s.inner.RaiseFence(ctx, namespace, holder, token)
}

// Stale counts the call and passes it on.
func (s *Store) Stale(ctx context.Context, status store.Status, before time.Time, limit int) ([]store.Task, error) {
	if err := s.before(ctx, "Stale"); err != nil {
		return nil, err
	}
	return s.inner.Stale(ctx, status, before, limit)
}

// RegisterSchedules counts the call and passes it on.
func (s *Store) RegisterSchedules(ctx context.Context, defs []store.ScheduleDef) ([]store.Schedule, error) {
	if err := s.before(ctx, "RegisterSchedules"); err != nil {
		return nil, err
	}
	return s.inner.RegisterSchedules(ctx, defs)
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

// ResumeSchedule counts the call and passes it on.
func (s *Store) ResumeSchedule(ctx context.Context, name string, next time.Time) (*store.Schedule, error) {
	if err := s.before(ctx, "ResumeSchedule"); err != nil {
		return nil, err
	}
	return s.inner.ResumeSchedule(ctx, name, next)
}

// DeleteSchedule counts the call and passes it on.
func (s *Store) DeleteSchedule(ctx context.Context, name string) (int, error) {
	if err := s.before(ctx, "DeleteSchedule"); err != nil {
		return 0, err
	}
	return s.inner.DeleteSchedule(ctx, name)
}

// FireSchedule counts the call and passes it on.
func (s *Store) FireSchedule(ctx context.Context, p store.FireParams) (*store.FireResult, error) {
	if err := s.before(ctx, "FireSchedule"); err != nil {
		return nil, err
	}
	return s.inner.FireSchedule(ctx, p)
}

// TaskStats counts the call and passes it on.
func (s *Store) TaskStats(ctx context.Context, now time.Time) (*store.TaskStats, error) {
	if err := s.before(ctx, "TaskStats"); err != nil {
		return nil, err
	}
	return s.inner.TaskStats(ctx, now)
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

// PruneStats counts the call and passes it on.
func (s *Store) PruneStats(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := s.before(ctx, "PruneStats"); err != nil {
		return 0, err
	}
	return s.inner.PruneStats(ctx, before, limit)
}

// Close counts the call and closes the wrapped store.
func (s *Store) Close() error {
	if err := s.before(context.Background(), "Close"); err != nil {
		return err
	}
	return s.inner.Close()
}
