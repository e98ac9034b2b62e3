package ax

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"time"

	"github.com/axsched/ax/store"
)

// TaskQuery selects tasks for [Scheduler.Tasks]. Its filters combine with AND; a zero
// field does not filter, so the zero TaskQuery lists every task of the scheduler's
// namespace, newest first, 100 at a time.
type TaskQuery struct {
	// Statuses selects tasks in any of these states.
	Statuses []Status
	// Name selects the tasks of one handler name.
	Name string
	// KeyPrefix selects business keys that start with it (byte-wise, case-sensitive).
	// Every store's business-key index serves it together with Name; without Name the
	// prefix filters whatever the other conditions find.
	KeyPrefix string
	// OwnerService selects the tasks one service submitted.
	OwnerService string
	// TaskKey selects the tasks with this overlap key (a schedule's name selects its
	// occurrences).
	TaskKey string
	// DueFrom ≤ DueAt < DueBefore; a zero bound is open.
	DueFrom, DueBefore time.Time
	// FinishedFrom ≤ FinishedAt < FinishedBefore; a zero bound is open. Either bound
	// selects finished tasks only.
	FinishedFrom, FinishedBefore time.Time
	// Order is NewestFirst (the zero value) or SoonestFirst.
	Order TaskOrder
	// Limit is the page size: 0 means DefaultPageSize, at most MaxPageSize.
	Limit int
	// Cursor continues a listing: the Next of the page before, with the same query.
	// Empty: the first page.
	Cursor string
}

// TaskOrder is the order of a task listing.
type TaskOrder string

// The orders of a listing.
const (
	// NewestFirst lists the most recently submitted tasks first (by id, descending).
	NewestFirst TaskOrder = ""
	// SoonestFirst lists by due time, the earliest first (ties by id).
	SoonestFirst TaskOrder = "soonest"
)

// Page sizes of [Scheduler.Tasks].
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// TaskPage is one page of a listing.
type TaskPage struct {
	Tasks []*Task
	// Next is the Cursor of the next page, or empty when this page is the last.
	Next string
}

// Tasks lists the tasks of the scheduler's namespace that q selects, one page at a
// time: each page is one indexed query with a LIMIT, and Next continues after its
// last task (a keyset cursor: tasks written meanwhile never make a page skip or
// repeat one). A malformed query, or a cursor that is not one of this query's, is
// ErrInvalid. It only reads; the scheduler need not be started.
func (s *Scheduler) Tasks(ctx context.Context, q TaskQuery) (*TaskPage, error) {
	sq, err := storeQuery(q)
	if err != nil {
		return nil, errorf("ax: list tasks: %w", err)
	}
	size := sq.Limit
	sq.Limit++ // one more: is there a next page?
	ts, err := s.st.Tasks(ctx, sq)
	if err != nil {
		return nil, errorf("ax: list tasks: %w", err)
	}
	page := &TaskPage{Tasks: make([]*Task, 0, min(len(ts), size))}
	for i := range ts[:min(len(ts), size)] {
		page.Tasks = append(page.Tasks, taskOf(&ts[i]))
	}
	if len(ts) > size {
		last := ts[size-1]
		page.Next = encodeCursor(q, store.TaskCursor{ID: last.ID, DueAt: last.DueAt})
	}
	return page, nil
}

// storeQuery checks q and turns it into the store's query.
func storeQuery(q TaskQuery) (store.TaskQuery, error) {
	sq := store.TaskQuery{
		Statuses: q.Statuses, Name: q.Name, KeyPrefix: q.KeyPrefix, OwnerService: q.OwnerService, TaskKey: q.TaskKey,
		DueFrom: q.DueFrom, DueBefore: q.DueBefore, FinishedFrom: q.FinishedFrom, FinishedBefore: q.FinishedBefore,
		Limit: q.Limit,
	}
	switch q.Order {
	case NewestFirst:
	case SoonestFirst:
		sq.Soonest = true
	default:
		return sq, fmt.Errorf("unknown order %q: %w", q.Order, ErrInvalid)
	}
	switch {
	case q.Limit == 0:
		sq.Limit = DefaultPageSize
	case q.Limit < 0 || q.Limit > MaxPageSize:
		return sq, fmt.Errorf("page size %d is outside 1..%d: %w", q.Limit, MaxPageSize, ErrInvalid)
	}
	if q.Cursor != "" {
		c, err := decodeCursor(q)
		if err != nil {
			return sq, err
		}
		sq.After = &c
	}
	return sq, store.CheckTaskQuery(sq)
}

// A cursor is base64url of: a version byte, the position (id, due time in µs since
// the epoch) and a hash of the query it belongs to, which a cursor given with another
// query does not match.
const cursorVersion = 1

func encodeCursor(q TaskQuery, c store.TaskCursor) string {
	b := []byte{cursorVersion}
	b = binary.AppendVarint(b, c.ID)
	b = binary.AppendVarint(b, c.DueAt.UnixMicro())
	b = binary.BigEndian.AppendUint64(b, queryHash(q))
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(q TaskQuery) (store.TaskCursor, error) {
	bad := func(why string) (store.TaskCursor, error) {
		return store.TaskCursor{}, fmt.Errorf("cursor %q: %s: %w", q.Cursor, why, ErrInvalid)
	}
	b, err := base64.RawURLEncoding.DecodeString(q.Cursor)
	if err != nil || len(b) < 1 || b[0] != cursorVersion {
		return bad("not a cursor of this version")
	}
	b = b[1:]
	id, n := binary.Varint(b)
	if n <= 0 || id <= 0 {
		return bad("no position")
	}
	b = b[n:]
	due, n := binary.Varint(b)
	if n <= 0 {
		return bad("no position")
	}
	b = b[n:]
	if len(b) != 8 || binary.BigEndian.Uint64(b) != queryHash(q) {
		return bad("it belongs to another query")
	}
	return store.TaskCursor{ID: id, DueAt: time.UnixMicro(due).UTC()}, nil
}

// queryHash hashes what a cursor's position depends on: q's filters and order.
func queryHash(q TaskQuery) uint64 {
	h := fnv.New64a()
	statuses := slices.Clone(q.Statuses)
	slices.Sort(statuses)
	for _, st := range statuses {
		fmt.Fprintf(h, "%s,", st)
	}
	for _, v := range []string{q.Name, q.KeyPrefix, q.OwnerService, q.TaskKey, string(q.Order)} {
		fmt.Fprintf(h, "|%d:%s", len(v), v)
	}
	for _, t := range []time.Time{q.DueFrom, q.DueBefore, q.FinishedFrom, q.FinishedBefore} {
		fmt.Fprintf(h, "|%d", t.UnixMicro())
	}
	return h.Sum64()
}

// CountCap is where Counts stops counting: a status with more tasks is reported as
// CountCap with Capped set.
const CountCap = 100_000

// Count is a number of tasks, exact up to CountCap.
type Count struct {
	N      int64 // at most CountCap
	Capped bool  // there are more than CountCap
}

// String returns the count with its thousands grouped, "100,000+" when it is capped.
func (c Count) String() string {
	if c.Capped {
		return groupThousands(c.N) + "+"
	}
	return groupThousands(c.N)
}

func groupThousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Counts returns the number of tasks of the scheduler's namespace in each status,
// every status present. Each count reads at most CountCap + 1 index entries, so it
// stays fast on tens of millions of rows; a larger one is capped (Count.Capped).
func (s *Scheduler) Counts(ctx context.Context) (map[Status]Count, error) {
	raw, err := s.st.CountTasks(ctx, CountCap)
	if err != nil {
		return nil, errorf("ax: count tasks: %w", err)
	}
	out := make(map[Status]Count, len(raw))
	for st, n := range raw {
		out[st] = Count{N: min(n, CountCap), Capped: n > CountCap}
	}
	return out, nil
}

// Get returns the task with this id, or ErrNotFound. With WithTx it reads in the
// caller's transaction, which sees its own uncommitted changes.
func (s *Scheduler) Get(ctx context.Context, id int64, opts ...ActionOption) (*Task, error) {
	o := collect(opts)
	if id <= 0 {
		o.errs = append(o.errs, fmt.Errorf("id is not positive: %w", ErrInvalid))
	}
	if err := errors.Join(o.errs...); err != nil {
		return nil, errorf("ax: get task %d: %w", id, err)
	}
	t, err := inTxOr(s, o, func(txs store.TxStore, tx any) (*store.Task, error) { return txs.GetTx(ctx, tx, id) },
		func() (*store.Task, error) { return s.st.Get(ctx, id) })
	if err != nil {
		return nil, errorf("ax: get task %d: %w", id, err)
	}
	return taskOf(t), nil
}

// Lookup returns the newest task with this name and key — the one holding the key,
// if any (see Unique) — or ErrNotFound.
func (s *Scheduler) Lookup(ctx context.Context, name, key string) (*Task, error) {
	if err := errors.Join(validName(name), validKey(key)); err != nil {
		return nil, errorf("ax: lookup %q/%q: %w", name, key, err)
	}
	t, err := s.st.Lookup(ctx, name, key)
	if err != nil {
		return nil, errorf("ax: lookup %q/%q: %w", name, key, err)
	}
	return taskOf(t), nil
}

// Executions returns the task's executions, oldest first, or ErrNotFound.
func (s *Scheduler) Executions(ctx context.Context, id int64) ([]Execution, error) {
	if id <= 0 {
		return nil, errorf("ax: executions of task %d: id is not positive: %w", id, ErrInvalid)
	}
	es, err := s.st.Executions(ctx, id)
	if err != nil {
		return nil, errorf("ax: executions of task %d: %w", id, err)
	}
	return executionsOf(es), nil
}
