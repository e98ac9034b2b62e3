package ax

import (
	"context"
	"fmt"

	"github.com/axsched/ax/store"
)

// InTx runs fn in a transaction of the store's own. It commits if fn returns nil, else
// rolls back and returns fn's error. Calls in fn given ctx and WithTx(tx) commit or
// roll back together: Delay, At, SubmitMany, Get, Cancel, Trigger, Reschedule, Retry,
// PauseSchedule, ResumeSchedule, TriggerSchedule and Audit. tx is a pgx.Tx on
// PostgreSQL, a *sql.Tx on MySQL and SQLite.
//
// fn must not:
//   - commit or roll back tx;
//   - write through the scheduler without WithTx(tx) (SQLite's one writer is held by
//     tx);
//   - do what it could not repeat outside tx: on MySQL a deadlock runs fn again, in a
//     new transaction;
//   - call or wait for another InTx: SQLite has one writer, and on PostgreSQL and
//     MySQL at most half the store's pool is in InTx at once, so that what fn reads
//     outside tx always finds a connection. InTx within fn's ctx is ErrInvalid; a
//     pool of one connection is ErrInvalid.
//
// What the calls change on this scheduler happens once the transaction has committed
// (see "Transactions" in the package doc). Trigger in InTx claims the task as without
// a transaction when this scheduler runs its handler, and dispatches it after the
// commit (see Trigger). Should the commit's outcome be unknown (the connection lost
// during it), InTx returns the error and runs none of the after-commit work: a task
// Trigger claimed is then handed back by the stale-claim recovery
// (Config.DispatchTimeout), and runs. A store that writes in no transaction (the
// memory store) is ErrUnsupported.
func (s *Scheduler) InTx(ctx context.Context, fn func(ctx context.Context, tx any) error) error {
	txs, ok := s.st.(store.Transactor)
	if !ok {
		return errorf("ax: transaction: %T: %w", s.cfg.Store, ErrUnsupported)
	}
	if ctx.Value(ownTxKey{}) != nil {
		return errorf("ax: transaction: InTx within InTx would wait for the outer one: %w", ErrInvalid)
	}
	var cur *ownTx
	err := txs.InTx(ctx, func(tx store.Tx) error {
		cur = &ownTx{tx: tx.Raw(), s: s, view: tx} // afresh each time the store runs fn
		return fn(context.WithValue(ctx, ownTxKey{}, cur), tx.Raw())
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
	tx          any        // the transaction, as fn gets it
	s           *Scheduler // whose InTx it is
	view        store.Tx   // s's store bound to it
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

// unlessRolledBack runs f once the transaction of o commits when it is one of InTx's
// (never if it rolls back), else at once: for what must happen whether or not the
// scheduler will see the commit — a caller's own transaction, where a watch on the
// task covers the wait — but never for a transaction it knows rolled back.
func (o *options) unlessRolledBack(ctx context.Context, f func()) {
	if c := joined(ctx, o.tx); o.hasTx && c != nil {
		c.afterCommit = append(c.afterCommit, f)
		return
	}
	f()
}

// inTxOr is in, given the store bound to o's transaction, when o has one, else own.
func inTxOr[T any](ctx context.Context, s *Scheduler, o *options, in func(tx store.Tx) (T, error), own func() (T, error)) (T, error) {
	if !o.hasTx {
		return own()
	}
	tx, err := s.bind(ctx, o.tx)
	if err != nil {
		var zero T
		return zero, err
	}
	return in(tx)
}

// bind returns s's store bound to tx: as InTx bound it, when tx is s's InTx's, else
// bound now (the store checks that tx is on its database and schema, so another
// scheduler's InTx transaction is checked too). A store that cannot write in a
// caller's transaction is ErrInvalid.
func (s *Scheduler) bind(ctx context.Context, tx any) (store.Tx, error) {
	if c := joined(ctx, tx); c != nil && c.s == s {
		return c.view, nil
	}
	txs, ok := s.st.(store.Transactor)
	if !ok {
		return nil, fmt.Errorf("Tx: store %T cannot write in a caller's transaction: %w", s.st, ErrInvalid)
	}
	return txs.Bind(ctx, tx)
}

// CompleteTx finishes the task t as a success inside tx, the caller's transaction on
// the store's database (as for WithTx), so that the effect the handler writes in tx
// and the task's completion commit together or not at all. t is the task the handler
// was given: the completion applies only if t's execution is still the task's current
// one. When it is not — the handler was paused past OrphanAfter and recovery ran the
// task again elsewhere, or the task finished meanwhile — CompleteTx changes nothing
// and returns an error wrapping ErrNotCurrent: roll tx back and return the error.
// Until tx ends, the task's row stays locked, and a recovery of the execution waits
// for the outcome.
//
// A handler that checks its context before committing still has a window, between
// the check and the commit, in which its execution may be run again elsewhere;
// CompleteTx closes it. The handler returns nil after the commit; the scheduler
// finds the task finished and records nothing more. On a store without transactions
// (store/memory) it is ErrInvalid, as WithTx is.
func (s *Scheduler) CompleteTx(ctx context.Context, tx any, t *Task) error {
	if t == nil || t.ExecutionID == "" {
		return errorf("ax: complete task: %w", fmt.Errorf("no task, or a task that has not run: %w", ErrInvalid))
	}
	view, err := s.bind(ctx, tx)
	if err != nil {
		return errorf("ax: complete task %d: %w", t.ID, err)
	}
	ok, err := view.Complete(ctx, store.ExecRef{TaskID: t.ID, ExecutionID: t.ExecutionID})
	switch {
	case err != nil:
		return errorf("ax: complete task %d: %w", t.ID, err)
	case !ok:
		return errorf("ax: complete task %d: execution %s: %w", t.ID, t.ExecutionID, ErrNotCurrent)
	}
	return nil
}
