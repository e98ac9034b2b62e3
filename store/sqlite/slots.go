package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// The gaps of schedules live in ax_slot_gaps (migrations/0008_slot_gaps.sql):
// FireSchedule and ResumeSchedule write them in their transactions (insertGaps); the
// reads below are each one statement on one index, through the read pool.

// insertGaps records gaps of schedule name in tx.
func (s *Store) insertGaps(ctx context.Context, tx *sql.Tx, name string, gaps []store.SlotGap) error {
	now := micros(now())
	for _, g := range gaps {
		if _, err := tx.ExecContext(ctx, `INSERT INTO ax_slot_gaps (namespace, schedule, from_at, until_at, why, result, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, s.ns, name, micros(g.From), micros(g.Until), g.Why, g.Result, now); err != nil {
			return err
		}
	}
	return nil
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
		return nil, fmt.Errorf("ax: sqlite: %w", err)
	}
	rows, err := s.r.QueryContext(ctx, slotGapsSQL, s.ns, name, micros(from), micros(to), limit)
	if err != nil {
		return nil, s.wrap("slot gaps", err)
	}
	defer rows.Close()
	out := []store.SlotGap{}
	for rows.Next() {
		var g store.SlotGap
		var from, until, created int64
		if err := rows.Scan(&g.ID, &g.Schedule, &from, &until, &g.Why, &g.Result, &created); err != nil {
			return nil, s.wrap("slot gaps", err)
		}
		g.From, g.Until, g.CreatedAt = fromMicros(from), fromMicros(until), fromMicros(created)
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("slot gaps", err)
	}
	return out, nil
}

// tasksByKeysSQL reads the tasks of a name with a key in a list (the placeholders
// follow): one probe of ax_tasks_ns_name_key per key.
const tasksByKeysSQL = `SELECT ` + taskColumns + ` FROM ax_tasks WHERE namespace = ? AND name = ? AND key IN (`

// TasksByKeys returns the tasks of the view's namespace named name with one of keys,
// by id (see store.SlotHistory).
func (s *Store) TasksByKeys(ctx context.Context, name string, keys []string) ([]store.Task, error) {
	if err := driverkit.CheckTasksByKeys(keys); err != nil {
		return nil, fmt.Errorf("ax: sqlite: %w", err)
	}
	if len(keys) == 0 {
		return []store.Task{}, nil
	}
	args := make([]any, 0, len(keys)+2)
	args = append(args, s.ns, name)
	for _, k := range keys {
		args = append(args, k)
	}
	query := tasksByKeysSQL + strings.Repeat("?, ", len(keys)-1) + "?) ORDER BY id"
	tasks, err := scanTasks(s.r.QueryContext(ctx, query, args...))
	if err != nil {
		return nil, s.wrap("tasks by keys", err)
	}
	return nonNil(tasks), nil
}

// tasksByKeyRangeSQL reads the tasks of a name with a key in a range, greatest first:
// a backward range scan of ax_tasks_ns_name_key (keys compare by bytes, BINARY).
const tasksByKeyRangeSQL = `SELECT ` + taskColumns + ` FROM ax_tasks
	WHERE namespace = ? AND name = ? AND key >= ? AND key < ? ORDER BY key DESC, key_slot DESC LIMIT ?`

// TasksByKeyRange returns the tasks of the view's namespace named name with a key in
// [from, before), greatest first (see store.SlotHistory).
func (s *Store) TasksByKeyRange(ctx context.Context, name, from, before string, limit int) ([]store.Task, error) {
	if err := driverkit.CheckTasksByKeyRange(from, before, limit); err != nil {
		return nil, fmt.Errorf("ax: sqlite: %w", err)
	}
	tasks, err := scanTasks(s.r.QueryContext(ctx, tasksByKeyRangeSQL, s.ns, name, from, before, limit))
	if err != nil {
		return nil, s.wrap("tasks by key range", err)
	}
	return nonNil(tasks), nil
}

func nonNil(tasks []store.Task) []store.Task {
	if tasks == nil {
		return []store.Task{}
	}
	return tasks
}

// pruneSlotGapsSQL deletes a namespace's oldest gaps that ended by a time, up to a
// limit, found on ax_slot_gaps_until.
const pruneSlotGapsSQL = `DELETE FROM ax_slot_gaps WHERE id IN (
	SELECT id FROM ax_slot_gaps WHERE namespace = ? AND until_at <= ? ORDER BY until_at, id LIMIT ?)`

// PruneSlotGaps deletes up to limit gaps of the view's namespace that ended at or
// before before, oldest first, found on ax_slot_gaps_until (see store.SlotHistory).
func (s *Store) PruneSlotGaps(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := driverkit.CheckPruneSlotGaps(before, limit); err != nil {
		return 0, fmt.Errorf("ax: sqlite: %w", err)
	}
	var n int64
	err := s.write(ctx, "prune slot gaps", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, pruneSlotGapsSQL, s.ns, micros(before), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
