package ax

import (
	"context"

	"github.com/axsched/ax/store"
)

// InTx runs fn in a transaction of the store's own and commits it if fn returns nil,
// else rolls it back and returns fn's error: calls in fn given ctx and WithTx(tx) —
// Delay, At, SubmitMany, Get, Cancel, Trigger, Reschedule, Retry, PauseSchedule,
// ResumeSchedule, TriggerSchedule, Audit — commit or roll back together. It is how a
// tool without a database handle of its own acts atomically: the admin API writes
// each change and its audit record this way. tx is a pgx.Tx on PostgreSQL, a
// *sql.Tx on MySQL and SQLite; fn must not commit or roll it back, nor call the
// scheduler without WithTx(tx) for a write meanwhile (SQLite's single writer is held
// by tx). On MySQL a deadlock runs fn again in a new transaction, so fn must do
// nothing outside tx that it could not repeat.
//
// What the calls change on this scheduler — its wheel, the dispatch of a task Trigger
// claimed — happens once the transaction has committed; Trigger in InTx claims the
// task as without a transaction when this scheduler runs its handler, and dispatches
// it right after the commit. A store that writes in no transaction (the memory
// store) is ErrUnsupported.
func (s *Scheduler) InTx(ctx context.Context, fn func(ctx context.Context, tx any) error) error {
	txs, ok := s.st.(store.TxStore)
	if !ok {
		return errorf("ax: transaction: %T: %w", s.cfg.Store, ErrUnsupported)
	}
	var cur *ownTx
	err := txs.InTx(ctx, func(tx any) error {
		cur = &ownTx{tx: tx} // afresh each time the store runs fn
		return fn(context.WithValue(ctx, ownTxKey{}, cur), tx)
	})
	if err != nil {
		return err
	}
	for _, f := range cur.afterCommit {
		f()
	}
	return nil
}

// ownTx is a transaction of InTx's, with what is to be done once it commits.
type ownTx struct {
	tx          any
	afterCommit []func()
}

type ownTxKey struct{}

// joined returns the InTx transaction that ctx runs in if tx is it, else nil: tx is
// then the caller's own, whose commit the scheduler cannot see.
func joined(ctx context.Context, tx any) *ownTx {
	c, _ := ctx.Value(ownTxKey{}).(*ownTx)
	if c == nil || c.tx != tx {
		return nil
	}
	return c
}

// onCommit runs f once the transaction of o commits: at once without WithTx, after
// InTx's commit in one of InTx's, never in the caller's own transaction (whose
// commit the scheduler cannot see; the refill, or a watch, finds the change then).
func (o *options) onCommit(ctx context.Context, f func()) {
	switch {
	case !o.hasTx:
		f()
	default:
		if c := joined(ctx, o.tx); c != nil {
			c.afterCommit = append(c.afterCommit, f)
		}
	}
}
