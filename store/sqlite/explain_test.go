package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestExplain pins the plans of the overlap rule's lookups: SQLite uses a partial
// index only for a query whose WHERE clause contains the index's, so a reworded
// condition would silently fall back to a scan of every DISPATCHING and RUNNING row.
// It also pins the claim of tasks without a key to the primary key, and nothing else,
// and TaskStats's oldest due time to the partial due index, read once, and the fence
// check to ax_leader's primary key.
func TestExplain(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(t.TempDir(), "ax.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	batch := func(b *batchStmt) string { return strings.Replace(b.sql, "%V%", values(4, b.cols), 1) }
	const (
		pk     = "SEARCH ax_tasks USING INTEGER PRIMARY KEY (rowid=?)"
		holder = "USING INDEX ax_tasks_key_holder (task_key=?)"
	)
	for _, c := range []struct {
		name, sql string
		want      []string // each in some line of EXPLAIN QUERY PLAN
		not       []string // in none
	}{
		{"holder lookup (Claim)", batch(holdersStmt), []string{"SEARCH ax_tasks " + holder}, []string{"SCAN ax_tasks"}},
		{"keyed claim", batch(keyedClaimStmt), []string{pk, "SEARCH o " + holder}, []string{"SCAN ax_tasks", "SCAN o"}},
		{"claim without keys", batch(claimStmt), []string{pk}, []string{"SCAN ax_tasks", "SUBQUERY", "ax_tasks_key_holder"}},
		{"trigger", triggerSQL, []string{pk, "SEARCH o " + holder}, []string{"SCAN ax_tasks", "SCAN o"}},
		{"holder lookup (Trigger)", holderSQL, []string{"SEARCH ax_tasks " + holder}, []string{"SCAN ax_tasks"}},
		{"task stats", taskStatsSQL, []string{"SEARCH ax_tasks USING COVERING INDEX ax_tasks_scheduled_due (due_at<?)"},
			[]string{"CORRELATED"}},
		{"fence check", fenceSQL, []string{"SEARCH ax_leader USING INDEX sqlite_autoindex_ax_leader_1 (namespace=?)"},
			[]string{"SCAN ax_leader"}},
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
