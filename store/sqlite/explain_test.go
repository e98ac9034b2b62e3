package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/taskquery"
)

// tasksSQL is the statement Tasks runs for q (a page of 100).
func tasksSQL(q store.TaskQuery) string {
	q.Limit = 100
	sql, _ := taskquery.Select(dialect, taskColumns, tasksFrom(q), store.DefaultNamespace, q)
	return sql
}

// countSQL is the statement CountTasks runs.
func countSQL() string {
	sql, _ := taskquery.Count(dialect, store.DefaultNamespace, 100_000)
	return sql
}

// auditLogSQL is the statement AuditLog runs for q (a page of 100), continuing after a
// record of now when q pages by time.
func auditLogSQL(q store.AuditQuery) string {
	q.Limit = 100
	sql, _ := taskquery.AuditSelect(dialect, store.DefaultNamespace, q, time.Now())
	return sql
}

// TestExplain pins the plans of the overlap rule's lookups: SQLite uses a partial
// index only for a query whose WHERE clause contains the index's, so a reworded
// condition would silently fall back to a scan of every DISPATCHING and RUNNING row.
// It also pins the claim of tasks without a key to the primary key (and its handler
// list to json_each, read once),
// and TaskStats's oldest due time to the partial due index, read once, the fence
// check to ax_leader's primary key, and the leadership history's reads and prune to
// ax_leadership's.
//
// Every scan of a namespace's rows must be a range of an index whose leading column is
// the namespace (migrations/0004_namespaces.sql), and every statement that names its
// rows by id must stay on the primary key: the namespace predicate, compared as
// +namespace there, must not tempt the planner into a scan of a namespace index.
func TestExplain(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(t.TempDir(), "ax.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	batch := func(b *batchStmt) string { return strings.Replace(b.sql, "%V%", values(4, b.cols), 1) }
	const (
		pk       = "SEARCH ax_tasks USING INTEGER PRIMARY KEY (rowid=?)"
		holder   = "USING INDEX ax_tasks_ns_key_holder (namespace=? AND task_key=?)"
		names    = "USING INDEX sqlite_autoindex_ax_names_1" // ax_names' primary key
		due      = "USING COVERING INDEX ax_tasks_ns_scheduled_due (namespace=? AND due_at<?)"
		nsIndex  = "INDEX ax_tasks_ns_" // any namespace-leading index of ax_tasks
		sorted   = "TEMP B-TREE FOR ORDER BY"
		scanTask = "SCAN ax_tasks"
	)
	for _, c := range []struct {
		name, sql string
		want      []string // each in some line of EXPLAIN QUERY PLAN
		not       []string // in none
	}{
		{"holder lookup (Claim)", batch(holdersStmt), []string{"SEARCH ax_tasks " + holder}, []string{scanTask}},
		{"restricted claim", batch(restrictedClaimStmt), []string{pk, "SEARCH o " + holder},
			[]string{scanTask, "SCAN o", "ax_tasks_ns_scheduled"}},
		// The handler list of ClaimStart is a list subquery over json_each, read once per
		// statement (not correlated), and so is the check for a paused or limited name
		// of the namespace; the one correlated subquery is the check of the row's name,
		// a probe of ax_names' primary key per task.
		{"claim without keys", batch(claimStmt), []string{pk, "LIST SUBQUERY", "SCAN json_each",
			"\nSCALAR SUBQUERY", "SEARCH r " + names + " (namespace=?)",
			"CORRELATED SCALAR SUBQUERY", "SEARCH p " + names + " (namespace=? AND name=?)"},
			[]string{scanTask, "CORRELATED LIST", "SCAN p", "SCAN r", nsIndex}},
		{"tasks a claim missed", batch(missedStmt), []string{pk, "SEARCH p " + names + " (namespace=? AND name=?)"},
			[]string{scanTask, nsIndex, "SCAN p"}},
		// The count of a limited name's tasks in flight reads the namespace's
		// DISPATCHING and RUNNING rows through their partial indexes, never every task
		// of the name through the business key's.
		{"names' tasks in flight (Claim)", batch(inflightStmt), []string{
			"SEARCH ax_tasks USING INDEX ax_tasks_ns_dispatching_since (namespace=?)",
			"SEARCH ax_tasks USING INDEX ax_tasks_ns_running_heartbeat (namespace=?)"},
			[]string{scanTask, "ax_tasks_ns_name_key", "ax_tasks_ns_scheduled"}},
		// A claim reads the limits of its limited names, and writes back the claim
		// times of its rate-limited ones, by ax_names' primary key.
		{"names' limits (Claim)", batch(limitsStmt), []string{"SEARCH ax_names " + names + " (namespace=? AND name=?)"},
			[]string{"SCAN ax_names"}},
		{"names' claim times (Claim)", batch(startsStmt), []string{"SEARCH ax_names USING COVERING INDEX sqlite_autoindex_ax_names_1 (namespace=? AND name=?)"},
			[]string{"SCAN ax_names"}},
		// A claim reads the claim times of the keys under a rate per key by
		// ax_key_starts' primary key, which holds the rows (WITHOUT ROWID), and
		// writes them back by an upsert on it (a plan of the VALUES list alone);
		// PruneKeyStarts finds the oldest by ax_key_starts_last, in order.
		{"keys' claim times (Claim)", batch(keyStartsStmt), []string{"SEARCH ax_key_starts USING PRIMARY KEY (namespace=? AND name=? AND task_key=?)"},
			[]string{"SCAN ax_key_starts"}},
		{"keys' claim times written (Claim)", batch(keyStartsWriteStmt), []string{"SCAN 4-ROW VALUES CLAUSE"},
			[]string{"SCAN ax_key_starts"}},
		{"old claim times of keys (PruneKeyStarts)", pruneKeyStartsSQL,
			[]string{"SEARCH ax_key_starts USING COVERING INDEX ax_key_starts_last (namespace=? AND last_at<?)"},
			[]string{"SCAN ax_key_starts", sorted}},
		{"trigger", triggerSQL, []string{pk, "SEARCH o " + holder, "SEARCH p " + names + " (namespace=? AND name=?)"},
			[]string{scanTask, "SCAN o", "SCAN p", "ax_tasks_ns_scheduled"}},
		{"limit of a name (Trigger)", limitSQL, []string{"SEARCH ax_names " + names + " (namespace=? AND name=?)"},
			[]string{"SCAN ax_names"}},
		{"holder lookup (Trigger)", holderSQL, []string{"SEARCH ax_tasks " + holder}, []string{scanTask}},
		{"get", getSQL, []string{pk}, []string{scanTask, nsIndex}},
		{"lookup", lookupSQL, []string{"SEARCH ax_tasks USING INDEX ax_tasks_ns_name_key (namespace=? AND name=? AND key=?)"},
			[]string{scanTask}},
		{"holder of a key", holderOfKeySQL, []string{"SEARCH ax_tasks USING INDEX ax_tasks_ns_name_key (namespace=? AND name=? AND key=? AND key_slot=?)"},
			[]string{scanTask}},
		{"release of a key", releaseSQL, []string{"SEARCH ax_tasks USING INDEX ax_tasks_ns_name_key (namespace=? AND name=? AND key=? AND key_slot=?)"},
			[]string{scanTask}},
		{"refill changed", refillChangedSQL, []string{"SEARCH ax_tasks USING INDEX ax_tasks_ns_scheduled_seq (namespace=? AND seq>?)"},
			[]string{scanTask, sorted}},
		{"refill window", refillWindowSQL, []string{"SEARCH ax_tasks " + due}, []string{scanTask, sorted}},
		{"stale running", staleRunningSQL,
			[]string{"SEARCH ax_tasks USING INDEX ax_tasks_ns_running_heartbeat (namespace=? AND heartbeat_at<?)"},
			[]string{scanTask, sorted}},
		{"stale dispatching", staleDispatchingSQL,
			[]string{"SEARCH ax_tasks USING INDEX ax_tasks_ns_dispatching_since (namespace=? AND dispatched_at<?)"},
			[]string{scanTask, sorted}},
		{"schedule occurrences (pause, delete)", cancelOccurrencesSQL,
			[]string{"SEARCH ax_tasks USING INDEX ax_tasks_ns_name_key (namespace=? AND name=?)"}, []string{scanTask}},
		{"task stats", taskStatsSQL, []string{"SEARCH ax_tasks " + due,
			"SEARCH ax_tasks USING INDEX ax_tasks_ns_name_key (namespace=?)"},
			[]string{"CORRELATED", scanTask}},
		{"nodes", nodesSQL, []string{"SEARCH ax_nodes USING INDEX sqlite_autoindex_ax_nodes_1 (namespace=?)"},
			[]string{"SCAN ax_nodes", sorted}},
		{"tasks: a name and a key prefix", tasksSQL(store.TaskQuery{Name: "n", KeyPrefix: "cust-7/"}),
			[]string{"SEARCH ax_tasks USING INDEX ax_tasks_ns_name_key (namespace=? AND name=? AND key>? AND key<?)"}, []string{scanTask}},
		{"tasks: the newest failed", tasksSQL(store.TaskQuery{Statuses: []store.Status{store.Failed}}),
			[]string{"SCAN ax_tasks"}, []string{sorted}},
		{"tasks: due soonest", tasksSQL(store.TaskQuery{Statuses: []store.Status{store.Scheduled}, Soonest: true}),
			[]string{"SEARCH ax_tasks USING INDEX ax_tasks_ns_scheduled_due (namespace=?)"}, []string{scanTask, sorted}},
		{"tasks: the oldest due (the console's queue lag)", tasksSQL(store.TaskQuery{Statuses: []store.Status{store.Scheduled}, Soonest: true, DueBefore: time.Unix(2, 0), Limit: 2}),
			[]string{"SEARCH ax_tasks USING INDEX ax_tasks_ns_scheduled_due (namespace=? AND due_at<?)"}, []string{scanTask, sorted}},
		{"tasks: failed in a range", tasksSQL(store.TaskQuery{Statuses: []store.Status{store.Failed}, FinishedFrom: time.Unix(1, 0), FinishedBefore: time.Unix(2, 0)}),
			[]string{"SEARCH ax_tasks USING INDEX ax_tasks_ns_failed (namespace=? AND finished_at>? AND finished_at<?)"}, []string{scanTask}},
		{"tasks: a page of every task", tasksSQL(store.TaskQuery{After: &store.TaskCursor{ID: 9}}),
			[]string{"SEARCH ax_tasks USING INTEGER PRIMARY KEY (rowid<?)"}, []string{sorted}},
		{"counts", countSQL(),
			[]string{"ax_tasks_ns_scheduled_", "ax_tasks_ns_succeeded (namespace=?)", "ax_tasks_ns_failed (namespace=?)",
				"ax_tasks_ns_running_heartbeat (namespace=?)", "ax_tasks_ns_dispatching_since (namespace=?)", "ax_tasks_ns_skipped (namespace=?)",
				"ax_tasks_ns_cancelled (namespace=?)"}, []string{scanTask}},
		{"gaps of a schedule (SlotGaps)", slotGapsSQL,
			[]string{"SEARCH ax_slot_gaps USING INDEX ax_slot_gaps_schedule (namespace=? AND schedule=? AND until_at>?)"},
			[]string{"SCAN ax_slot_gaps", sorted}},
		{"old gaps (PruneSlotGaps)", pruneSlotGapsSQL,
			[]string{"SEARCH ax_slot_gaps USING COVERING INDEX ax_slot_gaps_until (namespace=? AND until_at<?)"},
			[]string{"SCAN ax_slot_gaps", sorted}},
		{"occurrences by their keys (TasksByKeys, 50 keys)", tasksByKeysSQL + strings.Repeat("?, ", 49) + "?) ORDER BY id",
			[]string{"SEARCH ax_tasks USING INDEX ax_tasks_ns_name_key (namespace=? AND name=? AND key=?)"}, []string{scanTask}},
		{"manual occurrences (TasksByKeyRange)", tasksByKeyRangeSQL,
			[]string{"SEARCH ax_tasks USING INDEX ax_tasks_ns_name_key (namespace=? AND name=? AND key>? AND key<?)"}, []string{scanTask, sorted}},
		{"fence check", fenceSQL, []string{"SEARCH ax_leader USING INDEX sqlite_autoindex_ax_leader_1 (namespace=?)"},
			[]string{"SCAN ax_leader"}},
		{"an hour of statistics", statsSQL, []string{"SEARCH ax_stats USING PRIMARY KEY (namespace=? AND minute>?)"},
			[]string{"SCAN ax_stats", sorted}},
		{"statistics pruned", pruneStatsSQL, []string{"SEARCH ax_stats USING PRIMARY KEY (namespace=? AND minute<?)"},
			[]string{"SCAN ax_stats", sorted}},
		{"leadership history", historySQL, []string{"SEARCH ax_leadership USING PRIMARY KEY (namespace=?)"},
			[]string{"SCAN ax_leadership", sorted}},
		{"newest leadership change (RaiseFence)", newestChangeSQL, []string{"SEARCH ax_leadership USING PRIMARY KEY (namespace=?)"},
			[]string{"SCAN ax_leadership", sorted}},
		{"leadership prune cut", pruneCutSQL, []string{"SEARCH ax_leadership USING PRIMARY KEY (namespace=?)"},
			[]string{"SCAN ax_leadership", sorted}},
		{"leadership prune: the first to stay", pruneStaySQL, []string{"SEARCH ax_leadership USING PRIMARY KEY (namespace=? AND (epoch,kind)>(?,?))"},
			[]string{"SCAN ax_leadership", sorted}},
		{"leadership prune", pruneLeadershipSQL, []string{"SEARCH ax_leadership USING PRIMARY KEY (namespace=? AND (epoch,kind)<(?,?))"},
			[]string{"SCAN ax_leadership", sorted}},
		// The audit log by time: a range of ax_audit_at, whose entries hold the rowid
		// (the id) in order after at, so (at, id) descending needs no sort.
		{"audit log by time", auditLogSQL(store.AuditQuery{Since: time.Now().Add(-time.Hour), Until: time.Now()}),
			[]string{"SEARCH ax_audit USING INDEX ax_audit_at (namespace=? AND at>? AND at<?)"}, []string{sorted, "SCAN ax_audit"}},
		{"audit log by time, next page", auditLogSQL(store.AuditQuery{Actor: "alice", Since: time.Now().Add(-time.Hour), BeforeID: 9}),
			[]string{"SEARCH ax_audit USING INDEX ax_audit_at (namespace=? AND at>? AND at<?)"}, []string{sorted, "SCAN ax_audit"}},
		{"audit log until", auditLogSQL(store.AuditQuery{Until: time.Now()}),
			[]string{"SEARCH ax_audit USING INDEX ax_audit_at (namespace=? AND at<?)"}, []string{sorted, "SCAN ax_audit"}},
	} {
		rows, err := s.w.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+c.sql, make([]any, strings.Count(c.sql, "?"))...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		got := strings.Join(plan, "\n")
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("EXPLAIN QUERY PLAN of the %s lacks %q:\n%s", c.name, w, got)
			}
		}
		for _, n := range c.not {
			if strings.Contains(got, n) {
				t.Errorf("EXPLAIN QUERY PLAN of the %s has %q:\n%s", c.name, n, got)
			}
		}
		t.Logf("%s:\n%s", c.name, got)
	}
}
