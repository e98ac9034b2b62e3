package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/axsched/ax/store"
)

type auditRow struct {
	ns  string
	rec store.AuditRecord
}

// Audit appends a record to the namespace's audit log. See [store.Auditor].
func (s *Store) Audit(ctx context.Context, rec store.AuditRecord) (*store.AuditRecord, error) {
	if err := store.CheckAudit(rec); err != nil {
		return nil, fmt.Errorf("ax: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: audit: %w", err)
	}
	defer s.mu.Unlock()
	s.lastAudit++
	rec.ID, rec.At = s.lastAudit, s.now()
	s.audit = append(s.audit, auditRow{ns: s.ns, rec: rec})
	return &rec, nil
}

// AuditLog returns the namespace's matching records, newest first. See [store.Auditor].
func (s *Store) AuditLog(ctx context.Context, q store.AuditQuery) ([]store.AuditRecord, error) {
	if err := store.CheckAuditQuery(q); err != nil {
		return nil, fmt.Errorf("ax: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: audit log: %w", err)
	}
	defer s.mu.Unlock()
	out := []store.AuditRecord{}
	for i := len(s.audit) - 1; i >= 0 && len(out) < q.Limit; i-- {
		r := s.audit[i]
		if r.ns != s.ns || q.BeforeID > 0 && r.rec.ID >= q.BeforeID || q.Actor != "" && r.rec.Actor != q.Actor ||
			q.Action != "" && r.rec.Action != q.Action || q.Target != "" && r.rec.Target != q.Target {
			continue
		}
		out = append(out, r.rec)
	}
	return out, nil
}

// PruneAudit deletes the namespace's records older than before. See [store.Auditor].
func (s *Store) PruneAudit(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := store.CheckPruneAudit(before, limit); err != nil {
		return 0, fmt.Errorf("ax: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return 0, fmt.Errorf("ax: prune audit: %w", err)
	}
	defer s.mu.Unlock()
	n := 0
	kept := s.audit[:0]
	for _, r := range s.audit {
		if r.ns == s.ns && r.rec.At.Before(before) && n < limit {
			n++
			continue
		}
		kept = append(kept, r)
	}
	s.audit = kept
	return n, nil
}
