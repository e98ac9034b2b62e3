package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// pruneSQL deletes, of namespace $1, up to $5 tasks in status $2 that finished before
// $3 (NULL: none by age) or, when $4 is positive, that are beyond the $4 that finished
// last, oldest first, with their executions, in one statement. The victims are read
// from ax_tasks_finished and locked FOR UPDATE SKIP LOCKED: a row another transaction
// holds (a Retry of a FAILED task, another pruner) is left for the next round, and one
// that left the status before the lock is not read. A task within its UniqueFor
// window (key_until in the future) is kept: deleting it would free its key early. The executions go by
// ax_executions_task, the tasks by their primary key.
const pruneSQL = `WITH cut AS (
	SELECT t.finished_at, t.id FROM ax_tasks t WHERE t.namespace = $1 AND t.status = $2
	ORDER BY t.finished_at DESC, t.id DESC OFFSET $4 LIMIT 1),
victims AS (
	SELECT t.id FROM ax_tasks t WHERE t.namespace = $1 AND t.status = $2
		AND (t.finished_at < $3 OR $4 > 0 AND (t.finished_at, t.id) <= (SELECT finished_at, id FROM cut))
		AND (t.key_until IS NULL OR t.key_until <= clock_timestamp())
	ORDER BY t.finished_at, t.id LIMIT $5 FOR UPDATE SKIP LOCKED),
execs AS (DELETE FROM ax_executions x USING victims v WHERE x.task_id = v.id)
DELETE FROM ax_tasks t USING victims v WHERE t.id = v.id`

// Prune deletes finished tasks of the view's namespace with their executions (see
// store.Pruner and pruneSQL).
func (s *Store) Prune(ctx context.Context, p store.PruneParams) (int, error) {
	if err := driverkit.CheckPrune(p); err != nil {
		return 0, fmt.Errorf("ax: postgres: %w", err)
	}
	var before *time.Time
	if !p.Before.IsZero() {
		before = &p.Before
	}
	var n int
	err := s.tx(ctx, "prune", func(b *pgx.Batch) {
		b.Queue(pruneSQL, s.ns, string(p.Status), before, p.KeepNewest, p.Limit)
	}, func(br pgx.BatchResults) error {
		tag, err := br.Exec()
		n = int(tag.RowsAffected())
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
