package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
)

// tasksFrom names the index a task query reads. Without statistics SQLite takes the
// first index whose leading column the query constrains — the business key's, for
// the namespace alone — and then sorts every row of the namespace; so the index is
// chosen here, by the query's shape: the business key's for a name (and a key
// prefix), a terminal status's for its finished range, the due index for SCHEDULED
// soonest first, and otherwise none (NOT INDEXED): the rows in id order, read
// backwards for the newest first, which stops at the page's end.
func tasksFrom(q store.TaskQuery) string {
	one := len(q.Statuses) == 1
	switch {
	case q.Name != "":
		return "ax_tasks INDEXED BY ax_tasks_ns_name_key"
	case one && q.Statuses[0].Terminal() && (!q.FinishedFrom.IsZero() || !q.FinishedBefore.IsZero()):
		return "ax_tasks INDEXED BY ax_tasks_ns_" + strings.ToLower(string(q.Statuses[0]))
	case one && q.Statuses[0] == store.Scheduled && q.Soonest:
		return "ax_tasks INDEXED BY ax_tasks_ns_scheduled_due"
	}
	return "ax_tasks NOT INDEXED"
}

// Get returns one task of the view's namespace.
func (s *Store) Get(ctx context.Context, id int64) (*store.Task, error) {
	return s.get(ctx, s.r, id)
}

// rowQuerier is what reads one row: the read pool, or a transaction.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// get is Get through q: the read pool, or a store.Tx's transaction.
func (s *Store) get(ctx context.Context, q rowQuerier, id int64) (*store.Task, error) {
	t, err := scanTask(q.QueryRowContext(ctx, getSQL, id, s.ns))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ax: sqlite: get task %d: %w", id, store.ErrNotFound)
	}
	return t, s.wrap("get task", err)
}

// Lookup returns the task of the view's namespace with this name and key.
func (s *Store) Lookup(ctx context.Context, name, key string) (*store.Task, error) {
	t, err := scanTask(s.r.QueryRowContext(ctx, lookupSQL, s.ns, name, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ax: sqlite: lookup %q/%q: %w", name, key, store.ErrNotFound)
	}
	return t, s.wrap("lookup task", err)
}

// Executions returns a task's executions, oldest first; a task of another namespace
// is store.ErrNotFound.
func (s *Store) Executions(ctx context.Context, taskID int64) ([]store.Execution, error) {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, s.wrap("executions", err)
	}
	defer tx.Rollback()
	var one int
	if err := tx.QueryRowContext(ctx, `SELECT 1 FROM ax_tasks WHERE id = ? AND +namespace = ?`, taskID, s.ns).Scan(&one); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("ax: sqlite: executions of task %d: %w", taskID, store.ErrNotFound)
		}
		return nil, s.wrap("executions", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+executionColumns+` FROM ax_executions WHERE task_id = ? ORDER BY started_at, id`, taskID)
	if err != nil {
		return nil, s.wrap("executions", err)
	}
	out, err := collect(rows, scanExecution)
	return out, s.wrap("executions", err)
}

// taskStatsSQL counts the namespace's tasks per status and, in a scalar subquery
// evaluated once, reads its oldest due SCHEDULED task: a MIN over
// ax_tasks_ns_scheduled_due, which SQLite uses because the subquery's WHERE contains
// the index's (see TestExplain).
const taskStatsSQL = `SELECT status, count(*),
	(SELECT min(due_at) FROM ax_tasks WHERE namespace = ? AND status = 'SCHEDULED' AND due_at <= ?)
	FROM ax_tasks WHERE namespace = ? GROUP BY status`

// TaskStats counts the tasks per status and finds the oldest due SCHEDULED task, in
// one statement on the read pool (one snapshot; no write lock). See store.Store. A
// zero now is store.ErrInvalid.
func (s *Store) TaskStats(ctx context.Context, now time.Time) (*store.TaskStats, error) {
	if now.IsZero() {
		return nil, fmt.Errorf("ax: sqlite: task stats: zero time: %w", store.ErrInvalid)
	}
	rows, err := s.r.QueryContext(ctx, taskStatsSQL, s.ns, micros(now), s.ns)
	if err != nil {
		return nil, s.wrap("task stats", err)
	}
	defer rows.Close()
	st := driverkit.NewTaskStats()
	for rows.Next() {
		var status string
		var n int64
		var oldest sql.NullInt64
		if err := rows.Scan(&status, &n, &oldest); err != nil {
			return nil, s.wrap("task stats", err)
		}
		st.Counts[store.Status(status)] = n
		st.OldestDue = fromNull(oldest)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("task stats", err)
	}
	return st, nil
}
