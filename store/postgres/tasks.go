package postgres

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/store"
)

// txRows is what both pgx.Rows and *sql.Rows offer.
type txRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// txQuerier runs statements in a bound transaction of either kind.
type txQuerier interface {
	exec(ctx context.Context, sql string, args ...any) error
	count(ctx context.Context, sql string, args ...any) (int64, error) // exec, and the rows it changed
	query(ctx context.Context, sql string, args []any, read func(txRows) error) error
}

type pgxQuerier struct{ tx pgx.Tx }

func (q pgxQuerier) exec(ctx context.Context, sql string, args ...any) error {
	_, err := q.tx.Exec(ctx, sql, args...)
	return err
}

func (q pgxQuerier) count(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.tx.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (q pgxQuerier) query(ctx context.Context, sql string, args []any, read func(txRows) error) error {
	rows, err := q.tx.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if err := read(rows); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

type sqlQuerier struct{ tx *sql.Tx }

func (q sqlQuerier) exec(ctx context.Context, sql string, args ...any) error {
	_, err := q.tx.ExecContext(ctx, sql, args...)
	return err
}

func (q sqlQuerier) count(ctx context.Context, sql string, args ...any) (int64, error) {
	res, err := q.tx.ExecContext(ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q sqlQuerier) query(ctx context.Context, sql string, args []any, read func(txRows) error) error {
	rows, err := q.tx.QueryContext(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if err := read(rows); err != nil {
		return err
	}
	if err := rows.Close(); err != nil {
		return err
	}
	return rows.Err()
}

// queryTasks runs a query of taskCols on the pool.
func (s *Store) queryTasks(ctx context.Context, sql string, args ...any) ([]*store.Task, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// getSQL reads one task of namespace $2 by id.
const getSQL = `SELECT ` + taskCols + ` FROM ax_tasks t WHERE t.id = $1 AND t.namespace || '' = $2`

// lookupSQL reads the newest task of namespace $3 with a business key: the one
// holding it, if any, for every other gave it up to a newer one. The newest is found
// as max(id + 0) over the key's entries of ax_tasks_name_key: an ORDER BY id DESC
// LIMIT 1, or a max(id), would let a plan cached on a small table read the primary
// key backwards instead, the whole table for a key it does not find.
const lookupSQL = `SELECT ` + taskCols + ` FROM ax_tasks t WHERE t.id = (SELECT max(h.id + 0) FROM ax_tasks h
	WHERE h.namespace = $3 AND h.name = $1 AND h.key = $2)`

// readTransition reads the results of a conditional UPDATE … RETURNING taskCols and
// of the fresh read of its row that follows it: the task moved, or else the task as
// it is now (nil when there is none).
func readTransition(br pgx.BatchResults) (t *store.Task, applied bool, err error) {
	t, err = scanTask(br.QueryRow())
	if err == nil {
		_, err = br.Exec() // the read: not needed
		return t, true, err
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, false, err
	}
	t, err = scanTask(br.QueryRow())
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	return t, false, err
}
