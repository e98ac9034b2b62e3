package mysql

import (
	"context"
	"database/sql"
	"time"

	"github.com/axsched/ax/store"
)

// The execution path — Claim, Start, Heartbeat, Finish, Requeue — runs for every task.
// MySQL has no UPDATE … RETURNING and no UPDATE … FROM (VALUES …), so each chunk of up
// to store.MaxBatch ids, sorted ascending, is a fixed handful of statements in one
// READ COMMITTED transaction:
//
//  1. SELECT … WHERE id IN (…) AND status = <old> ORDER BY id FOR UPDATE: lock the rows
//     whose status matches, in id order;
//  2. one UPDATE … SET col = CASE id WHEN ? THEN ? … END … WHERE id IN (locked ids)
//     AND status = <old> [AND execution_id = CASE id …]: the per-row CAS, kept;
//  3. where the caller needs rows back, one SELECT by id.
//
// Stamps come from the database clock: UTC_TIMESTAMP(6) read by statement 1.
//
// Statements 1 and 2 say FORCE INDEX (PRIMARY). Given "id IN (…) AND status = ?" the
// optimizer may prefer the (status, …) indexes and scan every SCHEDULED row; a locking
// scan locks each row it reads (READ COMMITTED lets go of the non-matching ones only
// after reading them), so concurrent batches would wait on rows neither meant to touch.

// chunks calls f for consecutive chunks of at most store.MaxBatch of n items.
func chunks(n int, f func(lo, hi int) error) error {
	for lo := 0; lo < n; lo += store.MaxBatch {
		if err := f(lo, min(n, lo+store.MaxBatch)); err != nil {
			return err
		}
	}
	return nil
}

// locked is a row locked by lockRows.
type locked struct {
	execID  string
	attempt int
	retries int
	due     bool
	dueAt   time.Time
	overlap store.OverlapPolicy // readKeys only: skip or queue when the task's key rules, else empty
	taskKey string              // readKeys only, when its key rules
	name    string              // readName and readKeys only
	claimed time.Time           // readName only: dispatched_at, the claim
	// cancelBy, with readCancel only, is who asked to cancel the task; empty when
	// nobody did.
	cancelBy string
	// paused, with readKeys only: the task's name is paused (store.NameKeeper).
	paused bool
	// limited, with readKeys only: the task's name has a concurrency or a rate limit,
	// a key concurrency above one or a rate per task key, and is not paused.
	limited bool
}

// lockRead says what lockRows reads of a row besides its state.
type lockRead int

// lockRows locks the rows of namespace ns among ids whose status is status, in id
// order, and returns them by id with the database time of the statement. The rows of
// other namespaces are left out, as if they were not in that status. With readKeys it
// also reads the overlap policy and task key of the tasks whose key rules — both are
// NULL for the others, which the driver hands over without allocating — and the rule
// of the task's name (nameRule): paused, or limited (a concurrency or a rate limit, a
// key concurrency above one or a rate per task key).
func lockRows(ctx context.Context, tx *sql.Tx, ns string, status store.Status, ids []int64, read lockRead) (map[int64]*locked, time.Time, error) {
	cols := ""
	switch read {
	case readName:
		cols = `, name, dispatched_at`
	case readKeys:
		cols = `, IF(overlap IN ('skip', 'queue'), overlap, NULL), IF(overlap IN ('skip', 'queue'), task_key, NULL), name, ` + nameRule
	case readCancel:
		cols = `, IF(cancel_requested_at IS NULL, NULL, cancelled_by)`
	}
	args := make([]any, 0, len(ids)+2)
	for _, id := range ids {
		args = append(args, id)
	}
	args = append(args, string(status), ns)
	q := `SELECT id, COALESCE(execution_id, ''), attempt, dispatch_retries, due_at, due_at <= UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)` + cols + `
		FROM ax_tasks FORCE INDEX (PRIMARY) WHERE id IN (` + marks(len(ids)) + `) AND status = ? AND namespace = ? ORDER BY id FOR UPDATE`
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer rows.Close()
	out := make(map[int64]*locked, len(ids))
	var now time.Time
	for rows.Next() {
		var id int64
		l := &locked{}
		switch read {
		case readName:
			err = rows.Scan(&id, &l.execID, &l.attempt, &l.retries, dbTime{&l.dueAt}, &l.due, dbTime{&now}, &l.name, dbTime{&l.claimed})
		case readKeys:
			var rule int
			err = rows.Scan(&id, &l.execID, &l.attempt, &l.retries, dbTime{&l.dueAt}, &l.due, dbTime{&now},
				nullText{(*string)(&l.overlap)}, nullText{&l.taskKey}, &l.name, &rule)
			l.paused, l.limited = rule < 0, rule > 0
		case readCancel:
			err = rows.Scan(&id, &l.execID, &l.attempt, &l.retries, dbTime{&l.dueAt}, &l.due, dbTime{&now}, nullText{&l.cancelBy})
		default:
			err = rows.Scan(&id, &l.execID, &l.attempt, &l.retries, dbTime{&l.dueAt}, &l.due, dbTime{&now})
		}
		if err != nil {
			return nil, time.Time{}, err
		}
		out[id] = l
	}
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, err
	}
	return out, now, nil
}

// selectTasks reads tasks by id, in id order.
func selectTasks(ctx context.Context, tx *sql.Tx, ids []int64) ([]store.Task, error) {
	rows, err := tx.QueryContext(ctx, `SELECT `+taskColumns+` FROM ax_tasks WHERE id IN (`+marks(len(ids))+`) ORDER BY id`, int64s(ids)...)
	if err != nil {
		return nil, err
	}
	return scanTasks(rows, len(ids))
}

// assignments builds the SET list of a multi-row UPDATE, one "col = CASE id … END"
// per column that some rows change.
type assignments struct {
	sql  string
	args []any
}

func (u *assignments) add(col string, ids []int64, vals []any) {
	if len(ids) == 0 {
		return
	}
	c, a := caseID(ids, vals, col)
	u.sql += ", " + col + " = " + c
	u.args = append(u.args, a...)
}
