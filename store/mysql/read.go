package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
)

// Get returns one task of the view's namespace; another namespace's is store.ErrNotFound.
func (s *Store) Get(ctx context.Context, id int64) (*store.Task, error) {
	if err := s.check("get task"); err != nil {
		return nil, err
	}
	return s.get(ctx, s.db, id)
}

// get reads the task id of the view's namespace through q: the pool, or a transaction
// as it sees the task.
func (s *Store) get(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, id int64) (*store.Task, error) {
	t, err := scanTask(q.QueryRowContext(ctx, getSQL, id, s.ns))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ax: mysql: get task %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, s.wrap("get task", err)
	}
	return t, nil
}

// Lookup returns the task of the view's namespace with this name and key.
func (s *Store) Lookup(ctx context.Context, name, key string) (*store.Task, error) {
	if err := s.check("lookup task"); err != nil {
		return nil, err
	}
	t, err := scanTask(s.db.QueryRowContext(ctx, lookupSQL, s.ns, name, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ax: mysql: lookup %q/%q: %w", name, key, store.ErrNotFound)
	}
	return t, s.wrap("lookup task", err)
}

// Executions returns the executions of a task of the view's namespace, oldest first,
// in one statement.
func (s *Store) Executions(ctx context.Context, taskID int64) ([]store.Execution, error) {
	if err := s.check("executions"); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT e.id IS NOT NULL, COALESCE(e.id, ''), t.id, COALESCE(e.attempt, 0),
		COALESCE(e.node, ''), COALESCE(e.status, ''), e.due_at, e.claimed_at, e.started_at, e.heartbeat_at, e.finished_at, COALESCE(e.error, '')
		FROM ax_tasks t LEFT JOIN ax_executions e ON e.task_id = t.id
		WHERE t.id = ? AND t.namespace = ? ORDER BY e.started_at, e.id`, taskID, s.ns)
	if err != nil {
		return nil, s.wrap("executions", err)
	}
	defer rows.Close()
	found := false
	out := []store.Execution{}
	for rows.Next() {
		found = true
		var has bool
		var e store.Execution
		var status string
		if err := rows.Scan(&has, &e.ID, &e.TaskID, &e.Attempt, &e.Node, &status, dbTime{&e.DueAt}, dbTime{&e.ClaimedAt},
			dbTime{&e.StartedAt}, dbTime{&e.HeartbeatAt}, dbTime{&e.FinishedAt}, &e.Error); err != nil {
			return nil, s.wrap("executions", err)
		}
		if has {
			e.Status = store.Status(status)
			out = append(out, e)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("executions", err)
	}
	if !found {
		return nil, fmt.Errorf("ax: mysql: executions of task %d: %w", taskID, store.ErrNotFound)
	}
	return out, nil
}

// taskStatsSQL counts one namespace's tasks per status and, in an uncorrelated
// subquery run once, reads its oldest due SCHEDULED task: a MIN over the (namespace,
// status, due_at) range of ax_tasks_status_due, which the optimizer answers from the
// index alone (see DESIGN.md). Its arguments are the namespace, now, the namespace.
const taskStatsSQL = `SELECT status, COUNT(*),
	(SELECT MIN(due_at) FROM ax_tasks WHERE namespace = ? AND status = 'SCHEDULED' AND due_at <= ?)
	FROM ax_tasks WHERE namespace = ? GROUP BY status`

// TaskStats counts the view's namespace's tasks per status and finds its oldest due
// SCHEDULED task, in one statement: one round trip and one read view (see
// store.Store). The counts read the namespace's whole range of an index. A zero now is store.ErrInvalid; one outside years 1000-9999 is
// clamped.
func (s *Store) TaskStats(ctx context.Context, now time.Time) (*store.TaskStats, error) {
	if err := s.check("task stats"); err != nil {
		return nil, err
	}
	if now.IsZero() {
		return nil, fmt.Errorf("ax: mysql: task stats: zero time: %w", store.ErrInvalid)
	}
	rows, err := s.db.QueryContext(ctx, taskStatsSQL, s.ns, dt(clamp(now)), s.ns)
	if err != nil {
		return nil, s.wrap("task stats", err)
	}
	defer rows.Close()
	st := driverkit.NewTaskStats()
	for rows.Next() {
		var status string
		var n int64
		if err := rows.Scan(&status, &n, dbTime{&st.OldestDue}); err != nil {
			return nil, s.wrap("task stats", err)
		}
		st.Counts[store.Status(status)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("task stats", err)
	}
	return st, nil
}
