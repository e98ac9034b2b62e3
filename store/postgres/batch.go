package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// The execution path — Claim, Start, Heartbeat, Finish, Requeue — runs for every
// task, so each chunk of up to store.MaxBatch rows is one statement over unnest()ed
// arrays, and all the chunks of a call go out in one pipelined transaction. Every
// statement first locks its candidate rows in ascending id order (a CTE
// SELECT … ORDER BY id FOR NO KEY UPDATE), so concurrent batches queue behind each
// other instead of deadlocking, and then applies the per-row CAS conditions; a row
// whose condition fails is not touched.

// Every statement reaches rows through the primary key only: l locks the given ids
// whatever their state, and the status conditions are written so that no partial
// index on status can serve them ("t.status || ''"). Otherwise, on a table without
// fresh statistics, the planner took the SCHEDULED due-time index for a claim and
// read the whole due backlog for every batch of 200 (a 50,000-task drain ran at
// 800 tasks/s instead of thousands).
//
// Each statement locks its candidate rows first, in the CTE l; the UPDATE refers to
// l only through the variable-free condition (SELECT count(*) FROM l) >= 0, which
// PostgreSQL evaluates once, as a one-time filter, before the UPDATE reads a row. So
// the locks are taken in id order before any row is written, and the UPDATE itself
// joins only the unnest()ed input (a nested loop over the primary key), never a CTE,
// whose row count the planner cannot estimate.

// claimSQL claims the due tasks of one chunk whose key does not restrict them (no
// key, or Overlap allow) and returns, with an outcome, the claimed rows
// (claimClaimed), the rows it started (claimStarted), the rows not due (claimNotDue)
// and the due rows with a key and Overlap skip or queue (claimKeyed), which it leaves
// alone: Claim hands those to claimKeyed. A chunk without keyed tasks therefore costs
// what it did before keys existed: this one statement. Rows of another namespace than
// $3 are locked by l (by primary key, like every row asked for) but neither claimed
// nor returned: to the view they are not SCHEDULED. The namespace is compared after
// concatenating the empty string to it, as the status is, so that no index leading
// with the namespace can serve the statement: on a table without statistics the
// planner otherwise read the whole namespace through ax_tasks_name_key for every
// chunk (a 20,000-task drain fell from about 10,000 to 145-390 tasks/s).
//
// A claimed row whose claim asks to start ($4) and whose name is one of the handlers
// ($5) goes straight to RUNNING, and ins records its execution on node $6, in the
// same statement (ClaimStart): one write per task where Claim then Start were two.
//
// The rows not due and the keyed ones are read from l, the rows as locked (their
// latest version, once any lock the claim waited for was released), not by a second
// scan of ax_tasks: that scan cost about a third of the statement's planning (0.42 →
// 0.32 ms for 25 tasks) and 200 more index probes for a full chunk.
const claimSQL = `WITH ts AS (SELECT clock_timestamp() AS now),
c AS (SELECT * FROM unnest($1::bigint[], $2::text[], $4::bool[]) AS c(id, eid, start)),
l AS (SELECT t.* FROM ax_tasks t WHERE t.id = ANY($1) ORDER BY t.id FOR NO KEY UPDATE),
u AS (UPDATE ax_tasks t SET status = CASE WHEN c.start AND t.name = ANY($5::text[]) THEN 'RUNNING' ELSE 'DISPATCHING' END,
		execution_id = c.eid, dispatched_at = ts.now, updated_at = ts.now,
		started_at = CASE WHEN c.start AND t.name = ANY($5::text[]) THEN ts.now ELSE t.started_at END,
		heartbeat_at = CASE WHEN c.start AND t.name = ANY($5::text[]) THEN ts.now ELSE t.heartbeat_at END
	FROM c, ts
	WHERE (SELECT count(*) FROM l) >= 0 AND t.id = c.id AND t.id = ANY($1) AND t.namespace || '' = $3 AND t.status || '' = 'SCHEDULED' AND t.due_at <= ts.now
		AND (t.task_key = '' OR t.overlap = 'allow')
	RETURNING ` + taskCols + `),
ins AS (INSERT INTO ax_executions (id, task_id, attempt, node, status, due_at, claimed_at, started_at, heartbeat_at)
	SELECT u.execution_id, u.id, u.attempt, $6::text, 'RUNNING', u.due_at, u.dispatched_at, u.started_at, u.heartbeat_at
	FROM u WHERE u.status = 'RUNNING')
SELECT CASE WHEN u.status = 'RUNNING' THEN 3 ELSE 0 END, * FROM u
UNION ALL
SELECT CASE WHEN t.due_at > ts.now THEN 1 ELSE 2 END, ` + taskCols + ` FROM l t, ts
	WHERE t.namespace = $3 AND t.status = 'SCHEDULED' AND (t.due_at > ts.now OR (t.task_key <> '' AND t.overlap <> 'allow'))`

// The outcomes claimSQL returns in its first column.
const (
	claimClaimed = 0
	claimNotDue  = 1
	claimKeyed   = 2
	claimStarted = 3
)

// startSQL moves to RUNNING the tasks of namespace $5 DISPATCHING with the given
// execution id and name whose id is not recorded yet, and records exactly those
// executions, with the task's due_at and dispatched_at (the claim) as they stand. Execution ids are fresh per claim, so a task DISPATCHING with an id
// never has it recorded; should a caller reuse one, the INSERT fails and the whole
// Start with it. The namespace is compared as in claimSQL.
const startSQL = `WITH ts AS (SELECT clock_timestamp() AS now),
c AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[]) AS c(task_id, eid, node, name)),
l AS (SELECT t.id FROM ax_tasks t WHERE t.id = ANY($1) ORDER BY t.id FOR NO KEY UPDATE),
u AS (UPDATE ax_tasks t SET status = 'RUNNING', started_at = ts.now, heartbeat_at = ts.now, updated_at = ts.now
	FROM c, ts
	WHERE (SELECT count(*) FROM l) >= 0 AND t.id = c.task_id AND t.id = ANY($1) AND t.status || '' = 'DISPATCHING' AND t.execution_id = c.eid
		AND t.namespace || '' = $5 AND t.name = c.name
		AND NOT EXISTS (SELECT 1 FROM ax_executions x WHERE x.id = c.eid AND x.id = ANY($2))
	RETURNING c.node, ` + taskCols + `),
ins AS (INSERT INTO ax_executions (id, task_id, attempt, node, status, due_at, claimed_at, started_at, heartbeat_at)
	SELECT u.execution_id, u.id, u.attempt, u.node, 'RUNNING', u.due_at, u.dispatched_at, u.started_at, u.heartbeat_at FROM u)
SELECT * FROM u`

// heartbeatSQL stamps the tasks of namespace $3 RUNNING with the given execution id,
// and their executions.
const heartbeatSQL = `WITH ts AS (SELECT clock_timestamp() AS now),
c AS (SELECT * FROM unnest($1::bigint[], $2::text[]) AS c(id, eid)),
l AS (SELECT t.id FROM ax_tasks t WHERE t.id = ANY($1) ORDER BY t.id FOR NO KEY UPDATE),
u AS (UPDATE ax_tasks t SET heartbeat_at = ts.now
	FROM c, ts
	WHERE (SELECT count(*) FROM l) >= 0 AND t.id = c.id AND t.id = ANY($1) AND t.status || '' = 'RUNNING' AND t.execution_id = c.eid
		AND t.namespace || '' = $3
	RETURNING t.id, t.execution_id),
x AS (UPDATE ax_executions x SET heartbeat_at = ts.now FROM u, ts WHERE x.id = u.execution_id AND x.id = ANY($2))
SELECT id, execution_id FROM u`

// finishSQL applies the results of one chunk to the tasks of namespace $8 and closes
// the execution record of each that did not succeed ($7: those execution ids): FAILED,
// with its error and finish time. A succeeded execution's record is left as it was
// written at its start, RUNNING, and reads as its task says: the task is SUCCEEDED with
// that execution id, finished at the time the record would have been given (see
// execCols). That is one row write a task fewer (a HOT update, but a new row version
// and its WAL all the same), and the ids of the succeeded executions are not even
// looked up.
const finishSQL = `WITH ts AS (SELECT clock_timestamp() AS now),
c AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::timestamptz[])
	AS c(id, eid, status, error, attempt, due_at)),
l AS (SELECT t.id FROM ax_tasks t WHERE t.id = ANY($1) ORDER BY t.id FOR NO KEY UPDATE),
u AS (UPDATE ax_tasks t SET
		status = c.status,
		last_error = CASE c.status WHEN 'SUCCEEDED' THEN t.last_error ELSE c.error END,
		attempt = CASE c.status WHEN 'SCHEDULED' THEN c.attempt ELSE t.attempt END,
		due_at = CASE c.status WHEN 'SCHEDULED' THEN c.due_at ELSE t.due_at END,
		seq = CASE c.status WHEN 'SCHEDULED' THEN nextval('ax_seq') ELSE t.seq END,
		finished_at = CASE c.status WHEN 'SCHEDULED' THEN t.finished_at ELSE ts.now END,
		updated_at = ts.now
	FROM c, ts
	WHERE (SELECT count(*) FROM l) >= 0 AND t.id = c.id AND t.id = ANY($1) AND t.status || '' = 'RUNNING' AND t.execution_id = c.eid
		AND t.namespace || '' = $8
	RETURNING t.id, t.execution_id, c.status AS new_status, c.error),
x AS (UPDATE ax_executions x SET status = 'FAILED', error = u.error, finished_at = ts.now
	FROM u, ts WHERE x.id = u.execution_id AND x.id = ANY($7) AND u.new_status <> 'SUCCEEDED')
SELECT id, execution_id FROM u`

// requeueSQL hands back the tasks of namespace $6 DISPATCHING with the given
// execution id.
const requeueSQL = `WITH ts AS (SELECT clock_timestamp() AS now),
c AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::text[], $5::bigint[])
	AS c(id, eid, due_at, error, max_dispatch_retries)),
l AS (SELECT t.id FROM ax_tasks t WHERE t.id = ANY($1) ORDER BY t.id FOR NO KEY UPDATE)
UPDATE ax_tasks t SET
	status = CASE WHEN t.dispatch_retries + 1 > c.max_dispatch_retries THEN 'FAILED' ELSE 'SCHEDULED' END,
	finished_at = CASE WHEN t.dispatch_retries + 1 > c.max_dispatch_retries THEN ts.now ELSE NULL END,
	due_at = CASE WHEN t.dispatch_retries + 1 > c.max_dispatch_retries THEN t.due_at ELSE c.due_at END,
	seq = CASE WHEN t.dispatch_retries + 1 > c.max_dispatch_retries THEN t.seq ELSE nextval('ax_seq') END,
	dispatch_retries = t.dispatch_retries + 1, last_error = c.error, updated_at = ts.now
FROM c, ts
WHERE (SELECT count(*) FROM l) >= 0 AND t.id = c.id AND t.id = ANY($1) AND t.status || '' = 'DISPATCHING' AND t.execution_id = c.eid
	AND t.namespace || '' = $6
RETURNING t.id, t.execution_id`

// chunks calls f for consecutive chunks of at most store.MaxBatch of items.
func chunks[T any](items []T, f func(part []T)) {
	for lo := 0; lo < len(items); lo += store.MaxBatch {
		f(items[lo:min(len(items), lo+store.MaxBatch)])
	}
}

// readChunks reads the results of the statements queued by chunks over n items,
// one per chunk and in order, calling row on each of their rows.
func readChunks(br pgx.BatchResults, n int, row func(rows pgx.Rows) error) error {
	for lo := 0; lo < n; lo += store.MaxBatch {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		for rows.Next() {
			if err := row(rows); err != nil {
				rows.Close()
				return err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	return nil
}

type ref struct {
	id  int64
	eid string
}

// readRefs reads the (id, execution_id) rows of one result per chunk of n items.
func readRefs(br pgx.BatchResults, n int, into map[ref]int) error {
	return readChunks(br, n, func(rows pgx.Rows) error {
		var r ref
		if err := rows.Scan(&r.id, &r.eid); err != nil {
			return err
		}
		into[r]++
		return nil
	})
}

// Claim moves due SCHEDULED tasks of the view's namespace to DISPATCHING. Ids of
// another namespace's tasks are left out of the result, as missing ones are.
//
// Rows are locked in id order and waited for, not skipped. A row another transaction
// holds is claimed if it is still SCHEDULED and due when that transaction ends. A
// skipped row would be neither claimed nor NotDue, and the scheduler would drop a due
// task.
//
// Tasks whose key restricts them (a TaskKey with Overlap skip or queue) are left alone
// by the claim statement. They then go through claimKeyed, in a second transaction
// under their keys' advisory locks (see DESIGN.md, "Task keys"). A call without such
// due tasks is one transaction and one round trip, as before. A fence with a token is
// checked first in each of the two transactions (see fence.go).
func (s *Store) Claim(ctx context.Context, fence store.Fence, claims []store.Claim) (*store.ClaimResult, error) {
	return s.ClaimStart(ctx, fence, store.StartOn{}, claims)
}

// ClaimStart is Claim whose claiming statement also starts the tasks on can start
// (see claimSQL). Keyed tasks (skip, queue) are claimed by claimKeyed, DISPATCHING.
func (s *Store) ClaimStart(ctx context.Context, fence store.Fence, on store.StartOn, claims []store.Claim) (*store.ClaimResult, error) {
	if err := driverkit.CheckFence(fence); err != nil {
		return nil, fmt.Errorf("ax: postgres: claim: %w", err)
	}
	if err := driverkit.CheckClaims(claims); err != nil {
		return nil, fmt.Errorf("ax: postgres: claim: %w", err)
	}
	if err := driverkit.CheckStartOn(on); err != nil {
		return nil, fmt.Errorf("ax: postgres: claim: %w", err)
	}
	handlers := on.Handlers
	if handlers == nil {
		handlers = []string{}
	}
	uniq := driverkit.UniqueClaims(claims) // a task named twice is claimed once, with its first execution id
	res := &store.ClaimResult{}
	if len(uniq) == 0 {
		return res, s.check("claim")
	}
	var (
		keyedClaims []store.Claim // due, keyed: for claimKeyed, in id order
		keys        []string
	)
	err := s.execTx(ctx, "claim", func(b *pgx.Batch) {
		queueFence(b, fence)
		chunks(uniq, func(part []store.Claim) {
			ids, eids, start := make([]int64, len(part)), make([]string, len(part)), make([]bool, len(part))
			for k, c := range part {
				ids[k], eids[k], start[k] = c.ID, c.ExecutionID, c.Start
			}
			b.Queue(claimSQL, ids, eids, s.ns, start, handlers, on.Node)
		})
	}, func(br pgx.BatchResults) error {
		res.Claimed, res.Started, res.NotDue = nil, nil, nil
		keyedClaims, keys = nil, nil
		if err := readFence(br, fence); err != nil {
			return err
		}
		return readChunks(br, len(uniq), func(rows pgx.Rows) error {
			var outcome int32
			t, err := scanTask(rows, &outcome)
			if err != nil {
				return err
			}
			switch outcome {
			case claimClaimed:
				res.Claimed = append(res.Claimed, *t)
			case claimStarted:
				res.Started = append(res.Started, *t)
			case claimNotDue:
				res.NotDue = append(res.NotDue, store.Due{ID: t.ID, DueAt: t.DueAt})
			case claimKeyed:
				i, _ := slices.BinarySearchFunc(uniq, t.ID, func(c store.Claim, id int64) int { return cmp.Compare(c.ID, id) })
				keyedClaims = append(keyedClaims, uniq[i])
				keys = append(keys, t.TaskKey)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	if len(keyedClaims) > 0 {
		// The claim statement returns a chunk's rows in no particular order.
		slices.SortFunc(keyedClaims, func(a, b store.Claim) int { return cmp.Compare(a.ID, b.ID) })
		if err := s.claimKeyed(ctx, fence, keyedClaims, keys, res); err != nil {
			return nil, err
		}
	}
	sortResult(res)
	return res, nil
}

// Start records executions and moves their tasks to RUNNING, in one transaction; a
// fence with a token is checked first in it (see fence.go).
func (s *Store) Start(ctx context.Context, fence store.Fence, starts []store.StartParams) ([]store.StartResult, error) {
	if err := driverkit.CheckFence(fence); err != nil {
		return nil, fmt.Errorf("ax: postgres: start: %w", err)
	}
	if err := driverkit.CheckStarts(starts); err != nil {
		return nil, fmt.Errorf("ax: postgres: start: %w", err)
	}
	out := make([]store.StartResult, len(starts))
	if len(starts) == 0 {
		return out, s.check("start")
	}
	order := driverkit.SortedOrder(len(starts), func(i int) int64 { return starts[i].TaskID })
	var others []int // inputs not started: duplicates or lost
	err := s.execTx(ctx, "start", func(b *pgx.Batch) {
		queueFence(b, fence)
		chunks(order, func(part []int) {
			ids, eids, nodes, names := make([]int64, len(part)), make([]string, len(part)), make([]string, len(part)), make([]string, len(part))
			for k, i := range part {
				ids[k], eids[k], nodes[k], names[k] = starts[i].TaskID, starts[i].ExecutionID, starts[i].Node, starts[i].Name
			}
			b.Queue(startSQL, ids, eids, nodes, names, s.ns)
		})
	}, func(br pgx.BatchResults) error {
		clear(out)
		others = others[:0]
		if err := readFence(br, fence); err != nil {
			return err
		}
		var err error
		chunks(order, func(part []int) {
			if err != nil {
				return
			}
			started := map[ref]*store.StartResult{}
			var rows pgx.Rows
			if rows, err = br.Query(); err != nil {
				return
			}
			for rows.Next() {
				var node string
				t, serr := scanTask(rows, &node)
				if serr != nil {
					rows.Close()
					err = serr
					return
				}
				started[ref{t.ID, t.ExecutionID}] = &store.StartResult{Outcome: store.Started, Task: t, Execution: &store.Execution{
					ID: t.ExecutionID, TaskID: t.ID, Attempt: t.Attempt, Node: node, Status: store.Running,
					DueAt: t.DueAt, ClaimedAt: t.DispatchedAt, StartedAt: t.StartedAt, HeartbeatAt: t.HeartbeatAt,
				}}
			}
			rows.Close()
			if err = rows.Err(); err != nil {
				return
			}
			for _, i := range part {
				r := ref{starts[i].TaskID, starts[i].ExecutionID}
				if sr := started[r]; sr != nil {
					out[i] = *sr
					delete(started, r) // a second copy in this call is a duplicate
					continue
				}
				others = append(others, i)
			}
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(others) > 0 {
		// What is recorded for the others, read after the commit: a duplicate
		// delivery (also of a record a concurrent Start just wrote), or lost — as is
		// an execution of another namespace's task.
		eids := make([]string, len(others))
		for k, i := range others {
			eids[k] = starts[i].ExecutionID
		}
		recorded := map[string]*store.Execution{}
		rows, err := s.pool.Query(ctx, `SELECT `+execCols("t")+` FROM ax_executions x JOIN ax_tasks t ON t.id = x.task_id
			WHERE x.id = ANY($1) AND t.namespace || '' = $2`, eids, s.ns)
		if err != nil {
			return nil, s.wrap("start", err)
		}
		for rows.Next() {
			e, err := scanExecution(rows)
			if err != nil {
				rows.Close()
				return nil, s.wrap("start", err)
			}
			recorded[e.ID] = e
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, s.wrap("start", err)
		}
		for _, i := range others {
			if e := recorded[starts[i].ExecutionID]; e != nil {
				c := *e
				out[i] = store.StartResult{Outcome: store.Duplicate, Execution: &c}
			} else {
				out[i] = store.StartResult{Outcome: store.Lost}
			}
		}
	}
	return out, nil
}

// Heartbeat stamps heartbeat_at on running executions and their tasks.
func (s *Store) Heartbeat(ctx context.Context, refs []store.ExecRef) ([]bool, error) {
	out := make([]bool, len(refs))
	if len(refs) == 0 {
		return out, s.check("heartbeat")
	}
	order := driverkit.SortedOrder(len(refs), func(i int) int64 { return refs[i].TaskID })
	alive := map[ref]int{}
	err := s.execTx(ctx, "heartbeat", func(b *pgx.Batch) {
		chunks(order, func(part []int) {
			ids, eids := make([]int64, len(part)), make([]string, len(part))
			for k, i := range part {
				ids[k], eids[k] = refs[i].TaskID, refs[i].ExecutionID
			}
			b.Queue(heartbeatSQL, ids, eids, s.ns)
		})
	}, func(br pgx.BatchResults) error {
		clear(alive)
		return readRefs(br, len(order), alive)
	})
	if err != nil {
		return nil, err
	}
	for i, r := range refs {
		out[i] = alive[ref{r.TaskID, r.ExecutionID}] > 0
	}
	return out, nil
}

// Finish records the results of executions; a fence with a token is checked first in
// its transaction (see fence.go).
func (s *Store) Finish(ctx context.Context, fence store.Fence, results []store.Finish) ([]bool, error) {
	if err := driverkit.CheckFence(fence); err != nil {
		return nil, fmt.Errorf("ax: postgres: finish: %w", err)
	}
	if err := driverkit.CheckFinishes(results); err != nil {
		return nil, fmt.Errorf("ax: postgres: finish: %w", err)
	}
	retry := false
	for _, f := range results {
		retry = retry || f.Status == store.Scheduled
	}
	out := make([]bool, len(results))
	if len(results) == 0 {
		return out, s.check("finish")
	}
	// Only the first result of an execution can apply: drop repeats, which a
	// multi-row UPDATE would otherwise pick from arbitrarily.
	order := driverkit.SortedOrder(len(results), func(i int) int64 { return results[i].TaskID })
	seen := make(map[string]bool, len(order))
	order = slices.DeleteFunc(order, func(i int) bool {
		dup := seen[results[i].ExecutionID]
		seen[results[i].ExecutionID] = true
		return dup
	})
	done := map[ref]int{}
	err := s.execTx(ctx, "finish", func(b *pgx.Batch) {
		queueFence(b, fence)
		if retry {
			b.Queue(publishSQL, s.lockKey, s.channel)
		}
		chunks(order, func(part []int) {
			ids, eids, statuses, errs := make([]int64, len(part)), make([]string, len(part)), make([]string, len(part)), make([]string, len(part))
			attempts, dues := make([]int64, len(part)), make([]time.Time, len(part))
			failed := []string{}
			for k, i := range part {
				f := results[i]
				ids[k], eids[k], statuses[k], errs[k] = f.TaskID, f.ExecutionID, string(f.Status), f.Error
				attempts[k], dues[k] = int64(f.Attempt), f.DueAt
				if f.Status != store.Succeeded {
					failed = append(failed, f.ExecutionID)
				}
			}
			b.Queue(finishSQL, ids, eids, statuses, errs, attempts, dues, failed, s.ns)
		})
	}, func(br pgx.BatchResults) error {
		clear(done)
		if err := readFence(br, fence); err != nil {
			return err
		}
		if retry {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		return readRefs(br, len(order), done)
	})
	if err != nil {
		return nil, err
	}
	for _, i := range order {
		out[i] = done[ref{results[i].TaskID, results[i].ExecutionID}] > 0
	}
	return out, nil
}

// Requeue hands undispatched tasks back to SCHEDULED, or FAILED when their dispatch
// retries are exhausted; a fence with a token is checked first in its transaction
// (see fence.go).
func (s *Store) Requeue(ctx context.Context, fence store.Fence, requeues []store.Requeue) ([]bool, error) {
	if err := driverkit.CheckFence(fence); err != nil {
		return nil, fmt.Errorf("ax: postgres: requeue: %w", err)
	}
	out := make([]bool, len(requeues))
	if len(requeues) == 0 {
		return out, s.check("requeue")
	}
	order := driverkit.SortedOrder(len(requeues), func(i int) int64 { return requeues[i].TaskID })
	// One transition per (task, execution): repeats in the call do not apply.
	seen := make(map[ref]bool, len(order))
	order = slices.DeleteFunc(order, func(i int) bool {
		r := ref{requeues[i].TaskID, requeues[i].ExecutionID}
		dup := seen[r]
		seen[r] = true
		return dup
	})
	done := map[ref]int{}
	err := s.execTx(ctx, "requeue", func(b *pgx.Batch) {
		queueFence(b, fence)
		b.Queue(publishSQL, s.lockKey, s.channel)
		chunks(order, func(part []int) {
			ids, eids, dues := make([]int64, len(part)), make([]string, len(part)), make([]time.Time, len(part))
			errs, maxes := make([]string, len(part)), make([]int64, len(part))
			for k, i := range part {
				r := requeues[i]
				ids[k], eids[k], dues[k], errs[k], maxes[k] = r.TaskID, r.ExecutionID, r.DueAt, r.Error, int64(r.MaxDispatchRetries)
			}
			b.Queue(requeueSQL, ids, eids, dues, errs, maxes, s.ns)
		})
	}, func(br pgx.BatchResults) error {
		clear(done)
		if err := readFence(br, fence); err != nil {
			return err
		}
		if _, err := br.Exec(); err != nil {
			return err
		}
		return readRefs(br, len(order), done)
	})
	if err != nil {
		return nil, err
	}
	for _, i := range order {
		out[i] = done[ref{requeues[i].TaskID, requeues[i].ExecutionID}] > 0
	}
	return out, nil
}
