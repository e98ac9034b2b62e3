package admin_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/admin"
	"github.com/axsched/ax/store/memory"
)

// logBuffer is a log's output, safe for concurrent writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the lines logged that hold msg.
func (l *logBuffer) lines(msg string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for line := range strings.Lines(l.b.String()) {
		if strings.Contains(line, msg) {
			out = append(out, line)
		}
	}
	return out
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newLimitedAPI returns, inside a synctest bubble, the admin API of a scheduler on a
// memory store with an operator ("ops"), a viewer ("dash") and an admin ("root"),
// its log, and the scheduler.
func newLimitedAPI(t *testing.T, cfg admin.Config) (*admin.Handler, *logBuffer, *ax.Scheduler) {
	t.Helper()
	st := memory.New()
	t.Cleanup(func() { st.Close() })
	s, err := ax.New(ax.Config{Store: st, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	cfg.Tokens = []admin.Token{{Actor: "ops", Role: admin.Operator, Hash: admin.HashToken("ops-secret")},
		{Actor: "dash", Role: admin.Viewer, Hash: admin.HashToken("dash-secret")},
		{Actor: "root", Role: admin.Admin, Hash: admin.HashToken("root-secret")}}
	h, err := admin.NewHandler(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h, logs, s
}

// from makes a GET of target from the client address remote with the bearer token
// secret ("" for none).
func from(h http.Handler, remote, method, target, secret string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, nil)
	req.RemoteAddr = remote
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// Failed authentications are logged at WARN once per address per window, never with
// the token, the others counted and logged in one line when the window ends; past
// Config.FailedAuth an address's failed attempts are answered 429 until its window
// ends, while a valid token from it is still served. IPv6 addresses count by /64;
// past MaxTrackedAddresses, new addresses share one count.
func TestFailedAuthenticationIsLoggedAndLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, logs, _ := newLimitedAPI(t, admin.Config{FailedAuth: admin.Limit{N: 3, Per: time.Minute}})
		const forged = "forged-token-9f2c"
		failed := func() []string { return logs.lines("authentication failed") }

		var codes []int
		for range 10 {
			rec := from(h, "198.51.100.7:5555", "GET", "/tasks", forged)
			codes = append(codes, rec.Code)
			if rec.Code == http.StatusTooManyRequests && rec.Header().Get("Retry-After") != "60" {
				t.Errorf("a limited attempt: Retry-After %q, want 60", rec.Header().Get("Retry-After"))
			}
		}
		if fmt.Sprint(codes) != "[401 401 401 429 429 429 429 429 429 429]" {
			t.Errorf("10 failed attempts from one address: %v, want 3 × 401 then 429", codes)
		}
		if rec := from(h, "198.51.100.7:5555", "GET", "/tasks", "dash-secret"); rec.Code != http.StatusOK {
			t.Errorf("a valid token from the limited address: %d, want 200", rec.Code)
		}
		if rec := from(h, "198.51.100.8:1", "POST", "/tasks/1/cancel", ""); rec.Code != http.StatusUnauthorized {
			t.Errorf("no token from another address: %d, want 401", rec.Code)
		}
		metrics := h.Require(admin.Viewer, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		for i, remote := range []string{"[2001:db8:1:2::1]:1", "[2001:db8:1:2::9]:2", "[2001:db8:1:2:ffff::]:3", "[2001:db8:1:2::1]:4"} {
			if rec := from(metrics, remote, "GET", "/metrics", forged); rec.Code != map[bool]int{true: 401, false: 429}[i < 3] {
				t.Errorf("failure %d from the /64 of 2001:db8:1:2::: %d", i+1, rec.Code)
			}
		}
		lines := failed()
		if len(lines) != 3 || !strings.Contains(lines[0], `remote=198.51.100.7 method=GET path=/tasks why="unknown token"`) ||
			!strings.Contains(lines[1], `remote=198.51.100.8 method=POST path=/tasks/1/cancel why="no bearer token"`) ||
			!strings.Contains(lines[2], "remote=2001:db8:1:2::/64") || !strings.Contains(lines[0], "level=WARN") {
			t.Errorf("logged failures:\n%s\nwant one line per address, at WARN", strings.Join(lines, ""))
		}
		if strings.Contains(logs.String(), forged) {
			t.Errorf("the log holds the token:\n%s", logs)
		}

		time.Sleep(time.Minute) // every window ends
		if rec := from(h, "198.51.100.7:5555", "GET", "/tasks", forged); rec.Code != http.StatusUnauthorized {
			t.Errorf("a failed attempt after the window: %d, want 401", rec.Code)
		}
		summaries := logs.lines("not logged one by one")
		if len(summaries) != 2 || len(failed()) != 4 {
			t.Errorf("after the window: summaries\n%s\nand %d failure lines; want 2 summaries (9 and 3 failures) and one more line", strings.Join(summaries, ""), len(failed()))
		}
		for _, want := range []string{"remote=198.51.100.7 failures=9", "remote=2001:db8:1:2::/64 failures=3"} {
			if !strings.Contains(strings.Join(summaries, ""), want) {
				t.Errorf("summaries:\n%s\nwant %q", strings.Join(summaries, ""), want)
			}
		}

		// A flood from many addresses: each of the first MaxTrackedAddresses (less the
		// one counted) has its line, the rest share one count, limited as one.
		time.Sleep(time.Minute)
		before := len(failed())
		limited := 0
		for i := range 3 * admin.MaxTrackedAddresses {
			if from(h, fmt.Sprintf("10.%d.%d.%d:80", i>>16, i>>8&0xff, i&0xff), "GET", "/tasks", forged).Code == http.StatusTooManyRequests {
				limited++
			}
		}
		if n := len(failed()) - before; n != admin.MaxTrackedAddresses+1 {
			t.Errorf("a flood from %d addresses logged %d lines, want %d", 3*admin.MaxTrackedAddresses, n, admin.MaxTrackedAddresses+1)
		}
		if want := 2*admin.MaxTrackedAddresses - 3; limited != want {
			t.Errorf("a flood from %d addresses: %d answered 429, want %d (the shared count's past 3)", 3*admin.MaxTrackedAddresses, limited, want)
		}
		if err := h.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if s := logs.lines(`remote="other addresses" failures=`); len(s) != 1 || !strings.Contains(s[0], fmt.Sprintf("failures=%d", 2*admin.MaxTrackedAddresses-1)) {
			t.Errorf("Flush logged %q, want the shared count's summary", s)
		}
	})
}

// A known token's refused calls past Config.Refusals are counted, not written one
// row each; the count is written as one summary row when the actor's window has
// ended (at its next call, at a read of the audit log) or at Flush. Allowed calls
// are always written.
func TestRefusalsCannotFloodTheAuditLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, logs, s := newLimitedAPI(t, admin.Config{})
		ctx := context.Background()
		task, err := s.Delay(ctx, "order.close", "42", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		rows := func() []ax.AuditRecord { return auditLog(t, s) }
		refuse := func(n int) {
			t.Helper()
			for range n {
				if rec := from(h, "192.0.2.1:1", "POST", "/tasks/x/cancel", "ops-secret"); rec.Code != http.StatusBadRequest {
					t.Fatalf("POST /tasks/x/cancel: %d %s, want 400", rec.Code, rec.Body)
				}
			}
		}
		summary := func(rec ax.AuditRecord, n int) bool {
			return rec.Action == admin.SuppressedAction && rec.Actor == "ops" && rec.Role == "operator" &&
				strings.HasPrefix(rec.Result, fmt.Sprintf("suppressed: %d refused calls from ", n)) &&
				strings.HasSuffix(rec.Result, fmt.Sprintf("(over 30 per 1m0s): task.cancel %d", n))
		}

		refuse(300)
		if n := len(rows()); n != admin.DefaultRefusalsPerMinute {
			t.Errorf("300 refused calls in a minute wrote %d rows, want %d", n, admin.DefaultRefusalsPerMinute)
		}
		if rec := from(h, "192.0.2.1:1", "POST", fmt.Sprintf("/tasks/%d/cancel", task.ID), "ops-secret"); rec.Code != http.StatusOK {
			t.Fatalf("an allowed cancel: %d %s", rec.Code, rec.Body)
		}
		if log := rows(); len(log) != 31 || log[0].Result != "ok" {
			t.Errorf("after an allowed call past the limit: %d rows, the newest %+v; want it written", len(log), log[0])
		}

		time.Sleep(time.Minute)
		refuse(1)
		log := rows()
		if len(log) != 33 || !summary(log[1], 270) || log[0].Action != "task.cancel" {
			t.Errorf("the first refusal of the next window: %d rows, newest %+v, %+v; want its summary of 270 and its own row", len(log), log[0], log[1])
		}

		refuse(40) // 29 written, 11 counted
		if err := h.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if log := rows(); len(log) != 63 || !summary(log[0], 11) {
			t.Errorf("after Flush: %d rows, newest %+v; want 63, the newest the summary of 11", len(log), log[0])
		}

		refuse(35) // the window goes on: all counted
		time.Sleep(time.Minute)
		status, body, _ := call(t, h, http.MethodGet, "/audit?action="+admin.SuppressedAction+"&limit=1", "root-secret")
		entries, _ := body["entries"].([]any)
		if status != http.StatusOK || len(entries) != 1 || !strings.HasPrefix(entries[0].(map[string]any)["result"].(string), "suppressed: 35 refused calls") {
			t.Errorf("GET /audit after the window: %d %v, want the summary of 35 written first", status, body)
		}
		if n := len(logs.lines("refused calls over the limit")); n != 2 {
			t.Errorf("%d WARN lines about refusals over the limit, want 2: one per window", n)
		}
	})
}
