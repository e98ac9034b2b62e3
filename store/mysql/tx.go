package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// This file holds the store inside one transaction (store.Transactor): Bind, for a
// caller's *sql.Tx on the store's database, InTx, for one of the store's own, and
// txView, the store.Tx both return. A view's writes run the code of the store's own
// (insert, cancelIn, triggerIn, …) in the bound transaction.

// txView is the view s inside the transaction tx, which it neither commits nor rolls
// back. tx is on the store's database: Bind checked it, or InTx began it.
type txView struct {
	s  *Store
	tx *sql.Tx
}

var _ store.Tx = (*txView)(nil)

// Bind returns the view of the store inside tx, a *sql.Tx of the caller's (see
// store.Transactor). It checks once, by a read that changes nothing, that tx is on the
// store's server and database; a tx of another kind, or elsewhere, is
// store.ErrInvalid. The view's writes are in the store's namespace.
func (s *Store) Bind(ctx context.Context, tx any) (store.Tx, error) {
	if err := s.check("bind"); err != nil {
		return nil, err
	}
	stx, ok := tx.(*sql.Tx)
	if !ok || stx == nil {
		return nil, fmt.Errorf("ax: mysql: bind: transaction of type %T, want a *sql.Tx: %w", tx, store.ErrInvalid)
	}
	var host, dbName sql.NullString
	var port int
	if err := stx.QueryRowContext(ctx, `SELECT @@hostname, @@port, DATABASE()`).Scan(&host, &port, &dbName); err != nil {
		return nil, s.wrap("bind", err)
	}
	if id := fmt.Sprintf("%s:%d/%s", host.String, port, dbName.String); id != s.identity {
		return nil, fmt.Errorf("ax: mysql: bind: the transaction is on %s, the store on %s: %w", id, s.identity, store.ErrInvalid)
	}
	return &txView{s: s, tx: stx}, nil
}

// InTx runs fn in a READ COMMITTED transaction of the store's own and commits it if
// fn returns nil (see store.Transactor). A deadlock or a lock wait timeout rolls it
// back and runs fn again in a new one, as every write of the store's is retried. At
// most half the pool's connections (as sized when New ran) are in such transactions
// at once — a call waits for its turn — so that what fn does on a connection of its
// own (a sequence number's reservation) always finds one; a pool of one connection is
// ErrInvalid. The sequence numbers its transactions reserved and did not commit are
// released at once, not after HoldGrace.
func (s *Store) InTx(ctx context.Context, fn func(tx store.Tx) error) error {
	if s.db.Stats().MaxOpenConnections == 1 {
		return fmt.Errorf("ax: mysql: transaction: the pool has one connection, and a transaction's sequence numbers need another: %w", store.ErrInvalid)
	}
	select {
	case s.inTx <- struct{}{}:
		defer func() { <-s.inTx }()
	case <-ctx.Done():
		return s.wrap("transaction", ctx.Err())
	}
	var ferr error
	var holds []int64
	attempts := 0
	err := s.run(ctx, "transaction", 0, func(tx *sql.Tx, _ int64) error {
		attempts++
		s.holdsMu.Lock()
		s.txHolds[tx] = &holds
		s.holdsMu.Unlock()
		defer func() {
			s.holdsMu.Lock()
			delete(s.txHolds, tx)
			s.holdsMu.Unlock()
		}()
		ferr = fn(&txView{s: s, tx: tx})
		return ferr
	})
	if err != nil || attempts > 1 {
		for _, lo := range holds { // a committed one's delete already removed it: a no-op
			s.dropHold(ctx, lo)
		}
	}
	if ferr != nil && errors.Is(err, ferr) {
		return ferr // fn's own, not wrapped again (the last attempt's, if it was retried)
	}
	return err
}

// noteHold records lo, a hold that tx took, when tx is one of InTx's.
func (s *Store) noteHold(tx *sql.Tx, lo int64) {
	s.holdsMu.Lock()
	defer s.holdsMu.Unlock()
	if h := s.txHolds[tx]; h != nil {
		*h = append(*h, lo)
	}
}

// Raw returns the bound *sql.Tx.
func (v *txView) Raw() any { return v.tx }

// Insert is Insert in the view's transaction. The tasks become visible if and only if
// it commits. Until then the refill change cursor stays behind them (see the package
// doc), so keep such transactions short: a long one holds back the incremental refill
// of tasks that other transactions submit meanwhile (they are still found by the
// window scan).
func (v *txView) Insert(ctx context.Context, tasks []store.NewTask) ([]store.Inserted, error) {
	if err := validateNew("insert", tasks); err != nil {
		return nil, err
	}
	if err := v.s.check("insert"); err != nil {
		return nil, err
	}
	if len(tasks) == 0 {
		return []store.Inserted{}, nil
	}
	lo, err := v.s.callerSeq(ctx, "insert", v.tx, len(tasks))
	if err != nil {
		return nil, err
	}
	out, err := insert(ctx, v.tx, v.s.ns, tasks, lo, v.s.returning)
	if err != nil {
		// The transaction is still open, holding the range: it comes back unlocked
		// when it rolls back, and the next refill reaps it.
		return nil, v.s.wrap("insert", err)
	}
	return out, nil
}

// Cancel is Cancel in the view's transaction.
func (v *txView) Cancel(ctx context.Context, name, key, by string) (*store.Task, error) {
	if err := v.s.check("cancel"); err != nil {
		return nil, err
	}
	if err := driverkit.CheckCancelledBy(by); err != nil {
		return nil, fmt.Errorf("ax: mysql: cancel %q/%q: %w", name, key, err)
	}
	t, sentinel, err := v.s.cancelIn(ctx, v.tx, name, key, by)
	if err != nil {
		return nil, v.s.wrap("cancel", err)
	}
	if sentinel != nil {
		return driverkit.Refusal(fmt.Sprintf("ax: mysql: cancel %q/%q", name, key), t, sentinel)
	}
	return t, nil
}

// Get is Get in the view's transaction: the task as it sees it.
func (v *txView) Get(ctx context.Context, id int64) (*store.Task, error) {
	if err := v.s.check("get task"); err != nil {
		return nil, err
	}
	return v.s.get(ctx, v.tx, id)
}

// Reschedule is Reschedule in the view's transaction.
func (v *txView) Reschedule(ctx context.Context, name, key string, at time.Time) (*store.Task, error) {
	op := fmt.Sprintf("ax: mysql: reschedule %q/%q", name, key)
	if at.IsZero() {
		return nil, fmt.Errorf("%s: zero due time: %w", op, store.ErrInvalid)
	}
	return v.moveBack(ctx, "reschedule", op, v.s.rescheduleIn(ctx, name, key, at))
}

// Retry is Retry in the view's transaction.
func (v *txView) Retry(ctx context.Context, id int64) (*store.Task, error) {
	return v.moveBack(ctx, "retry", fmt.Sprintf("ax: mysql: retry task %d", id), v.s.retryIn(ctx, id))
}

// MakeDue is MakeDue in the view's transaction: the task is due now, TriggeredAt
// stamped, with a fresh sequence number, if and only if the transaction commits.
func (v *txView) MakeDue(ctx context.Context, id int64) (*store.Task, error) {
	return v.moveBack(ctx, "make due", fmt.Sprintf("ax: mysql: make task %d due", id), v.s.makeDueIn(ctx, id))
}

// moveBack is Store.moveBack in the view's transaction. The transition goes first,
// keeping the row's sequence number, and only once it applied — the row now locked by
// the transaction — is a fresh number reserved and set: a refused one reserves none,
// for a number whose hold is rolled back would keep every refill cursor behind it for
// HoldGrace. Should the reservation or the number's write fail, the transition is
// undone (to a savepoint), so that a caller who commits anyway publishes no row under
// a stale number.
func (v *txView) moveBack(ctx context.Context, name, op string, move func(tx *sql.Tx, seq any) (t *store.Task, refusal, err error)) (*store.Task, error) {
	s, stx := v.s, v.tx
	if err := s.check(name); err != nil {
		return nil, err
	}
	if _, err := stx.ExecContext(ctx, `SAVEPOINT ax_move`); err != nil {
		return nil, s.wrap(name, err)
	}
	t, sentinel, err := move(stx, nil)
	switch {
	case err != nil:
		return nil, s.wrap(name, err)
	case sentinel != nil:
		return driverkit.Refusal(op, t, sentinel)
	}
	seq, err := s.callerSeq(ctx, name, stx, 1)
	if err == nil {
		if _, err = stx.ExecContext(ctx, `UPDATE ax_tasks SET seq = ? WHERE id = ?`, seq, t.ID); err != nil {
			err = s.wrap(name, err)
		}
	}
	if err != nil {
		if _, uerr := stx.ExecContext(context.WithoutCancel(ctx), `ROLLBACK TO SAVEPOINT ax_move`); uerr != nil {
			return nil, fmt.Errorf("%w; and the move could not be undone (%v): roll the transaction back", err, uerr)
		}
		return nil, err
	}
	return t, nil
}

// Trigger is Trigger in the view's transaction. A limited name's task, made due, gets
// its sequence number reserved as MakeDue's does, its hold taken in the transaction
// once the row is locked.
func (v *txView) Trigger(ctx context.Context, id int64, executionID string) (*store.Task, error) {
	if executionID == "" || !validText(executionID, maxExecID) {
		return nil, fmt.Errorf("ax: mysql: trigger task %d: empty or over-long execution id: %w", id, store.ErrInvalid)
	}
	if err := v.s.check("trigger"); err != nil {
		return nil, err
	}
	reserve := func() (int64, error) { return v.s.seqIn(ctx, v.tx, 1) }
	t, sentinel, holder, err := v.s.triggerIn(ctx, v.tx, id, executionID, reserve)
	if err != nil {
		return nil, v.s.wrap("trigger", err)
	}
	return triggered(id, t, sentinel, holder)
}

// PauseSchedule is PauseSchedule in the view's transaction.
func (v *txView) PauseSchedule(ctx context.Context, name string) (*store.Schedule, error) {
	return v.schedule(ctx, "pause schedule", name, func() (*store.Schedule, error) {
		return v.s.pauseIn(ctx, v.tx, name)
	})
}

// ResumeSchedule is ResumeSchedule in the view's transaction.
func (v *txView) ResumeSchedule(ctx context.Context, name string, next time.Time) (*store.Schedule, error) {
	if next.IsZero() || !inRange(next) {
		return nil, fmt.Errorf("ax: mysql: resume schedule %q: next fire time %v zero or outside years 1000-9999: %w", name, next, store.ErrInvalid)
	}
	return v.schedule(ctx, "resume schedule", name, func() (*store.Schedule, error) {
		return v.s.resumeIn(ctx, v.tx, name, next)
	})
}

// schedule runs change, a change of schedule name, in the view's transaction.
func (v *txView) schedule(ctx context.Context, op, name string, change func() (*store.Schedule, error)) (*store.Schedule, error) {
	if err := v.s.check(op); err != nil {
		return nil, err
	}
	sc, err := change()
	switch {
	case err != nil:
		return nil, v.s.wrap(op, err)
	case sc == nil:
		return nil, fmt.Errorf("ax: mysql: %s %q: %w", op, name, store.ErrNotFound)
	}
	return sc, nil
}

// Audit is Audit in the view's transaction: the record is kept if and only if the
// transaction commits.
func (v *txView) Audit(ctx context.Context, rec store.AuditRecord) (*store.AuditRecord, error) {
	if err := driverkit.CheckAudit(rec); err != nil {
		return nil, fmt.Errorf("ax: mysql: %w", err)
	}
	if err := v.s.check("audit"); err != nil {
		return nil, err
	}
	if err := v.s.auditIn(ctx, v.tx, &rec); err != nil {
		return nil, v.s.wrap("audit", err)
	}
	return &rec, nil
}

// Complete finishes the execution ref as a success in the view's transaction (see
// store.Tx).
func (v *txView) Complete(ctx context.Context, ref store.ExecRef) (bool, error) {
	const op = "complete"
	if err := v.s.check(op); err != nil {
		return false, err
	}
	res, err := v.tx.ExecContext(ctx, `UPDATE ax_tasks SET status = 'SUCCEEDED', finished_at = UTC_TIMESTAMP(6), updated_at = UTC_TIMESTAMP(6)
		WHERE id = ? AND namespace = ? AND status = 'RUNNING' AND execution_id = ?`, ref.TaskID, v.s.ns, ref.ExecutionID)
	if err != nil {
		return false, v.s.wrap(op, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return false, v.s.wrap(op, err)
	}
	if _, err := v.tx.ExecContext(ctx, `UPDATE ax_executions SET status = 'SUCCEEDED', error = '', finished_at = UTC_TIMESTAMP(6) WHERE id = ?`,
		ref.ExecutionID); err != nil {
		return false, v.s.wrap(op, err)
	}
	return true, nil
}
