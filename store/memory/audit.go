package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/axsched/ax/store"
)

type auditRow struct {
	ns  string
	rec store.AuditRecord
}

// Audit appends a record to the namespace's audit log. See [store.Auditor].
func (s *Store) Audit(ctx context.Context, rec store.AuditRecord) (*store.AuditRecord, error) {
	if err := checkAudit(rec); err != nil {
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

// AuditLog returns the namespace's matching records, newest first. See [store.Auditor]
// and [store.AuditQuery] for the order.
func (s *Store) AuditLog(ctx context.Context, q store.AuditQuery) ([]store.AuditRecord, error) {
	if err := checkAuditQuery(q); err != nil {
		return nil, fmt.Errorf("ax: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: audit log: %w", err)
	}
	defer s.mu.Unlock()
	match := func(r auditRow) bool {
		return r.ns == s.ns && (q.Actor == "" || r.rec.Actor == q.Actor) &&
			(q.Action == "" || r.rec.Action == q.Action) && (q.Target == "" || r.rec.Target == q.Target)
	}
	out := []store.AuditRecord{}
	if !q.ByTime() {
		for i := len(s.audit) - 1; i >= 0 && len(out) < q.Limit; i-- {
			if r := s.audit[i]; match(r) && (q.BeforeID <= 0 || r.rec.ID < q.BeforeID) {
				out = append(out, r.rec)
			}
		}
		return out, nil
	}
	// By time: (At, ID) descending, from after the cursor's record.
	var cursor *store.AuditRecord
	if q.BeforeID > 0 {
		for i := range s.audit {
			if s.audit[i].ns == s.ns && s.audit[i].rec.ID == q.BeforeID {
				cursor = &s.audit[i].rec
			}
		}
		if cursor == nil {
			return out, nil
		}
	}
	newer := func(a, b store.AuditRecord) int { // descending (At, ID)
		if c := micro(b.At).Compare(micro(a.At)); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	}
	for _, r := range s.audit {
		at := micro(r.rec.At)
		if !match(r) || !q.Since.IsZero() && at.Before(micro(q.Since)) ||
			!q.Until.IsZero() && !at.Before(micro(q.Until)) || cursor != nil && newer(*cursor, r.rec) >= 0 {
			continue
		}
		out = append(out, r.rec)
	}
	slices.SortFunc(out, newer)
	return out[:min(len(out), q.Limit)], nil
}

// PruneAudit deletes the namespace's records older than before. See [store.Pruner].
func (s *Store) PruneAudit(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := checkPruneBefore("prune audit", before, limit); err != nil {
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
