package driverkit

import (
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax/store"
)

// Stored returns the task a SQL driver wrote for nt, SCHEDULED with id and the stamps
// the database set, as reading the row back would give it — times and durations kept
// to the microsecond, times in UTC, an empty payload non-nil — so that an insert need
// not read back the rows it wrote. Durations are kept to the microsecond as
// FormatBackoff does, towards zero; no delays is a nil Backoff.
func Stored(nt *store.NewTask, id int64, created, updated time.Time) *store.Task {
	t := &store.Task{
		ID: id, Name: nt.Name, Key: nt.Key, Status: store.Scheduled, DueAt: nt.DueAt.UTC().Truncate(time.Microsecond),
		MaxRetry: nt.MaxRetry, OwnerService: nt.OwnerService, TaskKey: nt.TaskKey, Overlap: nt.Overlap,
		KeyHold: nt.KeyHold, Timeout: nt.Timeout.Truncate(time.Microsecond), Trace: nt.Trace,
		CreatedAt: created, UpdatedAt: updated,
	}
	if nt.Payload != nil {
		t.Payload = append([]byte{}, nt.Payload...)
	}
	if !nt.KeyUntil.IsZero() {
		t.KeyUntil = nt.KeyUntil.UTC().Truncate(time.Microsecond)
	}
	if len(nt.Backoff) > 0 {
		t.Backoff = make([]time.Duration, len(nt.Backoff))
		for i, d := range nt.Backoff {
			t.Backoff[i] = d.Truncate(time.Microsecond)
		}
	}
	return t
}

// FormatBackoff encodes a task's retry delays as comma-separated microseconds, the
// text form the SQL drivers store.
func FormatBackoff(b []time.Duration) string {
	parts := make([]string, len(b))
	for i, d := range b {
		parts[i] = strconv.FormatInt(d.Microseconds(), 10)
	}
	return strings.Join(parts, ",")
}

// ParseBackoff decodes FormatBackoff's text; "" is no delays.
func ParseBackoff(s string) ([]time.Duration, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	b := make([]time.Duration, len(parts))
	for i, p := range parts {
		us, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("backoff %q: %w", s, err)
		}
		b[i] = time.Duration(us) * time.Microsecond
	}
	return b, nil
}

// Refusal is what Cancel and Trigger return when their transition did not apply:
// the task as it is, or nil when it does not exist, with the sentinel (ErrNotFound,
// ErrNotCancellable, ErrNotTriggerable) wrapped under op.
func Refusal(op string, t *store.Task, sentinel error) (*store.Task, error) {
	switch {
	case t == nil:
		return nil, fmt.Errorf("%s: %w", op, sentinel)
	case t.Superseded:
		return t, fmt.Errorf("%s: task is %s and superseded: a newer task holds its key: %w", op, t.Status, sentinel)
	}
	return t, fmt.Errorf("%s: task is %s: %w", op, t.Status, sentinel)
}

// KeyHeld is the error Trigger returns when the task's key is held by another task:
// a *KeyHeldError under op, wrapping ErrNotTriggerable.
func KeyHeld(op string, t *store.Task, holder int64) (*store.Task, error) {
	return t, fmt.Errorf("%s: %w", op, &store.KeyHeldError{TaskKey: t.TaskKey, Holder: holder})
}

// NewTaskStats returns the TaskStats of an empty table: every status counted zero, no
// OldestDue. Drivers add their counts to it, so that a status without tasks is
// present as the contract asks.
func NewTaskStats() *store.TaskStats {
	statuses := store.Statuses()
	st := &store.TaskStats{Counts: make(map[store.Status]int64, len(statuses))}
	for _, s := range statuses {
		st.Counts[s] = 0
	}
	return st
}

// SchedulesInOrder returns stored, the rows a driver read back after
// RegisterSchedules, in the order of defs, as the contract answers. A definition
// without its row is an error: the upsert did not write it.
func SchedulesInOrder(defs []store.ScheduleDef, stored []store.Schedule) ([]store.Schedule, error) {
	byName := make(map[string]store.Schedule, len(stored))
	for _, sc := range stored {
		byName[sc.Name] = sc
	}
	out := make([]store.Schedule, len(defs))
	for i, d := range defs {
		sc, ok := byName[d.Name]
		if !ok {
			return nil, fmt.Errorf("schedule %q registered but not read back", d.Name)
		}
		out[i] = sc
	}
	return out, nil
}

// TaskRow is what the SQL drivers scan alike from a row of their task columns: the
// task's own fields (into Task) and the raw values of the columns they convert the
// same way. A driver embeds it in its row type, one per query, reused for every row,
// so that a claim's rows do not each allocate a destination per column (Scan's
// arguments escape).
type TaskRow struct {
	Task       store.Task // scanned into, then copied out by Fill
	Payload    []byte
	HasPayload bool // the drivers read a zero-length BLOB as nil
	Status     string
	ExecID     sql.NullString
	Timeout    int64 // microseconds
	Backoff    string
}

// Fill sets t to the task scanned, with the columns of TaskRow converted; the driver
// sets the rest (its times, for instance) after it. The row is ready for the next
// Scan: Task is reset.
func (r *TaskRow) Fill(t *store.Task) error {
	*t, r.Task = r.Task, store.Task{}
	if r.HasPayload {
		t.Payload = append([]byte{}, r.Payload...)
	}
	t.Status = store.Status(r.Status)
	t.ExecutionID = r.ExecID.String
	t.Timeout = time.Duration(r.Timeout) * time.Microsecond
	var err error
	t.Backoff, err = ParseBackoff(r.Backoff)
	return err
}
