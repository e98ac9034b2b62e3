package taskquery

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

func TestSuccessor(t *testing.T) {
	for prefix, want := range map[string]string{"a": "b", "order-4": "order-5", "k/": "k0", "é": "\xc3\xaa"} {
		if got := Successor(prefix); got != want {
			t.Errorf("Successor(%q) = %q, want %q", prefix, got, want)
		}
		// Every string with the prefix lies in [prefix, Successor(prefix)).
		for _, s := range []string{prefix, prefix + "\x00", prefix + "zzz", prefix + "\U0010FFFF\U0010FFFF"} {
			if s < prefix || s >= Successor(prefix) {
				t.Errorf("%q is outside [%q, %q)", s, prefix, Successor(prefix))
			}
		}
	}
}

var numbered = Dialect{
	Placeholder: func(n int) string { return "$" + strconv.Itoa(n) },
	Time:        func(t time.Time) any { return t },
	Prefix:      func(ph func(any) string, p string) string { return "starts_with(key, " + ph(p) + ")" },
}

// Select writes each filter once, binds each value once, in order, and writes the
// statuses as literals; a cursor follows the order.
func TestSelect(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	sql, args := Select(numbered, "id", "ax_tasks", "ns", store.TaskQuery{
		Statuses: []store.Status{store.Failed, store.Cancelled}, Name: "n", KeyPrefix: "k", OwnerService: "o", TaskKey: "tk",
		DueFrom: at, FinishedBefore: at, Soonest: true, After: &store.TaskCursor{ID: 7, DueAt: at}, Limit: 11,
	})
	want := "SELECT id FROM ax_tasks WHERE namespace = $1 AND status IN ('FAILED', 'CANCELLED') AND name = $2 AND starts_with(key, $3)" +
		" AND owner_service = $4 AND task_key = $5 AND due_at >= $6 AND finished_at < $7 AND (due_at > $8 OR (due_at = $9 AND id > $10))" +
		" ORDER BY due_at, id LIMIT $11"
	if sql != want {
		t.Errorf("Select =\n%s\nwant\n%s", sql, want)
	}
	if len(args) != 11 || args[0] != "ns" || args[1] != "n" || args[9] != int64(7) || args[10] != 11 {
		t.Errorf("Select args = %v", args)
	}
	sql, _ = Select(numbered, "id", "ax_tasks", "ns", store.TaskQuery{Statuses: []store.Status{store.Scheduled}, After: &store.TaskCursor{ID: 7}, Limit: 1})
	if !strings.Contains(sql, "status = 'SCHEDULED'") || !strings.Contains(sql, "id < $2") || !strings.HasSuffix(sql, "ORDER BY id DESC LIMIT $3") {
		t.Errorf("Select (one status, newest first, a cursor) = %s", sql)
	}
}
