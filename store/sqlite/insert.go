package sqlite

import (
	"context"
	"database/sql"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
)

// Insert writes new SCHEDULED tasks into the view's namespace, in one transaction (see
// store.Store). The business key is unique per namespace.
func (s *Store) Insert(ctx context.Context, tasks []store.NewTask) ([]store.Inserted, error) {
	if err := validNew("insert", tasks); err != nil {
		return nil, err
	}
	out := make([]store.Inserted, len(tasks))
	err := s.write(ctx, "insert", func(tx *sql.Tx) error { return s.insert(ctx, tx, s.batch, tasks, out) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// insert writes tasks in tx and fills out, one result per task. run is s.batch on
// the store's writer, s.batchText in a transaction of the caller's.
//
// A task whose key is taken by a task that no longer holds it (store.KeyHold) is
// written by a second statement, after releaseSQL has moved the old task off the key;
// a task whose key is held is a duplicate of the holder.
func (s *Store) insert(ctx context.Context, tx *sql.Tx, run batchFunc, tasks []store.NewTask, out []store.Inserted) error {
	seq, err := nextSeq(ctx, tx, len(tasks))
	if err != nil {
		return err
	}
	ts := micros(now())
	write := func(rows []int) (missing []int, err error) {
		args := make([]any, 0, insertStmt.cols*len(rows))
		for _, i := range rows {
			nt := tasks[i]
			var until any
			if !nt.KeyUntil.IsZero() {
				until = micros(nt.KeyUntil)
			}
			args = append(args, nt.Name, nt.Key, nt.Payload != nil && len(nt.Payload) == 0, nt.Payload, micros(nt.DueAt),
				nt.MaxRetry, nt.OwnerService, nt.Timeout.Microseconds(), driverkit.FormatBackoff(nt.Backoff), seq+int64(i),
				nt.TaskKey, string(nt.Overlap), string(nt.KeyHold), until, traceArg(nt.Trace))
		}
		// Each row written answers with its id and sequence number, seq+i for input i:
		// the task is the input as stored, read back from no row.
		res, err := run(ctx, tx, insertStmt, []any{ts, ts, s.ns}, args, nil)
		if err != nil {
			return nil, err
		}
		ids := make(map[int]int64, len(rows))
		for res.Next() {
			var id, n int64
			if err := res.Scan(&id, &n); err != nil {
				res.Close()
				return nil, err
			}
			ids[int(n-seq)] = id
		}
		res.Close()
		if err := res.Err(); err != nil {
			return nil, err
		}
		for _, i := range rows {
			if id, ok := ids[i]; ok {
				out[i].Task = driverkit.Stored(&tasks[i], id, fromMicros(ts), fromMicros(ts))
			} else {
				missing = append(missing, i)
			}
		}
		return missing, nil
	}
	return chunks(len(tasks), func(lo, hi int) error {
		rows := make([]int, 0, hi-lo)
		for i := lo; i < hi; i++ {
			rows = append(rows, i)
		}
		missing, err := write(rows)
		if err != nil || len(missing) == 0 {
			return err
		}
		var freed, held []int
		for _, i := range missing {
			res, err := tx.ExecContext(ctx, releaseSQL, ts, s.ns, tasks[i].Name, tasks[i].Key)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n > 0 {
				freed = append(freed, i)
			} else {
				held = append(held, i)
			}
		}
		if len(freed) > 0 {
			again, err := write(freed) // what is still missing: a second copy of a freed key
			if err != nil {
				return err
			}
			held = append(held, again...)
		}
		for _, i := range held {
			t, err := scanTask(tx.QueryRowContext(ctx, holderOfKeySQL, s.ns, tasks[i].Name, tasks[i].Key))
			if err != nil {
				return err
			}
			out[i] = store.Inserted{Task: t, Err: store.ErrDuplicate}
		}
		return nil
	})
}

// keyFreeSQL is store.KeyHold.Frees over a task's columns, with ? the time now.
const keyFreeSQL = `key_hold <> 'forever' AND (key_until IS NULL OR key_until <= ?)
	AND (status IN ('SUCCEEDED', 'CANCELLED', 'SKIPPED') OR status = 'FAILED' AND key_hold = 'active')`

// releaseSQL moves the task holding a business key off it, if it no longer holds it
// at the given time: its key_slot becomes its id, which makes it Superseded and
// leaves slot 0 to the insert that follows.
const releaseSQL = `UPDATE ax_tasks SET key_slot = id WHERE ` + keyFreeSQL + `
	AND namespace = ? AND name = ? AND key = ? AND key_slot = 0`
