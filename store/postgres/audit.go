package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
	"github.com/axsched/ax/store/internal/taskquery"
)

// Audit appends a record to the view's namespace's audit log, stamped by the
// database's clock (see store.Auditor).
func (s *Store) Audit(ctx context.Context, rec store.AuditRecord) (*store.AuditRecord, error) {
	if err := driverkit.CheckAudit(rec); err != nil {
		return nil, fmt.Errorf("ax: postgres: %w", err)
	}
	if err := s.check("audit"); err != nil {
		return nil, err
	}
	if err := s.pool.QueryRow(ctx, auditSQL, s.auditArgs(rec)...).Scan(&rec.ID, &rec.At); err != nil {
		return nil, s.wrap("audit", err)
	}
	rec.At = rec.At.UTC()
	return &rec, nil
}

// auditIn is Audit's statement in q: the record is kept if q's transaction commits.
func (s *Store) auditIn(ctx context.Context, q txQuerier, rec store.AuditRecord) (*store.AuditRecord, error) {
	if err := driverkit.CheckAudit(rec); err != nil {
		return nil, fmt.Errorf("ax: postgres: %w", err)
	}
	if err := q.query(ctx, auditSQL, s.auditArgs(rec), func(rows txRows) error {
		if !rows.Next() {
			return errors.New("no row returned")
		}
		return rows.Scan(&rec.ID, &rec.At)
	}); err != nil {
		return nil, s.wrap("audit in transaction", err)
	}
	rec.At = rec.At.UTC()
	return &rec, nil
}

// auditSQL appends a record, the arguments of auditArgs, stamped by the database's
// clock.
const auditSQL = `INSERT INTO ax_audit (namespace, at, actor, role, action, target, reason, result,
		status_before, status_after, execution_id)
	VALUES ($1, clock_timestamp(), $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id, at`

func (s *Store) auditArgs(rec store.AuditRecord) []any {
	return []any{s.ns, rec.Actor, rec.Role, rec.Action, rec.Target, rec.Reason, rec.Result, string(rec.StatusBefore),
		string(rec.StatusAfter), rec.ExecutionID}
}

// AuditLog returns the view's namespace's matching records, newest first: a backward
// scan of the primary key, filtered, or with a time bound of ax_audit_at within the
// bounds (see store.AuditQuery). A page by time that continues after a record reads
// that record's time first, by its primary key.
func (s *Store) AuditLog(ctx context.Context, q store.AuditQuery) ([]store.AuditRecord, error) {
	if err := driverkit.CheckAuditQuery(q); err != nil {
		return nil, fmt.Errorf("ax: postgres: %w", err)
	}
	if err := s.check("audit log"); err != nil {
		return nil, err
	}
	var cursorAt time.Time
	if q.ByTime() && q.BeforeID > 0 {
		err := s.pool.QueryRow(ctx, `SELECT at FROM ax_audit WHERE namespace = $1 AND id = $2`, s.ns, q.BeforeID).Scan(&cursorAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return []store.AuditRecord{}, nil // pruned: nothing older is left
		}
		if err != nil {
			return nil, s.wrap("audit log", err)
		}
	}
	query, args := taskquery.AuditSelect(dialect(false), s.ns, q, cursorAt)
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, s.wrap("audit log", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.AuditRecord, error) {
		var r store.AuditRecord
		var before, after string
		err := row.Scan(&r.ID, &r.At, &r.Actor, &r.Role, &r.Action, &r.Target, &r.Reason, &r.Result, &before, &after, &r.ExecutionID)
		r.At, r.StatusBefore, r.StatusAfter = r.At.UTC(), store.Status(before), store.Status(after)
		return r, err
	})
	if err != nil {
		return nil, s.wrap("audit log", err)
	}
	if out == nil {
		out = []store.AuditRecord{}
	}
	return out, nil
}

// PruneAudit deletes the view's namespace's records older than before, oldest first,
// through ax_audit_at (see store.Auditor).
func (s *Store) PruneAudit(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := driverkit.CheckPruneAudit(before, limit); err != nil {
		return 0, fmt.Errorf("ax: postgres: %w", err)
	}
	if err := s.check("prune audit"); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM ax_audit WHERE id IN (
		SELECT id FROM ax_audit WHERE namespace = $1 AND at < $2 ORDER BY at LIMIT $3)`, s.ns, before, limit)
	if err != nil {
		return 0, s.wrap("prune audit", err)
	}
	return int(tag.RowsAffected()), nil
}
