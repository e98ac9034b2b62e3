package admin_test

import (
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/admin"
)

// driverText are words of the SQL drivers' messages, which no answer may hold.
var driverText = []string{"SQLSTATE", "SQLITE", "sqlite3", "Error 1", "ax_tasks", "ax_audit", "no such table", "doesn't exist",
	"relation", "audit down", "constraint failed", "invalid byte sequence", "ERROR:"}

// noDriverText fails t if what, the answer to a request, holds a driver's words.
func noDriverText(t *testing.T, request, what string) {
	t.Helper()
	for _, w := range driverText {
		if strings.Contains(what, w) {
			t.Errorf("%s: the answer holds %q: %s", request, w, what)
		}
	}
}

// newStoreAPI returns the admin API, with an operator ("ops") and an admin ("root"),
// of a scheduler (not started) on the SQL store c opens, its log, the scheduler and
// a database/sql handle on the store's database.
func newStoreAPI(t *testing.T, c sqlStore) (*admin.Handler, *logBuffer, *ax.Scheduler, func(...string)) {
	st, db := c.open(t)
	s, err := ax.New(ax.Config{Store: st, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	h, err := admin.NewHandler(s, admin.Config{Logger: slog.New(slog.NewTextHandler(logs, nil)), Tokens: []admin.Token{
		{Actor: "ops", Role: admin.Operator, Hash: admin.HashToken("ops-secret")},
		{Actor: "root", Role: admin.Admin, Hash: admin.HashToken("root-secret")}}})
	if err != nil {
		t.Fatal(err)
	}
	return h, logs, s, func(stmts ...string) { execAll(t, db, stmts) }
}

// A refused call whose reason or path holds a NUL (%00) or invalid UTF-8, or whose
// reason is over the bound, is one audit row all the same: its text made safe
// (U+FFFD, cut at a rune boundary) and the row's result saying which fields were.
func TestRefusalsWithUnsafeTextAreAudited(t *testing.T) {
	t.Parallel()
	for name, c := range sqlStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, _, s, _ := newStoreAPI(t, c)
			task, err := s.Delay(context.Background(), "job", "a", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			id := itoa(task.ID)
			long := strings.Repeat("é", 1500) // 3,000 bytes
			for _, step := range []struct {
				target, body   string
				status         int
				wantTarget     string
				wantReason     string
				sanitized      string // the result's note
				resultContains string
			}{
				{"/tasks/" + id + "/trigger", `{"reason":"the customer\u0000called"}`, 400, "task " + id, "the customer\uFFFDcalled",
					" [sanitized: reason]", "invalid: the reason is over 2000 bytes or holds a NUL"},
				{"/tasks/" + id + "/reschedule", `{"reason":"` + long + `","at":"2031-01-01T00:00:00Z"}`, 400, "task " + id, long[:2000],
					" [sanitized: reason]", "invalid: the reason is over 2000 bytes"},
				{"/tasks/" + id + "%00/cancel", ``, 400, "task " + id + "\uFFFD", "", " [sanitized: target]", `invalid: task id "` + id + `\x00"`},
				{"/schedules/night%00ly/pause", ``, 0, "schedule night\uFFFDly", "", " [sanitized: target]", ""},
				{"/schedules/%ff%fe%00/resume", `{"reason":"x"}`, 0, "schedule \uFFFD\uFFFD", "x", " [sanitized: target]", ""},
			} {
				before := len(auditLog(t, s))
				status, body := post(t, h, step.target, "ops-secret", step.body)
				if step.status != 0 && status != step.status || status < 400 || status > 499 {
					t.Errorf("POST %s: %d %v, want %d", step.target, status, body, step.status)
				}
				noDriverText(t, "POST "+step.target, errorMessage(body))
				log := auditLog(t, s)
				if len(log) != before+1 {
					t.Errorf("POST %s: %d audit rows written, want 1", step.target, len(log)-before)
					continue
				}
				got := log[0]
				if got.Target != step.wantTarget || got.Reason != step.wantReason || !strings.HasSuffix(got.Result, step.sanitized) ||
					!strings.Contains(got.Result, step.resultContains) {
					t.Errorf("POST %s: audit row %+v; want target %q, reason %.40q…, result with %q ending %q", step.target, got,
						step.wantTarget, step.wantReason, step.resultContains, step.sanitized)
				}
				noDriverText(t, "POST "+step.target+": the audit row", got.Result)
			}
			// A reader of GET /audit sees which rows were made safe.
			_, body, _ := call(t, h, http.MethodGet, "/audit?actor=ops", "root-secret")
			entries, _ := body["entries"].([]any)
			if len(entries) != 5 {
				t.Fatalf("GET /audit?actor=ops: %v, want the 5 rows", body)
			}
			for _, e := range entries {
				if r := e.(map[string]any)["result"].(string); !strings.Contains(r, "[sanitized: ") {
					t.Errorf("GET /audit: entry %v, want its result to say it was sanitized", e)
				}
			}
		})
	}
}

// Errors carry stable messages: a store error is a 500 whose message names an error
// id and nothing of the driver's, logged at ERROR with its cause under that id; an
// audit row that could not be written is the same; the audit row of a call that
// failed so holds the stable message.
func TestErrorsNeverShowDriverText(t *testing.T) {
	t.Parallel()
	errorID := regexp.MustCompile(`\(error id ([0-9a-f]{16}); the server's log has the cause\)$`)
	for name, c := range sqlStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, logs, s, exec := newStoreAPI(t, c)
			task, err := s.Delay(context.Background(), "job", "a", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			id := itoa(task.ID)
			// answered checks a 500 of code: a stable message with an error id, and the
			// cause in the log under that id, with the driver's message in it unless the
			// store gave none.
			answered := func(request string, status int, body map[string]any, code string) {
				t.Helper()
				m := errorID.FindStringSubmatch(errorMessage(body))
				if status != http.StatusInternalServerError || errorCode(body) != code || m == nil {
					t.Errorf("%s: %d %v, want 500 %s with an error id", request, status, body, code)
					return
				}
				noDriverText(t, request, errorMessage(body))
				lines := logs.lines("error_id=" + m[1])
				if len(lines) != 1 || !strings.Contains(lines[0], "level=ERROR") || code == "internal" && !containsAny(lines[0], driverText) {
					t.Errorf("%s: log lines of error %s: %q, want one at ERROR with the driver's message", request, m[1], lines)
				}
			}

			exec(`ALTER TABLE ax_tasks RENAME TO ax_tasks_away`)
			for _, target := range []string{"/tasks", "/tasks/" + id, "/tasks/counts"} {
				status, body, _ := call(t, h, http.MethodGet, target, "root-secret")
				answered("GET "+target, status, body, "internal")
			}
			status, body := post(t, h, "/tasks/"+id+"/cancel", "ops-secret", ``)
			answered("POST cancel with the tasks table away", status, body, "internal")
			exec(`ALTER TABLE ax_tasks_away RENAME TO ax_tasks`)
			if log := auditLog(t, s); len(log) != 1 || !strings.HasPrefix(log[0].Result, "internal: internal error (error id ") {
				t.Errorf("the audit log after the failed cancel: %+v, want its row with the stable message", log)
			} else {
				noDriverText(t, "the failed cancel's audit row", log[0].Result)
			}

			exec(c.break_...)
			status, body = post(t, h, "/tasks/"+id+"/cancel", "ops-secret", ``)
			answered("POST cancel with the audit log down", status, body, "audit_failed")
			exec(c.un...)
			if got, err := s.Get(context.Background(), task.ID); err != nil || got.Status != ax.Scheduled {
				t.Errorf("after the cancel without its record: %+v, %v; want SCHEDULED", got, err)
			}
		})
	}
}

func errorCode(body map[string]any) string { return code(body) }

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
