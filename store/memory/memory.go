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
// It is also the example of a store written from go doc ./store and storetest
// alone: it uses no package of the module but store, and holds its own reading of
// the contract (check.go validates every input).
//
// DESIGN.md, beside this file, has the design notes: the indexes that keep Refill's
// cost in proportion to what it returns.
package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/axsched/ax/store"
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

	schedules  map[nameKey]*store.Schedule  // key unused
	names      map[nameKey]*store.NameState // key unused (names.go)
	starts     map[nameKey][]time.Time      // a rate-limited name's last claims, ascending; with a key, its rate per key's (names.go)
	leases     map[string]*leaseRow         // by namespace (lease.go)
	nodes      map[nameKey]*store.NodeInfo  // key unused (nodes.go)
	audit      []auditRow                   // id order (audit.go)
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
		names:      make(map[nameKey]*store.NameState),
		starts:     make(map[nameKey][]time.Time),
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

// current reports whether the change entry c still describes r: r is SCHEDULED and
// c is its latest write.
func (r *row) current(c change) bool {
	return r.seq == c.seq && r.task.Status == store.Scheduled
}

// serialised reports whether t waits for its task key: it has one, and its Overlap is
// skip or queue.
func serialised(t *store.Task) bool { return t.TaskKey != "" && t.Overlap != store.OverlapAllow }

// keyHold is the tasks DISPATCHING or RUNNING with a task key: the lowest id, and how
// many.
type keyHold struct {
	first int64
	count int
}

// holders returns, for each task key, its holders. The store keeps no index of keys:
// it scans, as a test store may.
func (s *Store) holders() map[string]keyHold {
	held := make(map[string]keyHold)
	for _, r := range s.rows {
		t := &r.task
		if r.ns == s.ns && t.TaskKey != "" && (t.Status == store.Dispatching || t.Status == store.Running) {
			h := held[t.TaskKey]
			if h.count == 0 || t.ID < h.first {
				h.first = t.ID
			}
			h.count++
			held[t.TaskKey] = h
		}
	}
	return held
}

// inflight counts, for each task name, the tasks DISPATCHING or RUNNING with it.
func (s *Store) inflight() map[string]int {
	used := make(map[string]int)
	for _, r := range s.rows {
		if r.ns == s.ns && (r.task.Status == store.Dispatching || r.task.Status == store.Running) {
			used[r.task.Name]++
		}
	}
	return used
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
