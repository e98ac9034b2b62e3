package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// Column limits in bytes, checked before writing (a non-strict sql_mode would
// truncate). Each fits its column: a VARCHAR(n) holds n characters, at least n bytes.
const (
	maxName    = store.MaxNameLen // name VARCHAR(200)
	maxKey     = store.MaxKeyLen  // `key` VARCHAR(500)
	maxOwner   = 200              // owner_service VARCHAR(200)
	maxExecID  = 100              // execution_id VARCHAR(100)
	maxNode    = 200              // node VARCHAR(200)
	maxTaskKey = 500              // task_key VARCHAR(500)
)

// These fail to compile if store's limits outgrow the columns.
const (
	_ = uint(200 - maxName)
	_ = uint(500 - maxKey)
)

// getSQL reads a task of the view's namespace by id; lookupSQL by name and key.
const (
	getSQL = "SELECT " + taskColumns + " FROM ax_tasks WHERE id = ? AND namespace = ?"
	// lookupSQL reads the newest task of a business key: the one holding it, if
	// any, for every other gave it up to a newer one.
	// (MAX(id + 0) over ax_tasks_name_key: with ORDER BY id DESC LIMIT 1 the
	// optimizer may read the primary key backwards instead.)
	lookupSQL = "SELECT " + taskColumns + " FROM ax_tasks WHERE id = (SELECT MAX(id + 0) FROM ax_tasks " +
		"WHERE namespace = ? AND name = ? AND `key` = ?)"
)

func validText(s string, limit int) bool { return len(s) <= limit && utf8.ValidString(s) }

// validateNew checks tasks as Insert does; op names the operation in the error
// ("insert", "fire schedule \"report\"").
func validateNew(op string, tasks []store.NewTask) error {
	for i, nt := range tasks {
		if err := driverkit.CheckNewTask(nt); err != nil {
			return fmt.Errorf("ax: mysql: %s: task %d: %w", op, i, err)
		}
		switch {
		case !validText(nt.Name, maxName) || !validText(nt.Key, maxKey) || !validText(nt.OwnerService, maxOwner) ||
			!validText(nt.TaskKey, maxTaskKey):
			return fmt.Errorf("ax: mysql: %s: task %d: name (≤ %d bytes), key (≤ %d), owner (≤ %d) or task key (≤ %d) too long or not UTF-8: %w",
				op, i, maxName, maxKey, maxOwner, maxTaskKey, store.ErrInvalid)
		case !inRange(nt.DueAt):
			return fmt.Errorf("ax: mysql: %s: task %d: due time %v outside years 1000-9999: %w", op, i, nt.DueAt, store.ErrInvalid)
		case nt.MaxRetry < math.MinInt32 || nt.MaxRetry > math.MaxInt32 || nt.Timeout < 0:
			return fmt.Errorf("ax: mysql: %s: task %d: max retry or timeout out of range: %w", op, i, store.ErrInvalid)
		}
	}
	return nil
}

// callerSeq reserves n sequence numbers for rows the caller's transaction stx writes,
// their hold taken inside stx (see run), and returns the first.
func (s *Store) callerSeq(ctx context.Context, op string, stx *sql.Tx, n int) (int64, error) {
	lo, err := s.seqIn(ctx, stx, n)
	if err != nil {
		return 0, s.wrap(op, err)
	}
	return lo, nil
}

// seqIn is callerSeq, its error not wrapped.
func (s *Store) seqIn(ctx context.Context, stx *sql.Tx, n int) (int64, error) {
	for attempt := 1; ; attempt++ {
		lo, err := s.allocSeq(ctx, n)
		if err != nil {
			return 0, err
		}
		ok, err := takeHold(ctx, stx, lo)
		if err != nil {
			s.dropHold(ctx, lo)
			return 0, err
		}
		if ok {
			s.noteHold(stx, lo)
			return lo, nil
		}
		if attempt == maxAttempts {
			return 0, fmt.Errorf("sequence hold lost %d times", attempt)
		}
	}
}

// moveBack runs move, a transition that leaves one task SCHEDULED, in a transaction
// with a fresh sequence number for it, and turns a refusal into its error under op.
func (s *Store) moveBack(ctx context.Context, name, op string, move func(tx *sql.Tx, seq any) (t *store.Task, refusal, err error)) (*store.Task, error) {
	var t *store.Task
	var sentinel error
	err := s.run(ctx, name, 1, func(tx *sql.Tx, seq int64) error {
		var err error
		t, sentinel, err = move(tx, seq)
		return err
	})
	if err != nil {
		return nil, err
	}
	if sentinel != nil {
		return driverkit.Refusal(op, t, sentinel)
	}
	return t, nil
}

// triggerSet is Trigger's transition; its arguments are the execution id, the task id
// and the namespace. attempt is assigned first: MySQL evaluates single-table SET
// clauses left to right, so it must read the old status.
const triggerSet = `UPDATE ax_tasks SET attempt = attempt + (status = 'FAILED'),
	status = 'DISPATCHING', execution_id = ?, finished_at = NULL,
	dispatched_at = UTC_TIMESTAMP(6), triggered_at = UTC_TIMESTAMP(6), updated_at = UTC_TIMESTAMP(6)
	WHERE id = ? AND namespace = ? AND status IN ('SCHEDULED', 'FAILED') AND key_slot = 0`

// triggered is the answer of a trigger of task id that found t, and refused it with
// sentinel or, its key held, with holder.
func triggered(id int64, t *store.Task, sentinel error, holder int64) (*store.Task, error) {
	op := fmt.Sprintf("ax: mysql: trigger task %d", id)
	switch {
	case holder != 0:
		return driverkit.KeyHeld(op, t, holder)
	case sentinel != nil:
		return driverkit.Refusal(op, t, sentinel)
	}
	return t, nil
}
