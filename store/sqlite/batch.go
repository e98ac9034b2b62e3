package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/axsched/ax/store"
)

// The execution path — Claim, Start, Heartbeat, Finish — runs for every task, so each
// chunk of up to store.MaxBatch rows is one multi-row statement joined against a
// VALUES list (columns column1, column2, …), not a statement per row. Every statement
// keeps the per-row conditions; a row whose condition fails is simply not touched.

// values returns "(?,?),(?,?)…": rows tuples of cols placeholders.
func values(rows, cols int) string {
	tuple := "(" + strings.TrimSuffix(strings.Repeat("?,", cols), ",") + ")"
	return strings.TrimSuffix(strings.Repeat(tuple+",", rows), ",")
}

// A batchStmt is a statement over a VALUES list, written with %V% where the list
// goes. It is prepared once per size bucket when the store opens (parsing was a sixth
// of the CPU of the execution path), and a batch is padded up to its bucket with a
// row that matches nothing.
type batchStmt struct {
	sql  string
	cols int
	pad  []any // a row that matches no row of the table
}

// buckets are the prepared sizes of every batchStmt.
var buckets = []int{1, 2, 4, 8, 16, 32, 64, 128, store.MaxBatch}

func bucket(n int) int {
	for i, b := range buckets {
		if n <= b {
			return i
		}
	}
	panic(fmt.Sprintf("ax: sqlite: batch of %d rows exceeds %d", n, store.MaxBatch))
}

func (s *Store) prepareBatches(ctx context.Context) error {
	s.stmts = make(map[*batchStmt][]*sql.Stmt)
	for _, b := range batchStmts {
		for _, size := range buckets {
			st, err := s.w.PrepareContext(ctx, strings.Replace(b.sql, "%V%", values(size, b.cols), 1))
			if err != nil {
				return fmt.Errorf("ax: sqlite: prepare: %w", err)
			}
			s.stmts[b] = append(s.stmts[b], st)
		}
	}
	return nil
}

// batch runs b in tx, a transaction on the store's writer, through b's statement
// prepared for the bucket, with the arguments of batchArgs.
func (s *Store) batch(ctx context.Context, tx *sql.Tx, b *batchStmt, head, rows, tail []any) (*sql.Rows, error) {
	i, args := batchArgs(b, head, rows, tail)
	return tx.StmtContext(ctx, s.stmts[b][i]).QueryContext(ctx, args...)
}

// batchText is batch for a transaction of the caller's (a store.Tx from Bind), on another
// *sql.DB, to which the statements prepared on the writer do not apply: the SQL goes
// as text.
func (s *Store) batchText(ctx context.Context, tx *sql.Tx, b *batchStmt, head, rows, tail []any) (*sql.Rows, error) {
	i, args := batchArgs(b, head, rows, tail)
	return tx.QueryContext(ctx, strings.Replace(b.sql, "%V%", values(buckets[i], b.cols), 1), args...)
}

// batchFunc is batch or batchText.
type batchFunc func(ctx context.Context, tx *sql.Tx, b *batchStmt, head, rows, tail []any) (*sql.Rows, error)

// batchArgs returns the bucket of b for rows and its arguments: head, then rows (n
// rows of b.cols values, padded up to the bucket), then tail.
func batchArgs(b *batchStmt, head, rows, tail []any) (int, []any) {
	n := len(rows) / b.cols
	i := bucket(n)
	args := make([]any, 0, len(head)+buckets[i]*b.cols+len(tail))
	args = append(append(args, head...), rows...)
	for range buckets[i] - n {
		args = append(args, b.pad...)
	}
	return i, append(args, tail...)
}

func (s *Store) batchExec(ctx context.Context, tx *sql.Tx, b *batchStmt, head, rows, tail []any) error {
	r, err := s.batch(ctx, tx, b, head, rows, tail)
	if err != nil {
		return err
	}
	r.Close()
	return r.Err()
}

// holding is the condition of a row holding its task key: in flight, with a key. It
// is word for word the WHERE clause of the partial index ax_tasks_ns_key_holder, which
// SQLite uses only for a query whose WHERE contains it.
const holding = `status IN ('DISPATCHING', 'RUNNING') AND task_key <> ''`

// In the statements that name their rows by id (claimStmt, missedStmt,
// keyedClaimStmt, recordStmt, recordedStmt, heartbeatStmt, finishStmt, Requeue's,
// triggerSQL, getSQL), the namespace is compared as +namespace, which SQLite
// checks on the row it found by the primary key but never uses to pick an index:
// "namespace = ? AND due_at <= ?" would otherwise match ax_tasks_ns_scheduled_due, and
// the planner, which knows nothing of the ids' selectivity, prefers a scan of every due
// task to the VALUES list's rowid lookups (TestExplain pins the plans).

// keyFree is the overlap rule inside a claiming UPDATE of ax_tasks: no other row of
// the updated row's namespace holds its task key.
const keyFree = `NOT EXISTS (SELECT 1 FROM ax_tasks o
		WHERE o.namespace = ax_tasks.namespace AND o.task_key = ax_tasks.task_key
			AND o.status IN ('DISPATCHING', 'RUNNING') AND o.task_key <> '')`

// keyHolders counts, inside a claiming UPDATE of ax_tasks, the rows of the updated
// row's namespace that hold its task key (ax_tasks_ns_key_holder, as keyFree): the
// overlap rule of a name with a key concurrency compares it with the name's.
const keyHolders = `(SELECT count(*) FROM ax_tasks o
		WHERE o.namespace = ax_tasks.namespace AND o.task_key = ax_tasks.task_key
			AND o.status IN ('DISPATCHING', 'RUNNING') AND o.task_key <> '')`

// chunks calls f for consecutive chunks of at most store.MaxBatch of n items.
func chunks(n int, f func(lo, hi int) error) error {
	for lo := 0; lo < n; lo += store.MaxBatch {
		if err := f(lo, min(n, lo+store.MaxBatch)); err != nil {
			return err
		}
	}
	return nil
}

// collect scans every row with scan and closes rows. No rows is an empty slice, not
// nil.
func collect[T any](rows *sql.Rows, scan func(scanner) (*T, error)) ([]T, error) {
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *v)
	}
	return out, rows.Err()
}

// scanTasks reads the tasks a query returns: scanTasks(tx.QueryContext(…)).
func scanTasks(rows *sql.Rows, err error) ([]store.Task, error) {
	return scanTasksN(rows, err, 0)
}

// scanTasksN is scanTasks for a query expected to return about n rows: read in
// place, in one allocation when there are no more.
func scanTasksN(rows *sql.Rows, err error, n int) ([]store.Task, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var r taskRow
	out := make([]store.Task, 0, n)
	for rows.Next() {
		out = append(out, store.Task{})
		if err := r.scan(rows, &out[len(out)-1]); err != nil {
			return nil, err
		}
	}
	return out, rows.Err()
}
