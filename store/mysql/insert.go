package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
)

// maxChunkBytes bounds the payload bytes of one multi-row INSERT, well under the
// servers' default max_allowed_packet (16 MiB on MariaDB, 64 MiB on MySQL 8).
const maxChunkBytes = 4 << 20

// Insert writes new SCHEDULED tasks in one transaction (see store.Store).
func (s *Store) Insert(ctx context.Context, tasks []store.NewTask) ([]store.Inserted, error) {
	if err := s.check("insert"); err != nil {
		return nil, err
	}
	if err := validateNew("insert", tasks); err != nil {
		return nil, err
	}
	if len(tasks) == 0 {
		return []store.Inserted{}, nil
	}
	var out []store.Inserted
	err := s.run(ctx, "insert", len(tasks), func(tx *sql.Tx, seq int64) error {
		var err error
		out, err = insert(ctx, tx, s.ns, tasks, seq, s.returning)
		return err
	})
	return out, err
}

// insert writes tasks into namespace ns in chunks (at most store.MaxBatch rows and
// maxChunkBytes of payload), ordered by (name, key) so that concurrent inserts lock the
// unique index (namespace, name, key) in one order. Task i gets sequence number seq+i; reading the rows back, a row that
// carries input i's number was written by input i, any other is a duplicate. With
// returning (MariaDB), the INSERT itself returns what the database set on the rows it
// wrote (INSERT … RETURNING), and only duplicates are read back; MySQL has no
// RETURNING, and reads every chunk's keys back after its INSERT.
//
// It does not use INSERT … ON DUPLICATE KEY UPDATE: on MariaDB 10.11 a multi-row one
// racing with an insert of the same key can skip its other rows without an error or a
// warning (reproduced at about one in a thousand races). Nor INSERT IGNORE, which turns
// other errors into warnings. A plain multi-row INSERT is tried first; on a duplicate
// key (error 1062, which rolls back only the statement) the existing keys are read
// with a locking read, which sees the latest committed rows whatever the isolation
// level, and the rest is inserted again.
func insert(ctx context.Context, tx *sql.Tx, ns string, tasks []store.NewTask, seq int64, returning bool) ([]store.Inserted, error) {
	order := make([]int, len(tasks))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := cmp.Compare(tasks[a].Name, tasks[b].Name); c != 0 {
			return c
		}
		return cmp.Compare(tasks[a].Key, tasks[b].Key)
	})
	firstOf := make(map[[2]string]bool, len(tasks))
	out := make([]store.Inserted, len(tasks))
	for lo := 0; lo < len(order); {
		hi, size := lo, 0
		for hi < len(order) && hi-lo < store.MaxBatch && (hi == lo || size+len(tasks[order[hi]].Payload) <= maxChunkBytes) {
			size += len(tasks[order[hi]].Payload)
			hi++
		}
		part := order[lo:hi]
		lo = hi
		var fresh []int // first occurrences of their key in this call
		for _, i := range part {
			k := [2]string{tasks[i].Name, tasks[i].Key}
			if !firstOf[k] {
				firstOf[k] = true
				fresh = append(fresh, i)
			}
		}
		var written map[[2]string]writtenRow
		for try := 1; len(fresh) > 0; try++ {
			w, err := insertRows(ctx, tx, ns, tasks, fresh, seq, returning)
			var me *mysql.MySQLError
			if err == nil {
				written = w
				break
			}
			if !errors.As(err, &me) || me.Number != 1062 || try == maxAttempts {
				return nil, err
			}
			// A key taken by a task that no longer holds it is freed, and the rows
			// inserted again; else the holders are read and left out.
			released, err := release(ctx, tx, ns, tasks, fresh)
			if err != nil {
				return nil, err
			}
			if released {
				continue
			}
			existing, err := readByKey(ctx, tx, ns, tasks, fresh, true)
			if err != nil {
				return nil, err
			}
			fresh = slices.DeleteFunc(fresh, func(i int) bool {
				_, ok := existing[[2]string{tasks[i].Name, tasks[i].Key}]
				return ok
			})
		}
		// The rows written carry their input's sequence number: their tasks are built
		// from the input and the few columns the database set. Only the others —
		// duplicates — are read whole.
		if !returning {
			var err error
			if written, err = readWritten(ctx, tx, ns, tasks, part); err != nil {
				return nil, err
			}
		}
		var others []int
		for _, i := range part {
			if w, ok := written[[2]string{tasks[i].Name, tasks[i].Key}]; ok && w.seq == seq+int64(i) {
				out[i].Task = driverkit.Stored(&tasks[i], w.id, w.created, w.updated)
				continue
			}
			others = append(others, i)
		}
		if len(others) == 0 {
			continue
		}
		byKey, err := readByKey(ctx, tx, ns, tasks, others, false)
		if err != nil {
			return nil, err
		}
		var missing []int // duplicates committed after a REPEATABLE READ snapshot
		for _, i := range others {
			if _, ok := byKey[[2]string{tasks[i].Name, tasks[i].Key}]; !ok {
				missing = append(missing, i)
			}
		}
		if len(missing) > 0 {
			more, err := readByKey(ctx, tx, ns, tasks, missing, true)
			if err != nil {
				return nil, err
			}
			maps.Copy(byKey, more)
		}
		for _, i := range others {
			r, ok := byKey[[2]string{tasks[i].Name, tasks[i].Key}]
			if !ok {
				return nil, fmt.Errorf("task %q/%q not found after insert", tasks[i].Name, tasks[i].Key)
			}
			t := clone(r.t)
			if r.seq == seq+int64(i) {
				out[i] = store.Inserted{Task: t}
			} else {
				out[i] = store.Inserted{Task: t, Err: store.ErrDuplicate}
			}
		}
	}
	return out, nil
}

// keyFreeSQL is store.KeyHold.Frees over a task's columns, now.
const keyFreeSQL = `key_hold <> 'forever' AND (key_until IS NULL OR key_until <= UTC_TIMESTAMP(6))
	AND (status IN ('SUCCEEDED', 'CANCELLED', 'SKIPPED') OR status = 'FAILED' AND key_hold = 'active')`

// release moves the tasks holding the business keys of tasks[i], i in rows, off them
// where they no longer hold them (keyFreeSQL): key_slot becomes the task's id, which
// marks it Superseded and leaves slot 0 to a new task. It reports whether it released
// any. Only after a duplicate-key error: the failed insert holds a shared lock on the
// old row's index entry, so two inserts of one freed key racing can deadlock here,
// which retries the transaction (Insert) or ends the caller's (a Tx's Insert).
func release(ctx context.Context, tx *sql.Tx, ns string, tasks []store.NewTask, rows []int) (bool, error) {
	q, args := byKeys("UPDATE ax_tasks SET key_slot = id", ns, tasks, rows)
	res, err := tx.ExecContext(ctx, strings.Replace(q, " FROM ax_tasks WHERE ", " WHERE "+keyFreeSQL+" AND ", 1), args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// insertRows inserts tasks[i] for i in rows into namespace ns with one multi-row
// INSERT. With returning (MariaDB) it returns what the database set on each row, by
// business key, as readWritten reads it: a statement and 200 index lookups fewer a
// chunk.
func insertRows(ctx context.Context, tx *sql.Tx, ns string, tasks []store.NewTask, rows []int, seq int64, returning bool) (map[[2]string]writtenRow, error) {
	var q strings.Builder
	q.WriteString("INSERT INTO ax_tasks (namespace, name, `key`, payload, status, due_at, max_retry, owner_service, last_error, " +
		"timeout_us, backoff, seq, task_key, overlap, key_hold, key_until, trace, created_at, updated_at) VALUES ")
	args := make([]any, 0, 15*len(rows))
	nsArg := any(ns) // boxed once, not once per row
	for k, i := range rows {
		if k > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?,?,?,?,'SCHEDULED',?,?,?,'',?,?,?,?,?,?,?,?,UTC_TIMESTAMP(6),UTC_TIMESTAMP(6))")
		nt := tasks[i]
		var until any
		if !nt.KeyUntil.IsZero() {
			until = dt(nt.KeyUntil)
		}
		args = append(args, nsArg, nt.Name, nt.Key, nullPayload(nt.Payload), dt(nt.DueAt), nt.MaxRetry, nt.OwnerService,
			nt.Timeout.Microseconds(), driverkit.FormatBackoff(nt.Backoff), seq+int64(i), nt.TaskKey, string(nt.Overlap),
			string(nt.KeyHold), until, nullString(nt.Trace))
	}
	if !returning {
		_, err := tx.ExecContext(ctx, q.String(), args...)
		return nil, err
	}
	q.WriteString(" RETURNING " + writtenCols)
	r, err := tx.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return nil, err
	}
	return scanWritten(r, len(rows))
}

type keyedRow struct {
	t   *store.Task
	seq int64
}

// byKeys returns the query selecting cols from the tasks of namespace ns with the
// business keys of tasks[i], i in rows, and its arguments. A row-constructor IN list,
// a range on ax_tasks_name_key (TestExplain): 1.12 times the bulk-insert rate of the
// equivalent OR list; chunks of 500 or 1,000 rows measured no faster (BENCHMARKS.md,
// "Bulk submits").
func byKeys(cols, ns string, tasks []store.NewTask, rows []int) (string, []any) {
	var q strings.Builder
	q.WriteString(cols + " FROM ax_tasks WHERE namespace = ? AND key_slot = 0 AND (name, `key`) IN (")
	args := make([]any, 0, 1+2*len(rows))
	args = append(args, ns)
	for k, i := range rows {
		if k > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?)")
		args = append(args, tasks[i].Name, tasks[i].Key)
	}
	q.WriteByte(')')
	return q.String(), args
}

// writtenRow is what readWritten reads of a row: what the database set on insert.
type writtenRow struct {
	id, seq          int64
	created, updated time.Time
}

// readWritten reads the id, sequence number and stamps of the tasks of namespace ns
// with the business keys of tasks[i], i in rows, with a plain read.
func readWritten(ctx context.Context, tx *sql.Tx, ns string, tasks []store.NewTask, rows []int) (map[[2]string]writtenRow, error) {
	q, args := byKeys("SELECT "+writtenCols, ns, tasks, rows)
	r, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return scanWritten(r, len(rows))
}

// writtenCols are the columns scanWritten reads.
const writtenCols = "id, name, `key`, seq, created_at, updated_at"

// scanWritten reads rows of writtenCols by business key, and closes r.
func scanWritten(r *sql.Rows, n int) (map[[2]string]writtenRow, error) {
	defer r.Close()
	out := make(map[[2]string]writtenRow, n)
	for r.Next() {
		var w writtenRow
		var k [2]string
		if err := r.Scan(&w.id, &k[0], &k[1], &w.seq, dbTime{&w.created}, dbTime{&w.updated}); err != nil {
			return nil, err
		}
		out[k] = w
	}
	return out, r.Err()
}

// readByKey reads the tasks of namespace ns with the business keys of tasks[i], i in rows. A locking
// read (LOCK IN SHARE MODE: MariaDB has no FOR SHARE) sees the latest committed rows
// even inside a caller's REPEATABLE READ transaction, but there it also locks gaps, so
// it is used only where a plain read may miss a row.
func readByKey(ctx context.Context, tx *sql.Tx, ns string, tasks []store.NewTask, rows []int, locking bool) (map[[2]string]keyedRow, error) {
	q, args := byKeys("SELECT "+taskColumns+", seq", ns, tasks, rows)
	if locking {
		q += " LOCK IN SHARE MODE"
	}
	r, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	byKey := make(map[[2]string]keyedRow, len(rows))
	for r.Next() {
		var kr keyedRow
		if kr.t, err = scanTask(r, &kr.seq); err != nil {
			return nil, err
		}
		byKey[[2]string{kr.t.Name, kr.t.Key}] = kr
	}
	return byKey, r.Err()
}

func clone(t *store.Task) *store.Task {
	c := *t
	if t.Payload != nil {
		c.Payload = append([]byte{}, t.Payload...)
	}
	c.Backoff = slices.Clone(t.Backoff)
	return &c
}
