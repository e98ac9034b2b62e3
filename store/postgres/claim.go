package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/driverkit"
)

// claimSQL claims the due tasks of one chunk whose key does not restrict them (no
// key, or Overlap allow) and whose name is neither paused nor limited, and returns,
// with an outcome, the claimed rows (claimClaimed), the rows it started
// (claimStarted), the rows not due (claimNotDue), the due rows of a paused name
// (claimPaused), the due rows of a name with a limit — concurrency, rate, a key
// concurrency above one, or a rate per task key — (claimLimited), and
// the due rows with a key and Overlap skip or queue (claimKeyed), which it leaves
// alone: Claim hands the last two to claimKeyed. A chunk without such tasks costs
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
		AND (t.task_key = '' OR t.overlap = 'allow') AND NOT ` + heldName + `
	RETURNING ` + taskCols + `),
ins AS (INSERT INTO ax_executions (id, task_id, attempt, node, status, due_at, claimed_at, started_at, heartbeat_at)
	SELECT u.execution_id, u.id, u.attempt, $6::text, 'RUNNING', u.due_at, u.dispatched_at, u.started_at, u.heartbeat_at
	FROM u WHERE u.status = 'RUNNING')
SELECT CASE WHEN u.status = 'RUNNING' THEN 3 ELSE 0 END, * FROM u
UNION ALL
SELECT CASE WHEN t.due_at > ts.now THEN 1 WHEN ` + pausedName + ` THEN 4 WHEN ` + limitedName + ` THEN 5 ELSE 2 END, ` + taskCols + ` FROM l t, ts
	WHERE t.namespace = $3 AND t.status = 'SCHEDULED' AND (t.due_at > ts.now OR (t.task_key <> '' AND t.overlap <> 'allow') OR ` + heldName + `)`

// The outcomes claimSQL returns in its first column.
const (
	claimClaimed = 0
	claimNotDue  = 1
	claimKeyed   = 2
	claimStarted = 3
	claimPaused  = 4
	claimLimited = 5
)

// Claim moves due SCHEDULED tasks of the view's namespace to DISPATCHING. Ids of
// another namespace's tasks are left out of the result, as missing ones are.
//
// Rows are locked in id order and waited for, not skipped. A row another transaction
// holds is claimed if it is still SCHEDULED and due when that transaction ends. A
// skipped row would be neither claimed nor NotDue, and the scheduler would drop a due
// task.
//
// Tasks whose key restricts them (a TaskKey with Overlap skip or queue), or whose name
// has a limit (nameLimits), are left alone by the claim statement. They then go through
// claimKeyed, in a second transaction under their keys' and names' advisory locks
// (see DESIGN.md, "Task keys"). A call without such due tasks is one transaction and
// one round trip, as before. A fence with a token is
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
	starts := 0
	for _, c := range uniq {
		if c.Start {
			starts++
		}
	}
	res := &store.ClaimResult{}
	if len(uniq) == 0 {
		return res, s.check("claim")
	}
	var (
		keyedClaims []store.Claim // due, keyed or limited: for claimKeyed, in id order
		keys        []string      // the keys that restrict them
		names       []string      // the limited names among them
		pairs       []nameTaskKey // the names and keys of those of limited names whose key restricts them
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
		keyedClaims, keys, names, pairs = nil, nil, nil, nil
		if err := readFence(br, fence); err != nil {
			return err
		}
		if starts > 0 { // the usual drain: all of them start
			res.Started = make([]store.Task, 0, starts)
		}
		var (
			r       taskRow
			t       = new(store.Task)
			outcome int32
		)
		return readChunks(br, len(uniq), func(rows pgx.Rows) error {
			if err := r.scan(rows, t, &outcome); err != nil {
				return err
			}
			switch outcome {
			case claimClaimed:
				res.Claimed = append(res.Claimed, *t)
			case claimStarted:
				res.Started = append(res.Started, *t)
			case claimNotDue:
				res.NotDue = append(res.NotDue, store.Due{ID: t.ID, DueAt: t.DueAt})
			case claimPaused:
				res.Paused = append(res.Paused, store.Due{ID: t.ID, DueAt: t.DueAt})
			case claimKeyed, claimLimited:
				i, _ := slices.BinarySearchFunc(uniq, t.ID, func(c store.Claim, id int64) int { return cmp.Compare(c.ID, id) })
				keyedClaims = append(keyedClaims, uniq[i])
				if keyed(t) {
					keys = append(keys, t.TaskKey)
				}
				if outcome == claimLimited {
					names = append(names, t.Name)
					if keyed(t) { // its name may have a rate per key: claimKeyed reads the key's claims
						pairs = append(pairs, nameTaskKey{t.Name, t.TaskKey})
					}
				}
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
		if err := s.claimKeyed(ctx, fence, keyedClaims, keys, names, pairs, res); err != nil {
			return nil, err
		}
	}
	sortResult(res)
	return res, nil
}
