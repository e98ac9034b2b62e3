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

// Audit appends a record to the view's namespace's audit log, stamped by the
// database's clock, in one transaction (see store.Auditor).
func (s *Store) Audit(ctx context.Context, rec store.AuditRecord) (*store.AuditRecord, error) {
	if err := driverkit.CheckAudit(rec); err != nil {
		return nil, fmt.Errorf("ax: mysql: %w", err)
	}
	err := s.run(ctx, "audit", 0, func(tx *sql.Tx, _ int64) error { return s.auditIn(ctx, tx, &rec) })
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

// auditIn appends rec in tx, stamped by the database's clock, and sets its ID and At.
func (s *Store) auditIn(ctx context.Context, tx *sql.Tx, rec *store.AuditRecord) error {
	if err := tx.QueryRowContext(ctx, `SELECT UTC_TIMESTAMP(6)`).Scan(dbTime{&rec.At}); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO ax_audit (namespace, at, actor, role, action, target, reason, result,
			status_before, status_after, execution_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		s.ns, dt(rec.At), rec.Actor, rec.Role, rec.Action, rec.Target, rec.Reason, rec.Result, string(rec.StatusBefore),
		string(rec.StatusAfter), rec.ExecutionID)
	if err != nil {
		return err
	}
	rec.ID, err = res.LastInsertId()
	return err
}

// AuditLog returns the view's namespace's matching records, newest first: by id,
// or with a time bound by (at, id) through ax_audit_at (see store.AuditQuery). A page
// by time that continues after a record reads that record's time first.
func (s *Store) AuditLog(ctx context.Context, q store.AuditQuery) ([]store.AuditRecord, error) {
	if err := driverkit.CheckAuditQuery(q); err != nil {
		return nil, fmt.Errorf("ax: mysql: %w", err)
	}
	if err := s.check("audit log"); err != nil {
		return nil, err
	}
	var cursorAt time.Time
	if q.ByTime() && q.BeforeID > 0 {
		err := s.db.QueryRowContext(ctx, `SELECT at FROM ax_audit WHERE namespace = ? AND id = ?`, s.ns, q.BeforeID).Scan(dbTime{&cursorAt})
		if errors.Is(err, sql.ErrNoRows) {
			return []store.AuditRecord{}, nil // pruned: nothing older is left
		}
		if err != nil {
			return nil, s.wrap("audit log", err)
		}
	}
	query, args := taskquery.AuditSelect(dialect, s.ns, q, cursorAt)
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, s.wrap("audit log", err)
	}
	defer rows.Close()
	out := []store.AuditRecord{}
	for rows.Next() {
		var r store.AuditRecord
		var before, after string
		if err := rows.Scan(&r.ID, dbTime{&r.At}, &r.Actor, &r.Role, &r.Action, &r.Target, &r.Reason, &r.Result, &before, &after, &r.ExecutionID); err != nil {
			return nil, s.wrap("audit log", err)
		}
		r.StatusBefore, r.StatusAfter = store.Status(before), store.Status(after)
		out = append(out, r)
	}
	return out, s.wrap("audit log", rows.Err())
}

// PruneAudit deletes the view's namespace's records older than before, oldest first,
// through ax_audit_at (see store.Auditor). MySQL takes no LIMIT in an IN subquery: the
// ids are read first, in the same transaction.
func (s *Store) PruneAudit(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := driverkit.CheckPruneAudit(before, limit); err != nil {
		return 0, fmt.Errorf("ax: mysql: %w", err)
	}
	var n int
	err := s.run(ctx, "prune audit", 0, func(tx *sql.Tx, _ int64) error {
		var err error
		n, err = deleteSelected(ctx, tx, "ax_audit", `SELECT id FROM ax_audit WHERE namespace = ? AND at < ? ORDER BY at LIMIT ? FOR UPDATE`,
			s.ns, dt(before), limit)
		return err
	})
	return n, err
}
