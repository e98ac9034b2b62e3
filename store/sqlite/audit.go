package sqlite

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

// Audit appends a record to the view's namespace's audit log, in a write transaction
// of its own (see store.Auditor); a store.Tx's Audit runs auditIn in its transaction.
func (s *Store) Audit(ctx context.Context, rec store.AuditRecord) (*store.AuditRecord, error) {
	if err := driverkit.CheckAudit(rec); err != nil {
		return nil, fmt.Errorf("ax: sqlite: %w", err)
	}
	err := s.write(ctx, "audit", func(tx *sql.Tx) error { return s.auditIn(ctx, tx, &rec) })
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

// auditIn appends rec in tx and sets its ID and At.
func (s *Store) auditIn(ctx context.Context, tx *sql.Tx, rec *store.AuditRecord) error {
	at := micros(now())
	if err := tx.QueryRowContext(ctx, `INSERT INTO ax_audit (namespace, at, actor, role, action, target, reason, result,
			status_before, status_after, execution_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		s.ns, at, rec.Actor, rec.Role, rec.Action, rec.Target, rec.Reason, rec.Result, string(rec.StatusBefore),
		string(rec.StatusAfter), rec.ExecutionID).Scan(&rec.ID); err != nil {
		return err
	}
	rec.At = fromMicros(at)
	return nil
}

// AuditLog returns the view's namespace's matching records, newest first: by id,
// or with a time bound by (at, id) through ax_audit_at (see store.AuditQuery). A page
// by time that continues after a record reads that record's time first.
func (s *Store) AuditLog(ctx context.Context, q store.AuditQuery) ([]store.AuditRecord, error) {
	if err := driverkit.CheckAuditQuery(q); err != nil {
		return nil, fmt.Errorf("ax: sqlite: %w", err)
	}
	var cursorAt time.Time
	if q.ByTime() && q.BeforeID > 0 {
		var at int64
		err := s.r.QueryRowContext(ctx, `SELECT at FROM ax_audit WHERE namespace = ? AND id = ?`, s.ns, q.BeforeID).Scan(&at)
		if errors.Is(err, sql.ErrNoRows) {
			return []store.AuditRecord{}, nil // pruned: nothing older is left
		}
		if err != nil {
			return nil, s.wrap("audit log", err)
		}
		cursorAt = fromMicros(at)
	}
	query, args := taskquery.AuditSelect(dialect, s.ns, q, cursorAt)
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, s.wrap("audit log", err)
	}
	defer rows.Close()
	out := []store.AuditRecord{}
	for rows.Next() {
		var r store.AuditRecord
		var at int64
		var before, after string
		if err := rows.Scan(&r.ID, &at, &r.Actor, &r.Role, &r.Action, &r.Target, &r.Reason, &r.Result, &before, &after, &r.ExecutionID); err != nil {
			return nil, s.wrap("audit log", err)
		}
		r.At, r.StatusBefore, r.StatusAfter = fromMicros(at), store.Status(before), store.Status(after)
		out = append(out, r)
	}
	return out, s.wrap("audit log", rows.Err())
}

// PruneAudit deletes the view's namespace's records older than before, oldest first,
// through ax_audit_at (see store.Auditor).
func (s *Store) PruneAudit(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := driverkit.CheckPruneAudit(before, limit); err != nil {
		return 0, fmt.Errorf("ax: sqlite: %w", err)
	}
	var n int64
	err := s.write(ctx, "prune audit", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM ax_audit WHERE id IN (
			SELECT id FROM ax_audit WHERE namespace = ? AND at < ? ORDER BY at LIMIT ?)`, s.ns, micros(before), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
