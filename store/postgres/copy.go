package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Bulk inserts. An Insert of at least copyThreshold tasks does not bind them as arrays
// (insertSQL, a chunk of store.MaxBatch per statement) but streams them with COPY into
// a temporary staging table of the session, then moves them into ax_tasks with one
// INSERT … SELECT … ON CONFLICT DO NOTHING that returns the rows inserted and, as
// insertSQL does, those that were there already: the uniqueness of (namespace, name,
// key) and the per-row store.ErrDuplicate are the same on both paths. The whole is one
// transaction:
//
//	BEGIN; CREATE TEMP TABLE IF NOT EXISTS ax_insert_stage (…) ON COMMIT DELETE ROWS
//	COPY pg_temp.ax_insert_stage FROM STDIN (binary)
//	publishSQL; insertStagedSQL; COMMIT
//
// The staging table lives as long as the pooled connection and is emptied at each
// commit; it is never WAL-logged. Creating it needs the TEMPORARY privilege on the
// database (PUBLIC has it by default); a role without it gets the arrays, for every
// Insert of the store from the first refusal on. The rows keep the (name, key) order of the
// insertion (the ord column), so that concurrent inserts take the unique index's
// locks in one order.

// copyThreshold is the smallest Insert that goes through COPY: measured, COPY was
// slower than the arrays at 1,000 tasks, even at 2,000 and 1.2 times as fast at 5,000
// (BENCHMARKS.md, "Bulk submits on PostgreSQL").
const copyThreshold = 5000

const createStageSQL = `CREATE TEMP TABLE IF NOT EXISTS ax_insert_stage (
	name text, key text, payload bytea, due_at timestamptz, max_retry bigint,
	owner_service text, timeout_us bigint, backoff_us text, task_key text, overlap text, ord bigint
) ON COMMIT DELETE ROWS`

var stageTable = pgx.Identifier{"pg_temp", "ax_insert_stage"}

var stageCols = []string{"name", "key", "payload", "due_at", "max_retry", "owner_service", "timeout_us",
	"backoff_us", "task_key", "overlap", "ord"}

// insertStagedSQL moves the staged tasks into namespace $1, as insertSQL does a chunk.
var insertStagedSQL = insertFromSQL(`SELECT * FROM pg_temp.ax_insert_stage`, "$1")

// insertCopy runs one attempt of a bulk insertion (see above) on a connection of its
// own: three round trips, BEGIN and the table's creation pipelined, COPY, then the
// move and COMMIT pipelined.
func (s *Store) insertCopy(ctx context.Context, in *insertion) error {
	in.reset()
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer pc.Release()
	conn := pc.Conn()
	committed := false
	defer func() {
		if !committed { // best effort: pgxpool discards a connection left in a transaction
			conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	b := &pgx.Batch{}
	b.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED`)    // as every other write (send)
	b.Queue(`SET LOCAL client_min_messages = warning`) // no NOTICE that the table exists
	b.Queue(createStageSQL)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	rows := make([][]any, len(in.order))
	for k, i := range in.order {
		nt := in.tasks[i]
		rows[k] = []any{nt.Name, nt.Key, payloadArg(nt.Payload), nt.DueAt, int64(nt.MaxRetry), nt.OwnerService,
			nt.Timeout.Microseconds(), formatBackoff(nt.Backoff), nt.TaskKey, string(nt.Overlap), int64(k)}
	}
	if _, err := conn.CopyFrom(ctx, stageTable, stageCols, pgx.CopyFromRows(rows)); err != nil {
		return err
	}
	b = &pgx.Batch{}
	b.Queue(publishSQL, s.lockKey, s.channel)
	b.Queue(insertStagedSQL, in.ns)
	b.Queue(`COMMIT`)
	br := conn.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return err
	}
	res, err := br.Query()
	if err != nil {
		return err
	}
	err = in.collect(in.order, res)
	res.Close()
	if err != nil {
		return err
	}
	if _, err := br.Exec(); err != nil {
		return err
	}
	committed = true
	return br.Close()
}

// noTempPrivilege reports an error of a role that may not create temporary tables
// (REVOKE TEMPORARY ON DATABASE …): bulk inserts then bind arrays, as smaller ones do.
func noTempPrivilege(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42501" // insufficient_privilege
}
