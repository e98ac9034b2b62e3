package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// This file holds the store's writes inside a transaction (store.Transactor): Bind
// binds a caller's *sql.Tx on the store's file, InTx an IMMEDIATE transaction of the
// store's own, and both return a txView, whose methods run the bodies the store's own
// methods run (insert, cancelIn, triggerIn, …) in that transaction. SQLite has one
// writer: while such a transaction is open, every other write waits for it.

var _ store.Transactor = (*Store)(nil)

// mainFileSQL reads the file of a connection's main database.
const mainFileSQL = `SELECT file FROM pragma_database_list WHERE name = 'main'`

// Bind returns the store's writes inside tx, a transaction of the caller's: a *sql.Tx
// on a database/sql handle of the store's file (sql.Open("sqlite", path) with
// modernc.org/sqlite), which the view neither commits nor rolls back (see
// store.Transactor). What it writes exists if, and only if, the caller commits. A tx
// of another kind, or on another file, is store.ErrInvalid, found by one read that
// changes nothing. SQLite has one writer at a time: once the caller's transaction
// writes, the scheduler's own writes wait for it (up to the busy timeout, 10s), so
// keep such transactions short.
func (s *Store) Bind(ctx context.Context, tx any) (store.Tx, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("ax: sqlite: bind: %w", store.ErrClosed)
	}
	stx, ok := tx.(*sql.Tx)
	if !ok || stx == nil {
		return nil, fmt.Errorf("ax: sqlite: bind: %T is not a *sql.Tx: %w", tx, store.ErrInvalid)
	}
	var file string
	if err := stx.QueryRowContext(ctx, mainFileSQL).Scan(&file); err != nil {
		return nil, s.wrap("bind", err)
	}
	if file != s.file {
		return nil, fmt.Errorf("ax: sqlite: bind: the transaction is on %q, the store on %q: %w", file, s.file, store.ErrInvalid)
	}
	// Another *sql.DB than the writer: the statements prepared on the writer do not
	// apply to it, so the batches go as text.
	return &txView{s: s, tx: stx, batch: s.batchText}, nil
}

// InTx runs fn in an IMMEDIATE transaction on the store's writer connection and
// commits it if fn returns nil (see store.Transactor). It is not retried.
func (s *Store) InTx(ctx context.Context, fn func(tx store.Tx) error) error {
	var ferr error
	err := s.write(ctx, "transaction", func(tx *sql.Tx) error {
		ferr = fn(&txView{s: s, tx: tx, batch: s.batch})
		return ferr
	})
	if ferr != nil {
		return ferr // fn's own, not wrapped again
	}
	return err
}

// txView is the store inside one transaction (store.Tx): a caller's that Bind checked,
// or the store's own in InTx.
type txView struct {
	s     *Store
	tx    *sql.Tx
	batch batchFunc // s.batch on the writer's own transaction, s.batchText on a caller's
}

var _ store.Tx = (*txView)(nil)

// Raw returns the bound *sql.Tx.
func (v *txView) Raw() any { return v.tx }

// open refuses a call after the store's Close, as every method of the store does.
func (v *txView) open(op string) error {
	if v.s.closed.Load() {
		return fmt.Errorf("ax: sqlite: %s: %w", op, store.ErrClosed)
	}
	return nil
}

// Insert is the store's Insert, into the view's namespace, in the transaction.
func (v *txView) Insert(ctx context.Context, tasks []store.NewTask) ([]store.Inserted, error) {
	const op = "insert in transaction"
	if err := validNew(op, tasks); err != nil {
		return nil, err
	}
	if err := v.open(op); err != nil {
		return nil, err
	}
	out := make([]store.Inserted, len(tasks))
	if err := v.s.insert(ctx, v.tx, v.batch, tasks, out); err != nil {
		return nil, v.s.wrap(op, err)
	}
	return out, nil
}

// Get is the store's Get in the transaction: the task with the transaction's own
// changes.
func (v *txView) Get(ctx context.Context, id int64) (*store.Task, error) {
	if err := v.open("get task"); err != nil {
		return nil, err
	}
	return v.s.get(ctx, v.tx, id)
}

// Cancel is the store's Cancel in the transaction.
func (v *txView) Cancel(ctx context.Context, name, key, by string) (*store.Task, error) {
	const op = "cancel in transaction"
	if err := driverkit.CheckCancelledBy(by); err != nil {
		return nil, fmt.Errorf("ax: sqlite: cancel %q/%q: %w", name, key, err)
	}
	if err := v.open(op); err != nil {
		return nil, err
	}
	t, sentinel, err := v.s.cancelIn(ctx, v.tx, name, key, by)
	if err != nil {
		return nil, v.s.wrap(op, err)
	}
	return cancelled(name, key, t, sentinel)
}

// Reschedule is the store's Reschedule in the transaction.
func (v *txView) Reschedule(ctx context.Context, name, key string, at time.Time) (*store.Task, error) {
	op := fmt.Sprintf("ax: sqlite: reschedule %q/%q", name, key)
	if at.IsZero() {
		return nil, fmt.Errorf("%s: zero due time: %w", op, store.ErrInvalid)
	}
	return v.moveBack(ctx, "reschedule in transaction", op, func(tx *sql.Tx, seq int64) (*store.Task, error, error) {
		return v.s.rescheduleIn(ctx, tx, seq, name, key, at)
	})
}

// Retry is the store's Retry in the transaction.
func (v *txView) Retry(ctx context.Context, id int64) (*store.Task, error) {
	return v.moveBack(ctx, "retry in transaction", fmt.Sprintf("ax: sqlite: retry task %d", id),
		func(tx *sql.Tx, seq int64) (*store.Task, error, error) { return v.s.retryIn(ctx, tx, seq, id) })
}

// MakeDue is the store's MakeDue in the transaction: no scheduler can claim the task
// before the commit.
func (v *txView) MakeDue(ctx context.Context, id int64) (*store.Task, error) {
	return v.moveBack(ctx, "make due in transaction", fmt.Sprintf("ax: sqlite: make task %d due", id),
		func(tx *sql.Tx, seq int64) (*store.Task, error, error) { return v.s.makeDueIn(ctx, tx, seq, id) })
}

// moveBack is the store's moveBack in the transaction.
func (v *txView) moveBack(ctx context.Context, name, op string, move func(tx *sql.Tx, seq int64) (t *store.Task, refusal, err error)) (*store.Task, error) {
	if err := v.open(name); err != nil {
		return nil, err
	}
	seq, err := nextSeq(ctx, v.tx, 1)
	if err != nil {
		return nil, v.s.wrap(name, err)
	}
	t, sentinel, err := move(v.tx, seq)
	if err != nil {
		return nil, v.s.wrap(name, err)
	}
	if sentinel != nil {
		return driverkit.Refusal(op, t, sentinel)
	}
	return t, nil
}

// Trigger is the store's Trigger in the transaction.
func (v *txView) Trigger(ctx context.Context, id int64, executionID string) (*store.Task, error) {
	const op = "trigger in transaction"
	if executionID == "" {
		return nil, fmt.Errorf("ax: sqlite: trigger task %d: empty execution id: %w", id, store.ErrInvalid)
	}
	if err := v.open(op); err != nil {
		return nil, err
	}
	t, sentinel, holder, err := v.s.triggerIn(ctx, v.tx, id, executionID)
	if err != nil {
		return nil, v.s.wrap(op, err)
	}
	return triggered(id, t, sentinel, holder)
}

// PauseSchedule is the store's PauseSchedule in the transaction.
func (v *txView) PauseSchedule(ctx context.Context, name string) (*store.Schedule, error) {
	return v.schedule(ctx, "pause schedule", name, func(tx *sql.Tx) (*store.Schedule, error) {
		return v.s.pauseIn(ctx, tx, name)
	})
}

// ResumeSchedule is the store's ResumeSchedule in the transaction.
func (v *txView) ResumeSchedule(ctx context.Context, name string, next time.Time) (*store.Schedule, error) {
	if next.IsZero() {
		return nil, fmt.Errorf("ax: sqlite: resume schedule %q: zero next fire time: %w", name, store.ErrInvalid)
	}
	return v.schedule(ctx, "resume schedule", name, func(tx *sql.Tx) (*store.Schedule, error) {
		return v.s.resumeIn(ctx, tx, name, next)
	})
}

// schedule runs change, a change of schedule name, in the transaction.
func (v *txView) schedule(ctx context.Context, op, name string, change func(tx *sql.Tx) (*store.Schedule, error)) (*store.Schedule, error) {
	if err := v.open(op + " in transaction"); err != nil {
		return nil, err
	}
	sc, err := change(v.tx)
	switch {
	case err != nil:
		return nil, v.s.wrap(op+" in transaction", err)
	case sc == nil:
		return nil, fmt.Errorf("ax: sqlite: %s %q: %w", op, name, store.ErrNotFound)
	}
	return sc, nil
}

// Audit is the store's Audit in the transaction: the record is kept if, and only if,
// the transaction commits.
func (v *txView) Audit(ctx context.Context, rec store.AuditRecord) (*store.AuditRecord, error) {
	const op = "audit in transaction"
	if err := driverkit.CheckAudit(rec); err != nil {
		return nil, fmt.Errorf("ax: sqlite: %w", err)
	}
	if err := v.open(op); err != nil {
		return nil, err
	}
	if err := v.s.auditIn(ctx, v.tx, &rec); err != nil {
		return nil, v.s.wrap(op, err)
	}
	return &rec, nil
}

// Complete finishes the execution ref as a success in the transaction (see
// store.Tx).
func (v *txView) Complete(ctx context.Context, ref store.ExecRef) (bool, error) {
	const op = "complete in transaction"
	if err := v.open(op); err != nil {
		return false, err
	}
	ts := micros(now())
	res, err := v.tx.ExecContext(ctx, `UPDATE ax_tasks SET status = 'SUCCEEDED', finished_at = ?, updated_at = ?
		WHERE id = ? AND +namespace = ? AND status = 'RUNNING' AND execution_id = ?`, ts, ts, ref.TaskID, v.s.ns, ref.ExecutionID)
	if err != nil {
		return false, v.s.wrap(op, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return false, v.s.wrap(op, err)
	}
	if _, err := v.tx.ExecContext(ctx, `UPDATE ax_executions SET status = 'SUCCEEDED', error = '', finished_at = ? WHERE id = ?`,
		ts, ref.ExecutionID); err != nil {
		return false, v.s.wrap(op, err)
	}
	return true, nil
}
