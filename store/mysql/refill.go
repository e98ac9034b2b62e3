package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"math"

	"github.com/axsched/ax/store"
)

// cursor returns the highest sequence number below which every number handed out is
// either visible or abandoned (see DESIGN.md, "The refill cursor").
func (s *Store) cursor(ctx context.Context) (int64, error) {
	// One statement: the counter and the holds from one read view.
	rows, err := s.db.QueryContext(ctx, `SELECT c.value, h.lo, h.created_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
		FROM ax_counters c LEFT JOIN ax_seq_holds h ON TRUE WHERE c.name = 'seq'`, s.grace.Microseconds())
	if err != nil {
		return 0, err
	}
	var safe int64 = math.MaxInt64
	var counter int64
	var old []int64
	for rows.Next() {
		var lo sql.NullInt64
		var stale sql.NullBool
		if err := rows.Scan(&counter, &lo, &stale); err != nil {
			rows.Close()
			return 0, err
		}
		switch {
		case !lo.Valid:
		case stale.Bool:
			old = append(old, lo.Int64)
		default:
			safe = min(safe, lo.Int64-1)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	safe = min(safe, counter)
	if len(old) == 0 {
		return safe, nil
	}
	reaped, err := s.reap(ctx, old)
	if err != nil {
		return 0, err
	}
	for _, lo := range old {
		if !reaped[lo] { // locked by a live transaction (or just released by its commit)
			safe = min(safe, lo-1)
		}
	}
	return safe, nil
}

// reap deletes the holds among los that no transaction has locked: their transactions
// rolled back or died. A transaction that has not yet locked its hold finds it gone
// and takes a fresh range.
func (s *Store) reap(ctx context.Context, los []int64) (map[int64]bool, error) {
	reaped := map[int64]bool{}
	err := s.run(ctx, "reap holds", 0, func(tx *sql.Tx, _ int64) error {
		clear(reaped)
		rows, err := tx.QueryContext(ctx, `SELECT lo FROM ax_seq_holds WHERE lo IN (`+marks(len(los))+`)
			ORDER BY lo FOR UPDATE SKIP LOCKED`, int64s(los)...)
		if err != nil {
			return err
		}
		var free []int64
		for rows.Next() {
			var lo int64
			if err := rows.Scan(&lo); err != nil {
				rows.Close()
				return err
			}
			free = append(free, lo)
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(free) == 0 {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM ax_seq_holds WHERE lo IN (`+marks(len(free))+`)`, int64s(free)...); err != nil {
			return err
		}
		for _, lo := range free {
			reaped[lo] = true
		}
		return nil
	})
	return reaped, err
}

// Refill reads changed and newly windowed SCHEDULED tasks of the view's namespace (see
// store.RefillParams). The cursor is global: sequence numbers, the counter and the
// holds are shared by every namespace, and every number up to the cursor is visible or
// abandoned whatever its row's namespace, so filtering the rows read by namespace keeps
// the rule. An open transaction of another namespace may hold a view's cursor back, as
// it would hold back any other writer's rows: later calls return them.
func (s *Store) Refill(ctx context.Context, p store.RefillParams) (*store.RefillResult, error) {
	if err := s.check("refill"); err != nil {
		return nil, err
	}
	if p.Limit <= 0 {
		return nil, fmt.Errorf("ax: mysql: refill: limit %d: %w", p.Limit, store.ErrInvalid)
	}
	// The cursor first: every number up to it is visible to the statements below.
	safe, err := s.cursor(ctx)
	if err != nil {
		return nil, s.wrap("refill", err)
	}
	res := &store.RefillResult{Seq: safe}
	to := dt(clamp(p.To))
	if p.AfterSeq >= 0 {
		res.Seq = max(p.AfterSeq, safe)
		rows, err := s.db.QueryContext(ctx, `SELECT id, due_at, seq, due_at < ? FROM ax_tasks
			WHERE namespace = ? AND status = 'SCHEDULED' AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?`, to, s.ns, p.AfterSeq, safe, p.Limit)
		if err != nil {
			return nil, s.wrap("refill", err)
		}
		n := 0
		for rows.Next() {
			var d store.Due
			var seq int64
			var inWindow bool
			if err := rows.Scan(&d.ID, dbTime{&d.DueAt}, &seq, &inWindow); err != nil {
				rows.Close()
				return nil, s.wrap("refill", err)
			}
			n++
			if inWindow {
				res.Changed = append(res.Changed, d)
			}
			if n == p.Limit {
				res.Seq = seq
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, s.wrap("refill", err)
		}
		res.More = n == p.Limit
	}
	if !p.From.IsZero() && !p.From.Before(p.To) {
		return res, nil
	}
	var rows *sql.Rows
	if p.From.IsZero() {
		rows, err = s.db.QueryContext(ctx, `SELECT id, due_at FROM ax_tasks
			WHERE namespace = ? AND status = 'SCHEDULED' AND due_at < ? ORDER BY due_at, id LIMIT ?`, s.ns, to, p.Limit)
	} else {
		from := dt(clamp(p.From))
		rows, err = s.db.QueryContext(ctx, `SELECT id, due_at FROM ax_tasks
			WHERE namespace = ? AND status = 'SCHEDULED' AND due_at >= ? AND due_at < ? AND (due_at > ? OR id > ?)
			ORDER BY due_at, id LIMIT ?`, s.ns, from, to, from, p.FromID, p.Limit)
	}
	if err != nil {
		return nil, s.wrap("refill", err)
	}
	defer rows.Close()
	for rows.Next() {
		var d store.Due
		if err := rows.Scan(&d.ID, dbTime{&d.DueAt}); err != nil {
			return nil, s.wrap("refill", err)
		}
		res.Entered = append(res.Entered, d)
	}
	if len(res.Entered) == p.Limit {
		res.More = true
	}
	return res, s.wrap("refill", rows.Err())
}
