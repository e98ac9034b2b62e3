package ax

import (
	"context"
	"errors"

	"github.com/axsched/ax/store"
)

// AuditRecord is one row of the audit log of the operations API (package admin): who
// did what to which task or schedule, why, and how it ended. Audit sets its ID and At.
type AuditRecord = store.AuditRecord

// AuditQuery selects audit records (AuditLog): each non-empty text field must match
// exactly; Since and Until, when set, keep the records with Since <= At < Until (at
// microsecond precision; Since must be before Until); BeforeID, when positive, keeps
// the records after that one in the log's order (the next page); Limit is the page
// size, 1 to 1,000.
//
// The log comes newest first: by ID, or, with Since or Until, by At and then ID, read
// along the store's index on the time.
type AuditQuery = store.AuditQuery

// Audit appends rec to the audit log of the scheduler's namespace, stamped by the
// store's clock, and returns it. The admin API calls it for every mutating request;
// a service's own tools may too. A store without an audit log is ErrUnsupported; a
// record without an actor, action or result, or with an over-long field, ErrInvalid.
//
// With WithTx the record is written in the caller's transaction (an InTx one, say),
// kept if, and only if, it commits: with the change it records.
func (s *Scheduler) Audit(ctx context.Context, rec AuditRecord, opts ...ActionOption) (*AuditRecord, error) {
	o := collect(opts)
	if err := errors.Join(o.errs...); err != nil {
		return nil, errorf("ax: audit: %w", err)
	}
	got, err := inTxOr(ctx, s, o, func(tx store.Tx) (*AuditRecord, error) { return tx.Audit(ctx, rec) },
		func() (*AuditRecord, error) { return s.st.Audit(ctx, rec) })
	if err != nil {
		return nil, errorf("ax: audit: %w", err)
	}
	return got, nil
}

// AuditLog returns the audit records of the scheduler's namespace that match q, newest
// first. A store without an audit log is ErrUnsupported; a Limit out of range, or a
// Since not before Until, ErrInvalid.
func (s *Scheduler) AuditLog(ctx context.Context, q AuditQuery) ([]AuditRecord, error) {
	out, err := s.st.AuditLog(ctx, q)
	if err != nil {
		return nil, errorf("ax: audit log: %w", err)
	}
	return out, nil
}
