package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/admin"
	"github.com/axsched/ax/store/memory"
)

// post makes a POST with body and the bearer token secret, and decodes the answer.
func post(t testing.TB, h http.Handler, target, secret, body string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("POST %s: the body is not JSON: %v\n%s", target, err, rec.Body.String())
	}
	return rec.Code, out
}

// auditLog reads the whole audit log, newest first, through the scheduler.
func auditLog(t testing.TB, s *ax.Scheduler) []ax.AuditRecord {
	t.Helper()
	recs, err := s.AuditLog(context.Background(), ax.AuditQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// Every action, allowed and refused, by role, and the one audit record of each call.
func TestActions(t *testing.T) {
	t.Parallel()
	h, s := newAPI(t)
	ctx := context.Background()
	task, err := s.Lookup(ctx, "order.close", "cust-7/1")
	if err != nil {
		t.Fatal(err)
	}
	path := "/tasks/" + itoa(task.ID)
	at := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	for _, c := range []struct {
		name, target, secret, body string
		status                     int
		code                       string
		result                     string // the audit record's result prefix; "" for no record
	}{
		{"viewer may not act", path + "/reschedule", secrets[admin.Viewer], `{"reason":"x","at":"` + at.Format(time.RFC3339) + `"}`, 403, "forbidden", "forbidden"},
		{"no token", path + "/cancel", "", ``, 401, "unauthorized", ""},
		{"forged token", path + "/cancel", "o-19cd", ``, 401, "unauthorized", ""},
		{"reschedule needs a reason", path + "/reschedule", secrets[admin.Operator], `{"at":"` + at.Format(time.RFC3339) + `"}`, 400, "invalid", "invalid"},
		{"reschedule needs at", path + "/reschedule", secrets[admin.Operator], `{"reason":"the customer asked"}`, 400, "invalid", "invalid"},
		{"an unknown field", path + "/cancel", secrets[admin.Operator], `{"reason":"x","force":true}`, 400, "invalid", "invalid"},
		{"malformed JSON", path + "/cancel", secrets[admin.Operator], `{"reason":`, 400, "invalid", "invalid"},
		{"two JSON values", path + "/cancel", secrets[admin.Operator], `{} {}`, 400, "invalid", "invalid"},
		{"a member in another case", path + "/cancel", secrets[admin.Operator], `{"Reason":"x"}`, 400, "invalid", "invalid"},
		{"a member twice", path + "/cancel", secrets[admin.Operator], `{"reason":"x","reason":"y"}`, 400, "invalid", "invalid"},
		{"a bad id", "/tasks/x/cancel", secrets[admin.Operator], ``, 400, "invalid", "invalid"},
		{"a missing task", "/tasks/999/cancel", secrets[admin.Operator], ``, 404, "not_found", "not_found"},
		{"reschedule", path + "/reschedule", secrets[admin.Operator], `{"reason":"the customer asked","at":"` + at.Format(time.RFC3339) + `"}`, 200, "", "ok"},
		{"retry of a SCHEDULED task", path + "/retry", secrets[admin.Admin], `{}`, 409, "conflict", "conflict"},
		{"trigger needs a reason", path + "/trigger", secrets[admin.Operator], ``, 400, "invalid", "invalid"},
		// A scheduler that does not run the task hands it over: due now, triggered.
		{"trigger of a stopped scheduler", path + "/trigger", secrets[admin.Operator], `{"reason":"now"}`, 200, "", "ok"},
		{"cancel", path + "/cancel", secrets[admin.Operator], ``, 200, "", "ok"},
		{"cancel again", path + "/cancel", secrets[admin.Operator], ``, 409, "conflict", "conflict"},
		{"GET of an action", path + "/cancel", "", "", 405, "method_not_allowed", ""},
	} {
		before := len(auditLog(t, s))
		var status int
		var body map[string]any
		if c.name == "GET of an action" {
			status, body, _ = call(t, h, http.MethodGet, c.target, secrets[admin.Operator])
		} else {
			status, body = post(t, h, c.target, c.secret, c.body)
		}
		if status != c.status || code(body) != c.code {
			t.Errorf("%s: %d %q, want %d %q (%v)", c.name, status, code(body), c.status, c.code, body)
		}
		log := auditLog(t, s)
		switch {
		case c.result == "" && len(log) != before:
			t.Errorf("%s: %d audit records written, want none", c.name, len(log)-before)
		case c.result != "" && (len(log) != before+1 || !strings.HasPrefix(log[0].Result, c.result)):
			t.Errorf("%s: audit log %+v, want one more record with result %q", c.name, log[:len(log)-before], c.result)
		}
	}
	got, err := s.Get(ctx, task.ID)
	if err != nil || got.Status != ax.Cancelled || got.TriggeredAt.IsZero() || !got.DueAt.Before(at) {
		t.Errorf("the task after the calls: %+v, %v; want CANCELLED, triggered, due before %v", got, err, at)
	}
	log := auditLog(t, s)
	var resched *ax.AuditRecord
	for i := range log {
		if log[i].Action == "task.reschedule" && log[i].Result == "ok" {
			resched = &log[i]
		}
	}
	if resched == nil || resched.Actor != "operator-user" || resched.Role != "operator" || resched.Reason != "the customer asked" ||
		resched.Target != "task "+itoa(task.ID) || resched.StatusBefore != ax.Scheduled || resched.StatusAfter != ax.Scheduled {
		t.Errorf("the reschedule's audit record = %+v", resched)
	}
	if log[0].Action != "task.cancel" || log[0].StatusBefore != ax.Cancelled || log[0].StatusAfter != ax.Cancelled {
		t.Errorf("the refused cancel's audit record = %+v, want CANCELLED before and after", log[0])
	}

	// The audit log: admin only, newest first, filtered, paged.
	if status, body, _ := call(t, h, http.MethodGet, "/audit", secrets[admin.Operator]); status != 403 || code(body) != "forbidden" {
		t.Errorf("GET /audit as an operator: %d %v, want 403", status, body)
	}
	status, body, _ := call(t, h, http.MethodGet, "/audit?action=task.cancel&limit=1", secrets[admin.Admin])
	entries, _ := body["entries"].([]any)
	if status != 200 || len(entries) != 1 || body["next"] == nil {
		t.Fatalf("GET /audit?action=task.cancel&limit=1: %d %v, want one entry and a next page", status, body)
	}
	next := int64(body["next"].(float64))
	_, body, _ = call(t, h, http.MethodGet, "/audit?action=task.cancel&limit=10&before_id="+itoa(next), secrets[admin.Admin])
	if entries, _ := body["entries"].([]any); len(entries) != 8 || body["next"] != nil {
		t.Errorf("the next page: %v, want the 8 older cancels and no next", body)
	}
	if status, body, _ := call(t, h, http.MethodGet, "/audit?who=me", secrets[admin.Admin]); status != 400 || code(body) != "invalid" {
		t.Errorf("GET /audit with an unknown parameter: %d %v, want 400", status, body)
	}

	// By time: since <= at < until, newest first, paged; bounds that are not RFC 3339,
	// or out of order, are 400.
	log = auditLog(t, s)
	rfc := func(at time.Time) string { return url.QueryEscape(at.Format(time.RFC3339Nano)) }
	window := "/audit?since=" + rfc(log[len(log)-2].At) + "&until=" + rfc(log[0].At)
	status, body, _ = call(t, h, http.MethodGet, window+"&limit=1000", secrets[admin.Admin])
	if entries, _ := body["entries"].([]any); status != 200 || len(entries) != len(log)-2 {
		t.Errorf("GET %s: %d, %d entries, want 200 and all but the newest and the oldest (%d)", window, status, len(entries), len(log)-2)
	}
	_, body, _ = call(t, h, http.MethodGet, window+"&limit=2", secrets[admin.Admin])
	first, _ := body["entries"].([]any)
	if len(first) != 2 || body["next"] == nil || int64(first[0].(map[string]any)["id"].(float64)) != log[1].ID {
		t.Fatalf("GET %s&limit=2: %v, want the two newest in the window and a next page", window, body)
	}
	_, body, _ = call(t, h, http.MethodGet, window+"&limit=1000&before_id="+itoa(int64(body["next"].(float64))), secrets[admin.Admin])
	if rest, _ := body["entries"].([]any); len(rest) != len(log)-4 {
		t.Errorf("the next page of %s: %d entries, want %d", window, len(rest), len(log)-4)
	}
	for _, bad := range []string{"/audit?since=yesterday", "/audit?until=2026-12-06", "/audit?since=" + rfc(log[0].At) + "&until=" + rfc(log[1].At),
		"/audit?since=" + rfc(log[0].At) + "&until=" + rfc(log[0].At)} {
		if status, body, _ := call(t, h, http.MethodGet, bad, secrets[admin.Admin]); status != 400 || code(body) != "invalid" {
			t.Errorf("GET %s: %d %v, want 400 invalid", bad, status, body)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A body over 1 MiB is 413 and audited; ReadOnly refuses every action, audited; the
// triggers of one actor are limited, the refusals audited.
func TestActionLimits(t *testing.T) {
	t.Parallel()
	st := memory.New()
	t.Cleanup(func() { st.Close() })
	s, err := ax.New(ax.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.HandleFunc("job", func(context.Context, *ax.Task) error { return nil })
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	ctx := context.Background()
	var ids []int64
	for _, key := range []string{"a", "b", "c"} {
		task, err := s.Delay(ctx, "job", key, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	tokens := []admin.Token{{Actor: "ops", Role: admin.Operator, Hash: admin.HashToken("secret-ops")}}
	h, err := admin.NewHandler(s, admin.Config{Tokens: tokens, Triggers: admin.TriggerLimit{N: 2, Per: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	big := `{"reason":"` + strings.Repeat("x", admin.MaxBody) + `"}`
	if status, body := post(t, h, "/tasks/"+itoa(ids[0])+"/cancel", "secret-ops", big); status != 413 || code(body) != "too_large" {
		t.Errorf("a 1 MiB body: %d %v, want 413 too_large", status, body)
	}
	for i, id := range ids {
		status, body := post(t, h, "/tasks/"+itoa(id)+"/trigger", "secret-ops", `{"reason":"compensation"}`)
		want := map[bool]int{true: 200, false: 429}[i < 2]
		if status != want {
			t.Errorf("trigger %d: %d %v, want %d", i+1, status, body, want)
		}
		if i == 0 {
			task, _ := body["task"].(map[string]any)
			audit, _ := body["audit"].(map[string]any)
			if task["execution_id"] == nil || audit["execution_id"] != task["execution_id"] {
				t.Errorf("the trigger's answer %v: want its execution id in the task and the audit record", body)
			}
		}
	}
	ro, err := admin.NewHandler(s, admin.Config{Tokens: tokens, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if status, body := post(t, ro, "/tasks/"+itoa(ids[2])+"/cancel", "secret-ops", ``); status != 403 || code(body) != "read_only" {
		t.Errorf("cancel through a read-only API: %d %v, want 403 read_only", status, body)
	}
	results := []string{}
	for _, r := range auditLog(t, s) {
		results = append(results, r.Action+" "+strings.SplitN(r.Result, ":", 2)[0])
	}
	want := []string{"task.cancel read_only", "task.trigger rate_limited", "task.trigger ok", "task.trigger ok", "task.cancel too_large"}
	if strings.Join(results, ", ") != strings.Join(want, ", ") {
		t.Errorf("audit log %v, want %v", results, want)
	}
	if task, _ := s.Get(ctx, ids[2]); task.Status != ax.Scheduled {
		t.Errorf("the task refused twice is %s, want SCHEDULED", task.Status)
	}
}

// FuzzActionBody drives the body decoder of the mutating routes: whatever the bytes,
// the answer is JSON, 200 or a 4xx, and never changes a task it refused.
func FuzzActionBody(f *testing.F) {
	for _, seed := range []string{"", "{}", `{"reason":"x"}`, `{"reason":"x","at":"2030-01-01T00:00:00Z"}`, `{"at":"yesterday"}`,
		`{"reason":1}`, `[]`, `null`, `{"reason":"x"} {}`, `{"Reason":"x"}`, "\xff", `{"reason":"` + strings.Repeat("y", 3000) + `"}`} {
		f.Add(seed)
	}
	h, s := newAPI(f)
	task, err := s.Lookup(context.Background(), "order.close", "cust-9/3")
	if err != nil {
		f.Fatal(err)
	}
	target := "/tasks/" + itoa(task.ID) + "/reschedule"
	f.Fuzz(func(t *testing.T, body string) {
		before, _ := s.Get(context.Background(), task.ID)
		req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secrets[admin.Operator])
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK && (rec.Code < 400 || rec.Code > 499) {
			t.Fatalf("POST %s %q: %d %s", target, body, rec.Code, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("POST %s %q: the body is not JSON: %s", target, body, rec.Body)
		}
		if after, _ := s.Get(context.Background(), task.ID); rec.Code != http.StatusOK && !after.DueAt.Equal(before.DueAt) {
			t.Fatalf("POST %s %q refused (%d) but moved the task", target, body, rec.Code)
		}
	})
}

// An action by business key on a task whose key a newer task holds is refused: it
// would reach the newer task.
func TestActionsOnASupersededTask(t *testing.T) {
	t.Parallel()
	h, s := newAPI(t)
	ctx := context.Background()
	old, err := s.Lookup(ctx, "order.close", "other") // cancelled by newAPI
	if err != nil {
		t.Fatal(err)
	}
	newer, err := s.Delay(ctx, "order.close", "other", time.Hour)
	if err != nil || newer.ID == old.ID {
		t.Fatalf("resubmit of the cancelled task's key = %+v, %v", newer, err)
	}
	for _, c := range []struct{ route, body string }{
		{"/cancel", ``},
		{"/reschedule", `{"reason":"x","at":"2031-01-01T00:00:00Z"}`},
	} {
		if status, body := post(t, h, "/tasks/"+itoa(old.ID)+c.route, secrets[admin.Operator], c.body); status != 409 || code(body) != "conflict" {
			t.Errorf("POST %s on the superseded task: %d %v, want 409 conflict", c.route, status, body)
		}
	}
	if got, _ := s.Get(ctx, newer.ID); got.Status != ax.Scheduled || !got.DueAt.Equal(newer.DueAt) {
		t.Errorf("the newer task was reached: %+v", got)
	}
}
