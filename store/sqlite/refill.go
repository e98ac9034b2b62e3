package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/axsched/ax/store"
)

const (
	// refillChangedSQL is the incremental refill: a range of ax_tasks_ns_scheduled_seq.
	refillChangedSQL = `SELECT id, due_at, seq FROM ax_tasks
		WHERE namespace = ? AND status = 'SCHEDULED' AND seq > ? ORDER BY seq LIMIT ?`
	// refillWindowSQL is the window scan: a range of ax_tasks_ns_scheduled_due.
	refillWindowSQL = `SELECT id, due_at FROM ax_tasks
		WHERE namespace = ? AND status = 'SCHEDULED' AND (due_at > ? OR (due_at = ? AND id > ?)) AND due_at < ?
		ORDER BY due_at, id LIMIT ?`
)

// Refill reads the view's namespace's changed and newly windowed SCHEDULED tasks (see
// store.RefillParams). The sequence cursor is the store's, shared by the namespaces.
func (s *Store) Refill(ctx context.Context, p store.RefillParams) (*store.RefillResult, error) {
	if p.Limit <= 0 {
		return nil, fmt.Errorf("ax: sqlite: refill: limit %d: %w", p.Limit, store.ErrInvalid)
	}
	// One read transaction: a snapshot, so the cursor and both scans agree.
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, s.wrap("refill", err)
	}
	defer tx.Rollback()
	res := &store.RefillResult{Seq: p.AfterSeq}
	to := micros(p.To)
	if p.AfterSeq < 0 {
		if err := tx.QueryRowContext(ctx, `SELECT value FROM ax_counters WHERE name = 'seq'`).Scan(&res.Seq); err != nil {
			return nil, s.wrap("refill", err)
		}
	} else {
		rows, err := tx.QueryContext(ctx, refillChangedSQL, s.ns, p.AfterSeq, p.Limit)
		if err != nil {
			return nil, s.wrap("refill", err)
		}
		n := 0
		for rows.Next() {
			var id, due, seq int64
			if err := rows.Scan(&id, &due, &seq); err != nil {
				rows.Close()
				return nil, s.wrap("refill", err)
			}
			n++
			res.Seq = seq
			if due < to {
				res.Changed = append(res.Changed, store.Due{ID: id, DueAt: fromMicros(due)})
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, s.wrap("refill", err)
		}
		res.More = n == p.Limit
	}
	from := int64(-1 << 62)
	if !p.From.IsZero() {
		from = micros(p.From)
	}
	rows, err := tx.QueryContext(ctx, refillWindowSQL, s.ns, from, from, p.FromID, to, p.Limit)
	if err != nil {
		return nil, s.wrap("refill", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, due int64
		if err := rows.Scan(&id, &due); err != nil {
			return nil, s.wrap("refill", err)
		}
		res.Entered = append(res.Entered, store.Due{ID: id, DueAt: fromMicros(due)})
	}
	if len(res.Entered) == p.Limit {
		res.More = true
	}
	return res, s.wrap("refill", rows.Err())
}
