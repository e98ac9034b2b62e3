package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
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
// and their executions, and says of each whether its cancel was requested.
const heartbeatSQL = `WITH ts AS (SELECT clock_timestamp() AS now),
c AS (SELECT * FROM unnest($1::bigint[], $2::text[]) AS c(id, eid)),
l AS (SELECT t.id FROM ax_tasks t WHERE t.id = ANY($1) ORDER BY t.id FOR NO KEY UPDATE),
u AS (UPDATE ax_tasks t SET heartbeat_at = ts.now
	FROM c, ts
	WHERE (SELECT count(*) FROM l) >= 0 AND t.id = c.id AND t.id = ANY($1) AND t.status || '' = 'RUNNING' AND t.execution_id = c.eid
		AND t.namespace || '' = $3
	RETURNING t.id, t.execution_id, t.cancel_requested_at IS NOT NULL AS cancel),
x AS (UPDATE ax_executions x SET heartbeat_at = ts.now FROM u, ts WHERE x.id = u.execution_id AND x.id = ANY($2))
SELECT id, execution_id, cancel FROM u`

// finishSQL applies the results of one chunk to the tasks of namespace $8 and closes
// the execution record of each that did not succeed ($7: those execution ids): FAILED,
// or SNOOZED for a snooze ($9), or CANCELLED for a task whose cancel was requested
// (see store.Finish), with its error and finish time. A succeeded execution's record is left as it was
// written at its start, RUNNING, and reads as its task says: the task is SUCCEEDED with
// that execution id, finished at the time the record would have been given (see
// execCols). That is one row write a task fewer (a HOT update, but a new row version
// and its WAL all the same), and the ids of the succeeded executions are not even
// looked up.
const finishSQL = `WITH ts AS (SELECT clock_timestamp() AS now),
c AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::timestamptz[], $9::bool[])
	AS c(id, eid, status, error, attempt, due_at, snooze)),
l AS (SELECT t.id FROM ax_tasks t WHERE t.id = ANY($1) ORDER BY t.id FOR NO KEY UPDATE),
u AS (UPDATE ax_tasks t SET
		status = CASE WHEN ` + cancelled + ` THEN 'CANCELLED' ELSE c.status END,
		last_error = CASE WHEN ` + cancelled + ` THEN 'cancelled by ' || t.cancelled_by || CASE c.error WHEN '' THEN '' ELSE ': ' || c.error END
			WHEN c.status = 'SUCCEEDED' THEN t.last_error ELSE c.error END,
		attempt = CASE WHEN ` + rescheduled + ` THEN c.attempt ELSE t.attempt END,
		due_at = CASE WHEN ` + rescheduled + ` THEN c.due_at ELSE t.due_at END,
		seq = CASE WHEN ` + rescheduled + ` THEN nextval('ax_seq') ELSE t.seq END,
		finished_at = CASE WHEN ` + rescheduled + ` THEN t.finished_at ELSE ts.now END,
		snoozes = t.snoozes + CASE WHEN c.snooze AND ` + rescheduled + ` THEN 1 ELSE 0 END,
		updated_at = ts.now
	FROM c, ts
	WHERE (SELECT count(*) FROM l) >= 0 AND t.id = c.id AND t.id = ANY($1) AND t.status || '' = 'RUNNING' AND t.execution_id = c.eid
		AND t.namespace || '' = $8
	RETURNING t.id, t.execution_id, t.status AS new_status, CASE t.status WHEN 'CANCELLED' THEN t.last_error ELSE c.error END AS error,
		c.snooze AND t.status = 'SCHEDULED' AS snooze),
x AS (UPDATE ax_executions x SET status = CASE WHEN u.new_status = 'CANCELLED' THEN 'CANCELLED' WHEN u.snooze THEN 'SNOOZED' ELSE 'FAILED' END,
		error = u.error, finished_at = ts.now
	FROM u, ts WHERE x.id = u.execution_id AND x.id = ANY($7) AND u.new_status <> 'SUCCEEDED')
SELECT id, execution_id FROM u`

// cancelled holds, in finishSQL, for a result that ends its task CANCELLED: the
// task's cancel was requested and the result is not a success. rescheduled holds for
// one that puts the task back to SCHEDULED.
const (
	cancelled   = `(t.cancel_requested_at IS NOT NULL AND c.status <> 'SUCCEEDED')`
	rescheduled = `(c.status = 'SCHEDULED' AND t.cancel_requested_at IS NULL)`
)

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
func (s *Store) Heartbeat(ctx context.Context, refs []store.ExecRef) ([]store.Beat, error) {
	out := make([]store.Beat, len(refs))
	if len(refs) == 0 {
		return out, s.check("heartbeat")
	}
	order := driverkit.SortedOrder(len(refs), func(i int) int64 { return refs[i].TaskID })
	alive := map[ref]store.Beat{}
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
		return readChunks(br, len(order), func(rows pgx.Rows) error {
			var r ref
			var cancel bool
			if err := rows.Scan(&r.id, &r.eid, &cancel); err != nil {
				return err
			}
			alive[r] = store.BeatAlive
			if cancel {
				alive[r] = store.BeatCancel
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	for i, r := range refs {
		out[i] = alive[ref{r.TaskID, r.ExecutionID}]
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
	freed := s.limits.needed(time.Now())
	finishedIDs := make([]int64, len(order))
	for k, i := range order {
		finishedIDs[k] = results[i].TaskID
	}
	err := s.execTx(ctx, "finish", func(b *pgx.Batch) {
		queueFence(b, fence)
		if retry {
			b.Queue(publishSQL, s.lockKey, s.channel)
		}
		chunks(order, func(part []int) {
			ids, eids, statuses, errs := make([]int64, len(part)), make([]string, len(part)), make([]string, len(part)), make([]string, len(part))
			attempts, dues, snoozes := make([]int64, len(part)), make([]time.Time, len(part)), make([]bool, len(part))
			failed := []string{}
			for k, i := range part {
				f := results[i]
				ids[k], eids[k], statuses[k], errs[k] = f.TaskID, f.ExecutionID, string(f.Status), f.Error
				attempts[k], dues[k], snoozes[k] = int64(f.Attempt), f.DueAt, f.Snooze
				if f.Status != store.Succeeded {
					failed = append(failed, f.ExecutionID)
				}
			}
			b.Queue(finishSQL, ids, eids, statuses, errs, attempts, dues, failed, s.ns, snoozes)
		})
		if freed {
			b.Queue(freedSQL, s.channel, s.ns, finishedIDs)
		}
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
		if err := readRefs(br, len(order), done); err != nil {
			return err
		}
		if !freed {
			return nil
		}
		var limited, notified bool
		if err := br.QueryRow().Scan(&limited, &notified); err != nil {
			return err
		}
		s.limits.learn(limited, time.Now())
		return nil
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

// The inspector's scans of namespace $3, each a range scan of its partial index.
const (
	staleRunningSQL = `SELECT ` + taskCols + ` FROM ax_tasks t
		WHERE t.namespace = $3 AND t.status = 'RUNNING' AND t.heartbeat_at < $1 ORDER BY t.heartbeat_at, t.id LIMIT $2`
	staleDispatchingSQL = `SELECT ` + taskCols + ` FROM ax_tasks t
		WHERE t.namespace = $3 AND t.status = 'DISPATCHING' AND t.dispatched_at < $1 ORDER BY t.dispatched_at, t.id LIMIT $2`
)

// Stale lists the view's RUNNING tasks without a heartbeat, or DISPATCHING tasks
// claimed, before a time, oldest first.
func (s *Store) Stale(ctx context.Context, status store.Status, before time.Time, limit int) ([]store.Task, error) {
	if limit < 1 {
		return nil, fmt.Errorf("ax: postgres: stale: limit %d: %w", limit, store.ErrInvalid)
	}
	var q string
	switch status {
	case store.Running:
		q = staleRunningSQL
	case store.Dispatching:
		q = staleDispatchingSQL
	default:
		return nil, fmt.Errorf("ax: postgres: stale %s tasks: %w", status, store.ErrInvalid)
	}
	if err := s.check("stale"); err != nil {
		return nil, err
	}
	tasks, err := s.queryTasks(ctx, q, before, limit, s.ns)
	if err != nil {
		return nil, s.wrap("stale", err)
	}
	out := make([]store.Task, len(tasks))
	for i, t := range tasks {
		out[i] = *t
	}
	return out, nil
}
