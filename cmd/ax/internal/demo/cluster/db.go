package cluster

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, as store/sqlite uses it

	"github.com/axsched/ax/cmd/ax/internal/demo"
)

// bizDB is the order service's own tables in the cluster scenario, kept in the
// scheduler's SQLite file so that every replica sees them: the orders, and a log of
// every handler execution (demo_runs), written in the transaction of the execution's
// business effect. The summary is computed from these tables and the scheduler's,
// not from what the replicas printed: a replica killed with kill -9 leaves its
// committed rows behind and nothing else.
//
//	demo_orders  (namespace, id) PRIMARY KEY, amount_cents, status (unpaid, paid,
//	             closed), reason, closed_by (the execution id that closed it),
//	             updated_us
//	demo_runs    id, namespace, name, key, task_id, execution_id, node, attempt,
//	             due_us, started_us, ended_us (NULL: the execution never returned —
//	             its process was killed), outcome, slow
//
// Each process opens one connection to the file whose transactions start IMMEDIATE,
// as the store's writer does: SQLite lets one writer at a time, across processes,
// and busy_timeout queues the others.
type bizDB struct {
	db *sql.DB
	ns string
}

// bizSchema creates the tables if the file lacks them.
const bizSchema = `
CREATE TABLE IF NOT EXISTS demo_orders (
	namespace    TEXT NOT NULL,
	id           TEXT NOT NULL,
	amount_cents INTEGER NOT NULL,
	status       TEXT NOT NULL,
	reason       TEXT NOT NULL DEFAULT '',
	closed_by    TEXT NOT NULL DEFAULT '',
	updated_us   INTEGER NOT NULL,
	PRIMARY KEY (namespace, id)
);
CREATE TABLE IF NOT EXISTS demo_runs (
	id           INTEGER PRIMARY KEY,
	namespace    TEXT NOT NULL,
	name         TEXT NOT NULL,
	key          TEXT NOT NULL,
	task_id      INTEGER NOT NULL,
	execution_id TEXT NOT NULL,
	node         TEXT NOT NULL,
	attempt      INTEGER NOT NULL,
	due_us       INTEGER NOT NULL,
	started_us   INTEGER NOT NULL,
	ended_us     INTEGER,
	outcome      TEXT NOT NULL DEFAULT '',
	slow         INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS demo_runs_ns_name_key ON demo_runs (namespace, name, key);
`

// bizPragmas are the store's connection settings (store/sqlite).
const bizPragmas = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"

// openBiz opens the business tables of namespace ns in the SQLite file at path.
// create makes the tables (the parent does, before any replica starts).
func openBiz(ctx context.Context, path, ns string, create bool) (*bizDB, error) {
	db, err := sql.Open("sqlite", "file:"+url.PathEscape(path)+"?"+bizPragmas)
	if err != nil {
		return nil, fmt.Errorf("open the order tables: %w", err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	b := &bizDB{db: db, ns: ns}
	if create {
		if _, err := db.ExecContext(ctx, bizSchema); err != nil {
			db.Close()
			return nil, fmt.Errorf("create the order tables: %w", err)
		}
	}
	return b, nil
}

func (b *bizDB) close() error { return b.db.Close() }

func us(t time.Time) int64 { return t.UnixMicro() }

func fromUS(v int64) time.Time { return time.UnixMicro(v) }

// insertOrder adds a new unpaid order.
func (b *bizDB) insertOrder(ctx context.Context, id string, amountCt int64) error {
	_, err := b.db.ExecContext(ctx, `INSERT INTO demo_orders (namespace, id, amount_cents, status, updated_us) VALUES (?, ?, ?, ?, ?)`,
		b.ns, id, amountCt, string(demo.Unpaid), us(time.Now()))
	if err != nil {
		return fmt.Errorf("insert order %s: %w", id, err)
	}
	return nil
}

// transition is UPDATE demo_orders SET status = to, reason = reason WHERE id = ? AND
// status = from; it reports whether it changed the row.
func (b *bizDB) transition(ctx context.Context, id string, from, to demo.OrderStatus, reason string) (bool, error) {
	res, err := b.db.ExecContext(ctx, `UPDATE demo_orders SET status = ?, reason = ?, updated_us = ? WHERE namespace = ? AND id = ? AND status = ?`,
		string(to), reason, us(time.Now()), b.ns, id, string(from))
	if err != nil {
		return false, fmt.Errorf("order %s: %s → %s: %w", id, from, to, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("order %s: %s → %s: %w", id, from, to, err)
	}
	return n == 1, nil
}

// bizOrder is one row of demo_orders.
type bizOrder struct {
	ID       string
	Status   demo.OrderStatus
	Reason   string
	ClosedBy string
}

// order reads one order.
func (b *bizDB) order(ctx context.Context, id string) (bizOrder, error) {
	o := bizOrder{ID: id}
	var status string
	err := b.db.QueryRowContext(ctx, `SELECT status, reason, closed_by FROM demo_orders WHERE namespace = ? AND id = ?`, b.ns, id).
		Scan(&status, &o.Reason, &o.ClosedBy)
	if err != nil {
		return o, fmt.Errorf("read order %s: %w", id, err)
	}
	o.Status = demo.OrderStatus(status)
	return o, nil
}

// orders reads every order of the namespace, by id.
func (b *bizDB) orders(ctx context.Context) (map[string]bizOrder, error) {
	rows, err := b.db.QueryContext(ctx, `SELECT id, status, reason, closed_by FROM demo_orders WHERE namespace = ?`, b.ns)
	if err != nil {
		return nil, fmt.Errorf("read the orders: %w", err)
	}
	defer rows.Close()
	out := map[string]bizOrder{}
	for rows.Next() {
		var o bizOrder
		var status string
		if err := rows.Scan(&o.ID, &status, &o.Reason, &o.ClosedBy); err != nil {
			return nil, fmt.Errorf("read the orders: %w", err)
		}
		o.Status = demo.OrderStatus(status)
		out[o.ID] = o
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the orders: %w", err)
	}
	return out, nil
}

// bizRun is one row of demo_runs: one handler execution.
type bizRun struct {
	ID           int64
	Name, Key    string
	TaskID       int64
	Exec, Node   string
	Attempt      int
	Due, Started time.Time
	Ended        time.Time // zero: it never returned (its process was killed)
	Outcome      string
	Slow         bool
	Late         time.Duration // Started − Due
}

// completed reports whether the execution returned with a business outcome (not a
// failure).
func (r bizRun) completed() bool {
	switch r.Outcome {
	case outClosed, outAlreadyPaid, outAlreadyClosed, outReconciled:
		return true
	}
	return false
}

// startRun records an execution as it starts and returns its row id.
func (b *bizDB) startRun(ctx context.Context, r bizRun) (int64, error) {
	res, err := b.db.ExecContext(ctx, `INSERT INTO demo_runs (namespace, name, key, task_id, execution_id, node, attempt, due_us, started_us, slow)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		b.ns, r.Name, r.Key, r.TaskID, r.Exec, r.Node, r.Attempt, us(r.Due), us(r.Started), r.Slow)
	if err != nil {
		return 0, fmt.Errorf("record the start of execution %s: %w", r.Exec, err)
	}
	return res.LastInsertId()
}

// endRun records how an execution ended.
func (b *bizDB) endRun(ctx context.Context, row int64, outcome string) error {
	return endRunIn(ctx, b.db, row, outcome)
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func endRunIn(ctx context.Context, x execer, row int64, outcome string) error {
	if _, err := x.ExecContext(ctx, `UPDATE demo_runs SET ended_us = ?, outcome = ? WHERE id = ?`, us(time.Now()), outcome, row); err != nil {
		return fmt.Errorf("record the end of run %d: %w", row, err)
	}
	return nil
}

// closeIfUnpaid is the close handler's business transaction: check, then change —
// read the order, close it with a conditional write if it is still unpaid
// (UPDATE demo_orders SET status='closed' … WHERE id=? AND status='unpaid'), and
// record the execution's outcome, all in one transaction: the effect and its record
// commit together or not at all.
func (b *bizDB) closeIfUnpaid(ctx context.Context, id, exec string, row int64) (outcome string, err error) {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("close order %s: %w", id, err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	var status string
	if err := tx.QueryRowContext(ctx, `SELECT status FROM demo_orders WHERE namespace = ? AND id = ?`, b.ns, id).Scan(&status); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return "", fmt.Errorf("close order %s: no such order", id)
		}
		return "", fmt.Errorf("close order %s: %w", id, err)
	}
	switch demo.OrderStatus(status) {
	case demo.Paid:
		outcome = outAlreadyPaid
	case demo.Closed:
		outcome = outAlreadyClosed
	default:
		res, err := tx.ExecContext(ctx, `UPDATE demo_orders SET status = ?, reason = 'timeout', closed_by = ?, updated_us = ?
			WHERE namespace = ? AND id = ? AND status = ?`, string(demo.Closed), exec, us(time.Now()), b.ns, id, string(demo.Unpaid))
		if err != nil {
			return "", fmt.Errorf("close order %s: %w", id, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return "", fmt.Errorf("close order %s: %w", id, err)
		}
		outcome = outClosed
		if n != 1 { // cannot happen inside the transaction; say so if it does
			outcome = outAlreadyClosed
		}
	}
	if err := endRunIn(ctx, tx, row, outcome); err != nil {
		return "", err
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("close order %s: %w", id, err)
	}
	return outcome, nil
}

// runs reads every execution of the namespace, in start order.
func (b *bizDB) runs(ctx context.Context) ([]bizRun, error) {
	rows, err := b.db.QueryContext(ctx, `SELECT id, name, key, task_id, execution_id, node, attempt, due_us, started_us, ended_us, outcome, slow
		FROM demo_runs WHERE namespace = ? ORDER BY started_us, id`, b.ns)
	if err != nil {
		return nil, fmt.Errorf("read the executions: %w", err)
	}
	defer rows.Close()
	var out []bizRun
	for rows.Next() {
		var (
			r            bizRun
			due, started int64
			ended        sql.NullInt64
		)
		if err := rows.Scan(&r.ID, &r.Name, &r.Key, &r.TaskID, &r.Exec, &r.Node, &r.Attempt, &due, &started, &ended, &r.Outcome, &r.Slow); err != nil {
			return nil, fmt.Errorf("read the executions: %w", err)
		}
		r.Due, r.Started = fromUS(due), fromUS(started)
		if ended.Valid {
			r.Ended = fromUS(ended.Int64)
		}
		r.Late = r.Started.Sub(r.Due)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the executions: %w", err)
	}
	return out, nil
}

// runsOf counts the executions of the task (name, key) recorded so far.
func (b *bizDB) runsOf(ctx context.Context, name, key string) (int, error) {
	var n int
	if err := b.db.QueryRowContext(ctx, `SELECT count(*) FROM demo_runs WHERE namespace = ? AND name = ? AND key = ?`, b.ns, name, key).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the executions of %s/%s: %w", name, key, err)
	}
	return n, nil
}
