package postgres

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/internal/servicetest"
)

// TestExplain loads 100k tasks in a realistic mix of states and namespaces and checks
// that the hot queries of one namespace are index scans, with the namespace in the
// index condition (the plans in doc.go come from this test: run it with -v, or set
// AX_EXPLAIN_OUT=file to write them out).
func TestExplain(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 100k rows")
	}
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, servicetest.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
	if _, err := s.pool.Exec(ctx, `VACUUM ANALYZE ax_tasks`); err != nil {
		t.Fatal(err)
	}
	var seq int64
	if err := s.pool.QueryRow(ctx, `SELECT last_value - 100 FROM ax_seq`).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	var claimIDs []int64
	rows, _ := s.pool.Query(ctx, `SELECT id FROM ax_tasks WHERE namespace = 'default' AND status = 'SCHEDULED' AND due_at <= clock_timestamp()
		ORDER BY id LIMIT 200`)
	claimIDs, err = pgx.CollectRows(rows, pgx.RowTo[int64])
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
	keys[199] = "order-4242" // a duplicate
	now := time.Now()
	ns := s.ns
	cases := []struct {
		name  string
		sql   string
		args  []any
		index string // an index the plan must use
		whole bool   // the statement reads the whole table: a Seq Scan on ax_tasks is expected
	}{
		{"window scan (Refill, Entered)", refillSQL, []any{int64(1<<63 - 1), now.Add(5 * time.Minute), 1000, time.Time{}, int64(0), ns},
			"ax_tasks_scheduled_due", false},
		{"refill (Refill, Changed)", refillSQL, []any{seq, now.Add(5 * time.Minute), 1000, now.Add(5 * time.Minute), int64(0), ns},
			"ax_tasks_scheduled_seq", false},
		{"claim (200 ids)", claimSQL, []any{claimIDs, claimEIDs, ns, make([]bool, len(claimIDs)), []string{}, ""}, "ax_tasks_pkey", false},
		{"claim and start (200 ids)", claimSQL, []any{claimIDs, claimEIDs, ns, starts(len(claimIDs)), []string{"order.close"}, "node-1"}, "ax_tasks_pkey", false},
		{"orphan scan (Stale RUNNING)", staleRunningSQL, []any{now.Add(-5 * time.Minute), 100, ns}, "ax_tasks_running_heartbeat", false},
		{"stuck-claim scan (Stale DISPATCHING)", staleDispatchingSQL, []any{now.Add(-5 * time.Minute), 100, ns}, "ax_tasks_dispatching_since", false},
		{"insert (200 tasks, one a duplicate)", insertSQL, []any{names, keys, payloads, dues, retries, owners, timeouts, backoffs, taskKeys, overlaps, ns},
			"ax_tasks_name_key", false},
		{"key holders (Claim, Trigger: 20 keys)", holdersSQL, []any{holderKeys, ns}, "ax_tasks_key_held", false},
		{fmt.Sprintf("keyed claim (%d winners)", len(keyedIDs)), keyedClaimSQL, []any{keyedIDs, keyedEIDs}, "ax_tasks_key_held", false},
		{"business key (Lookup)", lookupSQL, []any{"order.close", "order-4242", ns}, "ax_tasks_name_key", false},
		{"task stats (TaskStats)", taskStatsSQL, []any{now, ns}, "ax_tasks_scheduled_due", true},
	}
	var out strings.Builder
	for _, c := range cases {
		tx, err := s.pool.Begin(ctx) // rolled back: EXPLAIN ANALYZE of the claim writes
		if err != nil {
			t.Fatal(err)
		}
		rows, err := tx.Query(ctx, `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, SUMMARY OFF) `+c.sql, c.args...)
		if err != nil {
			tx.Rollback(ctx)
			t.Fatalf("%s: %v", c.name, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		tx.Rollback(ctx)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		plan := strings.Join(lines, "\n")
		out.WriteString("-- " + c.name + "\n" + plan + "\n\n")
		if strings.Contains(plan, "Seq Scan on ax_tasks") != c.whole || !strings.Contains(plan, c.index) {
			t.Errorf("%s: plan does not use %s, or scans ax_tasks sequentially (expected: %v):\n%s", c.name, c.index, c.whole, plan)
		}
		// The namespace leads every index it scans: it must be part of the index
		// condition, not a filter applied to the rows read.
		if !c.whole && c.index != "ax_tasks_pkey" && !namespaceInIndexCond(plan, c.index) {
			t.Errorf("%s: the scan of %s does not have the namespace in its index condition:\n%s", c.name, c.index, plan)
		}
	}
	t.Logf("plans on 100k rows:\n%s", out.String())
	if f := os.Getenv("AX_EXPLAIN_OUT"); f != "" {
		os.WriteFile(f, []byte(out.String()), 0o644)
	}
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

// starts is n claims' Start flags, all set.
func starts(n int) []bool {
	b := make([]bool, n)
	for i := range b {
		b[i] = true
	}
	return b
}
