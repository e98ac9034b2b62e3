package mysql_test

import (
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/mysql"
)

// TestExplain loads 100k tasks into two namespaces and checks, and prints for DESIGN.md,
// the plans of the store's hot queries with their namespace predicate: each must use
// its index (led by namespace), not scan the table. It runs only with
// AX_MYSQL_EXPLAIN=1.
func TestExplain(t *testing.T) {
	if os.Getenv("AX_MYSQL_EXPLAIN") != "1" {
		t.Skip("set AX_MYSQL_EXPLAIN=1 to check and print the query plans")
	}
	s, db := openWithDB(t)
	other, err := s.InNamespace("other")
	if err != nil {
		t.Fatal(err)
	}
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
		into := store.Store(s)
		if lo/1000%5 == 4 { // a fifth of the tasks in another namespace
			into = other
		}
		if _, err := into.Insert(ctx, nts); err != nil {
			t.Fatal(err)
		}
	}
	// The leadership history: 505 terms, each acquired and ended, in each of 20
	// namespaces, the default one among them — 10 changes beyond the 1,000 that
	// retention keeps.
	for i := range 20 {
		lns := "default"
		if i > 0 {
			lns = fmt.Sprintf("ns-%d", i)
		}
		var vals []string
		for e := 1; e <= 505; e++ {
			for _, kind := range []string{"acquired", "ended"} {
				vals = append(vals, fmt.Sprintf("('%s', %d, '%s', 'node-%d', UTC_TIMESTAMP(6) - INTERVAL %d HOUR, 'resigned')", lns, e, kind, e%3, 505-e))
			}
		}
		if _, err := db.Exec(`INSERT INTO ax_leadership (namespace, epoch, kind, holder, at, reason) VALUES ` + strings.Join(vals, ", ")); err != nil {
			t.Fatal(err)
		}
	}
	// 70% finished, 10% running, 5% dispatching, 15% scheduled.
	for _, q := range []string{
		`UPDATE ax_tasks SET status = 'SUCCEEDED', finished_at = UTC_TIMESTAMP(6) WHERE id % 20 < 14`,
		`UPDATE ax_tasks SET status = 'RUNNING', execution_id = UUID(), dispatched_at = due_at, started_at = due_at, heartbeat_at = due_at WHERE id % 20 IN (14, 15)`,
		`UPDATE ax_tasks SET status = 'DISPATCHING', execution_id = UUID(), dispatched_at = due_at WHERE id % 20 = 16`,
		// The lock rows of the schedules' keys and of 10,000 other keys, in both namespaces.
		`INSERT INTO ax_task_keys (namespace, task_key) SELECT DISTINCT namespace, task_key FROM ax_tasks WHERE task_key <> ''`,
		"INSERT INTO ax_task_keys (namespace, task_key) SELECT namespace, CONCAT('k.', `key`) FROM ax_tasks WHERE id % 10 = 0",
		// 20,000 gaps of the 100 schedules, a minute each, over the last two weeks.
		`INSERT INTO ax_slot_gaps (namespace, schedule, from_at, until_at, why, result, created_at)
			SELECT namespace, name, due_at, due_at + INTERVAL 1 MINUTE, 'missed', 'skipped', due_at FROM ax_tasks WHERE task_key <> ''`,
		// An audit log of 100,000 records over 29 days, a fifth in "other", with a bulk
		// action's 1,000 records in one microsecond an hour ago.
		`INSERT INTO ax_audit (namespace, at, actor, role, action, target, reason, result, status_before, status_after, execution_id)
			SELECT namespace, UTC_TIMESTAMP(6) - INTERVAL id * 25 SECOND, CONCAT('actor-', id % 7), 'operator', 'task.cancel',
				CONCAT('task ', id), '', 'ok', '', '', '' FROM ax_tasks`,
		`INSERT INTO ax_audit (namespace, at, actor, role, action, target, reason, result, status_before, status_after, execution_id)
			SELECT 'default', '` + now.Add(-time.Hour).UTC().Format("2006-01-02 15:04:05") + `', 'alice', 'operator', 'task.retry',
				CONCAT('task ', id), '', 'ok', '', '', '' FROM ax_tasks WHERE id <= 1000`,
		// A concurrency limit on every name, in both namespaces.
		`INSERT INTO ax_names (namespace, name, concurrency, changed_by, changed_at)
			SELECT DISTINCT namespace, name, 5, 'bench', UTC_TIMESTAMP(6) FROM ax_tasks`,
		// The claim times of the schedules' keys and of 10,000 other (name, key) pairs,
		// in both namespaces, their last claims over two days, half of them past a
		// day (store.MaxRatePer) ago.
		`INSERT INTO ax_key_starts (namespace, name, task_key, starts, last_at)
			SELECT DISTINCT namespace, name, task_key, UNHEX('0005F0E1D2C3B4A5'), UTC_TIMESTAMP(6) FROM ax_tasks WHERE task_key <> ''`,
		"INSERT INTO ax_key_starts (namespace, name, task_key, starts, last_at) SELECT namespace, name, CONCAT('k.', `key`), UNHEX('0005F0E1D2C3B4A5'), due_at - INTERVAL 1 DAY FROM ax_tasks WHERE id % 10 = 0",
		`ANALYZE TABLE ax_tasks, ax_task_keys, ax_slot_gaps, ax_leadership, ax_audit, ax_names, ax_key_starts`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	// Two days of statistics of 10 nodes, in both namespaces.
	base := now.Truncate(time.Minute)
	for _, into := range []store.Store{s, other} {
		for m := 0; m < 2880; m += 6 {
			var rows []store.MinuteStats
			for i := range 60 {
				rows = append(rows, store.MinuteStats{Node: fmt.Sprintf("node-%d", i%10),
					Minute: base.Add(-time.Duration(m+i/10) * time.Minute), Succeeded: int64(i)})
			}
			if err := into.WriteStats(ctx, rows); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := db.Exec(`ANALYZE TABLE ax_stats`); err != nil {
		t.Fatal(err)
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
	var byKey []string
	for i := range 200 {
		byKey = append(byKey, fmt.Sprintf("('handler.%d', 'key-%d')", (1507+i*20)%20, 1507+i*20))
	}
	var keyPairs []string // 10 schedules' (name, key) pairs, their names' keys
	for _, n := range names {
		keyPairs = append(keyPairs, n, n)
	}
	var limitedNames []string // 10 names with tasks (handler.0, .5, .10 and .15 have none)
	for _, i := range []int{1, 2, 3, 4, 6, 7, 8, 9, 11, 12} {
		limitedNames = append(limitedNames, fmt.Sprintf("'handler.%d'", i))
	}
	const ns = `namespace = 'default' AND `
	history, newest := bind(mysql.HistorySQL, "'default'", "20"), bind(mysql.NewestChangeSQL, "'default'")
	var out strings.Builder
	fmt.Fprintf(&out, "%s, %d rows in ax_tasks (a fifth in another namespace)\n", version, n)
	for _, c := range []struct {
		name, q, key string
		keyLen       int // the least key_len: namespace (202 bytes) and the columns after it the query needs
	}{
		{"window scan (from a cursor)", `SELECT id, due_at FROM ax_tasks WHERE ` + ns + `status = 'SCHEDULED' AND due_at >= '` + ts(0) + `' AND due_at < '` + ts(5*time.Minute) +
			`' AND (due_at > '` + ts(0) + `' OR id > 5) ORDER BY due_at, id LIMIT 1000`, "ax_tasks_status_due", 228},
		{"window scan (overdue first)", `SELECT id, due_at FROM ax_tasks WHERE ` + ns + `status = 'SCHEDULED' AND due_at < '` + ts(5*time.Minute) + `' ORDER BY due_at, id LIMIT 1000`, "ax_tasks_status_due", 228},
		{"claim: lock", `SELECT id FROM ax_tasks FORCE INDEX (PRIMARY) WHERE id IN (` + in + `) AND status = 'SCHEDULED' AND namespace = 'default' ORDER BY id FOR UPDATE`, "PRIMARY", 8},
		{"claim: lock, without the hint", `SELECT id FROM ax_tasks WHERE id IN (` + in + `) AND status = 'SCHEDULED' AND namespace = 'default' ORDER BY id FOR UPDATE`, "", 0},
		{"claim: update", `UPDATE ax_tasks FORCE INDEX (PRIMARY) SET status = 'DISPATCHING' WHERE id IN (` + in + `) AND status = 'SCHEDULED' AND due_at <= '` + ts(0) + `'`, "PRIMARY", 8},
		{"refill: changed since a cursor", `SELECT id, due_at, seq FROM ax_tasks WHERE ` + ns + `status = 'SCHEDULED' AND seq > 78000 AND seq <= 79000 ORDER BY seq LIMIT 1000`, "ax_tasks_status_seq", 228},
		{"orphan scan", `SELECT id FROM ax_tasks WHERE ` + ns + `status = 'RUNNING' AND heartbeat_at < '` + ts(-10*time.Hour) + `' ORDER BY heartbeat_at, id LIMIT 100`, "ax_tasks_status_heartbeat", 229},
		{"stuck-claim scan", `SELECT id FROM ax_tasks WHERE ` + ns + `status = 'DISPATCHING' AND dispatched_at < '` + ts(-10*time.Hour) + `' ORDER BY dispatched_at, id LIMIT 100`, "ax_tasks_status_dispatched", 229},
		{"key holders (10 keys)", args(mysql.HoldersSQL(10, false), append([]string{"'default'"}, names...)...), "ax_tasks_held_key", 2205},
		{"keyed claim: update (200 ids, 10 keys)", `UPDATE ax_tasks FORCE INDEX (PRIMARY) SET status = 'DISPATCHING' WHERE id IN (` + in + `) AND status = 'SCHEDULED' AND due_at <= '` + ts(0) + `'` +
			args(mysql.Unheld(10, 1), append([]string{"'default'"}, names...)...), "PRIMARY", 8},
		// A name's key concurrency above one: the holders counted, and the claim's
		// check "fewer than it admits", each holder's index entry read.
		{"key holders, counted (10 keys)", args(mysql.HoldersSQL(10, true), append([]string{"'default'"}, names...)...), "ax_tasks_held_key", 2205},
		{"keyed claim: update, 3 holders admitted (200 ids, 10 keys)", `UPDATE ax_tasks FORCE INDEX (PRIMARY) SET status = 'DISPATCHING' WHERE id IN (` + in +
			`) AND status = 'SCHEDULED' AND due_at <= '` + ts(0) + `'` + args(mysql.Unheld(10, 3), append(append([]string{"'default'"}, names...), "3")...), "PRIMARY", 8},
		{"claim: lock, with the name rule", `SELECT id, ` + mysql.NameRuleSQL + ` FROM ax_tasks FORCE INDEX (PRIMARY) WHERE id IN (` + in +
			`) AND status = 'SCHEDULED' AND namespace = 'default' ORDER BY id FOR UPDATE`, "PRIMARY", 8},
		// A limited name's claim: its row's lock, then the count of its tasks in flight
		// from the (namespace, status) ranges, not from the name's rows (4,000 a name
		// here, 2,800 of them finished).
		{"names' lock (10 names)", args(mysql.LockNamesSQL(10), append([]string{"'default'"}, limitedNames...)...), "PRIMARY", 1004},
		{"names in flight (10 names)", args(mysql.InflightSQL(10), append([]string{"'default'"}, limitedNames...)...), "ax_tasks_status_seq", 220},
		// A name's rate per task key: its keys' claim times, dives of ax_key_starts'
		// primary key; PruneKeyStarts' oldest rows, a range of ax_key_starts_last
		// (namespace, last_at) in its order, and their delete by primary key.
		{"key starts (10 keys)", args(mysql.KeyStartsSQL(10), append([]string{"'default'"}, keyPairs...)...), "PRIMARY", 3006},
		{"old key starts (PruneKeyStarts)", args(mysql.OldKeyStartsSQL, "'default'", fmt.Sprint(store.MaxRatePer.Microseconds()), "1000"),
			"ax_key_starts_last", 210},
		{"key starts pruned (10 keys)", args(mysql.DeleteKeyStartsSQL(10), append([]string{"'default'"}, keyPairs...)...), "PRIMARY", 3006},
		// Names: the namespace's names, and one pass over its tasks in flight.
		{"names (Names)", args(mysql.NamesSQL, "'default'", "'default'"), "PRIMARY", 202},
		{"key locks (10 keys)", `SELECT task_key FROM ax_task_keys WHERE ` + ns + `task_key IN (` + keys + `) ORDER BY task_key FOR UPDATE`, "PRIMARY", 2204},
		{"schedule's pending occurrences (pause)", `SELECT id FROM ax_tasks WHERE ` + ns + `name = 'sched.7' AND task_key = 'sched.7' AND status = 'SCHEDULED' ORDER BY id`, "ax_tasks_name_key", 1004},
		{"task stats", strings.Replace(strings.Replace(strings.Replace(mysql.TaskStatsSQL, "?", "'default'", 1), "?", "'"+ts(0)+"'", 1), "?", "'default'", 1), "ax_tasks_status_", 202},
		{"business key lookup", "SELECT id FROM ax_tasks WHERE " + ns + "name = 'handler.7' AND `key` = 'key-1507'", "ax_tasks_name_key", 3006},
		{"insert's read back (a chunk of 200 keys)", "SELECT id, seq FROM ax_tasks WHERE " + ns + "(name, `key`) IN (" + strings.Join(byKey, ", ") + ") LOCK IN SHARE MODE", "ax_tasks_name_key", 3006},
		{"executions of a task", `SELECT t.id FROM ax_tasks t LEFT JOIN ax_executions e ON e.task_id = t.id WHERE t.id = 1507 AND t.namespace = 'default' ORDER BY e.started_at, e.id`, "PRIMARY", 8},
		{"tasks: a name and a key prefix", mysql.TasksSQL(store.TaskQuery{Name: "handler.7", KeyPrefix: "key-15", Limit: 101}), "ax_tasks_name_key", 1004},
		{"tasks: due soonest", mysql.TasksSQL(store.TaskQuery{Statuses: []store.Status{store.Scheduled}, Soonest: true, Limit: 101}), "ax_tasks_status_due", 220},
		{"tasks: the oldest due (the console's queue lag)", mysql.TasksSQL(store.TaskQuery{Statuses: []store.Status{store.Scheduled}, Soonest: true,
			DueBefore: now, Limit: 2}), "ax_tasks_status_due", 220},
		{"tasks: failed in a range", mysql.TasksSQL(store.TaskQuery{Statuses: []store.Status{store.Failed},
			FinishedFrom: now.Add(-time.Hour), FinishedBefore: now.Add(time.Hour), Limit: 101}), "ax_tasks_status_", 220},
		{"tasks: a page of every task", mysql.TasksSQL(store.TaskQuery{After: &store.TaskCursor{ID: 50000}, Limit: 101}), "PRIMARY", 8},
		{"counts", mysql.CountSQL(100_000), "", 0},
		{"an hour of statistics", strings.NewReplacer("namespace = ?", "namespace = 'default'", "minute >= ?", "minute >= '"+ts(-time.Hour)+"'",
			"LIMIT ?", fmt.Sprint("LIMIT ", store.MaxStatsRead)).Replace(mysql.StatsSQL), "PRIMARY", 210},
		{"statistics pruned", strings.NewReplacer("namespace = ?", "namespace = 'default'", "minute < ?", "minute < '"+ts(-47*time.Hour)+"'",
			"LIMIT ?", fmt.Sprint("LIMIT ", store.MaxPrune)).Replace(mysql.PruneStatsSQL), "PRIMARY", 210},
		{"gaps of a schedule (SlotGaps)", args(mysql.SlotGapsSQL, "'default'", "'sched.7'", "'"+ts(-24*time.Hour)+"'", "'"+ts(0)+"'", "100"),
			"ax_slot_gaps_schedule", 1012},
		{"old gaps (PruneSlotGaps)", args(mysql.OldGapsSQL, "'default'", "'"+ts(-time.Hour)+"'", "1000"), "ax_slot_gaps_until", 210},
		{"occurrences by their keys (TasksByKeys, 50 keys)", args(mysql.TasksByKeysSQL(50), append([]string{"'default'", "'handler.7'"}, quoted(50, "key-%d")...)...),
			"ax_tasks_name_key", 3006},
		{"manual occurrences (TasksByKeyRange)", args(mysql.TasksByKeyRangeSQL, "'default'", "'handler.7'", "'key-15'", "'key-16'", "101"),
			"ax_tasks_name_key", 3006},
		// The leadership history: ranges of its primary key (namespace: 202 bytes).
		{"leadership history (20)", history, "PRIMARY", 202},
		{"newest leadership change (RaiseFence)", newest, "PRIMARY", 202},
		{"leadership prune: the cut (keep 1,000)", bind(mysql.PruneCutSQL, "'default'", "1000"), "PRIMARY", 202},
		{"leadership prune: the first to stay", bind(mysql.PruneStaySQL, "'default'", "10", "10", "'acquired'", "'"+ts(-90*24*time.Hour)+"'"), "PRIMARY", 210},
		{"leadership prune: delete", bind(mysql.PruneLeadershipSQL, "'default'", "6", "6", "'ended'", "1000"), "PRIMARY", 210},
		// The audit log by time: ax_audit_at, read backward in (at, id) order (its
		// entries end with the id), without a sort. A selective range is a range of
		// (namespace, at): 210 bytes. With a bound that leaves most of the namespace in,
		// MariaDB 10.11 reads the namespace's entries from the newest (ref, 202 bytes)
		// and filters them: a page then reads the rows newer than its upper bound too
		// (ANALYZE measured 57,101 rows read for "until 20 days ago" here).
		{"audit log: a day (AuditLog, since, until)", mysql.AuditLogSQL(store.AuditQuery{Since: now.Add(-48 * time.Hour),
			Until: now.Add(-24 * time.Hour), Limit: 101}, time.Time{}), "ax_audit_at", 210},
		{"audit log: since a week ago, an actor (AuditLog)", mysql.AuditLogSQL(store.AuditQuery{Actor: "actor-3",
			Since: now.Add(-7 * 24 * time.Hour), Limit: 101}, time.Time{}), "ax_audit_at", 202},
		{"audit log: until, the next page in a bulk action (AuditLog, BeforeID)", mysql.AuditLogSQL(store.AuditQuery{Until: now,
			BeforeID: 500, Limit: 101}, now.Add(-time.Hour).Truncate(time.Second)), "ax_audit_at", 202},
		{"audit log: until 20 days ago (AuditLog)", mysql.AuditLogSQL(store.AuditQuery{Until: now.Add(-20 * 24 * time.Hour), Limit: 101},
			time.Time{}), "ax_audit_at", 202},
	} {
		fmt.Fprintf(&out, "\n-- %s\n", c.name)
		plan := explain(t, db, &out, c.q)
		if c.key == "" {
			continue
		}
		first := plan[0]
		keyLen, _ := strconv.Atoi(first["key_len"])
		if !strings.HasPrefix(first["key"], c.key) || keyLen < c.keyLen || first["type"] == "ALL" || first["type"] == "index" {
			t.Errorf("%s: plan %v, want a range or lookup on %s with key_len >= %d", c.name, first, c.key, c.keyLen)
		}
		// The statistics are read and pruned, and the history's reads walk the key, in
		// the primary key's order and stop at their LIMIT, as the old key starts walk
		// ax_key_starts_last. (The history prune's DELETE may sort its range, the
		// changes before the first kept.)
		if (strings.Contains(c.name, "statistics") || strings.HasPrefix(c.name, "audit log") || strings.HasPrefix(c.name, "old key starts") ||
			c.q == history || c.q == newest) &&
			strings.Contains(first["Extra"], "filesort") {
			t.Errorf("%s: plan %v sorts, want its index's order", c.name, first)
		}
	}
	t.Log("\n" + out.String())
}

// bind replaces the placeholders of q, in order, with the literals args.
func bind(q string, args ...string) string {
	for _, a := range args {
		q = strings.Replace(q, "?", a, 1)
	}
	return q
}

// explain writes q's plan to out, one line per row, and returns the rows.
func explain(t *testing.T, db *sql.DB, out *strings.Builder, q string) []map[string]string {
	t.Helper()
	rows, err := db.Query("EXPLAIN " + q)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var plan []map[string]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := map[string]string{}
		var parts []string
		for i, c := range cols {
			if vals[i].Valid && c != "id" && c != "select_type" && c != "partitions" {
				parts = append(parts, c+"="+vals[i].String)
				row[c] = vals[i].String
			}
		}
		plan = append(plan, row)
		out.WriteString(strings.Join(parts, " ") + "\n")
	}
	if len(plan) == 0 {
		t.Fatalf("EXPLAIN %s: no rows", q)
	}
	return plan
}

// args replaces q's placeholders, in order, with the literals given.
func args(q string, lits ...string) string {
	for _, l := range lits {
		q = strings.Replace(q, "?", l, 1)
	}
	return q
}

// quoted is n string literals made from format and 0..n-1, times 20 plus 7.
func quoted(n int, format string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "'" + fmt.Sprintf(format, i*20+7) + "'"
	}
	return out
}
