package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
)

// publishSQL is run by every transaction before it stamps rows SCHEDULED: it draws a
// sequence value g and holds a shared advisory lock (lockKey, g mod 2^31) until the
// transaction ends, announcing "my stamps are all greater than g" to Refill (see
// DESIGN.md, "The refill cursor"). It also queues the wake-up signal, delivered at
// commit.
const publishSQL = `SELECT pg_advisory_xact_lock_shared($1::int4, (nextval('ax_seq') & 2147483647)::int4), pg_notify($2, '')`

// publishInsertSQL is publishSQL for Insert, whose signal's payload is $3: the
// view's mark, or empty (see Marked).
const publishInsertSQL = `SELECT pg_advisory_xact_lock_shared($1::int4, (nextval('ax_seq') & 2147483647)::int4), pg_notify($2, $3::text)`

// insertFromSQL is the insert statement over the rows of c, a query of the columns
// name, key, payload, due_at, max_retry, owner_service, timeout_us, backoff_us (text,
// as formatBackoff writes it), task_key, overlap, key_hold, key_until, trace and ord: it inserts
// them into namespace ns (a placeholder) in ord order — sorted by (name, key), so that
// concurrent inserts take the unique index's locks in one order — and returns, of
// each row it wrote, what the database chose: id and created_at (= updated_at), with
// name and key to match it to its input; the rest of the task is its input
// (driverkit.Stored). A row it did not write is a duplicate, read afterwards
// (insertion.resolve): reading the existing rows in the statement itself, through a
// LATERAL probe per row not written, made every insert return every column, and cost
// the rows that were written more than the rare duplicate.
//
// onConflict is what a row does whose key is held: nothing (insertQuietSQL), or
// (insertSQL) when the holder no longer holds it, raise keyFreed — ax_key_freed, in
// the SET of an ON CONFLICT DO UPDATE whose WHERE is store.KeyHold.Frees — which
// aborts the transaction, and Insert runs again with releaseSQL first. That costs the
// rows written nothing. A DO UPDATE locks every row it conflicts with, even where its
// WHERE is false, until the transaction ends — Insert's is one pipelined round trip —
// and cannot meet one key twice in a statement: insertion.args leaves a second copy
// of a key out of the chunk, a duplicate of the first.
func insertFromSQL(c, ns, onConflict string) string {
	return `WITH ts AS (SELECT clock_timestamp() AS now),
c AS (` + c + `)
INSERT INTO ax_tasks AS t (namespace, name, key, payload, status, due_at, max_retry, owner_service, timeout_us, backoff_us,
		task_key, overlap, key_hold, key_until, trace, seq, created_at, updated_at)
	SELECT ` + ns + `, c.name, c.key, c.payload, 'SCHEDULED', c.due_at, c.max_retry, c.owner_service, c.timeout_us, c.backoff_us::bigint[],
		c.task_key, c.overlap, COALESCE(c.key_hold, ''), c.key_until, NULLIF(c.trace, ''), nextval('ax_seq'), ts.now, ts.now
	FROM c, ts ORDER BY c.ord
	ON CONFLICT (namespace, name, key, key_slot) ` + onConflict + `
	RETURNING t.id, t.name, t.key, t.created_at`
}

// keyFreeSQL is store.KeyHold.Frees over the columns of t, a task holding its key:
// one CASE, which no index serves (see releaseSQL).
const keyFreeSQL = `CASE WHEN t.key_slot <> 0 OR t.key_hold = 'forever' OR t.key_until > clock_timestamp() THEN false
	WHEN t.status = 'FAILED' THEN t.key_hold = 'active'
	ELSE t.status IN ('SUCCEEDED', 'CANCELLED', 'SKIPPED') END`

// keyFreed is the SQLSTATE ax_key_freed raises.
const keyFreed = "AXK01"

// keyWasFreed reports the error of an insert that met a key held by a task that no
// longer holds it (insertFromSQL).
func keyWasFreed(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == keyFreed
}

// insertArrays is the rows of one chunk of tasks, bound as arrays; the traces, $14,
// come after the namespace, $13.
const insertArrays = `SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[], $4::timestamptz[], $5::bigint[], $6::text[],
		$7::bigint[], $8::text[], $9::text[], $10::text[], $11::text[], $12::timestamptz[], $14::text[])
	WITH ORDINALITY AS c(name, key, payload, due_at, max_retry, owner_service, timeout_us, backoff_us, task_key, overlap,
		key_hold, key_until, trace, ord)`

// insertSQL inserts one chunk of tasks into namespace $13, raising keyFreed on a key
// whose holder no longer holds it; insertQuietSQL, after releaseSQL, leaves such a
// key alone, a duplicate.
var (
	insertSQL      = insertFromSQL(insertArrays, "$13", `DO UPDATE SET key_slot = ax_key_freed(t.name, t.key) WHERE `+keyFreeSQL)
	insertQuietSQL = insertFromSQL(insertArrays, "$13", `DO NOTHING`)
)

// lookupManySQL reads the tasks of namespace $3 holding the given (name, key) pairs.
const lookupManySQL = `SELECT x.* FROM (SELECT DISTINCT * FROM unnest($1::text[], $2::text[]) AS c(name, key)) c
	CROSS JOIN LATERAL (SELECT ` + taskCols + ` FROM ax_tasks t
		WHERE t.namespace = $3 AND t.name = c.name AND t.key = c.key AND t.key_slot = 0 LIMIT 1) x`

// releaseSQL moves the tasks holding the business keys ($1, $2) of namespace $3 off
// them where they no longer hold them (store.KeyHold.Frees): key_slot becomes the
// task's id, which marks it Superseded and leaves slot 0 to the insert that follows in
// the transaction. It runs before the inserts of a Tx's Insert, and of an Insert whose
// first attempt found such a key (insertFromSQL); for a key no task has, a probe of
// ax_tasks_name_key that finds nothing. The holders are found by a LATERAL probe per
// key, its LIMIT keeping the planner from flattening it into a join, so that each
// probe's index condition names the whole key whatever the statistics (joined
// freely, the generic plan read the namespace's whole index for every insert), and
// updated by id = ANY, the primary key. The condition on the updated row — which
// PostgreSQL checks again on its latest version when it had to wait for its lock —
// is one CASE, which no index serves: as plain terms, a generic plan cached on a small
// table scanned ax_tasks_name_key for key_slot = 0 (ax_tasks_finished for the
// statuses) instead of the primary key (TestExecutionPathPlansOnStaleStatistics).
const releaseSQL = `UPDATE ax_tasks t SET key_slot = t.id
	WHERE t.id = ANY (ARRAY(SELECT h.id FROM unnest($1::text[], $2::text[]) AS c(name, key)
			CROSS JOIN LATERAL (SELECT h.id FROM ax_tasks h
				WHERE h.namespace = $3 AND h.name = c.name AND h.key = c.key AND h.key_slot = 0 LIMIT 1) h))
		AND ` + keyFreeSQL

type nameKey struct{ name, key string }

// insertion is one Insert call, the store's or a Tx's: the tasks in (name, key) order,
// split in chunks of at most store.MaxBatch, and the results in input order.
type insertion struct {
	ns      string // the namespace the tasks are stamped with
	tasks   []store.NewTask
	order   []int // input indexes sorted by (name, key), stable
	out     []store.Inserted
	missing []int // inputs not written: duplicates, whose existing rows resolve reads
	release bool  // run releaseSQL before the inserts (insertQuietSQL); else insertSQL
}

// maxTaskKey bounds a task key (and so a schedule name, the task key of its
// occurrences), in bytes: it is a column of the ax_tasks_key_held index, whose
// entries PostgreSQL limits to about 2.7 kB.
const maxTaskKey = 500

// checkTaskKey rejects a task key that is too long or not UTF-8.
func checkTaskKey(taskKey string) error {
	if len(taskKey) > maxTaskKey || !utf8.ValidString(taskKey) {
		return fmt.Errorf("task key longer than %d bytes or not UTF-8: %w", maxTaskKey, store.ErrInvalid)
	}
	return nil
}

func newInsertion(op, ns string, tasks []store.NewTask) (*insertion, error) {
	for i, nt := range tasks {
		if err := driverkit.CheckNewTask(nt); err != nil {
			return nil, fmt.Errorf("ax: postgres: %s: task %d: %w", op, i, err)
		}
		if err := checkTaskKey(nt.TaskKey); err != nil {
			return nil, fmt.Errorf("ax: postgres: %s: task %d: %w", op, i, err)
		}
		if nt.MaxRetry < math.MinInt32 || nt.MaxRetry > math.MaxInt32 { // the column is an integer
			return nil, fmt.Errorf("ax: postgres: %s: task %d: max retry %d does not fit an integer column: %w", op, i, nt.MaxRetry, store.ErrInvalid)
		}
	}
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
	return &insertion{ns: ns, tasks: tasks, order: order, out: make([]store.Inserted, len(tasks))}, nil
}

func (in *insertion) reset() {
	clear(in.out)
	in.missing = in.missing[:0]
}

// dueArg is a due time as it is bound: truncated to the microsecond, as driverkit.Stored
// keeps it, whichever way pgx sends it (binary truncates, the simple protocol's text
// would be rounded by the server).
func dueArg(t time.Time) time.Time { return t.Truncate(time.Microsecond) }

// payloadArg is a payload as it is bound: an empty one stays empty, not NULL.
func payloadArg(p []byte) []byte {
	if p != nil && len(p) == 0 {
		return []byte{}
	}
	return p
}

// args returns the arguments of the insert of part, less any second copy of a key
// (sorted: the one after its first), which the statement cannot meet twice.
func (in *insertion) args(part []int) []any {
	part = slices.CompactFunc(slices.Clone(part), func(a, b int) bool {
		return in.tasks[a].Name == in.tasks[b].Name && in.tasks[a].Key == in.tasks[b].Key
	})
	names, keys, payloads := make([]string, len(part)), make([]string, len(part)), make([][]byte, len(part))
	dues, owners, backoffs := make([]time.Time, len(part)), make([]string, len(part)), make([]string, len(part))
	retries, timeouts := make([]int64, len(part)), make([]int64, len(part))
	taskKeys, overlaps := make([]string, len(part)), make([]string, len(part))
	// The key holds, windows and traces are NULL arrays when every task has the
	// default: unnest() pads them with NULLs, which the statement reads as the defaults.
	var holds, traces []string
	var untils []*time.Time
	for k, i := range part {
		nt := in.tasks[i]
		names[k], keys[k], payloads[k], dues[k] = nt.Name, nt.Key, payloadArg(nt.Payload), dueArg(nt.DueAt)
		retries[k], owners[k], timeouts[k], backoffs[k] = int64(nt.MaxRetry), nt.OwnerService, nt.Timeout.Microseconds(), formatBackoff(nt.Backoff)
		taskKeys[k], overlaps[k] = nt.TaskKey, string(nt.Overlap)
		if nt.KeyHold != store.HoldLive {
			if holds == nil {
				holds = make([]string, len(part))
			}
			holds[k] = string(nt.KeyHold)
		}
		if !nt.KeyUntil.IsZero() {
			if untils == nil {
				untils = make([]*time.Time, len(part))
			}
			until := dueArg(nt.KeyUntil)
			untils[k] = &until
		}
		if nt.Trace != "" {
			if traces == nil {
				traces = make([]string, len(part))
			}
			traces[k] = nt.Trace
		}
	}
	return []any{names, keys, payloads, dues, retries, owners, timeouts, backoffs, taskKeys, overlaps, holds, untils, in.ns, traces}
}

// insertSQL is the insert statement of in (see insertFromSQL).
func (in *insertion) insertSQL() string {
	if in.release {
		return insertQuietSQL
	}
	return insertSQL
}

// releaseArgs are releaseSQL's arguments: every key of the insertion, sorted.
func (in *insertion) releaseArgs() []any {
	names, keys := make([]string, len(in.order)), make([]string, len(in.order))
	for k, i := range in.order {
		names[k], keys[k] = in.tasks[i].Name, in.tasks[i].Key
	}
	return []any{names, keys, in.ns}
}

// queue adds the insertion's statements to a transaction's batch: the announcing
// lock and wake-up signal (publishSQL), with in.release the release of the keys
// given up (releaseSQL), then one insertSQL per chunk.
func (in *insertion) queue(b *pgx.Batch, s *Store) {
	b.Queue(publishInsertSQL, s.lockKey, s.channel, s.marked)
	if in.release {
		b.Queue(releaseSQL, in.releaseArgs()...)
	}
	chunks(in.order, func(part []int) { b.Queue(in.insertSQL(), in.args(part)...) })
}

// read consumes the results of the statements queue added.
func (in *insertion) read(br pgx.BatchResults) error {
	in.reset()
	if _, err := br.Exec(); err != nil {
		return err
	}
	if in.release {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	var err error
	chunks(in.order, func(part []int) {
		if err != nil {
			return
		}
		rows, qerr := br.Query()
		if qerr != nil {
			err = qerr
			return
		}
		err = in.collect(part, rows)
		rows.Close()
	})
	return err
}

// resolveOnPool reads the missing duplicates (see resolve) through the pool, once
// the insertion's transaction has committed.
func (in *insertion) resolveOnPool(ctx context.Context, s *Store) error {
	return in.resolve(func(names, keys []string) ([]*store.Task, error) {
		return s.queryTasks(ctx, lookupManySQL, names, keys, in.ns)
	})
}

// collect reads the rows of one chunk statement: its inputs written are built
// from the input and what the row returned (driverkit.Stored); the others are
// duplicates, of a row that existed before or of an earlier copy in the call, read
// by resolve.
func (in *insertion) collect(part []int, rows interface {
	Next() bool
	scanner
	Err() error
}) error {
	type written struct {
		id      int64
		created time.Time
	}
	inserted := map[nameKey]written{}
	for rows.Next() {
		var (
			k nameKey
			w written
		)
		if err := rows.Scan(&w.id, &k.name, &k.key, &w.created); err != nil {
			return err
		}
		inserted[k] = w
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, i := range part {
		k := nameKey{in.tasks[i].Name, in.tasks[i].Key}
		w, ok := inserted[k]
		if !ok {
			in.missing = append(in.missing, i)
			continue
		}
		delete(inserted, k) // a second copy in this call is a duplicate of the first
		created := w.created.UTC()
		in.out[i] = store.Inserted{Task: driverkit.Stored(&in.tasks[i], w.id, created, created)}
	}
	return nil
}

// resolve reads the existing rows of the missing duplicates through query.
func (in *insertion) resolve(query func(names, keys []string) ([]*store.Task, error)) error {
	if len(in.missing) == 0 {
		return nil
	}
	var names, keys []string
	for _, i := range in.missing {
		names, keys = append(names, in.tasks[i].Name), append(keys, in.tasks[i].Key)
	}
	found, err := query(names, keys)
	if err != nil {
		return err
	}
	byKey := map[nameKey]*store.Task{}
	for _, t := range found {
		byKey[nameKey{t.Name, t.Key}] = t
	}
	for _, i := range in.missing {
		t := byKey[nameKey{in.tasks[i].Name, in.tasks[i].Key}]
		if t == nil {
			return fmt.Errorf("task %q/%q conflicted but cannot be read", in.tasks[i].Name, in.tasks[i].Key)
		}
		c := *t
		in.out[i] = store.Inserted{Task: &c, Err: store.ErrDuplicate}
	}
	return nil
}

// Insert writes new SCHEDULED tasks of the view's namespace in one transaction (see
// store.Store).
func (s *Store) Insert(ctx context.Context, tasks []store.NewTask) ([]store.Inserted, error) {
	in, err := newInsertion("insert", s.ns, tasks)
	if err != nil {
		return nil, err
	}
	if len(tasks) == 0 {
		if err := s.check("insert"); err != nil {
			return nil, err
		}
		return []store.Inserted{}, nil
	}
	copied := false
	if len(tasks) >= s.copyThreshold && in.copyable() {
		err = s.retry(ctx, "insert", func() error { return s.insertCopy(ctx, in) })
		copied = err == nil
		if errors.Is(err, errCopyConflict) { // a duplicate: the arrays, with ON CONFLICT
			err = nil
		}
		if err != nil {
			return nil, err
		}
	}
	if !copied {
		err := s.genericTx(ctx, "insert", func(b *pgx.Batch) { in.queue(b, s) }, in.read)
		if keyWasFreed(err) { // nothing was written: again, moving such holders off their keys first
			in.release = true
			err = s.genericTx(ctx, "insert", func(b *pgx.Batch) { in.queue(b, s) }, in.read)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := in.resolveOnPool(ctx, s); err != nil {
		return nil, s.wrap("insert", err)
	}
	return in.out, nil
}

// insertIn is Insert's statements in q, into the view's namespace: the announcing
// lock and the wake-up signal first, then releaseSQL and the inserts (insertQuietSQL),
// and the duplicates read in q.
func (s *Store) insertIn(ctx context.Context, q txQuerier, tasks []store.NewTask) ([]store.Inserted, error) {
	in, err := newInsertion("insert in transaction", s.ns, tasks)
	if err != nil {
		return nil, err
	}
	in.release = true // insertSQL's error would abort the bound transaction
	if len(tasks) == 0 {
		return []store.Inserted{}, nil
	}
	if err := q.exec(ctx, publishSQL, s.lockKey, s.channel); err != nil {
		return nil, s.wrap("insert in transaction", err)
	}
	if err := q.exec(ctx, releaseSQL, in.releaseArgs()...); err != nil {
		return nil, s.wrap("insert in transaction", err)
	}
	chunks(in.order, func(part []int) {
		if err == nil {
			err = q.query(ctx, in.insertSQL(), in.args(part), func(rows txRows) error { return in.collect(part, rows) })
		}
	})
	if err == nil {
		err = in.resolve(func(names, keys []string) ([]*store.Task, error) {
			var out []*store.Task
			err := q.query(ctx, lookupManySQL, []any{names, keys, in.ns}, func(rows txRows) error {
				for rows.Next() {
					t, err := scanTask(rows)
					if err != nil {
						return err
					}
					out = append(out, t)
				}
				return rows.Err()
			})
			return out, err
		})
	}
	if err != nil {
		return nil, s.wrap("insert in transaction", err)
	}
	return in.out, nil
}
