package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
)

// Get returns one task of the view's namespace.
func (s *Store) Get(ctx context.Context, id int64) (*store.Task, error) {
	if err := s.check("get task"); err != nil {
		return nil, err
	}
	t, err := scanTask(s.pool.QueryRow(ctx, getSQL, id, s.ns))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("ax: postgres: get task %d: %w", id, store.ErrNotFound)
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
	t, err := scanTask(s.pool.QueryRow(ctx, lookupSQL, name, key, s.ns))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("ax: postgres: lookup %q/%q: %w", name, key, store.ErrNotFound)
	}
	if err != nil {
		return nil, s.wrap("lookup task", err)
	}
	return t, nil
}

// Executions returns the executions of a task of the view's namespace, oldest first:
// one statement, so the task's existence and its records come from one snapshot.
func (s *Store) Executions(ctx context.Context, taskID int64) ([]store.Execution, error) {
	if err := s.check("executions"); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT x.id IS NOT NULL, `+execCols("t")+`
		FROM ax_tasks t LEFT JOIN ax_executions x ON x.task_id = t.id
		WHERE t.id = $1 AND t.namespace || '' = $2 ORDER BY x.started_at, x.id`, taskID, s.ns)
	if err != nil {
		return nil, s.wrap("executions", err)
	}
	defer rows.Close()
	found := false
	out := []store.Execution{}
	for rows.Next() {
		found = true
		var has bool
		var (
			id, node, status, errText sql.NullString
			tid                       sql.NullInt64
			attempt                   sql.NullInt32
			due, claimed              sql.NullTime
			started, hb, fin          sql.NullTime
		)
		if err := rows.Scan(&has, &id, &tid, &attempt, &node, &status, &due, &claimed, &started, &hb, &fin, &errText); err != nil {
			return nil, s.wrap("executions", err)
		}
		if !has {
			continue
		}
		out = append(out, store.Execution{ID: id.String, TaskID: tid.Int64, Attempt: int(attempt.Int32), Node: node.String,
			Status: store.Status(status.String), DueAt: fromNull(due), ClaimedAt: fromNull(claimed), StartedAt: fromNull(started), HeartbeatAt: fromNull(hb), FinishedAt: fromNull(fin),
			Error: errText.String})
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("executions", err)
	}
	if !found {
		return nil, fmt.Errorf("ax: postgres: executions of task %d: %w", taskID, store.ErrNotFound)
	}
	return out, nil
}

// taskStatsSQL counts the tasks of namespace $2 per status and, in an uncorrelated
// subquery that PostgreSQL runs once as an InitPlan, reads the namespace's oldest due
// SCHEDULED task from the head of its part of ax_tasks_scheduled_due (see DESIGN.md,
// "Indexes").
const taskStatsSQL = `SELECT t.status, count(*),
	(SELECT min(o.due_at) FROM ax_tasks o WHERE o.namespace = $2 AND o.status = 'SCHEDULED' AND o.due_at <= $1)
	FROM ax_tasks t WHERE t.namespace = $2 GROUP BY t.status`

// TaskStats counts the view's tasks per status and finds its oldest due SCHEDULED
// task, in one statement: one round trip and one snapshot (see store.Store). The
// counts read the whole table. A zero now is store.ErrInvalid.
func (s *Store) TaskStats(ctx context.Context, now time.Time) (*store.TaskStats, error) {
	if err := s.check("task stats"); err != nil {
		return nil, err
	}
	if now.IsZero() {
		return nil, fmt.Errorf("ax: postgres: task stats: zero time: %w", store.ErrInvalid)
	}
	rows, err := s.pool.Query(ctx, taskStatsSQL, now, s.ns)
	if err != nil {
		return nil, s.wrap("task stats", err)
	}
	defer rows.Close()
	st := driverkit.NewTaskStats()
	for rows.Next() {
		var status string
		var n int64
		var oldest sql.NullTime
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

// getIn reads task id of the view's namespace in q.
func (s *Store) getIn(ctx context.Context, q txQuerier, id int64) (*store.Task, error) {
	var t *store.Task
	if err := q.query(ctx, getSQL, []any{id, s.ns}, func(rows txRows) error {
		if !rows.Next() {
			return nil
		}
		var err error
		t, err = scanTask(rows)
		return err
	}); err != nil {
		return nil, s.wrap("get task in transaction", err)
	}
	if t == nil {
		return nil, fmt.Errorf("ax: postgres: get task %d: %w", id, store.ErrNotFound)
	}
	return t, nil
}
