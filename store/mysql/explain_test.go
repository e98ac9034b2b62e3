package mysql_test

import (
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/mysql"
)

// TestExplain loads 100k tasks and prints the plans of the store's hot queries, for
// doc.go. It runs only with AX_MYSQL_EXPLAIN=1.
func TestExplain(t *testing.T) {
	if os.Getenv("AX_MYSQL_EXPLAIN") != "1" {
		t.Skip("set AX_MYSQL_EXPLAIN=1 to print the query plans")
	}
	s, db := openWithDB(t)
	ctx := t.Context()
	now, _ := s.Now(ctx)
	const n = 100_000
	for lo := 0; lo < n; lo += 1000 {
		nts := make([]store.NewTask, 1000)
		for i := range nts {
			k := lo + i
			nts[i] = store.NewTask{Name: fmt.Sprintf("handler.%d", k%20), Key: fmt.Sprintf("key-%d", k),
				DueAt: now.Add(time.Duration(k%2880-1440) * time.Minute), OwnerService: "bench"}
			if k%5 == 0 { // 20% periodic occurrences of 100 schedules, among them every DISPATCHING task
				nts[i].Name = fmt.Sprintf("sched.%d", (k/5)%100)
				nts[i].TaskKey, nts[i].Overlap = nts[i].Name, store.OverlapSkip
			}
		}
		if _, err := s.Insert(ctx, nts); err != nil {
			t.Fatal(err)
		}
	}
	// 70% finished, 10% running, 5% dispatching, 15% scheduled.
	for _, q := range []string{
		`UPDATE ax_tasks SET status = 'SUCCEEDED', finished_at = UTC_TIMESTAMP(6) WHERE id % 20 < 14`,
		`UPDATE ax_tasks SET status = 'RUNNING', execution_id = UUID(), dispatched_at = due_at, started_at = due_at, heartbeat_at = due_at WHERE id % 20 IN (14, 15)`,
		`UPDATE ax_tasks SET status = 'DISPATCHING', execution_id = UUID(), dispatched_at = due_at WHERE id % 20 = 16`,
		`ANALYZE TABLE ax_tasks`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	var version string
	db.QueryRow(`SELECT VERSION()`).Scan(&version)
	ts := func(d time.Duration) string { return now.Add(d).UTC().Format("2006-01-02 15:04:05.000000") }
	var ids []string
	for i := 3; i < 3+200*20; i += 20 { // SCHEDULED ids (id % 20 = 3)
		ids = append(ids, fmt.Sprint(i))
	}
	in := strings.Join(ids, ",")
	var names []string
	for i := range 10 {
		names = append(names, fmt.Sprintf("'sched.%d'", i*7))
	}
	keys := strings.Join(names, ",")
	var out strings.Builder
	fmt.Fprintf(&out, "%s, %d rows in ax_tasks\n", version, n)
	for _, c := range []struct{ name, q string }{
		{"window scan (from a cursor)", `SELECT id, due_at FROM ax_tasks WHERE status = 'SCHEDULED' AND due_at >= '` + ts(0) + `' AND due_at < '` + ts(5*time.Minute) +
			`' AND (due_at > '` + ts(0) + `' OR id > 5) ORDER BY due_at, id LIMIT 1000`},
		{"window scan (overdue first)", `SELECT id, due_at FROM ax_tasks WHERE status = 'SCHEDULED' AND due_at < '` + ts(5*time.Minute) + `' ORDER BY due_at, id LIMIT 1000`},
		{"claim: lock", `SELECT id FROM ax_tasks FORCE INDEX (PRIMARY) WHERE id IN (` + in + `) AND status = 'SCHEDULED' ORDER BY id FOR UPDATE SKIP LOCKED`},
		{"claim: lock, without the hint", `SELECT id FROM ax_tasks WHERE id IN (` + in + `) AND status = 'SCHEDULED' ORDER BY id FOR UPDATE SKIP LOCKED`},
		{"claim: update", `UPDATE ax_tasks FORCE INDEX (PRIMARY) SET status = 'DISPATCHING' WHERE id IN (` + in + `) AND status = 'SCHEDULED' AND due_at <= '` + ts(0) + `'`},
		{"refill: changed since a cursor", `SELECT id, due_at, seq FROM ax_tasks WHERE status = 'SCHEDULED' AND seq > 99000 AND seq <= 100000 ORDER BY seq LIMIT 1000`},
		{"orphan scan", `SELECT id FROM ax_tasks WHERE status = 'RUNNING' AND heartbeat_at < '` + ts(-10*time.Hour) + `' ORDER BY heartbeat_at, id LIMIT 100`},
		{"stuck-claim scan", `SELECT id FROM ax_tasks WHERE status = 'DISPATCHING' AND dispatched_at < '` + ts(-10*time.Hour) + `' ORDER BY dispatched_at, id LIMIT 100`},
		{"key holders (10 keys)", `SELECT held_key, MIN(id) FROM ax_tasks WHERE held_key IN (` + keys + `) GROUP BY held_key`},
		{"keyed claim: update (200 ids, 10 keys)", `UPDATE ax_tasks FORCE INDEX (PRIMARY) SET status = 'DISPATCHING' WHERE id IN (` + in + `) AND status = 'SCHEDULED' AND due_at <= '` + ts(0) +
			`' AND task_key NOT IN (SELECT held_key FROM (SELECT held_key FROM ax_tasks WHERE held_key IN (` + keys + `) GROUP BY held_key) AS held)`},
		{"schedule's pending occurrences (pause)", `SELECT id FROM ax_tasks WHERE name = 'sched.7' AND task_key = 'sched.7' AND status = 'SCHEDULED' ORDER BY id`},
		{"task stats", strings.Replace(mysql.TaskStatsSQL, "?", "'"+ts(0)+"'", 1)},
		{"business key lookup", "SELECT id FROM ax_tasks WHERE name = 'handler.7' AND `key` = 'key-4507'"},
		{"executions of a task", `SELECT t.id FROM ax_tasks t LEFT JOIN ax_executions e ON e.task_id = t.id WHERE t.id = 4507 ORDER BY e.started_at, e.id`},
	} {
		fmt.Fprintf(&out, "\n-- %s\n", c.name)
		explain(t, db, &out, c.q)
	}
	t.Log("\n" + out.String())
}

func explain(t *testing.T, db *sql.DB, out *strings.Builder, q string) {
	t.Helper()
	rows, err := db.Query("EXPLAIN " + q)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var parts []string
		for i, c := range cols {
			if vals[i].Valid && c != "id" && c != "select_type" && c != "partitions" {
				parts = append(parts, c+"="+vals[i].String)
			}
		}
		out.WriteString(strings.Join(parts, " ") + "\n")
	}
}
