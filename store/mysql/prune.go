package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
	"github.com/axsched/ax/store/internal/taskquery"
)

// Prune deletes finished tasks of the view's namespace with their executions, in one
// transaction (see store.Pruner): the cut of KeepNewest and the victims are read
// through ax_tasks_status_finished, the victims locked FOR UPDATE SKIP LOCKED (a row
// another transaction holds, a Retry's or another pruner's, is left for the next
// round); then the executions (ax_executions_task) and the tasks, with their status
// condition again, are deleted by id. A task within its UniqueFor window is kept.
func (s *Store) Prune(ctx context.Context, p store.PruneParams) (int, error) {
	if err := driverkit.CheckPrune(p); err != nil {
		return 0, fmt.Errorf("ax: mysql: %w", err)
	}
	var n int
	err := s.run(ctx, "prune", 0, func(tx *sql.Tx, _ int64) error {
		n = 0
		before := time.Unix(0, 0).UTC() // nothing by age
		if !p.Before.IsZero() {
			before = p.Before
		}
		cutAt, cutID := time.Unix(0, 0).UTC(), int64(0) // nothing by count
		if p.KeepNewest > 0 {
			err := tx.QueryRowContext(ctx, `SELECT finished_at, id FROM ax_tasks FORCE INDEX (ax_tasks_status_finished)
				WHERE namespace = ? AND status = ? ORDER BY finished_at DESC, id DESC LIMIT 1 OFFSET ?`,
				s.ns, string(p.Status), p.KeepNewest).Scan(dbTime{&cutAt}, &cutID)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		ids, err := taskquery.ScanIDs(tx.QueryContext(ctx, `SELECT id FROM ax_tasks FORCE INDEX (ax_tasks_status_finished)
			WHERE namespace = ? AND status = ? AND (finished_at < ? OR finished_at < ? OR finished_at = ? AND id <= ?)
				AND (key_until IS NULL OR key_until <= UTC_TIMESTAMP(6))
			ORDER BY finished_at, id LIMIT ? FOR UPDATE SKIP LOCKED`,
			s.ns, string(p.Status), dt(before), dt(cutAt), dt(cutAt), cutID, p.Limit))
		if err != nil || len(ids) == 0 {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM ax_executions WHERE task_id IN (`+marks(len(ids))+`)`, ids...); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM ax_tasks WHERE id IN (`+marks(len(ids))+`) AND status = ?`,
			append(ids, string(p.Status))...)
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
