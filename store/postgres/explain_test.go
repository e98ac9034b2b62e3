package postgres

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/taskquery"
)

// sortNode matches a plan's Sort node (not an Incremental Sort).
var sortNode = regexp.MustCompile(`(?m)(^|->)\s*Sort\s+\(`)

// TestExplain loads 100k tasks in a realistic mix of states and namespaces and checks
// that the hot queries of one namespace are index scans, with the namespace in the
// index condition (the plans in DESIGN.md come from this test: run it with -v, or set
// AX_EXPLAIN_OUT=file to write them out).
func TestExplain(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 100k rows")
	}
	t.Parallel()
	ctx := context.Background()
	s := openInternal(t)
	// 100k rows: 70% finished, 20% scheduled over the next day (20 minutes' worth overdue),
	// 5% running, 5% dispatching. 4% are occurrences of 200 schedules (task key
	// schedule-N, Overlap skip), finished or scheduled; the latest occurrence of every
	// schedule whose number ends in 0-4 is running: 100 holders. Every tenth block of
	// 20 rows is in namespace "other", the rest in the default one, the view queried:
	// the same mix in both, with the same names, keys and task keys.
	if _, err := s.pool.Exec(ctx, `INSERT INTO ax_tasks (namespace, name, key, payload, status, due_at, seq, created_at, updated_at,
			execution_id, dispatched_at, heartbeat_at, task_key, overlap)
		SELECT CASE WHEN g / 20 % 10 = 3 THEN 'other' ELSE 'default' END, 'order.close', 'order-' || g, '{"order":42}',
			CASE WHEN g % 20 < 14 THEN 'SUCCEEDED' WHEN g % 20 < 18 THEN 'SCHEDULED' WHEN g % 20 = 18 THEN 'RUNNING' ELSE 'DISPATCHING' END,
			clock_timestamp() + ((g * 7) % 1440 - 20) * interval '1 minute', nextval('ax_seq'),
			clock_timestamp(), clock_timestamp(), gen_random_uuid()::text,
			clock_timestamp() - (g % 600) * interval '1 second', clock_timestamp() - (g % 600) * interval '1 second',
			CASE WHEN g % 50 IN (0, 15) THEN 'schedule-' || (g / 50 % 200) ELSE '' END,
			CASE WHEN g % 50 IN (0, 15) THEN 'skip' ELSE '' END
		FROM generate_series(1, 100000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE ax_tasks SET status = 'RUNNING' WHERE id IN (
		SELECT max(id) FROM ax_tasks WHERE task_key <> '' AND status = 'SUCCEEDED' AND task_key ~ '[0-4]$' GROUP BY namespace, task_key)`); err != nil {
		t.Fatal(err)
	}
	// 20,000 gaps of 200 schedules, a minute each, over the last two weeks.
	if _, err := s.pool.Exec(ctx, `INSERT INTO ax_slot_gaps (namespace, schedule, from_at, until_at, why, result, created_at)
		SELECT 'default', 'schedule-' || (g % 200), clock_timestamp() - g * interval '1 minute',
			clock_timestamp() - (g - 1) * interval '1 minute', 'missed', 'skipped', clock_timestamp()
		FROM generate_series(1, 20000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `VACUUM ANALYZE ax_slot_gaps`); err != nil {
		t.Fatal(err)
	}
	// The leadership history: 505 terms, each acquired and ended, in each of 20
	// namespaces, the default one among them — 10 changes beyond the 1,000 that
	// retention keeps.
	if _, err := s.pool.Exec(ctx, `INSERT INTO ax_leadership (namespace, epoch, kind, holder, at, reason)
		SELECT ns, g, kind, 'node-' || (g % 3), clock_timestamp() - (505 - g) * interval '1 hour', 'resigned'
		FROM unnest(ARRAY['default'] || ARRAY(SELECT 'ns-' || i FROM generate_series(1, 19) i)) ns,
			generate_series(1, 505) g, unnest(ARRAY['acquired', 'ended']) kind`); err != nil {
		t.Fatal(err)
	}
	// Another name is limited: every claim then probes ax_names per row.
	if _, err := s.pool.Exec(ctx, `INSERT INTO ax_names (namespace, name, concurrency, changed_at)
		VALUES ('default', 'report', 5, clock_timestamp()), ('default', 'order.close', 0, clock_timestamp())`); err != nil {
		t.Fatal(err)
	}
	// The claim times per task key of 10 names with a rate per key, 2,500 keys each,
	// in the default namespace and in "other", last claimed over the last two days:
	// about half of them beyond any window.
	if _, err := s.pool.Exec(ctx, `INSERT INTO ax_key_starts (namespace, name, task_key, starts, last_at)
		SELECT ns, 'sync-' || (g % 10), 'cust-' || g, decode('0006000000000000', 'hex'), clock_timestamp() - (g % 2880) * interval '1 minute'
		FROM unnest(ARRAY['default', 'other']) ns, generate_series(1, 25000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `VACUUM ANALYZE ax_tasks, ax_leadership, ax_key_starts`); err != nil {
		t.Fatal(err)
	}
	// Two days of statistics of 20 nodes, in the default namespace and in "other".
	if _, err := s.pool.Exec(ctx, `INSERT INTO ax_stats (namespace, minute, node, succeeded, lateness)
		SELECT ns, date_trunc('minute', clock_timestamp()) - m * interval '1 minute', 'node-' || n, m, '1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0'
		FROM unnest(ARRAY['default', 'other']) ns, generate_series(0, 2879) m, generate_series(1, 20) n`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `VACUUM ANALYZE ax_stats`); err != nil {
		t.Fatal(err)
	}
	// An audit log of 100,000 records over 29 days, a tenth in "other", with a bulk
	// action's 1,000 records in one microsecond an hour ago.
	if _, err := s.pool.Exec(ctx, `INSERT INTO ax_audit (namespace, at, actor, role, action, target, result)
		SELECT CASE WHEN g % 10 = 3 THEN 'other' ELSE 'default' END, clock_timestamp() - g * interval '25 seconds',
			'actor-' || (g % 7), 'operator', 'task.cancel', 'task ' || g, 'ok'
		FROM generate_series(1, 100000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO ax_audit (namespace, at, actor, role, action, target, result)
		SELECT 'default', date_trunc('second', clock_timestamp()) - interval '1 hour', 'alice', 'operator', 'task.retry', 'task ' || g, 'ok'
		FROM generate_series(1, 1000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `VACUUM ANALYZE ax_audit`); err != nil {
		t.Fatal(err)
	}
	var seq int64
	if err := s.pool.QueryRow(ctx, `SELECT last_value - 100 FROM ax_seq`).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	rows, _ := s.pool.Query(ctx, `SELECT id FROM ax_tasks WHERE namespace = 'default' AND status = 'SCHEDULED' AND due_at <= clock_timestamp()
		ORDER BY id LIMIT 200`)
	claimIDs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	claimEIDs := make([]string, len(claimIDs))
	for i := range claimEIDs {
		claimEIDs[i] = fmt.Sprintf("0190a0a0-0000-7000-8000-%012d", i)
	}
	// One due occurrence of each of 20 schedules, half of them held.
	rows, _ = s.pool.Query(ctx, `SELECT id FROM (SELECT DISTINCT ON (task_key) id FROM ax_tasks
		WHERE namespace = 'default' AND status = 'SCHEDULED' AND task_key <> '' AND due_at <= clock_timestamp()
		ORDER BY task_key, id) d ORDER BY id LIMIT 20`)
	keyedIDs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	keyedEIDs := claimEIDs[:len(keyedIDs)]
	// 20 keys of name sync-1, and their claim times as a claim writes them back.
	startNames, startKeys := fill(20, "sync-1"), make([]string, 20)
	for i := range startKeys {
		startKeys[i] = fmt.Sprintf("cust-%d", 1+i*10)
	}
	holderKeys := make([]string, 20)
	for i := range holderKeys {
		holderKeys[i] = fmt.Sprintf("schedule-%d", i*7)
	}
	var (
		names, keys, owners, backoffs []string
		taskKeys, overlaps            []string
		payloads                      [][]byte
		dues                          []time.Time
		retries, timeouts             []int64
	)
	for i := range 200 {
		names, keys, payloads = append(names, "order.close"), append(keys, fmt.Sprintf("new-%d", i)), append(payloads, []byte("{}"))
		dues, retries, owners = append(dues, time.Now()), append(retries, 5), append(owners, "orders")
		timeouts, backoffs = append(timeouts, 0), append(backoffs, "{}")
		taskKeys, overlaps = append(taskKeys, ""), append(overlaps, "")
	}
	keys[199] = "order-4255" // a duplicate, of a SCHEDULED task
	dupKeys := make([]string, 20)
	for i := range dupKeys {
		dupKeys[i] = fmt.Sprintf("order-%d", 1000+i*37)
	}
	// 200 of the 5,000 RUNNING and of the 5,000 DISPATCHING tasks, with their execution ids.
	inFlight := func(status string) (ids []int64, eids []string) {
		rows, _ := s.pool.Query(ctx, `SELECT id, execution_id FROM ax_tasks WHERE namespace = 'default' AND status = $1 ORDER BY id LIMIT 200`, status)
		var r struct {
			ID  int64
			EID string
		}
		if _, err := pgx.ForEachRow(rows, []any{&r.ID, &r.EID}, func() error {
			ids, eids = append(ids, r.ID), append(eids, r.EID)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return ids, eids
	}
	runIDs, runEIDs := inFlight("RUNNING")
	dispIDs, dispEIDs := inFlight("DISPATCHING")

	now := time.Now()
	ns := s.ns
	type explainCase struct {
		name    string
		sql     string
		args    []any
		index   string // an index the plan must use
		whole   bool   // the statement reads the whole table: a Seq Scan on ax_tasks is expected
		generic bool   // the store runs it on its generic plan (genericTx): explain that one
	}
	cases := []explainCase{
		{"window scan (Refill, Entered)", refillSQL, []any{int64(1<<63 - 1), now.Add(5 * time.Minute), 1000, time.Time{}, int64(0), ns},
			"ax_tasks_scheduled_due", false, false},
		{"refill (Refill, Changed)", refillSQL, []any{seq, now.Add(5 * time.Minute), 1000, now.Add(5 * time.Minute), int64(0), ns},
			"ax_tasks_scheduled_seq", false, false},
		{"claim (200 ids)", claimSQL, []any{claimIDs, claimEIDs, ns, make([]bool, len(claimIDs)), []string{}, ""}, "ax_tasks_pkey", false, false},
		{"claim and start (200 ids)", claimSQL, []any{claimIDs, claimEIDs, ns, starts(len(claimIDs)), []string{"order.close"}, "node-1"}, "ax_tasks_pkey", false, false},
		{"start (200 ids)", startSQL, []any{dispIDs, dispEIDs, fill(200, "node-1"), fill(200, "order.close"), ns}, "ax_tasks_pkey", false, false},
		{"heartbeat (200 ids)", heartbeatSQL, []any{runIDs, runEIDs, ns}, "ax_tasks_pkey", false, false},
		// Failed, so that the executions' records are closed too (a success leaves them).
		{"finish (200 ids)", finishSQL, []any{runIDs, runEIDs, fill(200, "FAILED"), fill(200, "boom"), fill(200, int64(0)), fill(200, now), runEIDs, ns, fill(200, false)},
			"ax_tasks_pkey", false, false},
		{"finish (200 ids, succeeded)", finishSQL, []any{runIDs, runEIDs, fill(200, "SUCCEEDED"), fill(200, ""), fill(200, int64(0)), fill(200, now), []string{}, ns, fill(200, false)},
			"ax_tasks_pkey", false, false},
		{"requeue (200 ids)", requeueSQL, []any{dispIDs, dispEIDs, fill(200, now), fill(200, "busy"), fill(200, int64(3)), ns}, "ax_tasks_pkey", false, false},
		{"orphan scan (Stale RUNNING)", staleRunningSQL, []any{now.Add(-5 * time.Minute), 100, ns}, "ax_tasks_running_heartbeat", false, false},
		{"stuck-claim scan (Stale DISPATCHING)", staleDispatchingSQL, []any{now.Add(-5 * time.Minute), 100, ns}, "ax_tasks_dispatching_since", false, false},
		{"insert (200 tasks, one a duplicate; generic plan)", insertSQL, []any{names, keys, payloads, dues, retries, owners, timeouts, backoffs, taskKeys, overlaps,
			fill(200, ""), make([]*time.Time, 200), ns, []string(nil)}, "ax_tasks_name_key", false, true},
		{"release of the keys given up (Insert's 200 keys; generic plan)", releaseSQL, []any{names, keys, ns}, "ax_tasks_name_key", false, true},
		{"key holders (Claim, Trigger: 20 keys)", holdersSQL, []any{holderKeys, ns}, "ax_tasks_key_held", false, false},
		// The tasks in flight of a limited name: read through the partial indexes of
		// DISPATCHING and RUNNING, not through the business key, which holds the
		// name's finished tasks too.
		{"limits and tasks in flight (Claim of a limited name)", limitsSQL, []any{[]string{"report"}, ns}, "ax_tasks_running_heartbeat", false, false},
		{fmt.Sprintf("keyed claim (%d winners)", len(keyedIDs)), keyedClaimSQL, []any{keyedIDs, keyedEIDs, nil, fill(len(keyedIDs), int32(1))}, "ax_tasks_key_held", false, false},
		{"claim times of 20 task keys (Claim of a name with a rate per key)", keyStartsSQL, []any{ns, startNames, startKeys}, "ax_key_starts_pkey", false, false},
		{"claim times of 20 task keys written (Claim of a name with a rate per key)", keyStartsWriteSQL,
			[]any{ns, startNames, startKeys, fill(20, []byte("01234567")), fill(20, now)}, "ax_key_starts_pkey", false, false},
		{"old claim times per key (PruneKeyStarts)", pruneKeyStartsSQL, []any{ns, store.MaxRatePer.Microseconds(), store.MaxPrune}, "ax_key_starts_last", false, false},
		{"duplicates (Insert's read of 20 existing keys)", lookupManySQL, []any{fill(20, "order.close"), dupKeys, ns}, "ax_tasks_name_key", false, false},
		{"business key (Lookup)", lookupSQL, []any{"order.close", "order-4242", ns}, "ax_tasks_name_key", false, false},
		{"task stats (TaskStats)", taskStatsSQL, []any{now, ns}, "ax_tasks_scheduled_due", true, false},
		{"an hour of statistics (Stats)", statsSQL, []any{ns, now.Add(-time.Hour), store.MaxStatsRead}, "ax_stats_pkey", false, false},
		{"statistics pruned (PruneStats)", pruneStatsSQL, []any{ns, now.Add(-47 * time.Hour), store.MaxPrune}, "ax_stats_pkey", false, false},
		{"occurrences by their keys (TasksByKeys, 50 keys)", tasksByKeysSQL, []any{ns, "order.close", dupKeys[:20]}, "ax_tasks_name_key", false, false},
		{"manual occurrences (TasksByKeyRange)", tasksByKeyRangeSQL, []any{ns, "order.close", "order-42", "order-43", 101}, "ax_tasks_name_key", false, false},
		{"gaps of a schedule (SlotGaps)", slotGapsSQL, []any{ns, "schedule-7", now.Add(-24 * time.Hour), now, 100}, "ax_slot_gaps_schedule", false, false},
		{"old gaps (PruneSlotGaps)", pruneSlotGapsSQL, []any{ns, now.Add(-7 * 24 * time.Hour), 1000}, "ax_slot_gaps_until", false, false},
		{"leadership history (LeadershipHistory, 20)", historySQL, []any{ns, 20}, "ax_leadership_pkey", false, false},
		{"newest leadership change (RaiseFence)", newestChangeSQL, []any{ns}, "ax_leadership_pkey", false, false},
		{"leadership prune (PruneLeadership: keep 1,000 of 1,010, 90 days)", pruneLeadershipSQL, []any{ns, int64(1000), now.Add(-90 * 24 * time.Hour), 1000},
			"ax_leadership_pkey", false, false},
	}
	for _, q := range []struct {
		name  string
		q     store.TaskQuery
		index string
	}{
		{"tasks: due soonest (Tasks, SCHEDULED)", store.TaskQuery{Statuses: []store.Status{store.Scheduled}, Soonest: true}, "ax_tasks_scheduled_due"},
		{"tasks: the oldest due (Tasks, SCHEDULED, due before now: the console's queue lag)", store.TaskQuery{Statuses: []store.Status{store.Scheduled},
			Soonest: true, DueBefore: now, Limit: 2}, "ax_tasks_scheduled_due"},
		{"tasks: a name and a key prefix (Tasks)", store.TaskQuery{Name: "order.close", KeyPrefix: "order-42"}, "ax_tasks_name_key"},
		{"tasks: finished in an hour (Tasks, SUCCEEDED)", store.TaskQuery{Statuses: []store.Status{store.Succeeded},
			FinishedFrom: now.Add(-time.Hour), FinishedBefore: now}, "ax_tasks_finished"},
		{"tasks: running newest (Tasks, RUNNING)", store.TaskQuery{Statuses: []store.Status{store.Running}}, "ax_tasks_pkey"},
		{"tasks: a page after a cursor (Tasks)", store.TaskQuery{After: &store.TaskCursor{ID: 50000}}, "ax_tasks_pkey"},
	} {
		q.q.Limit = 101
		sql, args := taskquery.Select(s.query, taskCols, "ax_tasks t", ns, q.q)
		cases = append(cases, explainCase{name: q.name, sql: sql, args: args, index: q.index})
	}

	// The audit log by time: a backward range scan of ax_audit_at, the rows of one at
	// sorted by id incrementally, so that a page reads about its LIMIT of rows, however
	// many the bounds hold.
	for _, q := range []struct {
		name     string
		q        store.AuditQuery
		cursorAt time.Time
	}{
		{"audit log: a day (AuditLog, since, until)", store.AuditQuery{Since: now.Add(-48 * time.Hour), Until: now.Add(-24 * time.Hour)}, time.Time{}},
		{"audit log: since a week ago, an actor (AuditLog)", store.AuditQuery{Actor: "actor-3", Since: now.Add(-7 * 24 * time.Hour)}, time.Time{}},
		{"audit log: until, the next page in a bulk action (AuditLog, BeforeID)", store.AuditQuery{Until: now, BeforeID: 100500},
			now.Add(-time.Hour).Truncate(time.Second)},
	} {
		q.q.Limit = 101
		sql, args := taskquery.AuditSelect(dialect(false), ns, q.q, q.cursorAt)
		cases = append(cases, explainCase{name: q.name, sql: sql, args: args, index: "ax_audit_at"})
	}

	var out strings.Builder
	for _, c := range cases {
		var plan string
		if c.generic {
			plan = genericPlan(ctx, t, s, c.sql, c.args)
		} else {
			plan = explainIn(ctx, t, s.pool, c.sql, c.args...) // rolled back: EXPLAIN ANALYZE of the claim writes
		}
		out.WriteString("-- " + c.name + "\n" + plan + "\n\n")
		if strings.Contains(plan, "Seq Scan on ax_slot_gaps") {
			t.Errorf("%s: plan scans ax_slot_gaps sequentially:\n%s", c.name, plan)
		}
		if strings.Contains(plan, "Seq Scan on ax_tasks") != c.whole || !strings.Contains(plan, c.index) {
			t.Errorf("%s: plan does not use %s, or scans ax_tasks sequentially (expected: %v):\n%s", c.name, c.index, c.whole, plan)
		}
		if c.index == "ax_audit_at" && (strings.Contains(plan, "Seq Scan on ax_audit") || !strings.Contains(plan, "Index Scan Backward using ax_audit_at") ||
			sortNode.MatchString(plan)) {
			t.Errorf("%s: the plan is not a backward range scan of ax_audit_at, sorted only within one at:\n%s", c.name, plan)
		}
		if strings.HasPrefix(c.index, "ax_key_starts") && strings.Contains(plan, "Seq Scan on ax_key_starts") {
			t.Errorf("%s: plan scans ax_key_starts sequentially:\n%s", c.name, plan)
		}
		// The prune's bound on last_at ends the range it scans: as a filter, a
		// namespace without old rows would be read whole.
		if c.index == "ax_key_starts_last" && !strings.Contains(plan, "AND (last_at <= (statement_timestamp()") {
			t.Errorf("%s: the bound on last_at is not part of the index condition:\n%s", c.name, plan)
		}
		if strings.HasPrefix(c.index, "ax_stats") && strings.Contains(plan, "Seq Scan on ax_stats") {
			t.Errorf("%s: plan scans ax_stats sequentially:\n%s", c.name, plan)
		}
		// The leadership history is read along its primary key, a few rows of one
		// namespace, never the whole table, and the reads in the key's order, unsorted.
		// (The prune's range, whose bounds come from the statement's own subqueries,
		// may be read by a bitmap scan of the key and sorted: the rows of one
		// namespace before the first change kept.)
		if c.index == "ax_leadership_pkey" && strings.Contains(plan, "Seq Scan on ax_leadership") ||
			c.sql != pruneLeadershipSQL && c.index == "ax_leadership_pkey" && strings.Contains(plan, "Sort Key") {
			t.Errorf("%s: the plan scans or sorts ax_leadership:\n%s", c.name, plan)
		}
		// A statement that reaches its rows by primary key reads no other index of
		// ax_tasks: a partial index on a status would have it read every row in that
		// status for each batch.
		if c.index == "ax_tasks_pkey" {
			for _, m := range otherIndex.FindAllString(plan, -1) {
				if !strings.HasSuffix(m, "ax_tasks_pkey") {
					t.Errorf("%s: the plan reads %s:\n%s", c.name, m, plan)
				}
			}
		}
		// The namespace leads every index it scans: it must be part of the index
		// condition, not a filter applied to the rows read.
		if !c.whole && c.index != "ax_tasks_pkey" && strings.Contains(plan, "using "+c.index) && !namespaceInIndexCond(plan, c.index) {
			t.Errorf("%s: the scan of %s does not have the namespace in its index condition:\n%s", c.name, c.index, plan)
		}
	}
	// CountTasks: each status's count stops at the cap. A status with few rows is
	// counted from its index; one as common as SUCCEEDED here (70 %) may be counted
	// by a sequential scan, which the LIMIT stops as early (the planner takes it
	// when VACUUM could not mark the pages all-visible, with other transactions open).
	countSQL, countArgs := taskquery.Count(s.query, ns, 100_000)
	plan := explainIn(ctx, t, s.pool, countSQL, countArgs...)
	out.WriteString("-- counts (CountTasks)\n" + plan + "\n\n")
	for _, st := range []string{"FAILED", "CANCELLED", "SKIPPED"} {
		if !strings.Contains(plan, "using ax_tasks_finished on ax_tasks") || !strings.Contains(plan, "status = '"+st+"'::text))") {
			t.Errorf("counts: %s is not counted from ax_tasks_finished:\n%s", st, plan)
		}
	}
	if strings.Count(plan, "->  Limit") != len(store.Statuses()) {
		t.Errorf("counts: not every status's count is bounded by a LIMIT:\n%s", plan)
	}
	t.Logf("plans on 100k rows:\n%s", out.String())
	if f := os.Getenv("AX_EXPLAIN_OUT"); f != "" {
		os.WriteFile(f, []byte(out.String()), 0o644)
	}
}

// genericSession has a connection's statements run on their generic plans, as
// genericPlans has a transaction's.
const genericSession = `SELECT set_config('plan_cache_mode', 'force_generic_plan', false), set_config('enable_seqscan', 'off', false)`

// genericPlan returns the plan of EXPLAIN ANALYZE of sql's generic plan, the one
// PostgreSQL caches for the prepared statement whatever its arguments (EXPLAIN of the
// statement itself would plan it for them), run with args and rolled back, on a
// connection of its own that is closed afterwards.
func genericPlan(ctx context.Context, t *testing.T, s *Store, sql string, args []any) string {
	t.Helper()
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn := pc.Hijack() // its session settings and prepared statement go with it
	defer conn.Close(ctx)
	for _, q := range []string{genericSession, `PREPARE explained AS ` + sql} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	lits, err := literals(ctx, conn, "explained", args)
	if err != nil {
		t.Fatal(err)
	}
	return explainIn(ctx, t, conn, `EXECUTE explained(`+strings.Join(lits, ", ")+`)`)
}

// literals returns args, the arguments of the prepared statement name, as SQL
// literals of its parameters' types: EXECUTE, a utility statement, takes no
// parameters.
func literals(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, name string, args []any) ([]string, error) {
	var types []string
	if err := q.QueryRow(ctx, `SELECT parameter_types::text[] FROM pg_prepared_statements WHERE name = $1`, name).Scan(&types); err != nil {
		return nil, err
	}
	lits := make([]string, len(args))
	for i, a := range args {
		if err := q.QueryRow(ctx, `SELECT quote_nullable($1::`+types[i]+`)`, a).Scan(&lits[i]); err != nil {
			return nil, err
		}
		lits[i] += "::" + types[i]
	}
	return lits, nil
}

// namespaceInIndexCond reports whether the scan of index in plan has the namespace in
// its Index Cond (the line after the scan's, of EXPLAIN's text format).
func namespaceInIndexCond(plan, index string) bool {
	lines := strings.Split(plan, "\n")
	for i, l := range lines {
		if !strings.Contains(l, "using "+index) {
			continue
		}
		for _, c := range lines[i+1:] {
			c = strings.TrimSpace(c)
			if strings.HasPrefix(c, "->") || strings.Contains(c, "Scan") {
				break
			}
			if strings.HasPrefix(c, "Index Cond:") && strings.Contains(c, "namespace = ") {
				return true
			}
		}
	}
	return false
}

// otherIndex finds the scans of ax_tasks' indexes in a plan.
var otherIndex = regexp.MustCompile(`(using|on) ax_tasks_\w+`)

// fill is n copies of v.
func fill[T any](n int, v T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// starts is n claims' Start flags, all set.
func starts(n int) []bool {
	b := make([]bool, n)
	for i := range b {
		b[i] = true
	}
	return b
}

// executionSession has a connection's statements planned as executionPlans has a
// transaction's.
const executionSession = `SELECT set_config('plan_cache_mode', 'force_generic_plan', false), set_config('enable_seqscan', 'off', false),
	set_config('enable_nestloop', 'off', false), set_config('enable_mergejoin', 'off', false), set_config('jit', 'off', false)`

// TestExecutionPathPlansOnStaleStatistics checks the plans of the statements that
// write tasks by id, and of Insert, in the worst case for their statistics: the
// generic plans cached while the table was empty (and analyzed so), then run once
// 30,000 tasks are written and a third of them each claimed and started at once, as
// after a bulk submit, before autovacuum runs.
//
// The execution path runs on its generic plans (executionPlans) and must reach every
// row through the primary key alone, by the index condition id = ANY($1), and join
// the batch by hash: comparing the status as such had it read every RUNNING row of
// ax_tasks_running_heartbeat for each batch it finished (111 µs of server CPU per
// finished task with 20,000 running, not 48); generic plans without the index
// condition read the whole primary key for each batch (0.4–0.6 s per 200 tasks), and
// with it but nested loops allowed they rescanned the unnest()ed batch for every row.
// Insert runs on its generic plan (genericPlans): it must read nothing of ax_tasks and
// leave the duplicate to the unique index.
func TestExecutionPathPlansOnStaleStatistics(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 30k rows")
	}
	t.Parallel()
	ctx := context.Background()
	s := openInternal(t)
	pc, err := s.pool.Acquire(ctx) // a prepared statement and its plan are the connection's
	if err != nil {
		t.Fatal(err)
	}
	conn := pc.Hijack() // its session settings and prepared statements go with it
	defer conn.Close(ctx)
	exec := func(q string) {
		t.Helper()
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	insertArgs := func(keys ...string) []any {
		n := len(keys)
		return []any{fill(n, "order.close"), keys, fill(n, []byte("{}")), fill(n, time.Now()), fill(n, int64(5)), fill(n, "orders"),
			fill(n, int64(0)), fill(n, "{}"), fill(n, ""), fill(n, ""), fill(n, ""), make([]*time.Time, n), s.ns, []string(nil)}
	}
	execute := func(name string, args []any) string {
		t.Helper()
		lits, err := literals(ctx, conn, name, args)
		if err != nil {
			t.Fatal(err)
		}
		return `EXECUTE ` + name + `(` + strings.Join(lits, ", ") + `)`
	}
	now := time.Now()
	statements := []struct {
		name string
		sql  string
		args func(ids []int64, eids []string) []any
	}{
		{"claim", claimSQL, func(ids []int64, eids []string) []any {
			return []any{ids, eids, s.ns, fill(len(ids), true), []string{"order.close"}, "node-1"}
		}},
		{"start", startSQL, func(ids []int64, eids []string) []any {
			return []any{ids, eids, fill(len(ids), "node-1"), fill(len(ids), "order.close"), s.ns}
		}},
		{"heartbeat", heartbeatSQL, func(ids []int64, eids []string) []any { return []any{ids, eids, s.ns} }},
		{"finish", finishSQL, func(ids []int64, eids []string) []any {
			n := len(ids)
			return []any{ids, eids, fill(n, "FAILED"), fill(n, "boom"), fill(n, int64(0)), fill(n, now), eids, s.ns, fill(n, false)} // records closed too
		}},
		{"requeue", requeueSQL, func(ids []int64, eids []string) []any {
			n := len(ids)
			return []any{ids, eids, fill(n, now), fill(n, "busy"), fill(n, int64(3)), s.ns}
		}},
	}
	exec(`ANALYZE ax_tasks`)
	exec(`ANALYZE ax_executions`)
	// The generic plans, cached by a first execution on the empty tables.
	exec(`PREPARE ins AS ` + insertSQL)
	exec(`PREPARE rel AS ` + releaseSQL)
	exec(`PREPARE lk AS ` + lookupSQL)
	exec(`PREPARE lkm AS ` + lookupManySQL)
	exec(genericSession)
	exec(execute("ins", insertArgs()))
	exec(execute("rel", []any{[]string{}, []string{}, s.ns}))
	exec(execute("lk", []any{"order.close", "none", s.ns}))
	exec(execute("lkm", []any{[]string{"order.close"}, []string{"none"}, s.ns}))
	exec(executionSession)
	for _, c := range statements {
		exec(`PREPARE ` + c.name + ` AS ` + c.sql)
		explainIn(ctx, t, conn, execute(c.name, c.args([]int64{1}, []string{"none"})))
	}
	exec(`INSERT INTO ax_tasks (namespace, name, key, status, due_at, seq, created_at, updated_at, execution_id)
		SELECT '` + s.ns + `', 'order.close', 'order-' || g, CASE g % 3 WHEN 0 THEN 'SCHEDULED' WHEN 1 THEN 'RUNNING' ELSE 'DISPATCHING' END,
			clock_timestamp() - interval '1 second', nextval('ax_seq'), clock_timestamp(), clock_timestamp(), gen_random_uuid()::text
		FROM generate_series(1, 30000) g`)
	exec(`INSERT INTO ax_executions (id, task_id, attempt, node, status, started_at)
		SELECT execution_id, id, 1, 'node-1', 'RUNNING', clock_timestamp() FROM ax_tasks WHERE status = 'RUNNING'`)

	keys := make([]string, 200)
	for i := range keys {
		keys[i] = fmt.Sprintf("new-%d", i)
	}
	keys[199] = "order-4242" // a duplicate
	exec(genericSession)
	plan := explainIn(ctx, t, conn, execute("ins", insertArgs(keys...)))
	if strings.Contains(plan, "Scan on ax_tasks") || !strings.Contains(plan, "Conflict Arbiter Indexes: ax_tasks_name_key") ||
		!strings.Contains(plan, "Tuples Inserted: 199") || !strings.Contains(plan, "Conflicting Tuples: 1") {
		t.Errorf("insert: the generic plan reads ax_tasks, or does not leave the duplicate to ax_tasks_name_key:\n%s", plan)
	}
	t.Logf("insert, generic plan cached on the empty table:\n%s", plan)
	plan = explainIn(ctx, t, conn, execute("rel", []any{fill(200, "order.close"), keys, s.ns}))
	if strings.Contains(plan, "Seq Scan on ax_tasks") || !strings.Contains(plan, "Index Cond: (id = ANY") ||
		!strings.Contains(plan, "(name = c.name) AND (key = c.key) AND (key_slot = 0)") || strings.Contains(plan, "Index Cond: (key_slot = 0)") {
		t.Errorf("release: the generic plan cached on the empty table does not probe ax_tasks_name_key per key, then the primary key:\n%s", plan)
	}
	for name, args := range map[string][]any{
		"lk":  {"order.close", "order-4242", s.ns},
		"lkm": {fill(20, "order.close"), keys[:20], s.ns},
	} {
		plan = explainIn(ctx, t, conn, execute(name, args))
		if strings.Contains(plan, "Seq Scan on ax_tasks") || strings.Contains(plan, "Backward") || !strings.Contains(plan, "ax_tasks_name_key") {
			t.Errorf("%s: the generic plan cached on the empty table does not read the key's entries of ax_tasks_name_key:\n%s", name, plan)
		}
	}

	inFlight := func(status string) (ids []int64, eids []string) {
		rows, _ := conn.Query(ctx, `SELECT id, execution_id FROM ax_tasks WHERE status = $1 ORDER BY id LIMIT 200`, status)
		var id int64
		var eid string
		if _, err := pgx.ForEachRow(rows, []any{&id, &eid}, func() error {
			ids, eids = append(ids, id), append(eids, eid)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return ids, eids
	}
	dueIDs, _ := inFlight("SCHEDULED")
	newEIDs := make([]string, len(dueIDs))
	for i := range newEIDs {
		newEIDs[i] = fmt.Sprintf("0190a0a0-0000-7000-8000-%012d", i)
	}
	runIDs, runEIDs := inFlight("RUNNING")
	dispIDs, dispEIDs := inFlight("DISPATCHING")
	exec(executionSession)
	for _, c := range statements {
		ids, eids := runIDs, runEIDs
		switch c.name {
		case "claim":
			ids, eids = dueIDs, newEIDs
		case "start", "requeue":
			ids, eids = dispIDs, dispEIDs
		}
		plan := explainIn(ctx, t, conn, execute(c.name, c.args(ids, eids)))
		for _, m := range otherIndex.FindAllString(plan, -1) {
			if !strings.HasSuffix(m, "ax_tasks_pkey") {
				t.Errorf("%s: the plan reads %s:\n%s", c.name, m, plan)
			}
		}
		if strings.Contains(plan, "Seq Scan") || !strings.Contains(plan, "Index Cond: (id = ANY ($1))") || !strings.Contains(plan, "Update on ax_tasks t") {
			t.Errorf("%s: the plan does not reach the tasks by the generic index condition on ax_tasks_pkey:\n%s", c.name, plan)
		}
		// No node reads more than a few times the batch — an index scan counts the
		// entries of the row versions the statements explained before left (rolled
		// back), so up to 400 here — where reading the table is 10,000 rows; and none
		// is run more than once, so none rescans its input per row.
		for _, line := range strings.Split(plan, "\n") {
			m := actualRows.FindStringSubmatch(line)
			if m == nil || strings.Contains(line, "CTE Scan on ts") { // the one-row CTE of the statement's time
				continue
			}
			if rows, _ := strconv.Atoi(m[1]); rows > 1000 || m[2] != "1" {
				t.Errorf("%s: a node reads %s rows %s times:\n%s", c.name, m[1], m[2], plan)
				break
			}
		}
		if !strings.Contains(plan, "rows=200 loops=1") {
			t.Errorf("%s: the plan does not write the 200 tasks:\n%s", c.name, plan)
		}
	}
}

// actualRows finds the row count and loops of each node of an EXPLAIN ANALYZE.
var actualRows = regexp.MustCompile(`\(actual time=[0-9.]+\.\.[0-9.]+ rows=(\d+) loops=(\d+)\)`)

// explainIn returns the plan of EXPLAIN ANALYZE of sql, run on conn in a transaction
// it rolls back.
func explainIn(ctx context.Context, t *testing.T, conn interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}, sql string, args ...any) string {
	t.Helper()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	rows, _ := tx.Query(ctx, `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, SUMMARY OFF) `+sql, args...)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return strings.Join(lines, "\n")
}
