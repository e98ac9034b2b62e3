package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/admin"
	"github.com/axsched/ax/console"
	"github.com/axsched/ax/internal/storecount"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/memory"
)

// countedConsole is a console, without a server, of a scheduler on a memory store
// that counts the calls made to it: 20 tasks and a schedule.
func countedConsole(t *testing.T) (http.Handler, *storecount.Store, int64) {
	t.Helper()
	inner := memory.New()
	if _, err := inner.RegisterSchedules(context.Background(), []store.ScheduleDef{{Name: "nightly", Spec: "30 2 * * *", TimeZone: "UTC",
		Overlap: store.OverlapSkip, Misfire: store.MisfireSkip, NextFireAt: time.Now().Add(time.Hour).Truncate(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	cnt := storecount.New(inner)
	s, err := ax.New(ax.Config{Store: cnt.WithOptionalInterfaces(), Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var id int64
	for i := range 20 {
		task, err := s.Delay(ctx, "job", fmt.Sprint("k", i), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		id = task.ID
	}
	api, err := admin.NewHandler(s, admin.Config{Tokens: tokens(), Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	pages, err := console.New(api, console.Config{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ax/", http.StripPrefix("/ax", pages))
	return mux, cnt, id
}

// serve makes a request of h in the process and returns its status, body and cookies.
func serve(h http.Handler, method, target string, form url.Values, cookies ...*http.Cookie) (int, string, []*http.Cookie) {
	var req *http.Request
	if form != nil {
		req = httptest.NewRequest(method, target, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req = httptest.NewRequest(method, target, nil)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String(), rec.Result().Cookies()
}

// signedIn signs in with role's token and returns the session cookie.
func signedIn(t *testing.T, h http.Handler, role admin.Role) *http.Cookie {
	t.Helper()
	st, body, cookies := serve(h, http.MethodPost, "/ax/signin", url.Values{"token": {secrets[role]}})
	if st != http.StatusSeeOther || len(cookies) != 1 {
		t.Fatalf("sign in: %d %v: %.300s", st, cookies, body)
	}
	return cookies[0]
}

// livePages are the pages the viewers poll: every page, each one view or a few.
func livePages(id int64) []string {
	return []string{"/ax/", "/ax/tasks", "/ax/tasks?status=SCHEDULED&order=soonest", fmt.Sprint("/ax/tasks/", id), "/ax/schedules",
		"/ax/schedules/nightly", "/ax/cluster", "/ax/audit"}
}

// 50 viewers polling every page twice per interval for 30 seconds cost the store what one viewer's one
// visit of every page costs, once per refresh interval (5 s): at most ⌈30/5⌉+1
// rounds, however many viewers. The clock is synctest's.
func TestLiveRefreshAtFixedCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// One round: an admin visits every page once, and a viewer the task's page
		// (whose payload only the admin is shown: two views).
		h, cnt, id := countedConsole(t)
		ck, viewer := signedIn(t, h, admin.Admin), signedIn(t, h, admin.Viewer)
		before := cnt.Snapshot().Total()
		serve(h, http.MethodGet, fmt.Sprint("/ax/tasks/", id), nil, viewer)
		for _, p := range livePages(id) {
			if st, body, _ := serve(h, http.MethodGet, p, nil, ck); st != http.StatusOK {
				t.Fatalf("GET %s: %d: %.300s", p, st, body)
			}
		}
		round := cnt.Snapshot().Total() - before
		if round == 0 {
			t.Fatal("a round of the pages read nothing from the store")
		}

		// 50 viewers, each polling every page every 2.5 s (twice per refresh
		// interval) for 30 s, on a fresh console (nothing shared yet).
		h, cnt, id = countedConsole(t)
		const viewers, watch, every = 50, 30 * time.Second, 5 * time.Second
		cookies := make([]*http.Cookie, viewers)
		for i := range cookies {
			cookies[i] = signedIn(t, h, []admin.Role{admin.Viewer, admin.Operator, admin.Admin}[i%3])
		}
		before = cnt.Snapshot().Total()
		beforeCounts := cnt.Snapshot().Calls["Counts"]
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		polls := 0
		for i := range viewers {
			wg.Go(func() {
				for time.Since(start) < watch {
					for _, p := range livePages(id) {
						if p == "/ax/audit" && i%3 != 2 {
							continue // admins only
						}
						if st, body, _ := serve(h, http.MethodGet, p, nil, cookies[i]); st != http.StatusOK {
							t.Errorf("GET %s: %d: %.300s", p, st, body)
							return
						}
						mu.Lock()
						polls++
						mu.Unlock()
					}
					time.Sleep(every / 2)
				}
			})
		}
		wg.Wait()
		rounds := int((watch+every-1)/every) + 1
		got := cnt.Snapshot().Total() - before
		t.Logf("%d polls by %d viewers in %v: %d store calls; one round is %d", polls, viewers, watch, got, round)
		if got > rounds*round {
			t.Errorf("%d store calls, over %d rounds of %d", got, rounds, round)
		}
		if n := cnt.Snapshot().Calls["Counts"] - beforeCounts; n > rounds {
			t.Errorf("the overview's counts were read %d times, over %d rounds", n, rounds)
		}
		if polls < viewers*(len(livePages(id))-1)*int(watch/(every/2)) {
			t.Errorf("only %d polls: the viewers did not poll", polls)
		}
	})
}

// A session ends after admin.Config.SessionTTL: its cookie is then sent to sign in.
func TestSessionExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _, _ := countedConsole(t)
		ck := signedIn(t, h, admin.Viewer)
		if st, _, _ := serve(h, http.MethodGet, "/ax/tasks", nil, ck); st != http.StatusOK {
			t.Fatalf("a fresh session: %d", st)
		}
		time.Sleep(admin.DefaultSessionTTL - time.Second)
		if st, _, _ := serve(h, http.MethodGet, "/ax/tasks", nil, ck); st != http.StatusOK {
			t.Fatalf("a session a second before its end: %d", st)
		}
		time.Sleep(time.Second)
		if st, _, _ := serve(h, http.MethodGet, "/ax/tasks", nil, ck); st != http.StatusSeeOther {
			t.Fatalf("a session at its end: %d, want 303 to sign in", st)
		}
	})
}

// Past admin.Config.FailedAuth, an address's failed sign-ins are answered 429
// until its window ends, and so are its page requests with a bearer token that
// matches none: guessing through the pages is counted as through the API. A valid
// token is still taken, as the API takes it. A new sign-in ends the session the
// browser carried.
func TestFailedSignInsAreLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _, _ := countedConsole(t)
		for i := range admin.DefaultFailedAuthPerMinute / 2 {
			if st, _, _ := serve(h, http.MethodPost, "/ax/signin", url.Values{"token": {"guess"}}); st != http.StatusUnauthorized {
				t.Fatalf("failed sign-in %d: %d, want 401", i+1, st)
			}
			req := httptest.NewRequest(http.MethodGet, "/ax/tasks", nil)
			req.Header.Set("Authorization", "Bearer guess")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusSeeOther {
				t.Fatalf("page with a wrong bearer %d: %d, want 303 to sign in", i+1, rec.Code)
			}
		}
		if st, _, _ := serve(h, http.MethodPost, "/ax/signin", url.Values{"token": {"guess"}}); st != http.StatusTooManyRequests {
			t.Fatalf("a failed sign-in past the limit: %d, want 429", st)
		}
		req := httptest.NewRequest(http.MethodGet, "/ax/tasks", nil)
		req.Header.Set("Authorization", "Bearer guess")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusTooManyRequests {
			t.Fatalf("a page with a wrong bearer past the limit: %d, want 429", rec.Code)
		}
		st, _, cookies := serve(h, http.MethodPost, "/ax/signin", url.Values{"token": {secrets[admin.Admin]}})
		if st != http.StatusSeeOther || len(cookies) != 1 {
			t.Fatalf("a valid sign-in from a limited address: %d, want 303", st)
		}
		first := cookies[0]
		_, _, again := serve(h, http.MethodPost, "/ax/signin", url.Values{"token": {secrets[admin.Viewer]}}, first)
		if st, _, _ := serve(h, http.MethodGet, "/ax/tasks", nil, first); st != http.StatusSeeOther || len(again) != 1 {
			t.Errorf("the session a new sign-in replaced: %d, want 303 to sign in", st)
		}
		time.Sleep(time.Minute)
		if st, _, _ := serve(h, http.MethodPost, "/ax/signin", url.Values{"token": {"guess"}}); st != http.StatusUnauthorized {
			t.Fatalf("a failed sign-in after the window: %d, want 401", st)
		}
	})
}

// One actor signing in again and again ends its own oldest sessions, nobody else's.
func TestSessionsBoundedPerActor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _, _ := countedConsole(t)
		admins := signedIn(t, h, admin.Admin)
		first := signedIn(t, h, admin.Viewer)
		for range admin.MaxSessionsPerActor {
			time.Sleep(time.Millisecond)
			signedIn(t, h, admin.Viewer)
		}
		if st, _, _ := serve(h, http.MethodGet, "/ax/tasks", nil, first); st != http.StatusSeeOther {
			t.Errorf("the viewer's first session past its bound: %d, want 303 to sign in", st)
		}
		if st, _, _ := serve(h, http.MethodGet, "/ax/tasks", nil, admins); st != http.StatusOK {
			t.Errorf("the admin's session after the viewer's sign-ins: %d, want 200", st)
		}
	})
}
