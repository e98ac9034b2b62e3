package admin_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/admin"
)

// A task name paused and resumed through the API: operators only, each call one
// audit record, the caller recorded as who changed it; GET /names shows it to
// viewers; and a started scheduler runs none of the name's tasks until it is
// resumed, while other names run.
func TestNamesPauseAndResume(t *testing.T) {
	t.Parallel()
	h, s := newAPI(t)
	ctx := context.Background()
	var reports, others atomic.Int32
	s.HandleFunc("report", func(context.Context, *ax.Task) error { reports.Add(1); return nil })
	s.HandleFunc("other", func(context.Context, *ax.Task) error { others.Add(1); return nil })

	long := strings.Repeat("n", ax.MaxNameLen+1)
	for _, c := range []struct {
		name, target, secret, body string
		status                     int
		code                       string
		result                     string // the audit record's result prefix; "" for no record
	}{
		{"no token", "/names/report/pause", "", ``, 401, "unauthorized", ""},
		{"viewer may not pause", "/names/report/pause", secrets[admin.Viewer], `{"reason":"x"}`, 403, "forbidden", "forbidden"},
		{"a name too long", "/names/" + long + "/pause", secrets[admin.Operator], ``, 400, "invalid", "invalid"},
		{"a name with a NUL", "/names/a%00b/pause", secrets[admin.Operator], ``, 400, "invalid", "invalid"},
		{"an unknown field", "/names/report/pause", secrets[admin.Operator], `{"why":"x"}`, 400, "invalid", "invalid"},
		{"pause, without a reason", "/names/report/pause", secrets[admin.Operator], ``, 200, "", "ok"},
		{"pause again, with one", "/names/report/pause", secrets[admin.Admin], `{"reason":"the report database is down"}`, 200, "", "ok"},
		{"viewer may not resume", "/names/report/resume", secrets[admin.Viewer], ``, 403, "forbidden", "forbidden"},
	} {
		before := len(auditLog(t, s))
		status, body := post(t, h, c.target, c.secret, c.body)
		if status != c.status || code(body) != c.code {
			t.Errorf("%s: %d %q, want %d %q (%v)", c.name, status, code(body), c.status, c.code, body)
		}
		log := auditLog(t, s)
		switch {
		case c.result == "" && len(log) != before:
			t.Errorf("%s: %d audit records written, want none", c.name, len(log)-before)
		case c.result != "" && (len(log) != before+1 || !strings.HasPrefix(log[0].Result, c.result)):
			t.Errorf("%s: audit log %+v, want one more record with result %q", c.name, log[:len(log)-before], c.result)
		case c.result != "" && !strings.HasPrefix(log[0].Action, "name."):
			t.Errorf("%s: the record's action is %q, want name.pause or name.resume", c.name, log[0].Action)
		}
		if c.name == "pause again, with one" {
			n, _ := body["name"].(map[string]any)
			// Pausing a paused name changes nothing: who paused it first stays.
			if n["name"] != "report" || n["paused"] != true || n["changed_by"] != "operator-user" {
				t.Errorf("the pause's answer: %v, want the name paused, changed by operator-user", body)
			}
			if rec := log[0]; rec.Action != "name.pause" || rec.Target != "name report" || rec.Actor != "admin-user" ||
				rec.Reason != "the report database is down" {
				t.Errorf("the pause's audit record: %+v", rec)
			}
		}
	}
	if status, body, _ := call(t, h, http.MethodGet, "/names/report/pause", secrets[admin.Operator]); status != 405 || code(body) != "method_not_allowed" {
		t.Errorf("GET of a name's pause: %d %v, want 405", status, body)
	}

	// A viewer reads the names, in snake_case.
	status, body, _ := call(t, h, http.MethodGet, "/names", secrets[admin.Viewer])
	list, _ := body["names"].([]any)
	if status != 200 || len(list) != 1 {
		t.Fatalf("GET /names: %d %v, want the one name", status, body)
	}
	if n := list[0].(map[string]any); n["name"] != "report" || n["paused"] != true || n["changed_by"] != "operator-user" || n["changed_at"] == nil {
		t.Errorf("GET /names: %v", n)
	}

	// Started, the scheduler runs the other name's task, not the paused one's.
	paused, err := s.Delay(ctx, "report", "daily", 0)
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Delay(ctx, "other", "x", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	waitFor(t, "the other name's task SUCCEEDED", func() bool {
		got, err := s.Get(ctx, other.ID)
		return err == nil && got.Status == ax.Succeeded
	})
	if got, err := s.Get(ctx, paused.ID); err != nil || got.Status != ax.Scheduled || reports.Load() != 0 {
		t.Fatalf("the paused name's task: %+v, %v, %d runs; want SCHEDULED, not run", got, err, reports.Load())
	}

	// Resumed by an operator, it runs.
	status, body = post(t, h, "/names/report/resume", secrets[admin.Operator], `{"reason":"database back"}`)
	if n, _ := body["name"].(map[string]any); status != 200 || n["paused"] != false || n["changed_by"] != "operator-user" {
		t.Fatalf("resume: %d %v, want 200, not paused, changed by operator-user", status, body)
	}
	if rec := auditLog(t, s)[0]; rec.Action != "name.resume" || rec.Target != "name report" || rec.Actor != "operator-user" ||
		rec.Reason != "database back" || rec.Result != "ok" {
		t.Errorf("the resume's audit record: %+v", rec)
	}
	waitFor(t, "the resumed name's task SUCCEEDED", func() bool {
		got, err := s.Get(ctx, paused.ID)
		return err == nil && got.Status == ax.Succeeded
	})
}

// A read-only API refuses a name's pause, and records the refusal.
func TestNamesReadOnly(t *testing.T) {
	t.Parallel()
	_, s := newAPI(t)
	h, err := admin.NewHandler(s, admin.Config{ReadOnly: true, Logger: discard,
		Tokens: []admin.Token{{Actor: "ops", Role: admin.Admin, Hash: admin.HashToken("tok")}}})
	if err != nil {
		t.Fatal(err)
	}
	if status, body := post(t, h, "/names/report/pause", "tok", ``); status != 403 || code(body) != "read_only" {
		t.Errorf("pause on a read-only API: %d %v, want 403 read_only", status, body)
	}
	if log := auditLog(t, s); len(log) != 1 || log[0].Action != "name.pause" || !strings.HasPrefix(log[0].Result, "read_only") {
		t.Errorf("the refusal's record: %+v", log)
	}
	if ns, err := s.Names(context.Background()); err != nil || len(ns) != 0 {
		t.Errorf("names after the refused pause: %+v, %v; want none", ns, err)
	}
}

// waitFor waits, at most 10 seconds, until cond holds; what names it.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
	}
}

// On the SQL stores a name's pause joins no transaction: it is done, then recorded.
// With the audit log down the answer is 500 audit_failed, and the name is paused all
// the same (done, unrecorded), as the package doc says.
func TestNamePauseIsRecordedAfterIt(t *testing.T) {
	t.Parallel()
	for name, c := range sqlStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, db := c.open(t)
			s, err := ax.New(ax.Config{Store: st, Logger: discard})
			if err != nil {
				t.Fatal(err)
			}
			h, err := admin.NewHandler(s, admin.Config{Logger: discard, Tokens: []admin.Token{{Actor: "ops", Role: admin.Operator, Hash: admin.HashToken("tok")}}})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if status, body := post(t, h, "/names/report/pause", "tok", `{"reason":"maintenance"}`); status != 200 {
				t.Fatalf("pause: %d %v, want 200", status, body)
			}
			if rec := auditLog(t, s)[0]; rec.Action != "name.pause" || rec.Target != "name report" || rec.Actor != "ops" || rec.Result != "ok" {
				t.Errorf("the pause's record: %+v", rec)
			}
			execAll(t, db, c.break_)
			status, body := post(t, h, "/names/report/resume", "tok", ``)
			execAll(t, db, c.un)
			if status != 500 || code(body) != "audit_failed" || !strings.Contains(errorMessage(body), "done, but") {
				t.Errorf("resume with the audit log down: %d %v, want 500 audit_failed, done", status, body)
			}
			if ns, err := s.Names(ctx); err != nil || len(ns) != 1 || ns[0].Paused || ns[0].ChangedBy != "ops" {
				t.Errorf("after the resume without its record: %+v, %v; want resumed by ops", ns, err)
			}
		})
	}
}

// A name's limits set through the API: each route sets its limit as the caller and
// answers the name's state, audited with the value set; GET /names shows them in
// snake_case; a missing or bad value is 400 and changes nothing.
func TestNameLimits(t *testing.T) {
	t.Parallel()
	h, s := newAPI(t)
	op := secrets[admin.Operator]
	for _, c := range []struct {
		target, secret, body string
		status               int
		code, result         string // result: the audit record's, "" for none
	}{
		{"/names/sync/key-rate", secrets[admin.Viewer], `{"rate":5,"per":"1m"}`, 403, "forbidden", "forbidden"},
		{"/names/sync/key-rate", op, `{"per":"1m"}`, 400, "invalid", "invalid"},
		{"/names/sync/key-rate", op, `{"rate":5,"per":"soon"}`, 400, "invalid", "invalid"},
		{"/names/sync/key-rate", op, `{"rate":5,"per":"1h"}`, 200, "", "ok: key rate 5 per 1h0m0s"},
		{"/names/sync/key-rate", op, `{"rate":-1,"per":"1h"}`, 400, "invalid", "invalid"},
		{"/names/sync/key-rate", op, `{"rate":5,"per":"25h"}`, 400, "invalid", "invalid"},
		{"/names/sync/rate", op, `{"rate":100,"per":"1s"}`, 200, "", "ok: rate 100 per 1s"},
		{"/names/sync/concurrency", op, `{"concurrency":4}`, 200, "", "ok: concurrency 4"},
		{"/names/sync/key-concurrency", op, `{"key_concurrency":2}`, 200, "", "ok: key concurrency 2"},
	} {
		before := len(auditLog(t, s))
		status, body := post(t, h, c.target, c.secret, c.body)
		if status != c.status || code(body) != c.code {
			t.Errorf("%s %s: %d %q, want %d %q (%v)", c.target, c.body, status, code(body), c.status, c.code, body)
		}
		if log := auditLog(t, s); len(log) != before+1 || !strings.HasPrefix(log[0].Result, c.result) {
			t.Errorf("%s %s: audit log %+v, want one more record with result %q", c.target, c.body, log[:len(log)-before], c.result)
		}
	}
	status, body, _ := call(t, h, http.MethodGet, "/names", secrets[admin.Viewer])
	list, _ := body["names"].([]any)
	if status != 200 || len(list) != 1 {
		t.Fatalf("GET /names: %d %v, want the one name", status, body)
	}
	n := list[0].(map[string]any)
	if n["name"] != "sync" || n["key_rate"] != 5.0 || n["key_per"] != "1h0m0s" || n["rate"] != 100.0 || n["per"] != "1s" ||
		n["concurrency"] != 4.0 || n["key_concurrency"] != 2.0 || n["changed_by"] != "operator-user" {
		t.Errorf("GET /names: %v, want every limit set", n)
	}
	st, err := s.Names(context.Background())
	if err != nil || len(st) != 1 || st[0].KeyRate != 5 || st[0].KeyPer != time.Hour {
		t.Errorf("Names = %+v, %v; want the key rate stored", st, err)
	}
}
