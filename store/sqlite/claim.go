package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
)

var (
	// claimStmt claims the due tasks of the view's namespace without a key (or with
	// Overlap allow) whose name is neither paused nor limited: the whole batch in one
	// statement. A keyed skip or queue task, and a task of a paused or limited name, is
	// left for missedStmt and claimRestricted; an id of another namespace is left
	// alone, as one no longer SCHEDULED is.
	//
	// A claimed row whose claim asks to start (column3) and whose name is one of the
	// handlers (a JSON array, read once per statement) goes straight to RUNNING
	// (ClaimStart); claimedStmt then records its execution.
	claimStmt = &batchStmt{cols: 3, pad: []any{0, "", false}, sql: `UPDATE ax_tasks SET
		status = CASE WHEN c.column3 AND ax_tasks.name IN (SELECT value FROM json_each(?)) THEN 'RUNNING' ELSE 'DISPATCHING' END,
		started_at = CASE WHEN c.column3 AND ax_tasks.name IN (SELECT value FROM json_each(?)) THEN ? ELSE started_at END,
		heartbeat_at = CASE WHEN c.column3 AND ax_tasks.name IN (SELECT value FROM json_each(?)) THEN ? ELSE heartbeat_at END,
		execution_id = c.column2, dispatched_at = ?, updated_at = ?
		FROM (VALUES %V%) AS c
		WHERE ax_tasks.id = c.column1 AND ax_tasks.status = 'SCHEDULED' AND ax_tasks.due_at <= ?
			AND +ax_tasks.namespace = ? AND (ax_tasks.task_key = '' OR ax_tasks.overlap = 'allow') AND NOT ` + restrictedName + `
		RETURNING ` + taskColumns}
	// missedStmt reads what claimStmt left SCHEDULED in the namespace — not due, of a
	// paused or limited name, or keyed — with whether its name is paused and whether
	// it is limited: a concurrency or a rate limit, a key concurrency above one or a
	// rate per key (one probe of ax_names' primary key per row).
	missedStmt = &batchStmt{cols: 1, pad: []any{0}, sql: `SELECT ax_tasks.id, ax_tasks.due_at, ax_tasks.name, ax_tasks.task_key,
		ax_tasks.overlap, coalesce(p.paused, 0), coalesce(p.concurrency > 0 OR p.rate > 0 OR p.key_concurrency > 1 OR p.key_rate > 0, 0)
		FROM ax_tasks LEFT JOIN ax_names p ON p.namespace = ax_tasks.namespace AND p.name = ax_tasks.name
		WHERE +ax_tasks.namespace = ? AND ax_tasks.status = 'SCHEDULED' AND ax_tasks.id IN (VALUES %V%) ORDER BY ax_tasks.id`}
	// holdersStmt finds, per key of the namespace, the lowest id holding it and how
	// many do (ax_tasks_ns_key_holder).
	holdersStmt = &batchStmt{cols: 1, pad: []any{""}, sql: `SELECT task_key, MIN(id), count(*) FROM ax_tasks
		WHERE namespace = ? AND task_key IN (VALUES %V%) AND ` + holding + `
		GROUP BY task_key`}
	// limitsStmt reads the limits of the names of the namespace that have one: the
	// concurrency limit, the rate limit with the times of the name's last claims
	// (driverkit.EncodeStarts), the key concurrency and the rate per key. One probe
	// of ax_names' primary key per name. (No task name is empty: the pad matches
	// nothing.)
	limitsStmt = &batchStmt{cols: 1, pad: []any{""}, sql: `SELECT name, concurrency, rate, rate_per_us, rate_starts, key_concurrency,
			key_rate, key_rate_per_us
		FROM ax_names
		WHERE namespace = ? AND name IN (VALUES %V%) AND (concurrency > 0 OR rate > 0 OR key_concurrency > 1 OR key_rate > 0)`}
	// startsStmt records the claim times of rate-limited names of the namespace
	// (column2, driverkit.EncodeStarts), by the primary key.
	startsStmt = &batchStmt{cols: 2, pad: []any{"", []byte{}}, sql: `UPDATE ax_names SET rate_starts = c.column2
		FROM (VALUES %V%) AS c
		WHERE ax_names.namespace = ? AND ax_names.name = c.column1`}
	// keyStartsStmt reads the claim times (driverkit.EncodeStarts) of the (name
	// column1, task key column2) pairs of the namespace that have some: one probe of
	// ax_key_starts' primary key per pair. (No task name is empty: the pad matches
	// nothing.)
	keyStartsStmt = &batchStmt{cols: 2, pad: []any{"", ""}, sql: `SELECT name, task_key, starts FROM ax_key_starts
		WHERE namespace = ? AND (name, task_key) IN (VALUES %V%)`}
	// keyStartsWriteStmt records the claim times (column3) of (name column1, task key
	// column2) pairs of the namespace, the last of them at column4, inserting the
	// pair's row or replacing its times. (The pad's NULL name writes nothing.)
	keyStartsWriteStmt = &batchStmt{cols: 4, pad: []any{nil, "", []byte{}, 0}, sql: `INSERT INTO ax_key_starts
		(namespace, name, task_key, starts, last_at)
		SELECT ?, c.column1, c.column2, c.column3, c.column4
		FROM (VALUES %V%) AS c
		WHERE c.column1 IS NOT NULL
		ON CONFLICT (namespace, name, task_key) DO UPDATE SET starts = excluded.starts, last_at = excluded.last_at`}
	// inflightStmt counts, per task name of the namespace, the tasks DISPATCHING or
	// RUNNING: a range of each status's partial index (ax_tasks_ns_dispatching_since,
	// ax_tasks_ns_running_heartbeat), so it reads the namespace's tasks in flight, not
	// every task of the names (their history, until pruned) through the business key's
	// index — which the planner, without statistics, would pick for "name IN n", hence
	// INDEXED BY. (No task name is empty: the pad matches nothing.)
	inflightStmt = &batchStmt{cols: 1, pad: []any{""}, sql: `WITH n(name) AS (VALUES %V%)
		SELECT name, count(*) FROM (
			SELECT name FROM ax_tasks INDEXED BY ax_tasks_ns_dispatching_since
				WHERE namespace = ? AND status = 'DISPATCHING' AND name IN n
			UNION ALL
			SELECT name FROM ax_tasks INDEXED BY ax_tasks_ns_running_heartbeat
				WHERE namespace = ? AND status = 'RUNNING' AND name IN n)
		GROUP BY name`}
	// restrictedClaimStmt claims the winners of driverkit.ResolveKeys, DISPATCHING, with
	// a restricting key's rule re-checked in the claiming write itself: its holders
	// fewer than the winner's admits (column3: its name's key concurrency, at least
	// one). (Their names' limits were read, and their tasks in flight counted, in the
	// same write transaction.)
	restrictedClaimStmt = &batchStmt{cols: 3, pad: []any{0, "", 1}, sql: `UPDATE ax_tasks SET status = 'DISPATCHING', execution_id = c.column2,
		dispatched_at = ?, updated_at = ?
		FROM (VALUES %V%) AS c
		WHERE ax_tasks.id = c.column1 AND ax_tasks.status = 'SCHEDULED' AND ax_tasks.due_at <= ?
			AND +ax_tasks.namespace = ? AND (ax_tasks.task_key = '' OR ax_tasks.overlap = 'allow' OR ` + keyHolders + ` < c.column3)
		RETURNING ` + taskColumns}
	// skipStmt ends the losers whose Overlap is skip.
	skipStmt = &batchStmt{cols: 2, pad: []any{0, ""}, sql: `UPDATE ax_tasks SET status = 'SKIPPED', last_error = c.column2,
		finished_at = ?, updated_at = ?
		FROM (VALUES %V%) AS c
		WHERE ax_tasks.id = c.column1 AND ax_tasks.status = 'SCHEDULED'
		RETURNING ` + taskColumns}
	// claimedStmt records the executions of the tasks claimStmt started: due at
	// column5, claimed and started now.
	claimedStmt = &batchStmt{cols: 5, pad: []any{nil, 0, 0, "", 0}, sql: `INSERT INTO ax_executions
		(id, task_id, attempt, node, status, due_at, claimed_at, started_at, heartbeat_at)
		SELECT c.column1, c.column2, c.column3, c.column4, 'RUNNING', c.column5, ?, ?, ?
		FROM (VALUES %V%) AS c
		WHERE c.column1 IS NOT NULL`}
	// recordStmt records the executions of the tasks of the view's namespace that are
	// DISPATCHING with the given execution id (column2) and name (column4), on node
	// column3, with the task's due_at and dispatched_at (the claim); runStmt then moves
	// exactly those tasks to RUNNING.
	recordStmt = &batchStmt{cols: 4, pad: []any{0, "", "", ""}, sql: `INSERT INTO ax_executions
		(id, task_id, attempt, node, status, due_at, claimed_at, started_at, heartbeat_at)
		SELECT c.column2, t.id, t.attempt, c.column3, 'RUNNING', t.due_at, t.dispatched_at, ?, ?
		FROM (VALUES %V%) AS c
		JOIN ax_tasks t ON t.id = c.column1 AND t.status = 'DISPATCHING' AND t.execution_id = c.column2
			AND t.name = c.column4 AND +t.namespace = ?
		WHERE true
		ON CONFLICT (id) DO NOTHING
		RETURNING id`}
	runStmt = &batchStmt{cols: 2, pad: []any{0, ""}, sql: `UPDATE ax_tasks SET status = 'RUNNING', started_at = ?, heartbeat_at = ?, updated_at = ?
		FROM (VALUES %V%) AS c
		WHERE ax_tasks.id = c.column1 AND ax_tasks.status = 'DISPATCHING' AND ax_tasks.execution_id = c.column2
		RETURNING ` + taskColumns}
	// recordedStmt reads the executions recorded for tasks of the view's namespace.
	recordedStmt = &batchStmt{cols: 1, pad: []any{""}, sql: `SELECT ` + executionColumns + ` FROM ax_executions
		WHERE id IN (VALUES %V%)
			AND EXISTS (SELECT 1 FROM ax_tasks t WHERE t.id = ax_executions.task_id AND +t.namespace = ?)`}
	// heartbeatStmt stamps the tasks of the view's namespace RUNNING with the given
	// execution id.
	heartbeatStmt = &batchStmt{cols: 2, pad: []any{0, ""}, sql: `UPDATE ax_tasks SET heartbeat_at = ?
		FROM (VALUES %V%) AS c
		WHERE ax_tasks.id = c.column1 AND ax_tasks.status = 'RUNNING' AND ax_tasks.execution_id = c.column2
			AND +ax_tasks.namespace = ?
		RETURNING ax_tasks.execution_id, ax_tasks.cancel_requested_at IS NOT NULL`}
	heartbeatExecStmt = &batchStmt{cols: 1, pad: []any{""}, sql: `UPDATE ax_executions SET heartbeat_at = ?
		WHERE id IN (VALUES %V%)`}
	// finishStmt applies the results to the tasks of the view's namespace RUNNING with
	// the given execution id, a task whose cancel was requested ending CANCELLED unless
	// it succeeded (see store.Finish), and returns the status and last error each
	// took. (In SET, the columns are the row's values before the update.)
	finishStmt = &batchStmt{cols: 8, pad: []any{0, "", "", "", 0, 0, 0, 0}, sql: `UPDATE ax_tasks SET
		status = CASE WHEN c.column3 = 'SUCCEEDED' OR cancel_requested_at IS NULL THEN c.column3 ELSE 'CANCELLED' END,
		last_error = CASE WHEN c.column3 = 'SUCCEEDED' THEN last_error WHEN cancel_requested_at IS NULL THEN c.column4
			ELSE 'cancelled by ' || cancelled_by || CASE c.column4 WHEN '' THEN '' ELSE ': ' || c.column4 END END,
		attempt = CASE WHEN ` + keptSQL + ` THEN attempt ELSE c.column5 END,
		due_at = CASE WHEN ` + keptSQL + ` THEN due_at ELSE c.column6 END,
		seq = CASE WHEN ` + keptSQL + ` THEN seq ELSE c.column7 END,
		finished_at = CASE WHEN ` + keptSQL + ` THEN ? ELSE finished_at END,
		snoozes = CASE WHEN ` + keptSQL + ` THEN snoozes ELSE snoozes + c.column8 END,
		updated_at = ?
		FROM (VALUES %V%) AS c
		WHERE ax_tasks.id = c.column1 AND ax_tasks.status = 'RUNNING' AND ax_tasks.execution_id = c.column2
			AND +ax_tasks.namespace = ?
		RETURNING ax_tasks.execution_id, ax_tasks.status, CASE ax_tasks.status WHEN 'CANCELLED' THEN ax_tasks.last_error ELSE '' END`}
	finishExecStmt = &batchStmt{cols: 3, pad: []any{"", "", ""}, sql: `UPDATE ax_executions SET status = c.column2, error = c.column3, finished_at = ?
		FROM (VALUES %V%) AS c WHERE ax_executions.id = c.column1`}

	// insertStmt inserts the tasks into one namespace (the last of its head arguments)
	// and returns the id and sequence number of each row written: the sequence numbers
	// are the inputs' (see insert), and the rest of the row is the input's.
	insertStmt = &batchStmt{cols: 15, pad: []any{nil, nil, false, nil, 0, 0, "", 0, "", 0, "", "", "", nil, nil}, sql: `INSERT INTO ax_tasks
		(name, key, payload, status, due_at, max_retry, owner_service, timeout_us, backoff, seq, task_key, overlap,
			key_hold, key_until, trace, created_at, updated_at, namespace)
		SELECT c.column1, c.column2, CASE WHEN c.column3 THEN X'' ELSE c.column4 END, 'SCHEDULED', c.column5,
			c.column6, c.column7, c.column8, c.column9, c.column10, c.column11, c.column12, c.column13, c.column14, c.column15, ?, ?, ?
		FROM (VALUES %V%) AS c
		WHERE c.column1 IS NOT NULL
		ON CONFLICT (namespace, name, key, key_slot) DO NOTHING
		RETURNING id, seq`}

	batchStmts = []*batchStmt{insertStmt, claimStmt, claimedStmt, missedStmt, holdersStmt, limitsStmt, startsStmt,
		keyStartsStmt, keyStartsWriteStmt, inflightStmt,
		restrictedClaimStmt, skipStmt,
		recordStmt, runStmt, recordedStmt, heartbeatStmt, heartbeatExecStmt, finishStmt, finishExecStmt}
)

// Claim moves due SCHEDULED tasks of the view's namespace to DISPATCHING, applying the
// overlap rule to the tasks with a key (as many holders of a key as their name's key
// concurrency admits) and their names' concurrency and rate limits, and rates per
// key (see DESIGN.md). An id of another namespace is left out of the result, as one no longer
// SCHEDULED is.
//
// A batch without keyed skip or queue tasks and without tasks of a limited name costs
// what it always has: one claiming statement per chunk, and one read of the tasks it
// missed when it missed some. A non-zero fence adds one read of ax_leader at the start
// of the transaction (see fence.go), which covers the restricted tasks' statements
// too.
func (s *Store) Claim(ctx context.Context, fence store.Fence, claims []store.Claim) (*store.ClaimResult, error) {
	return s.ClaimStart(ctx, fence, store.StartOn{}, claims)
}

// ClaimStart is Claim that, in the claiming transaction, also starts the claimed tasks
// on can start, with Start's two statements (record, then run). SQLite's cost is the
// commit, and this is still one. Keyed tasks (skip, queue) and the tasks of a limited
// name are claimed DISPATCHING.
func (s *Store) ClaimStart(ctx context.Context, fence store.Fence, on store.StartOn, claims []store.Claim) (*store.ClaimResult, error) {
	if err := driverkit.CheckClaims(claims); err != nil {
		return nil, fmt.Errorf("ax: sqlite: claim: %w", err)
	}
	if err := driverkit.CheckFence(fence); err != nil {
		return nil, fmt.Errorf("ax: sqlite: claim: %w", err)
	}
	if err := driverkit.CheckStartOn(on); err != nil {
		return nil, fmt.Errorf("ax: sqlite: claim: %w", err)
	}
	uniq := driverkit.UniqueClaims(claims) // a task named twice is claimed once, with its first execution id
	startable := driverkit.Startable(on, uniq)
	handlers := "[]"
	if startable != nil {
		b, err := json.Marshal(on.Handlers)
		if err != nil {
			return nil, fmt.Errorf("ax: sqlite: claim: %w", err)
		}
		handlers = string(b)
	}
	res := &store.ClaimResult{}
	err := s.write(ctx, "claim", func(tx *sql.Tx) error {
		if err := checkFence(ctx, tx, fence); err != nil {
			return err
		}
		var restricted []driverkit.Keyed
		limited := map[string]bool{} // the limited names of restricted, as missedStmt read them
		ts := micros(now())          // the claim's time: every write's, and the rates'

		err := chunks(len(uniq), func(lo, hi int) error {
			part := uniq[lo:hi]
			args := make([]any, 0, 3*len(part))
			for _, c := range part {
				args = append(args, c.ID, c.ExecutionID, startable[c.ID])
			}
			head := []any{handlers, handlers, ts, handlers, ts, ts, ts}
			rows, err := s.batch(ctx, tx, claimStmt, head, args, []any{ts, s.ns, s.ns})
			claimed, err := scanTasksN(rows, err, len(part))
			if err != nil {
				return err
			}
			if err := s.recordClaimed(ctx, tx, ts, on.Node, claimed, res); err != nil {
				return err
			}
			if len(claimed) == len(part) {
				return nil
			}
			got := make(map[int64]bool, len(claimed))
			for _, t := range claimed {
				got[t.ID] = true
			}
			var missed []any
			for _, c := range part {
				if !got[c.ID] {
					missed = append(missed, c.ID)
				}
			}
			rows, err = s.batch(ctx, tx, missedStmt, []any{s.ns}, missed, nil)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id, due int64
				var name, key, overlap string
				var paused, limit bool
				if err := rows.Scan(&id, &due, &name, &key, &overlap, &paused, &limit); err != nil {
					return err
				}
				switch {
				case due > ts: // not due comes first: a keyed task is never skipped early
					res.NotDue = append(res.NotDue, store.Due{ID: id, DueAt: fromMicros(due)})
				case paused: // then the pause, whatever the key or the limit
					res.Paused = append(res.Paused, store.Due{ID: id, DueAt: fromMicros(due)})
				case limit || key != "" && store.OverlapPolicy(overlap) != store.OverlapAllow:
					restricted = append(restricted, driverkit.Keyed{ID: id, DueAt: fromMicros(due), Name: name, TaskKey: key, Overlap: store.OverlapPolicy(overlap)})
					if limit {
						limited[name] = true
					}
				}
			}
			return rows.Err()
		})
		if err != nil || len(restricted) == 0 {
			return err
		}
		return s.claimRestricted(ctx, tx, ts, uniq, restricted, limited, res)
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(res.Claimed, func(a, b store.Task) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(res.Started, func(a, b store.Task) int { return cmp.Compare(a.ID, b.ID) })
	return res, nil
}

// recordClaimed records the executions of the tasks the claim statement started
// (RUNNING) on node, in the claim's transaction, and adds them to res.Started and the
// others (DISPATCHING) to res.Claimed.
func (s *Store) recordClaimed(ctx context.Context, tx *sql.Tx, ts int64, node string, claimed []store.Task, res *store.ClaimResult) error {
	var args []any
	nodeArg := any(node)
	for i := range claimed {
		if t := &claimed[i]; t.Status == store.Running {
			if args == nil {
				args = make([]any, 0, 5*len(claimed))
			}
			args = append(args, t.ExecutionID, t.ID, t.Attempt, nodeArg, micros(t.DueAt))
		}
	}
	driverkit.AddClaimed(res, claimed)
	if len(args) == 0 {
		return nil
	}
	return s.batchExec(ctx, tx, claimedStmt, []any{ts, ts, ts}, args, nil)
}

// claimRestricted applies the overlap rule, with the names' key concurrency, and the
// names' concurrency and rate limits and rates per key to the due restricted tasks of
// a Claim (keyed skip or queue, or of a limited name), in its transaction, at ts, the
// claim's time;
// limited holds their names that missedStmt found limited. uniq are the Claim's
// requests, by id.
//
// The transaction is IMMEDIATE (the writer's _txlock), so it holds the database's one
// write lock from its BEGIN: no claim, trigger or transition of this process or any
// other that opens the file runs between the reads here — the holders of the keys,
// the limits, the count of each name's tasks DISPATCHING or RUNNING, the times of
// each rate-limited name's last claims and of each key's under a rate per key — and
// the claims made from them, with the times written back. The counts and times are thus exact, not estimates, and the
// claimers are serialised per name (and per key) without a lock of their own: no
// limit is ever exceeded, whatever the number of processes.
func (s *Store) claimRestricted(ctx context.Context, tx *sql.Tx, ts int64, uniq []store.Claim, restricted []driverkit.Keyed, limited map[string]bool, res *store.ClaimResult) error {
	var keys []any
	seen := make(map[string]bool, len(restricted))
	for _, k := range restricted {
		if k.TaskKey != "" && k.Overlap != store.OverlapAllow && !seen[k.TaskKey] {
			seen[k.TaskKey] = true
			keys = append(keys, k.TaskKey)
		}
	}
	holders := make(map[string]driverkit.KeyHold, len(keys))
	err := chunks(len(keys), func(lo, hi int) error {
		rows, err := s.batch(ctx, tx, holdersStmt, []any{s.ns}, keys[lo:hi], nil)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var key string
			var h driverkit.KeyHold
			if err := rows.Scan(&key, &h.First, &h.Count); err != nil {
				return err
			}
			holders[key] = h
		}
		return rows.Err()
	})
	if err != nil {
		return err
	}
	names, err := s.limits(ctx, tx, limited)
	if err != nil {
		return err
	}
	if err := s.keyStarts(ctx, tx, restricted, names); err != nil {
		return err
	}
	claim, skip, block, over := driverkit.ResolveKeys(restricted, holders, names, fromMicros(ts))

	execID := func(id int64) string { // uniq is sorted by id and holds every id of restricted
		i, _ := slices.BinarySearchFunc(uniq, id, func(c store.Claim, id int64) int { return cmp.Compare(c.ID, id) })
		return uniq[i].ExecutionID
	}
	// The winners are claimed in the order ResolveKeys admitted them, (due_at, id): a
	// chunk's re-check of a key counts the holders before its statement, and those the
	// chunks before it claimed, which ResolveKeys had counted when it admitted the
	// chunk's winners. (By id, a winner of a name admitting one task per key could
	// find the key taken by a later winner of a name admitting more, claimed in an
	// earlier chunk.)
	win := slices.Clone(claim)
	slices.SortFunc(win, func(a, b driverkit.Keyed) int {
		if c := a.DueAt.Compare(b.DueAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	err = chunks(len(win), func(lo, hi int) error {
		args := make([]any, 0, 3*(hi-lo))
		for _, k := range win[lo:hi] {
			admits := 1
			if n := names[k.Name]; n != nil && n.KeyConcurrency > 1 {
				admits = n.KeyConcurrency
			}
			args = append(args, k.ID, execID(k.ID), admits)
		}
		claimed, err := scanTasks(s.batch(ctx, tx, restrictedClaimStmt, []any{ts, ts}, args, []any{ts, s.ns}))
		if err != nil {
			return err
		}
		if len(claimed) != hi-lo { // the holders, counts and times were read under the same lock
			return fmt.Errorf("claimed %d of %d tasks whose keys and names admitted them", len(claimed), hi-lo)
		}
		res.Claimed = append(res.Claimed, claimed...)
		return nil
	})
	if err != nil {
		return err
	}
	if err := s.writeStarts(ctx, tx, names); err != nil {
		return err
	}
	if err := s.writeKeyStarts(ctx, tx, names); err != nil {
		return err
	}

	err = chunks(len(skip), func(lo, hi int) error {
		args := make([]any, 0, 2*(hi-lo))
		for _, k := range skip[lo:hi] {
			args = append(args, k.ID, driverkit.SkipReason(k.TaskKey, k.Holder))
		}
		skipped, err := scanTasks(s.batch(ctx, tx, skipStmt, []any{ts, ts}, args, nil))
		if err != nil {
			return err
		}
		res.Skipped = append(res.Skipped, skipped...)
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(res.Skipped, func(a, b store.Task) int { return cmp.Compare(a.ID, b.ID) })

	for _, k := range block {
		res.Blocked = append(res.Blocked, store.Blocked{Due: store.Due{ID: k.ID, DueAt: k.DueAt}, TaskKey: k.TaskKey})
	}
	for _, k := range over {
		l := store.Limited{Due: store.Due{ID: k.ID, DueAt: k.DueAt}, Name: k.Name, Limit: k.Limit, RetryAt: k.RetryAt}
		if k.KeyLimited { // its name's rate per key held it back, not its name's own limits
			l.TaskKey = k.TaskKey
		}
		res.Limited = append(res.Limited, l)
	}
	return nil
}

// limits reads, in tx, the limits of the names of limited that have one in the view's
// namespace (limitsStmt), with the tasks in flight of each that has a concurrency
// limit (inflightStmt): what driverkit.ResolveKeys applies. A name without a limit
// (any more) is missing.
func (s *Store) limits(ctx context.Context, tx *sql.Tx, limited map[string]bool) (map[string]*driverkit.NameLimit, error) {
	asked := make([]any, 0, len(limited))
	for _, name := range slices.Sorted(maps.Keys(limited)) {
		asked = append(asked, name)
	}
	names := make(map[string]*driverkit.NameLimit, len(asked))
	var counted []any // the names with a concurrency limit
	err := chunks(len(asked), func(lo, hi int) error {
		rows, err := s.batch(ctx, tx, limitsStmt, []any{s.ns}, asked[lo:hi], nil)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			var perUS, keyPerUS int64
			var starts []byte
			n := &driverkit.NameLimit{}
			if err := rows.Scan(&name, &n.Concurrency, &n.Rate, &perUS, &starts, &n.KeyConcurrency, &n.KeyRate, &keyPerUS); err != nil {
				return err
			}
			n.Per, n.KeyPer = time.Duration(perUS)*time.Microsecond, time.Duration(keyPerUS)*time.Microsecond
			if n.Starts, err = driverkit.DecodeStarts(starts); err != nil {
				return fmt.Errorf("name %q: %w", name, err)
			}
			names[name] = n
			if n.Concurrency > 0 {
				counted = append(counted, name)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	err = chunks(len(counted), func(lo, hi int) error {
		rows, err := s.batch(ctx, tx, inflightStmt, nil, counted[lo:hi], []any{s.ns, s.ns})
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			var n int
			if err := rows.Scan(&name, &n); err != nil {
				return err
			}
			names[name].InFlight = n
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return names, nil
}

// writeStarts records, in tx, the claim times of each name of names whose
// driverkit.ResolveKeys changed them (startsStmt), in name order.
func (s *Store) writeStarts(ctx context.Context, tx *sql.Tx, names map[string]*driverkit.NameLimit) error {
	var args []any
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if n := names[name]; n.Changed {
			args = append(args, name, driverkit.EncodeStarts(n.Starts))
		}
	}
	return chunks(len(args)/2, func(lo, hi int) error {
		return s.batchExec(ctx, tx, startsStmt, nil, args[2*lo:2*hi], []any{s.ns})
	})
}

// keyStarts reads, in tx, the claim times of every (name, key) of restricted whose
// key restricts it and whose name has a rate per key in names (keyStartsStmt), into
// the name's KeyStarts: what driverkit.ResolveKeys applies. A pair without a row has
// none. The claim's write transaction holds the file's write lock, the keys' lock,
// so no other claim changes them before the claim writes them back.
func (s *Store) keyStarts(ctx context.Context, tx *sql.Tx, restricted []driverkit.Keyed, names map[string]*driverkit.NameLimit) error {
	type pair struct{ name, key string }
	seen := make(map[pair]bool)
	var args []any
	for _, k := range restricted {
		p := pair{k.Name, k.TaskKey}
		if n := names[k.Name]; n == nil || n.KeyRate == 0 || k.TaskKey == "" || k.Overlap == store.OverlapAllow || seen[p] {
			continue
		}
		seen[p] = true
		args = append(args, p.name, p.key)
	}
	return chunks(len(args)/2, func(lo, hi int) error {
		rows, err := s.batch(ctx, tx, keyStartsStmt, []any{s.ns}, args[2*lo:2*hi], nil)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name, key string
			var b []byte
			if err := rows.Scan(&name, &key, &b); err != nil {
				return err
			}
			if err := driverkit.SetKeyStarts(names, name, key, b); err != nil {
				return err
			}
		}
		return rows.Err()
	})
}

// writeKeyStarts records, in tx, the claim times of each key of each name of names
// whose driverkit.ResolveKeys changed them (keyStartsWriteStmt), with the last of
// them, in (name, key) order.
func (s *Store) writeKeyStarts(ctx context.Context, tx *sql.Tx, names map[string]*driverkit.NameLimit) error {
	var args []any
	for _, name := range slices.Sorted(maps.Keys(names)) {
		n := names[name]
		for _, key := range slices.Sorted(slices.Values(n.KeyChanged)) {
			starts := n.KeyStarts[key]
			args = append(args, name, key, driverkit.EncodeStarts(starts), micros(starts[len(starts)-1]))
		}
	}
	return chunks(len(args)/4, func(lo, hi int) error {
		return s.batchExec(ctx, tx, keyStartsWriteStmt, []any{s.ns}, args[4*lo:4*hi], nil)
	})
}
