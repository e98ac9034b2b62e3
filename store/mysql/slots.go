package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// The gaps of schedules live in ax_slot_gaps (migrations/0007_slot_gaps.sql):
// FireSchedule and ResumeSchedule write them in their transactions (insertGaps); the
// reads below are each one statement on one index.

// insertGaps records gaps of schedule name in tx, in one statement.
func (s *Store) insertGaps(ctx context.Context, tx *sql.Tx, name string, gaps []store.SlotGap) error {
	if len(gaps) == 0 {
		return nil
	}
	args := make([]any, 0, 6*len(gaps))
	for _, g := range gaps {
		if !inRange(g.From) || !inRange(g.Until) {
			return fmt.Errorf("gap [%v, %v) outside years 1000-9999: %w", g.From, g.Until, store.ErrInvalid)
		}
		args = append(args, s.ns, name, dt(g.From), dt(g.Until), g.Why, g.Result)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO ax_slot_gaps (namespace, schedule, from_at, until_at, why, result, created_at) VALUES `+
		strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6)), ", len(gaps)), ", "), args...)
	return err
}

// slotGapsSQL reads the gaps of a schedule overlapping a range, newest first: a
// backward range scan of ax_slot_gaps_schedule.
const slotGapsSQL = `SELECT id, schedule, from_at, until_at, why, result, created_at FROM ax_slot_gaps
	WHERE namespace = ? AND schedule = ? AND until_at > ? AND from_at <= ?
	ORDER BY until_at DESC, id DESC LIMIT ?`

// SlotGaps returns the gaps of a schedule of the view's namespace overlapping [from,
// to], newest first (see store.SlotHistory).
func (s *Store) SlotGaps(ctx context.Context, name string, from, to time.Time, limit int) ([]store.SlotGap, error) {
	if err := driverkit.CheckSlotGaps(from, to, limit); err != nil {
		return nil, fmt.Errorf("ax: mysql: %w", err)
	}
	if err := s.check("slot gaps"); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, slotGapsSQL, s.ns, name, dt(clamp(from)), dt(clamp(to)), limit)
	if err != nil {
		return nil, s.wrap("slot gaps", err)
	}
	defer rows.Close()
	out := []store.SlotGap{}
	for rows.Next() {
		var g store.SlotGap
		if err := rows.Scan(&g.ID, &g.Schedule, dbTime{&g.From}, dbTime{&g.Until}, &g.Why, &g.Result, dbTime{&g.CreatedAt}); err != nil {
			return nil, s.wrap("slot gaps", err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("slot gaps", err)
	}
	return out, nil
}

// TasksByKeys returns the tasks of the view's namespace named name with one of keys,
// by id: one probe of ax_tasks_name_key per key (see store.SlotHistory).
func (s *Store) TasksByKeys(ctx context.Context, name string, keys []string) ([]store.Task, error) {
	if err := driverkit.CheckTasksByKeys(keys); err != nil {
		return nil, fmt.Errorf("ax: mysql: %w", err)
	}
	if err := s.check("tasks by keys"); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return []store.Task{}, nil
	}
	args := make([]any, 0, len(keys)+2)
	args = append(args, s.ns, name)
	for _, k := range keys {
		args = append(args, k)
	}
	return s.queryTasks(ctx, "tasks by keys", tasksByKeysSQL(len(keys)), args...)
}

// tasksByKeysSQL reads the tasks of a name with one of n keys.
func tasksByKeysSQL(n int) string {
	return `SELECT ` + taskColumns + " FROM ax_tasks WHERE namespace = ? AND name = ? AND `key` IN (" + marks(n) + `) ORDER BY id`
}

// tasksByKeyRangeSQL reads the tasks of a name with a key in a range, greatest first:
// a backward range scan of ax_tasks_name_key (the key's collation is binary).
const tasksByKeyRangeSQL = `SELECT ` + taskColumns + " FROM ax_tasks WHERE namespace = ? AND name = ? AND `key` >= ? AND `key` < ? " +
	"ORDER BY `key` DESC, key_slot DESC LIMIT ?"

// TasksByKeyRange returns the tasks of the view's namespace named name with a key in
// [from, before), greatest first (see store.SlotHistory).
func (s *Store) TasksByKeyRange(ctx context.Context, name, from, before string, limit int) ([]store.Task, error) {
	if err := driverkit.CheckTasksByKeyRange(from, before, limit); err != nil {
		return nil, fmt.Errorf("ax: mysql: %w", err)
	}
	if err := s.check("tasks by key range"); err != nil {
		return nil, err
	}
	return s.queryTasks(ctx, "tasks by key range", tasksByKeyRangeSQL, s.ns, name, from, before, limit)
}

func (s *Store) queryTasks(ctx context.Context, op, query string, args ...any) ([]store.Task, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	tasks, err := scanTasks(rows, 0)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	if tasks == nil {
		tasks = []store.Task{}
	}
	return tasks, nil
}

// oldGapsSQL locks a namespace's oldest gaps that ended by a time, up to a limit,
// found on ax_slot_gaps_until.
const oldGapsSQL = `SELECT id FROM ax_slot_gaps WHERE namespace = ? AND until_at <= ? ORDER BY until_at, id LIMIT ? FOR UPDATE`

// PruneSlotGaps deletes up to limit gaps of the view's namespace that ended at or
// before before, oldest first, found on ax_slot_gaps_until (see store.SlotHistory).
func (s *Store) PruneSlotGaps(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := driverkit.CheckPruneSlotGaps(before, limit); err != nil {
		return 0, fmt.Errorf("ax: mysql: %w", err)
	}
	var n int
	err := s.run(ctx, "prune slot gaps", 0, func(tx *sql.Tx, _ int64) error {
		var err error
		n, err = deleteSelected(ctx, tx, "ax_slot_gaps", oldGapsSQL, s.ns, dt(clamp(before)), limit)
		return err
	})
	return n, err
}
