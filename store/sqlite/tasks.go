package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// validNew checks tasks as the contract asks of Insert; op names the caller in the
// error.
func validNew(op string, tasks []store.NewTask) error {
	for i, nt := range tasks {
		if err := driverkit.CheckNewTask(nt); err != nil {
			return fmt.Errorf("ax: sqlite: %s: task %d: %w", op, i, err)
		}
	}
	return nil
}

const (
	// getSQL reads one task of the view's namespace by id (the primary key).
	getSQL = `SELECT ` + taskColumns + ` FROM ax_tasks WHERE id = ? AND +namespace = ?`
	// lookupSQL reads the newest task of a business key (ax_tasks_ns_name_key): the
	// one holding it, if any, for every other gave it up to a newer one.
	lookupSQL = `SELECT ` + taskColumns + ` FROM ax_tasks WHERE namespace = ? AND name = ? AND key = ? ORDER BY id DESC LIMIT 1`
	// holderOfKeySQL reads the task holding a business key.
	holderOfKeySQL = `SELECT ` + taskColumns + ` FROM ax_tasks WHERE namespace = ? AND name = ? AND key = ? AND key_slot = 0`
)

// cancelled is the answer of a cancel of (name, key) that found t, and refused it
// with sentinel unless nil.
func cancelled(name, key string, t *store.Task, sentinel error) (*store.Task, error) {
	if sentinel != nil {
		return driverkit.Refusal(fmt.Sprintf("ax: sqlite: cancel %q/%q", name, key), t, sentinel)
	}
	return t, nil
}

// moveBack runs move, a transition that leaves one task SCHEDULED, in a write
// transaction with a fresh sequence number for it, and turns a refusal into its
// error under op.
func (s *Store) moveBack(ctx context.Context, name, op string, move func(tx *sql.Tx, seq int64) (t *store.Task, refusal, err error)) (*store.Task, error) {
	var t *store.Task
	var sentinel error
	err := s.write(ctx, name, func(tx *sql.Tx) error {
		seq, err := nextSeq(ctx, tx, 1)
		if err != nil {
			return err
		}
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

// triggered is the answer of a trigger of task id that found t, and refused it with
// sentinel or, its key held, with holder.
func triggered(id int64, t *store.Task, sentinel error, holder int64) (*store.Task, error) {
	if holder != 0 {
		return driverkit.KeyHeld(fmt.Sprintf("ax: sqlite: trigger task %d", id), t, holder)
	}
	if sentinel != nil {
		return driverkit.Refusal(fmt.Sprintf("ax: sqlite: trigger task %d", id), t, sentinel)
	}
	return t, nil
}

func applied(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
