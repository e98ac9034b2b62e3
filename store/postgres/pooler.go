package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// conns is the store's pool as its statements reach it. Without a pooler (setPath
// empty) every method is the pool's own. Behind a pooler in transaction mode
// (WithPooler) no session state outlives a transaction, so each transaction sets
// search_path for itself: BeginTx in its BEGIN, Query, QueryRow and Exec by sending
// setPath and the statement in one pipelined batch, which the server runs as one
// implicit transaction. SendBatch and Acquire are the pool's: their transactions
// set it themselves (the plans statement of send, copy.go).
type conns struct {
	pool *pgxpool.Pool
	// setPath is the statement that sets search_path to the store's schema for the
	// current transaction; "" when the store is not behind a pooler.
	setPath string
}

// setPathSQL is the statement that sets search_path to schema for the current
// transaction only. The schema is a literal, quoted as pgx quotes its own: with
// standard_conforming_strings on, and a schema without a backslash (WithPooler).
func setPathSQL(schema string) string {
	return `SELECT set_config('search_path', ` + quoteLiteral(pgx.Identifier{schema}.Sanitize()) + `, true)`
}

func quoteLiteral(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }

// Config is the pool's configuration.
func (c *conns) Config() *pgxpool.Config { return c.pool.Config() }

// Reset closes every connection of the pool, those in use once released: the next
// ones are opened anew.
func (c *conns) Reset() { c.pool.Reset() }

// Close closes the pool.
func (c *conns) Close() { c.pool.Close() }

// Acquire takes a connection of the pool's: behind a pooler, what runs on it must set
// search_path in each of its transactions.
func (c *conns) Acquire(ctx context.Context) (*pgxpool.Conn, error) { return c.pool.Acquire(ctx) }

// SendBatch sends b as it is: behind a pooler, b must set search_path itself.
func (c *conns) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return c.pool.SendBatch(ctx, b)
}

// BeginTx begins a transaction: behind a pooler, with search_path set in the same
// round trip (BEGIN and setPath sent as one simple query), ignoring opts.BeginQuery.
func (c *conns) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	return c.pool.BeginTx(ctx, c.txOptions(opts))
}

// txOptions is opts with, behind a pooler, search_path set in the same round trip as
// the BEGIN (see BeginTx).
func (c *conns) txOptions(opts pgx.TxOptions) pgx.TxOptions {
	if c.setPath != "" {
		opts.BeginQuery = beginSQL(opts) + "; " + c.setPath
	}
	return opts
}

// Begin is BeginTx with the server's default options.
func (c *conns) Begin(ctx context.Context) (pgx.Tx, error) { return c.BeginTx(ctx, pgx.TxOptions{}) }

// beginSQL is the BEGIN statement of opts (without a BeginQuery).
func beginSQL(opts pgx.TxOptions) string {
	s := "BEGIN"
	if opts.IsoLevel != "" {
		s += " ISOLATION LEVEL " + string(opts.IsoLevel)
	}
	if opts.AccessMode != "" {
		s += " " + string(opts.AccessMode)
	}
	if opts.DeferrableMode != "" {
		s += " " + string(opts.DeferrableMode)
	}
	return s
}

// Query runs sql: behind a pooler, after setPath in one implicit transaction.
func (c *conns) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if c.setPath == "" {
		return c.pool.Query(ctx, sql, args...)
	}
	br := c.pathBatch(ctx, sql, args)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		if rows != nil {
			rows.Close()
		}
		br.Close()
		return nil, err
	}
	return &pathRows{Rows: rows, br: br}, nil
}

// QueryRow is Query of one row, with pgx's QueryRow's errors: pgx.ErrNoRows when
// there is none.
func (c *conns) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if c.setPath == "" {
		return c.pool.QueryRow(ctx, sql, args...)
	}
	rows, err := c.Query(ctx, sql, args...)
	return pathRow{rows: rows, err: err}
}

// Exec runs sql: behind a pooler, after setPath in one implicit transaction.
func (c *conns) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if c.setPath == "" {
		return c.pool.Exec(ctx, sql, args...)
	}
	br := c.pathBatch(ctx, sql, args)
	_, err := br.Exec()
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// pathBatch sends setPath and sql as one pipelined batch.
func (c *conns) pathBatch(ctx context.Context, sql string, args []any) pgx.BatchResults {
	b := &pgx.Batch{}
	b.Queue(c.setPath)
	b.Queue(sql, args...)
	return c.pool.SendBatch(ctx, b)
}

// pathRows are the rows of a statement that Query sent after setPath: closing them
// closes the batch, which ends its implicit transaction and releases the connection.
type pathRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error // of closing br
}

func (r *pathRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.err, r.br = r.br.Close(), nil
	}
}

func (r *pathRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

func (r *pathRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *pathRows) Scan(dest ...any) error {
	if err := r.Rows.Scan(dest...); err != nil {
		r.Close()
		return err
	}
	return nil
}

// pathRow is the row of QueryRow behind a pooler.
type pathRow struct {
	rows pgx.Rows
	err  error
}

func (r pathRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}
