package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/store"
)

// This file holds the store's side of store.Transactor: Bind, which binds a caller's
// transaction, InTx, which binds one of the store's own, and txView, the store.Tx
// both return. Each method of txView runs the statements of its store method in the
// bound transaction, through the method's In variant in the method's file: insertIn
// in insert.go, getIn in read.go, cancelIn and the other transitions in operate.go,
// pauseScheduleIn and resumeScheduleIn in schedules.go, auditIn in audit.go.

// Bind returns the view of the store inside tx, the caller's transaction: a pgx.Tx, or
// a *sql.Tx opened through the pgx stdlib driver (stdlib.OpenDBFromPool,
// sql.Open("pgx", …)) on the store's database, with the store's schema first on its
// search_path (see store.Transactor). What the view writes, the wake-up signal
// included, becomes visible when tx commits; the view neither commits nor rolls back.
// Another kind of tx, or one on another database or schema, is store.ErrInvalid,
// found once, here, by a read that leaves the transaction usable. On another error of
// the view's, the caller should roll tx back: the statement that failed has aborted
// it.
//
// Behind a pooler (WithPooler) Bind first puts the store's schema at the head of
// tx's search_path, unless it is tx's current schema already, for the rest of tx
// (set_config(…, true)): the caller's own statements that follow in tx then find
// the store's tables before any of the same name in its other schemas.
func (s *Store) Bind(ctx context.Context, tx any) (store.Tx, error) {
	const op = "bind"
	if err := s.check(op); err != nil {
		return nil, err
	}
	var q txQuerier
	switch tx := tx.(type) {
	case pgx.Tx:
		if tx == nil {
			return nil, fmt.Errorf("ax: postgres: %s: nil pgx.Tx: %w", op, store.ErrInvalid)
		}
		q = pgxQuerier{tx}
	case *sql.Tx:
		if tx == nil {
			return nil, fmt.Errorf("ax: postgres: %s: nil *sql.Tx: %w", op, store.ErrInvalid)
		}
		q = sqlQuerier{tx}
	default:
		return nil, fmt.Errorf("ax: postgres: %s: a %T is neither a pgx.Tx nor a *sql.Tx: %w", op, tx, store.ErrInvalid)
	}
	if s.pool.setPath != "" {
		// Behind a pooler the store's statements name no schema and its pool sets
		// none: put the store's first on the transaction's search_path.
		if err := q.exec(ctx, prependPathSQL, pgx.Identifier{s.schema}.Sanitize(), s.schema); err != nil {
			return nil, s.wrap(op, err)
		}
	}
	var db, schema string
	if err := q.query(ctx, `SELECT current_database(), COALESCE(current_schema(), '')`, nil, func(rows txRows) error {
		if !rows.Next() {
			return errors.New("no row")
		}
		return rows.Scan(&db, &schema)
	}); err != nil {
		return nil, s.wrap(op, err)
	}
	if db != s.database || schema != s.schema {
		return nil, fmt.Errorf("ax: postgres: %s: the transaction is on database %q, schema %q; the store's are %q, %q: %w",
			op, db, schema, s.database, s.schema, store.ErrInvalid)
	}
	return &txView{s: s, q: q, raw: tx}, nil
}

// prependPathSQL puts the schema $2 (quoted as an identifier: $1) first on the
// transaction's search_path, for the rest of the transaction, unless it is the
// current schema already.
const prependPathSQL = `SELECT set_config('search_path',
		CASE current_setting('search_path') WHEN '' THEN $1::text ELSE $1::text || ', ' || current_setting('search_path') END, true)
	WHERE current_schema() IS DISTINCT FROM $2::text`

// InTx runs fn in a READ COMMITTED transaction of the store's own, a pgx.Tx bound as
// Bind binds the caller's (the view's Raw), and commits it if fn returns nil (see
// store.Transactor). It is not retried: fn runs once. At most half the pool's
// connections are in such transactions at once (a call waits for its turn), so that
// what fn reads outside its transaction always finds a connection; a pool of one
// connection is ErrInvalid. The commit is not cancelled with ctx: as every commit of
// the store's, it is waited for until the grace past ctx's deadline (WithCommitGrace).
func (s *Store) InTx(ctx context.Context, fn func(tx store.Tx) error) error {
	if err := s.check("transaction"); err != nil {
		return err
	}
	if n := s.pool.Config().MaxConns; n < 2 {
		return fmt.Errorf("ax: postgres: transaction: the pool has %d connection; what runs in a transaction may read through another: %w", n, store.ErrInvalid)
	}
	select {
	case s.inTx <- struct{}{}:
		defer func() { <-s.inTx }()
	case <-ctx.Done():
		return s.wrap("begin", ctx.Err())
	}
	tx, end, err := s.begin(ctx)
	if err != nil {
		return s.wrap("begin", err)
	}
	defer end() // rolls back after an error or a panic in fn
	if err := fn(&txView{s: s, q: pgxQuerier{tx}, raw: tx}); err != nil {
		return err
	}
	if err := s.commitTx(ctx, tx); err != nil {
		return s.wrap("commit", err)
	}
	return nil
}

// txView is the store.Tx of Bind and InTx: the store s inside one transaction, q,
// checked to be on the store's database and schema when it was the caller's. Each
// method checks only that the store is open, then runs its statements in q.
type txView struct {
	s   *Store
	q   txQuerier
	raw any // the transaction as Bind was given it, or InTx's pgx.Tx
}

var _ store.Tx = (*txView)(nil)

// Raw returns the bound transaction: a pgx.Tx, or the caller's *sql.Tx.
func (v *txView) Raw() any { return v.raw }

// Insert is Insert in the transaction: the same statements, the announcing lock and
// the wake-up signal included, taking effect when it commits.
func (v *txView) Insert(ctx context.Context, tasks []store.NewTask) ([]store.Inserted, error) {
	if err := v.s.check("insert in transaction"); err != nil {
		return nil, err
	}
	return v.s.insertIn(ctx, v.q, tasks)
}

// Cancel is Cancel in the transaction.
func (v *txView) Cancel(ctx context.Context, name, key, by string) (*store.Task, error) {
	if err := v.s.check("cancel in transaction"); err != nil {
		return nil, err
	}
	return v.s.cancelIn(ctx, v.q, name, key, by)
}

// Reschedule is Reschedule in the transaction, published as Insert's rows are.
func (v *txView) Reschedule(ctx context.Context, name, key string, at time.Time) (*store.Task, error) {
	if err := v.s.check("reschedule in transaction"); err != nil {
		return nil, err
	}
	return v.s.rescheduleIn(ctx, v.q, name, key, at)
}

// Retry is Retry in the transaction, published as Insert's rows are.
func (v *txView) Retry(ctx context.Context, id int64) (*store.Task, error) {
	if err := v.s.check("retry in transaction"); err != nil {
		return nil, err
	}
	return v.s.retryIn(ctx, v.q, id)
}

// Trigger is Trigger in the transaction: the same statements, the keyed task's under
// its key's lock, which the transaction holds until it ends.
func (v *txView) Trigger(ctx context.Context, id int64, executionID string) (*store.Task, error) {
	if err := v.s.check("trigger in transaction"); err != nil {
		return nil, err
	}
	return v.s.triggerIn(ctx, v.q, id, executionID)
}

// MakeDue is MakeDue in the transaction, published as Insert's rows are.
func (v *txView) MakeDue(ctx context.Context, id int64) (*store.Task, error) {
	if err := v.s.check("make due in transaction"); err != nil {
		return nil, err
	}
	return v.s.makeDueIn(ctx, v.q, "make due in transaction", id)
}

// Get is Get in the transaction: the task as it sees it.
func (v *txView) Get(ctx context.Context, id int64) (*store.Task, error) {
	if err := v.s.check("get task in transaction"); err != nil {
		return nil, err
	}
	return v.s.getIn(ctx, v.q, id)
}

// PauseSchedule is PauseSchedule in the transaction.
func (v *txView) PauseSchedule(ctx context.Context, name string) (*store.Schedule, error) {
	if err := v.s.check("pause schedule in transaction"); err != nil {
		return nil, err
	}
	return v.s.pauseScheduleIn(ctx, v.q, name)
}

// ResumeSchedule is ResumeSchedule in the transaction.
func (v *txView) ResumeSchedule(ctx context.Context, name string, next time.Time) (*store.Schedule, error) {
	if err := v.s.check("resume schedule in transaction"); err != nil {
		return nil, err
	}
	return v.s.resumeScheduleIn(ctx, v.q, name, next)
}

// Audit is Audit in the transaction: the record is kept if, and only if, it commits.
func (v *txView) Audit(ctx context.Context, rec store.AuditRecord) (*store.AuditRecord, error) {
	if err := v.s.check("audit in transaction"); err != nil {
		return nil, err
	}
	return v.s.auditIn(ctx, v.q, rec)
}

// Complete finishes the execution ref as a success in the transaction (see
// store.Tx). The execution's record is left RUNNING and reads as SUCCEEDED, as
// Finish leaves a success's (see execCols).
func (v *txView) Complete(ctx context.Context, ref store.ExecRef) (bool, error) {
	const op = "complete in transaction"
	if err := v.s.check(op); err != nil {
		return false, err
	}
	n, err := v.q.count(ctx, `UPDATE ax_tasks t SET status = 'SUCCEEDED', finished_at = clock_timestamp(), updated_at = clock_timestamp()
		WHERE t.id = $1 AND t.namespace = $3 AND t.status = 'RUNNING' AND t.execution_id = $2`, ref.TaskID, ref.ExecutionID, v.s.ns)
	if err != nil {
		return false, v.s.wrap(op, err)
	}
	return n == 1, nil
}
