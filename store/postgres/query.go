package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
	"github.com/axsched/ax/store/internal/taskquery"
)

// dialect is how PostgreSQL writes a task query. A key prefix is starts_with(), and,
// when the column compared orders text by bytes (byteOrder; ax_tasks.key does since
// schema v10, COLLATE "C"), also the range it is then (taskquery.KeyRange), which
// ax_tasks_name_key serves after the namespace and the name. Text is valid UTF-8, so
// the range alone is exact; starts_with() stays beside it for the planner, which,
// estimating more rows without it, read the primary key backwards instead
// (TestExplain). Under another collation (en_US, ICU) the strings with a prefix need
// not be one range of an index, and the prefix only filters.
func dialect(byteOrder bool) taskquery.Dialect {
	return taskquery.Dialect{
		Placeholder: func(n int) string { return "$" + strconv.Itoa(n) },
		Time:        func(t time.Time) any { return t },
		Prefix: func(ph func(any) string, prefix string) string {
			match := "starts_with(key, " + ph(prefix) + ")"
			if !byteOrder {
				return match
			}
			return taskquery.KeyRange(ph, "key", prefix) + " AND " + match
		},
	}
}

// Tasks returns the tasks of the view's namespace that q selects, in one statement
// (see store.Store.Tasks), planned for its arguments.
func (s *Store) Tasks(ctx context.Context, q store.TaskQuery) ([]store.Task, error) {
	if err := store.CheckTaskQuery(q); err != nil {
		return nil, fmt.Errorf("ax: postgres: list tasks: %w", err)
	}
	if err := s.check("list tasks"); err != nil {
		return nil, err
	}
	query, args := taskquery.Select(s.query, taskCols, "ax_tasks t", s.ns, q)
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, s.wrap("list tasks", err)
	}
	tasks, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Task, error) {
		t, err := scanTask(row)
		if err != nil {
			return store.Task{}, err
		}
		return *t, nil
	})
	if err != nil {
		return nil, s.wrap("list tasks", err)
	}
	return tasks, nil
}

// CountTasks counts the tasks of the view's namespace per status in one statement,
// each count read from its status's partial index and stopping at atMost + 1 (see
// store.Store.CountTasks).
func (s *Store) CountTasks(ctx context.Context, atMost int64) (map[store.Status]int64, error) {
	if err := driverkit.CheckCountCap(atMost); err != nil {
		return nil, fmt.Errorf("ax: postgres: count tasks: %w", err)
	}
	if err := s.check("count tasks"); err != nil {
		return nil, err
	}
	query, args := taskquery.Count(s.query, s.ns, atMost)
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, s.wrap("count tasks", err)
	}
	counts := driverkit.NewTaskStats().Counts
	var st string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&st, &n}, func() error {
		counts[store.Status(st)] = n
		return nil
	}); err != nil {
		return nil, s.wrap("count tasks", err)
	}
	return counts, nil
}
