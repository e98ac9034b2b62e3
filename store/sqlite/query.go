package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
	"github.com/axsched/ax/store/internal/taskquery"
)

// dialect is how SQLite writes a task query: times in microseconds, and a key prefix
// as the byte-wise range it is under the BINARY collation (taskquery.KeyRange), which
// the business-key index serves after the namespace and the name.
var dialect = taskquery.Dialect{
	Placeholder: func(int) string { return "?" },
	Time:        func(t time.Time) any { return micros(t) },
	Prefix:      func(ph func(any) string, prefix string) string { return taskquery.KeyRange(ph, "key", prefix) },
}

// Tasks returns the tasks of the view's namespace that q selects, in one statement
// (see store.Store.Tasks).
func (s *Store) Tasks(ctx context.Context, q store.TaskQuery) ([]store.Task, error) {
	if err := store.CheckTaskQuery(q); err != nil {
		return nil, fmt.Errorf("ax: sqlite: list tasks: %w", err)
	}
	query, args := taskquery.Select(dialect, taskColumns, tasksFrom(q), s.ns, q)
	tasks, err := scanTasks(s.r.QueryContext(ctx, query, args...))
	return tasks, s.wrap("list tasks", err)
}

// CountTasks counts the tasks of the view's namespace per status, each count read
// from the status's index and stopping at atMost + 1 (see store.Store.CountTasks).
func (s *Store) CountTasks(ctx context.Context, atMost int64) (map[store.Status]int64, error) {
	if err := driverkit.CheckCountCap(atMost); err != nil {
		return nil, fmt.Errorf("ax: sqlite: count tasks: %w", err)
	}
	query, args := taskquery.Count(dialect, s.ns, atMost)
	counts, err := taskquery.ReadCounts(s.r.QueryContext(ctx, query, args...))
	if err != nil {
		return nil, s.wrap("count tasks", err)
	}
	return counts, nil
}
