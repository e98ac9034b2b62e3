package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// The gaps of schedules live in ax_slot_gaps (migrations/0012_slot_gaps.sql):
// FireSchedule and ResumeSchedule write them in their own statements (fireSQL,
// resumeSQL); the reads below are each one statement on one index.

var _ store.SlotHistory = (*Store)(nil)

const gapCols = `g.id, g.schedule, g.from_at, g.until_at, g.why, g.result, g.created_at`

func scanGap(row pgx.CollectableRow) (store.SlotGap, error) {
	var g store.SlotGap
	if err := row.Scan(&g.ID, &g.Schedule, &g.From, &g.Until, &g.Why, &g.Result, &g.CreatedAt); err != nil {
		return g, err
	}
	g.From, g.Until, g.CreatedAt = g.From.UTC(), g.Until.UTC(), g.CreatedAt.UTC()
	return g, nil
}

// slotGapsSQL reads the gaps of schedule $2 of namespace $1 overlapping [$3, $4],
// newest first: a backward range scan of ax_slot_gaps_schedule from the top, down to
// until_at > $3, filtered by from_at <= $4.
const slotGapsSQL = `SELECT ` + gapCols + ` FROM ax_slot_gaps g
	WHERE g.namespace = $1 AND g.schedule = $2 AND g.until_at > $3 AND g.from_at <= $4
	ORDER BY g.until_at DESC, g.id DESC LIMIT $5`

// SlotGaps returns the gaps of a schedule of the view's namespace overlapping [from,
// to], newest first (see store.SlotHistory).
func (s *Store) SlotGaps(ctx context.Context, name string, from, to time.Time, limit int) ([]store.SlotGap, error) {
	if err := driverkit.CheckSlotGaps(from, to, limit); err != nil {
		return nil, fmt.Errorf("ax: postgres: %w", err)
	}
	if err := s.check("slot gaps"); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, slotGapsSQL, s.ns, name, from, to, limit)
	if err != nil {
		return nil, s.wrap("slot gaps", err)
	}
	gaps, err := pgx.CollectRows(rows, scanGap)
	if err != nil {
		return nil, s.wrap("slot gaps", err)
	}
	if gaps == nil {
		gaps = []store.SlotGap{}
	}
	return gaps, nil
}

// tasksByKeysSQL reads the tasks of name $2 and namespace $1 with a key in $3: one
// probe of ax_tasks_name_key per key.
const tasksByKeysSQL = `SELECT ` + taskCols + ` FROM ax_tasks t
	WHERE t.namespace = $1 AND t.name = $2 AND t.key = ANY($3::text[]) ORDER BY t.id`

// TasksByKeys returns the tasks of the view's namespace named name with one of keys,
// by id (see store.SlotHistory).
func (s *Store) TasksByKeys(ctx context.Context, name string, keys []string) ([]store.Task, error) {
	if err := driverkit.CheckTasksByKeys(keys); err != nil {
		return nil, fmt.Errorf("ax: postgres: %w", err)
	}
	if err := s.check("tasks by keys"); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return []store.Task{}, nil
	}
	return s.collectTasks(ctx, "tasks by keys", tasksByKeysSQL, s.ns, name, keys)
}

// tasksByKeyRangeSQL reads the tasks of name $2 and namespace $1 with a key in [$3,
// $4), greatest first: a backward range scan of ax_tasks_name_key (key is COLLATE
// "C", so the range is by bytes).
const tasksByKeyRangeSQL = `SELECT ` + taskCols + ` FROM ax_tasks t
	WHERE t.namespace = $1 AND t.name = $2 AND t.key >= $3 AND t.key < $4
	ORDER BY t.key DESC, t.key_slot DESC LIMIT $5`

// TasksByKeyRange returns the tasks of the view's namespace named name with a key in
// [from, before), greatest first (see store.SlotHistory).
func (s *Store) TasksByKeyRange(ctx context.Context, name, from, before string, limit int) ([]store.Task, error) {
	if err := driverkit.CheckTasksByKeyRange(from, before, limit); err != nil {
		return nil, fmt.Errorf("ax: postgres: %w", err)
	}
	if err := s.check("tasks by key range"); err != nil {
		return nil, err
	}
	return s.collectTasks(ctx, "tasks by key range", tasksByKeyRangeSQL, s.ns, name, from, before, limit)
}

func (s *Store) collectTasks(ctx context.Context, op, query string, args ...any) ([]store.Task, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	tasks, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Task, error) {
		t, err := scanTask(row)
		if err != nil {
			return store.Task{}, err
		}
		return *t, nil
	})
	if err != nil {
		return nil, s.wrap(op, err)
	}
	if tasks == nil {
		tasks = []store.Task{}
	}
	return tasks, nil
}

// pruneSlotGapsSQL deletes up to $3 gaps of namespace $1 that ended at or before $2,
// oldest first, found on ax_slot_gaps_until. The ids go through an array, so that
// the delete probes the primary key for each (an IN subquery was planned as a hash
// join over the whole table).
const pruneSlotGapsSQL = `DELETE FROM ax_slot_gaps WHERE id = ANY(ARRAY(
	SELECT g.id FROM ax_slot_gaps g WHERE g.namespace = $1 AND g.until_at <= $2 ORDER BY g.until_at, g.id LIMIT $3))`

// PruneSlotGaps deletes up to limit gaps of the view's namespace that ended at or
// before before, oldest first (see store.SlotHistory).
func (s *Store) PruneSlotGaps(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := driverkit.CheckPruneSlotGaps(before, limit); err != nil {
		return 0, fmt.Errorf("ax: postgres: %w", err)
	}
	if err := s.check("prune slot gaps"); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, pruneSlotGapsSQL, s.ns, before, limit)
	if err != nil {
		return 0, s.wrap("prune slot gaps", err)
	}
	return int(tag.RowsAffected()), nil
}

// gapArrays are FireParams.Gaps as the columns fireSQL unnests.
func gapArrays(gaps []store.SlotGap) (from, until []time.Time, why, result []string) {
	from, until = make([]time.Time, len(gaps)), make([]time.Time, len(gaps))
	why, result = make([]string, len(gaps)), make([]string, len(gaps))
	for i, g := range gaps {
		from[i], until[i], why[i], result[i] = g.From, g.Until, g.Why, g.Result
	}
	return from, until, why, result
}
