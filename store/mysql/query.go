package mysql

import (
	"context"
	"fmt"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
	"github.com/axsched/ax/store/internal/taskquery"
)

// dialect is how MySQL writes a task query. A key prefix is the range it is under the
// key's binary collation, which orders by code point (byte order in UTF-8):
// taskquery.KeyRange, a range of ax_tasks_name_key after the namespace and the name.
//
// Not LIKE 'prefix%': on MariaDB 10.11 the index range the optimizer derives from it
// ends below every key whose character after the prefix lies beyond U+FFFF, and the
// rows past its end are never read. Through an index on the key, LIKE 'a¿%' missed
// 'a¿😀' and 'a¿\U0010FFFF', and LIKE 'a😀%' missed 'a😀\U0010FFFF' (storetest's
// EveryKeyPrefix); a scan of the table found them.
var dialect = taskquery.Dialect{
	Placeholder: func(int) string { return "?" },
	Time:        func(t time.Time) any { return dt(t) },
	Prefix:      func(ph func(any) string, prefix string) string { return taskquery.KeyRange(ph, "`key`", prefix) },
}

// Tasks returns the tasks of the view's namespace that q selects, in one statement
// (see store.Store.Tasks).
func (s *Store) Tasks(ctx context.Context, q store.TaskQuery) ([]store.Task, error) {
	if err := store.CheckTaskQuery(q); err != nil {
		return nil, fmt.Errorf("ax: mysql: list tasks: %w", err)
	}
	if err := s.check("list tasks"); err != nil {
		return nil, err
	}
	query, args := taskquery.Select(dialect, taskColumns, "ax_tasks", s.ns, q)
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, s.wrap("list tasks", err)
	}
	tasks, err := scanTasks(rows, 0)
	return tasks, s.wrap("list tasks", err)
}

// CountTasks counts the tasks of the view's namespace per status in one statement,
// each count a range of ax_tasks_status_due stopping at atMost + 1 (see
// store.Store.CountTasks).
func (s *Store) CountTasks(ctx context.Context, atMost int64) (map[store.Status]int64, error) {
	if err := driverkit.CheckCountCap(atMost); err != nil {
		return nil, fmt.Errorf("ax: mysql: count tasks: %w", err)
	}
	if err := s.check("count tasks"); err != nil {
		return nil, err
	}
	query, args := taskquery.Count(dialect, s.ns, atMost)
	counts, err := taskquery.ReadCounts(s.db.QueryContext(ctx, query, args...))
	if err != nil {
		return nil, s.wrap("count tasks", err)
	}
	return counts, nil
}
