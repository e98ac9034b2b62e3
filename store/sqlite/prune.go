package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
	"github.com/axsched/ax/store/internal/taskquery"
)

// Prune deletes finished tasks of the view's namespace with their executions, in one
// write transaction (see store.Pruner): the cut of KeepNewest and the victims are
// read through the outcome's own index (ax_tasks_ns_<status>, which SQLite uses only
// when the query names its status as a literal: the status is one of four, checked
// before it is written into the SQL), then the executions and the tasks are deleted
// by id, the tasks with their status condition again. A task within its UniqueFor
// window is kept.
func (s *Store) Prune(ctx context.Context, p store.PruneParams) (int, error) {
	if err := driverkit.CheckPrune(p); err != nil {
		return 0, fmt.Errorf("ax: sqlite: %w", err)
	}
	from := "ax_tasks INDEXED BY ax_tasks_ns_" + strings.ToLower(string(p.Status))
	status := "status = '" + string(p.Status) + "'"
	var n int
	err := s.write(ctx, "prune", func(tx *sql.Tx) error {
		n = 0
		before := int64(-1 << 63) // nothing by age
		if !p.Before.IsZero() {
			before = micros(p.Before)
		}
		cutAt, cutID := int64(-1<<63), int64(0) // nothing by count
		if p.KeepNewest > 0 {
			err := tx.QueryRowContext(ctx, `SELECT finished_at, id FROM `+from+` WHERE namespace = ? AND `+status+`
				ORDER BY finished_at DESC, id DESC LIMIT 1 OFFSET ?`, s.ns, p.KeepNewest).Scan(&cutAt, &cutID)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		ids, err := taskquery.ScanIDs(tx.QueryContext(ctx, `SELECT id FROM `+from+` WHERE namespace = ? AND `+status+`
			AND (finished_at < ? OR finished_at < ? OR finished_at = ? AND id <= ?) AND (key_until IS NULL OR key_until <= ?)
			ORDER BY finished_at, id LIMIT ?`, s.ns, before, cutAt, cutAt, cutID, micros(now()), p.Limit))
		if err != nil || len(ids) == 0 {
			return err
		}
		in := strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")
		if _, err := tx.ExecContext(ctx, `DELETE FROM ax_executions WHERE task_id IN (`+in+`)`, ids...); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM ax_tasks WHERE id IN (`+in+`) AND `+status, ids...)
		if err != nil {
			return err
		}
		deleted, err := res.RowsAffected()
		n = int(deleted)
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
