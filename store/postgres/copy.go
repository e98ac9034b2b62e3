package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// Bulk inserts. An Insert of at least copyThreshold tasks, no two with one (name, key),
// is first tried as a COPY straight into ax_tasks, with the ids and creation time
// drawn beforehand in the same transaction:
//
//	BEGIN; [search_path, behind a pooler;] publishSQL
//	SELECT clock_timestamp(), <n values of ax_seq>
//	COPY ax_tasks (id, …, seq, created_at, updated_at) FROM STDIN (FORMAT binary)
//	COMMIT
//
// The rows are encoded by the store (copywire.go). Each task's value of ax_seq is both
// its id and its refill stamp: since schema v9 the ids come from ax_seq too (the
// column's default), so one value drawn after publishSQL is a fresh id and a stamp
// above the published bound (see DESIGN.md, "The refill cursor"). Drawing two values a
// task, one from each of two sequences, made bulk inserts of 1,000 about 6 % slower.
//
// COPY writes the rows a page at a time and without the speculative insertion of ON
// CONFLICT, which cost more than half again the insert itself (100,000 rows: 1.34 s
// with ON CONFLICT DO NOTHING, 0.84 s without, 0.77 s by COPY). It cannot skip a
// duplicate: a task whose (namespace, name, key) exists fails the COPY with a unique
// violation (logged by the server as an error), the transaction is rolled back, and
// the Insert binds arrays with ON CONFLICT instead (insertSQL), which gives each
// duplicate its store.ErrDuplicate. So a bulk insert of new tasks costs one COPY and
// one with duplicates costs the COPY tried in vain as well. The rows are copied in the
// (name, key) order of the insertion, so that concurrent inserts take the unique
// index's locks in one order. A COPY needs no privilege that other inserts do not:
// INSERT on ax_tasks and USAGE on ax_seq.

// copyThreshold is the smallest Insert that tries COPY. Measured against the arrays
// (BenchmarkBulkInsert, medians of 3; BENCHMARKS.md): at 200 tasks a call the two
// were even (37,564 against 36,993 tasks/s), at 1,000 COPY was 1.13 times as fast,
// at 2,000 1.34 and at 5,000 1.38 times.
const copyThreshold = 1000

// copyStampsSQL draws, for $1 tasks, the creation time and the values of ax_seq that
// are their ids and refill stamps.
const copyStampsSQL = `SELECT clock_timestamp(), array(SELECT nextval('ax_seq') FROM generate_series(1, $1::int))`

// errCopyConflict: a copied task's (namespace, name, key) exists; nothing was written.
var errCopyConflict = errors.New("a task of the copy exists already")

// copyable reports whether an insertion may go through COPY: no two of its tasks
// share a (name, key), which only ON CONFLICT can resolve.
func (in *insertion) copyable() bool {
	for k := 1; k < len(in.order); k++ {
		a, b := in.tasks[in.order[k-1]], in.tasks[in.order[k]]
		if a.Name == b.Name && a.Key == b.Key {
			return false
		}
	}
	return true
}

// insertCopy runs one attempt of a bulk insertion (see above) on a connection of its
// own: three round trips (BEGIN and the stamps pipelined, COPY, COMMIT). It returns
// errCopyConflict, having written nothing, if a task exists already.
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
	var (
		now time.Time
		ids []int64
	)
	b := &pgx.Batch{}
	b.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED`) // as every other write (send)
	if s.pool.setPath != "" {
		b.Queue(s.pool.setPath) // behind a pooler: the COPY below runs in this transaction
	}
	b.Queue(publishInsertSQL, s.lockKey, s.channel, s.marked)
	b.Queue(copyStampsSQL, len(in.order)).QueryRow(func(row pgx.Row) error { return row.Scan(&now, &ids) })
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	if len(ids) != len(in.order) {
		return errors.New("the database drew too few ids")
	}
	tag, err := conn.PgConn().CopyFrom(ctx, newCopyReader(in, ids, now), copySQL)
	if err != nil {
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "ax_tasks_name_key" {
			return errCopyConflict // unique_violation of the business key
		}
		return err
	}
	if tag.RowsAffected() != int64(len(in.order)) { // rolled back by the deferred ROLLBACK
		return fmt.Errorf("the COPY wrote %d rows of %d", tag.RowsAffected(), len(in.order))
	}
	if err := s.commit(ctx, conn.PgConn(), func(ctx context.Context) error {
		_, err := conn.Exec(ctx, `COMMIT`)
		return err
	}); err != nil {
		return err
	}
	committed = true
	now = now.UTC()
	for k, i := range in.order {
		in.out[i] = store.Inserted{Task: driverkit.Stored(&in.tasks[i], ids[k], now, now)}
	}
	return nil
}
