package admin_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/admin"
	"github.com/axsched/ax/store/memory"
)

// signIn starts a session of role's token on h and returns its cookie.
func signIn(t *testing.T, h *admin.Handler, role admin.Role, tls bool) *http.Cookie {
	t.Helper()
	req := httptest.NewRequest("POST", "/signin", nil)
	if tls {
		req = httptest.NewRequest("POST", "https://ax.example/signin", nil)
	}
	rec := httptest.NewRecorder()
	c, _, err := h.SignIn(rec, req, secrets[role], "/ops")
	if err != nil || c.Role != role {
		t.Fatalf("SignIn: %v %v", c, err)
	}
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("SignIn set %d cookies", len(cookies))
	}
	return cookies[0]
}

// A session cookie is opaque, HttpOnly, SameSite=Strict, Secure under TLS, scoped
// to the path given; the API takes it as it takes a token, and not after SignOut.
func TestSessions(t *testing.T) {
	t.Parallel()
	h, _ := newAPI(t)
	ck := signIn(t, h, admin.Operator, false)
	if ck.Name != admin.SessionCookie || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/ops" || ck.Secure ||
		len(ck.Value) < 40 || strings.Contains(ck.Value, "operator") {
		t.Errorf("the session cookie: %+v", ck)
	}
	if tls := signIn(t, h, admin.Operator, true); !tls.Secure {
		t.Errorf("the session cookie under TLS is not Secure")
	}
	get := func(ck *http.Cookie) int {
		req := httptest.NewRequest("GET", "/whoami", nil)
		req.AddCookie(ck)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if st := get(ck); st != http.StatusOK {
		t.Fatalf("GET /whoami with the session: %d", st)
	}
	if st := get(&http.Cookie{Name: admin.SessionCookie, Value: ck.Value + "x"}); st != http.StatusUnauthorized {
		t.Errorf("a forged session id: %d, want 401", st)
	}
	req := httptest.NewRequest("POST", "/signout", nil)
	req.AddCookie(ck)
	rec := httptest.NewRecorder()
	h.SignOut(rec, req, "/ops")
	if out := rec.Result().Cookies(); len(out) != 1 || out[0].MaxAge >= 0 || out[0].Value != "" {
		t.Errorf("SignOut's cookie: %+v", out)
	}
	if st := get(ck); st != http.StatusUnauthorized {
		t.Errorf("the session after SignOut: %d, want 401", st)
	}
	rec = httptest.NewRecorder()
	if _, _, err := h.SignIn(rec, httptest.NewRequest("POST", "/signin", nil), "nope", "/"); !errors.Is(err, admin.ErrUnauthorized) || len(rec.Result().Cookies()) != 0 {
		t.Errorf("SignIn with an unknown token: %v, %d cookies", err, len(rec.Result().Cookies()))
	}
}

// A browser's cross-origin POST with a session's cookie is refused before any
// route; one that carries a bearer token is a client's choice, judged by the token;
// a script's (no Origin, no Sec-Fetch-Site) is not concerned.
func TestCrossOriginRefused(t *testing.T) {
	t.Parallel()
	h, s := newAPI(t)
	ck := signIn(t, h, admin.Operator, false)
	for _, hdr := range [][2]string{{"Sec-Fetch-Site", "cross-site"}, {"Origin", "https://evil.example"}} {
		req := httptest.NewRequest("POST", "/tasks/1/cancel", nil)
		req.AddCookie(ck)
		req.Header.Set(hdr[0], hdr[1])
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "cross_origin") {
			t.Errorf("%s: %s: %d %s", hdr[0], hdr[1], rec.Code, rec.Body)
		}
	}
	if task, _ := s.Get(context.Background(), 1); task.Status != ax.Scheduled {
		t.Errorf("a refused cross-origin cancel changed task 1: %s", task.Status)
	}
	req := httptest.NewRequest("POST", "/tasks/1/cancel", nil)
	req.Header.Set("Authorization", "Bearer "+secrets[admin.Operator])
	req.Header.Set("Origin", "https://dashboard.example")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Errorf("a cross-origin cancel with a bearer token: %d %s", rec.Code, rec.Body)
	}
	if st, _, _ := call(t, h, "POST", "/tasks/2/cancel", secrets[admin.Operator]); st != http.StatusOK {
		t.Errorf("a script's cancel: %d", st)
	}
}

// GET /whoami says who the caller is and what it may see; GET /overview counts.
func TestWhoamiAndOverview(t *testing.T) {
	t.Parallel()
	h, _ := newAPI(t)
	for role, payloads := range map[admin.Role]bool{admin.Viewer: false, admin.Operator: true, admin.Admin: true} {
		st, body, _ := call(t, h, "GET", "/whoami", secrets[role])
		if st != http.StatusOK || body["role"] != role.String() || body["payloads"] != payloads || body["read_only"] != false {
			t.Errorf("GET /whoami as %s: %d %v", role, st, body)
		}
	}
	st, body, _ := call(t, h, "GET", "/overview", secrets[admin.Viewer])
	counts, _ := body["counts"].(map[string]any)
	sched, _ := counts["SCHEDULED"].(map[string]any)
	if st != http.StatusOK || sched["n"] != float64(4) || body["queue_lag_ms"] != float64(0) {
		t.Errorf("GET /overview: %d %v", st, body)
	}
}

// A shared read (Ax-Shared: 1) is read once per Config.Refresh for every caller of
// the same view, and read anew after a change made through the handler.
func TestSharedReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, s := newAPI(t)
		ctx := context.Background()
		read := func(secret string) float64 {
			req := httptest.NewRequest("GET", "/tasks/counts", nil)
			req.Header.Set("Authorization", "Bearer "+secret)
			req.Header.Set(admin.SharedHeader, "1")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				t.Fatalf("shared GET /tasks/counts: %d %s", rec.Code, rec.Body)
			}
			return float64(strings.Count(rec.Body.String(), `"CANCELLED":{"n":2`))
		}
		if read(secrets[admin.Viewer]) != 0 {
			t.Fatal("two tasks cancelled before any was")
		}
		// A change made elsewhere (not through the handler) is seen after the interval.
		if err := s.Cancel(ctx, "order.close", "cust-7/1"); err != nil {
			t.Fatal(err)
		}
		if read(secrets[admin.Viewer]) != 0 {
			t.Error("a shared read within the interval was read anew")
		}
		time.Sleep(admin.DefaultRefresh)
		if read(secrets[admin.Viewer]) != 1 {
			t.Error("a shared read after the interval is stale")
		}
		// A change made through the handler is seen at once.
		if st, body, _ := call(t, h, "POST", "/tasks/3/cancel", secrets[admin.Operator]); st != http.StatusOK {
			t.Fatalf("cancel: %d %v", st, body)
		}
		if strings.Count(sharedBody(t, h), `"CANCELLED":{"n":3`) != 1 {
			t.Error("a shared read after a change through the handler is stale")
		}
	})
}

func sharedBody(t *testing.T, h http.Handler) string {
	req := httptest.NewRequest("GET", "/tasks/counts", nil)
	req.Header.Set("Authorization", "Bearer "+secrets[admin.Viewer])
	req.Header.Set(admin.SharedHeader, "1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Body.String()
}

// GET /cluster shows the leadership history the store recorded, newest first.
func TestClusterShowsLeadershipHistory(t *testing.T) {
	t.Parallel()
	st := memory.New()
	defer st.Close()
	ctx := context.Background()
	for i, holder := range []string{"id-a node-a", "id-b node-b"} {
		if _, err := st.RaiseFence(ctx, "default", holder, int64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := ax.New(ax.Config{Store: st, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	h, err := admin.NewHandler(s, admin.Config{Tokens: []admin.Token{{Actor: "v", Role: admin.Viewer, Hash: admin.HashToken("v")}}, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	st2, body, _ := call(t, h, "GET", "/cluster", "v")
	hist, _ := body["history"].([]any)
	if st2 != http.StatusOK || len(hist) != 2 {
		t.Fatalf("GET /cluster: %d, history %v", st2, body["history"])
	}
	newest, _ := hist[0].(map[string]any)
	if newest["epoch"] != float64(2) || newest["node"] != "node-b" || newest["kind"] != "acquired" || newest["reason"] == "" {
		t.Errorf("the newest change: %v", newest)
	}
}

// A shared read of GET /whoami is never shared: each caller is told who it is.
func TestWhoamiIsNeverShared(t *testing.T) {
	t.Parallel()
	h, _ := newAPI(t)
	for _, role := range []admin.Role{admin.Admin, admin.Viewer, admin.Operator, admin.Viewer} {
		req := httptest.NewRequest("GET", "/whoami", nil)
		req.Header.Set("Authorization", "Bearer "+secrets[role])
		req.Header.Set(admin.SharedHeader, "1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if !strings.Contains(rec.Body.String(), `"role":"`+role.String()+`"`) {
			t.Errorf("GET /whoami as %s, shared: %s", role, rec.Body)
		}
	}
}
