package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/admin"
	"github.com/axsched/ax/store/memory"
)

var secrets = map[admin.Role]string{admin.Viewer: "v-7f3a", admin.Operator: "o-19cc", admin.Admin: "a-e042"}

// newAPI returns the admin API of a scheduler (not started) on a memory store holding
// 5 tasks, one of them cancelled, and the scheduler.
func newAPI(t testing.TB, tokens ...admin.Token) (*admin.Handler, *ax.Scheduler) {
	t.Helper()
	st := memory.New()
	t.Cleanup(func() { st.Close() })
	s, err := ax.New(ax.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, key := range []string{"cust-7/1", "cust-7/2", "cust-9/3", "cust-7/4", "other"} {
		if _, err := s.Delay(ctx, "order.close", key, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Cancel(ctx, "order.close", "other"); err != nil {
		t.Fatal(err)
	}
	if tokens == nil {
		for _, r := range []admin.Role{admin.Viewer, admin.Operator, admin.Admin} {
			tokens = append(tokens, admin.Token{Actor: r.String() + "-user", Role: r, Hash: admin.HashToken(secrets[r])})
		}
	}
	// Many failed authentications come from httptest's one address: not limited here.
	h, err := admin.NewHandler(s, admin.Config{Tokens: tokens, FailedAuth: admin.Limit{N: 1 << 20}, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	return h, s
}

var discard = slog.New(slog.DiscardHandler)

// call makes a request with the bearer token secret ("" for none) and decodes the
// JSON body into a map.
func call(t testing.TB, h http.Handler, method, target, secret string) (int, map[string]any, http.Header) {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("%s %s: the body is not JSON: %v\n%s", method, target, err, rec.Body.String())
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, target, ct)
	}
	return rec.Code, body, rec.Header()
}

func code(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// Every route refuses a request without a token, with a forged one, or with one
// whose hash no token has; every role at least viewer may read.
func TestAuthentication(t *testing.T) {
	t.Parallel()
	h, _ := newAPI(t)
	for _, target := range []string{"/tasks", "/tasks/counts", "/tasks/1", "/schedules", "/cluster"} {
		for name, secret := range map[string]string{
			"no token":                  "",
			"a forged token":            "v-7f3b",
			"a configured token's hash": admin.HashToken(secrets[admin.Viewer]),
			"an empty bearer":           " ",
		} {
			status, body, hdr := call(t, h, "GET", target, secret)
			if status != http.StatusUnauthorized || code(body) != "unauthorized" || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("GET %s with %s: %d %v, want 401 unauthorized with a Bearer challenge", target, name, status, body)
			}
		}
		for _, r := range []admin.Role{admin.Viewer, admin.Operator, admin.Admin} {
			if status, body, _ := call(t, h, "GET", target, secrets[r]); status != http.StatusOK {
				t.Errorf("GET %s as %s: %d %v, want 200", target, r, status, body)
			}
		}
	}
	// A scheme other than Bearer is no token.
	req := httptest.NewRequest("GET", "/tasks", nil)
	req.SetBasicAuth("viewer-user", secrets[admin.Viewer])
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("GET /tasks with basic auth: %d, want 401", rec.Code)
	}
	if status, body, _ := call(t, h, "GET", "/health", ""); status != http.StatusOK || body["status"] != "ok" {
		t.Errorf("GET /health without a token: %d %v, want 200 ok", status, body)
	}
}

// With no tokens configured, nothing but /health is served: no default credentials.
func TestNoTokensRefuseEverything(t *testing.T) {
	t.Parallel()
	h, _ := newAPI(t, []admin.Token{}...)
	for _, secret := range []string{"", "anything", secrets[admin.Admin]} {
		if status, body, _ := call(t, h, "GET", "/tasks", secret); status != http.StatusUnauthorized || code(body) != "unauthorized" {
			t.Errorf("GET /tasks with no tokens configured (%q): %d %v, want 401", secret, status, body)
		}
	}
	if status, _, _ := call(t, h, "GET", "/health", ""); status != http.StatusOK {
		t.Errorf("GET /health: %d, want 200", status)
	}
}

// A token without an actor, with no role or an unknown one, with a malformed hash,
// or configured twice, is refused when the handler is made.
func TestBadTokens(t *testing.T) {
	t.Parallel()
	st := memory.New()
	defer st.Close()
	s, err := ax.New(ax.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	good := admin.Token{Actor: "ops", Role: admin.Operator, Hash: admin.HashToken("x")}
	for name, tokens := range map[string][]admin.Token{
		"no actor":       {{Role: admin.Viewer, Hash: admin.HashToken("x")}},
		"no role":        {{Actor: "ops", Hash: admin.HashToken("x")}},
		"unknown role":   {{Actor: "ops", Role: admin.Admin + 1, Hash: admin.HashToken("x")}},
		"a secret":       {{Actor: "ops", Role: admin.Viewer, Hash: "x"}},
		"short hash":     {{Actor: "ops", Role: admin.Viewer, Hash: admin.HashToken("x")[:40]}},
		"not hex":        {{Actor: "ops", Role: admin.Viewer, Hash: "sha256:" + strings.Repeat("z", 64)}},
		"the same twice": {good, {Actor: "other", Role: admin.Admin, Hash: good.Hash}},
	} {
		if _, err := admin.NewHandler(s, admin.Config{Tokens: tokens}); !errors.Is(err, ax.ErrInvalid) {
			t.Errorf("NewHandler with %s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := admin.NewHandler(nil, admin.Config{}); !errors.Is(err, ax.ErrInvalid) {
		t.Errorf("NewHandler(nil): %v, want ErrInvalid", err)
	}
	if r, err := admin.ParseRole("operator"); err != nil || r != admin.Operator {
		t.Errorf("ParseRole(operator) = %v, %v", r, err)
	}
	if _, err := admin.ParseRole("root"); !errors.Is(err, ax.ErrInvalid) {
		t.Errorf("ParseRole(root): %v, want ErrInvalid", err)
	}
}

// GET /tasks lists by the query string's filters, in pages linked by next; what it
// cannot read is 400 invalid.
func TestListTasks(t *testing.T) {
	t.Parallel()
	h, _ := newAPI(t)
	v := secrets[admin.Viewer]
	var keys []string
	target := "/tasks?name=order.close&key_prefix=cust-7/&status=scheduled,FAILED&order=soonest&limit=2"
	for pages := 0; pages < 5; pages++ {
		status, body, _ := call(t, h, "GET", target, v)
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d %v", target, status, body)
		}
		for _, task := range body["tasks"].([]any) {
			keys = append(keys, task.(map[string]any)["key"].(string))
		}
		next, _ := body["next"].(string)
		if next == "" {
			break
		}
		target = "/tasks?name=order.close&key_prefix=cust-7/&status=scheduled,FAILED&order=soonest&limit=2&cursor=" + url.QueryEscape(next)
	}
	if strings.Join(keys, " ") != "cust-7/1 cust-7/2 cust-7/4" {
		t.Errorf("pages of cust-7's open tasks: %v, want cust-7/1 cust-7/2 cust-7/4", keys)
	}
	if _, body, _ := call(t, h, "GET", "/tasks?status=CANCELLED", v); len(body["tasks"].([]any)) != 1 {
		t.Errorf("GET /tasks?status=CANCELLED: %v, want the one cancelled task", body)
	}
	for _, q := range []string{
		"bogus=1", "limit=0", "limit=1001", "limit=ten", "order=oldest", "status=DONE", "due_from=yesterday",
		"cursor=AAAA", "name=a&name=b", "due_from=2026-12-01T10:00:00Z&due_before=2026-12-01T09:00:00Z",
	} {
		if status, body, _ := call(t, h, "GET", "/tasks?"+q, v); status != http.StatusBadRequest || code(body) != "invalid" {
			t.Errorf("GET /tasks?%s: %d %v, want 400 invalid", q, status, body)
		}
	}
}

// GET /tasks/counts and GET /tasks/{id}; unknown routes and methods answer in JSON.
func TestCountsAndDetail(t *testing.T) {
	t.Parallel()
	h, s := newAPI(t)
	v := secrets[admin.Viewer]
	status, body, _ := call(t, h, "GET", "/tasks/counts", v)
	counts, _ := body["counts"].(map[string]any)
	sched, _ := counts["SCHEDULED"].(map[string]any)
	if status != http.StatusOK || len(counts) != 7 || sched["n"] != 4.0 || sched["text"] != "4" {
		t.Errorf("GET /tasks/counts: %d %v, want 7 statuses, 4 SCHEDULED", status, body)
	}
	task, err := s.Lookup(context.Background(), "order.close", "cust-9/3")
	if err != nil {
		t.Fatal(err)
	}
	status, body, _ = call(t, h, "GET", "/tasks/"+strconv.FormatInt(task.ID, 10), v)
	got, _ := body["task"].(map[string]any)
	if status != http.StatusOK || got["key"] != "cust-9/3" || got["status"] != "SCHEDULED" || body["executions"] == nil {
		t.Errorf("GET /tasks/%d: %d %v", task.ID, status, body)
	}
	for target, want := range map[string]struct {
		status int
		code   string
	}{
		"/tasks/999999": {http.StatusNotFound, "not_found"},
		"/tasks/abc":    {http.StatusBadRequest, "invalid"},
		"/tasks/-1":     {http.StatusBadRequest, "invalid"},
		"/nope":         {http.StatusNotFound, "not_found"},
	} {
		if status, body, _ := call(t, h, "GET", target, v); status != want.status || code(body) != want.code {
			t.Errorf("GET %s: %d %v, want %d %s", target, status, body, want.status, want.code)
		}
	}
	if status, body, hdr := call(t, h, "POST", "/tasks", v); status != http.StatusMethodNotAllowed || code(body) != "method_not_allowed" || hdr.Get("Allow") != "GET" {
		t.Errorf("POST /tasks: %d %v, want 405 method_not_allowed", status, body)
	}
}

// Whatever the query string, GET /tasks answers 200 or 400, in JSON.
func FuzzListTasks(f *testing.F) {
	for _, seed := range []string{"", "status=SCHEDULED", "limit=5&order=soonest", "cursor=%00", "due_from=2026-01-01T00:00:00Z",
		"key_prefix=%ff", "status=,,,", "limit=-1", "name=a&status=FAILED&status=RUNNING"} {
		f.Add(seed)
	}
	h, _ := newAPI(f)
	f.Fuzz(func(t *testing.T, query string) {
		req := httptest.NewRequest("GET", "/tasks", nil)
		req.URL.RawQuery = query
		req.Header.Set("Authorization", "Bearer "+secrets[admin.Viewer])
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
			t.Fatalf("GET /tasks?%s: %d %s", query, rec.Code, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("GET /tasks?%s: the body is not JSON: %s", query, rec.Body)
		}
	})
}

// GET /schedules lists the schedules with their policies; GET /cluster the
// namespace, its epoch and the replicas (none registered here).
func TestSchedulesAndCluster(t *testing.T) {
	t.Parallel()
	h, s := newAPI(t)
	s.HandleFunc("payment.reconcile", func(context.Context, *ax.Task) error { return nil })
	if err := s.Every("payment.reconcile", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	v := secrets[admin.Viewer]
	status, body, _ := call(t, h, "GET", "/schedules", v)
	list, _ := body["schedules"].([]any)
	if status != http.StatusOK || len(list) != 1 {
		t.Fatalf("GET /schedules: %d %v, want the one schedule", status, body)
	}
	if sc := list[0].(map[string]any); sc["name"] != "payment.reconcile" || sc["spec"] != "@every 2m0s" || sc["paused"] != false || sc["dormant"] != false {
		t.Errorf("GET /schedules: %v", sc)
	}
	status, body, _ = call(t, h, "GET", "/cluster", v)
	if status != http.StatusOK || body["namespace"] != "default" || body["nodes"] == nil {
		t.Errorf("GET /cluster: %d %v", status, body)
	}
}

// ParseTokens says which entry is wrong, by its position and, when it has the
// shape, its actor, and why — never its text, which may be a secret pasted by
// mistake.
func TestParseTokensNeverEchoesAnEntry(t *testing.T) {
	t.Parallel()
	good := "ops:operator:" + admin.HashToken("x")
	for _, c := range []struct {
		list, want, secret string
	}{
		{good + ",s3cret-pasted-alone", "token entry 2: not actor:role:sha256:<64 hex digits> (1 colon-separated fields)", "s3cret-pasted-alone"},
		{"ops:operator:s3cret-in-place-of-the-hash", `token entry 1 (actor "ops"): the hash is not "sha256:" and 64 hex digits`, "s3cret-in-place-of-the-hash"},
		{good + " ops:s3cret-as-a-role:" + admin.HashToken("y"), `token entry 2 (actor "ops"): unknown role`, "s3cret-as-a-role"},
		{":viewer:" + admin.HashToken("y"), "token entry 1: no actor", admin.HashToken("y")},
		{"ops:viewer:sha256:" + strings.Repeat("Z", 64), "token entry 1 (actor \"ops\"): the hash is not", strings.Repeat("Z", 64)},
	} {
		_, err := admin.ParseTokens(c.list)
		if !errors.Is(err, ax.ErrInvalid) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.secret) {
			t.Errorf("ParseTokens(%q) = %v, want ErrInvalid with %q and without %q", c.list, err, c.want, c.secret)
		}
	}
	tokens, err := admin.ParseTokens(good + ",\n dash:viewer:" + admin.HashToken("y"))
	if err != nil || len(tokens) != 2 || tokens[1] != (admin.Token{Actor: "dash", Role: admin.Viewer, Hash: admin.HashToken("y")}) {
		t.Errorf("ParseTokens of two entries = %+v, %v", tokens, err)
	}
}

// GET /tasks/{id} shows each attempt's due time, claim and lateness.
func TestDetailShowsAttemptTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, s := newAPI(t)
		s.HandleFunc("order.close", func(context.Context, *ax.Task) error { return nil })
		ctx := context.Background()
		task, err := s.Delay(ctx, "order.close", "soon", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer s.Stop(ctx)
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		status, body, _ := call(t, h, "GET", "/tasks/"+strconv.FormatInt(task.ID, 10), secrets[admin.Viewer])
		execs, _ := body["executions"].([]any)
		if status != http.StatusOK || len(execs) != 1 {
			t.Fatalf("GET /tasks/%d: %d %v, want one execution", task.ID, status, body)
		}
		x := execs[0].(map[string]any)
		if due, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(x["due_at"])); !due.Equal(task.DueAt) || x["claimed_at"] == nil {
			t.Errorf("the execution: due_at %v, claimed_at %v; want the task's due time %v and the claim", x["due_at"], x["claimed_at"], task.DueAt)
		}
		if late, ok := x["lateness_ms"].(float64); !ok || late < 0 {
			t.Errorf("the execution: lateness_ms %v, want a lateness of zero or more", x["lateness_ms"])
		}
	})
}
