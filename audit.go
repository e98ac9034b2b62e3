package ax

import (
	"context"
	"errors"
	"time"

	"github.com/axsched/ax/store"
)

// AuditRecord is one row of the audit log of the operations API (package admin): who
// did what to which task or schedule, why, and how it ended. Audit sets its ID and At.
// Actor, Action and Result are required. A text field holds at most 1,000 bytes;
// Reason holds 2,000.
type AuditRecord struct {
	ID           int64     // set by Audit
	At           time.Time // set by Audit, by the store's clock
	Actor        string    // who: the token's actor
	Role         string    // the token's role
	Action       string    // e.g. "task.cancel"
	Target       string    // e.g. "task 42", "schedule nightly"
	Reason       string    // the operator's reason, if given
	Result       string    // "ok", or the refusal's code and message
	StatusBefore Status    // the task's status before the call, when there is one
	StatusAfter  Status    // and after it
	ExecutionID  string    // the execution it led to (a trigger), if any
}

// AuditQuery selects audit records (AuditLog). The log comes newest first.
type AuditQuery struct {
	// Actor, Action and Target, when not empty, must match exactly.
	Actor  string
	Action string
	Target string
	// Since and Until, when set, keep the records with Since <= At < Until, at
	// microsecond precision. When both are set, Since must be before Until. With
	// either set, the log is ordered by At and then ID, read along the store's
	// index on the time; without, by ID.
	Since time.Time
	Until time.Time
	// BeforeID, when positive, keeps the records after that one in the log's order:
	// the next page.
	BeforeID int64
	Limit    int // the page size, 1 to 1,000
}

// AuditRecord and AuditQuery have the fields of their store twins, in the same order,
// so that each converts to the other: the conversions below stop compiling if the two
// drift apart.
func (r AuditRecord) store() store.AuditRecord { return store.AuditRecord(r) }
func (q AuditQuery) store() store.AuditQuery   { return store.AuditQuery(q) }

// Audit appends rec to the audit log of the scheduler's namespace, stamped by the
// store's clock, and returns it. The admin API calls it for every mutating request;
// a service's own tools may too. A record without an actor, action or result, or
// with an over-long field, is ErrInvalid.
//
// With WithTx the record is written in the caller's transaction (an InTx one, say),
// kept if, and only if, it commits: with the change it records.
func (s *Scheduler) Audit(ctx context.Context, rec AuditRecord, opts ...ActionOption) (*AuditRecord, error) {
	o := collect(opts)
	if err := errors.Join(o.errs...); err != nil {
		return nil, errorf("ax: audit: %w", err)
	}
	got, err := inTxOr(ctx, s, o, func(tx store.Tx) (*store.AuditRecord, error) { return tx.Audit(ctx, rec.store()) },
		func() (*store.AuditRecord, error) { return s.st.Audit(ctx, rec.store()) })
	if err != nil {
		return nil, errorf("ax: audit: %w", err)
	}
	out := AuditRecord(*got)
	return &out, nil
}

// AuditLog returns the audit records of the scheduler's namespace that match q, newest
// first. A Limit out of range, or a Since not before Until, is ErrInvalid.
func (s *Scheduler) AuditLog(ctx context.Context, q AuditQuery) ([]AuditRecord, error) {
	rows, err := s.st.AuditLog(ctx, q.store())
	if err != nil {
		return nil, errorf("ax: audit log: %w", err)
	}
	out := make([]AuditRecord, len(rows))
	for i, r := range rows {
		out[i] = AuditRecord(r)
	}
	return out, nil
}
