package console_test

import (
	"context"
	"errors"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/admin"
	"github.com/axsched/ax/console"
	"github.com/axsched/ax/internal/teststores"
)

var discard = slog.New(slog.DiscardHandler)

// testStart is when the tests began.
var testStart = time.Now()

// secrets are the test tokens, by role.
var secrets = map[admin.Role]string{admin.Viewer: "viewer-7f3a", admin.Operator: "operator-19cc", admin.Admin: "admin-e042"}

// tokens are the test tokens: actors "viewer", "operator" and "admin".
func tokens() []admin.Token {
	var out []admin.Token
	for r, s := range secrets {
		out = append(out, admin.Token{Actor: r.String(), Role: r, Hash: admin.HashToken(s)})
	}
	return out
}

// stores open each store the console is tested on: a fresh one per call.
var stores = teststores.Durable

// site is a console mounted at /ax and its admin API at /ax/api, served over HTTP.
type site struct {
	srv *httptest.Server
	s   *ax.Scheduler
	api *admin.Handler
}

// newSite serves the console of s, with the test tokens, at /ax.
func newSite(t *testing.T, s *ax.Scheduler, cfg admin.Config) *site {
	t.Helper()
	if cfg.Tokens == nil {
		cfg.Tokens = tokens()
	}
	if cfg.Logger == nil {
		cfg.Logger = discard
	}
	api, err := admin.NewHandler(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	pages, err := console.New(api, console.Config{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ax/api/", http.StripPrefix("/ax/api", api))
	mux.Handle("/ax/", http.StripPrefix("/ax", pages))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &site{srv: srv, s: s, api: api}
}

// browser is a client with its own cookies that does not follow redirects.
type browser struct {
	t    *testing.T
	site *site
	c    *http.Client
}

func (s *site) browser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, site: s, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

// do makes a request to the site's path with headers (name, value, …), a form body
// for a POST, and returns the status, the body and the answer's headers.
func (b *browser) do(method, path string, form url.Values, headers ...string) (int, string, http.Header) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.site.srv.URL+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out), resp.Header
}

// get is a GET of path that must answer want.
func (b *browser) get(path string, want int) string {
	b.t.Helper()
	st, body, _ := b.do(http.MethodGet, path, nil)
	if st != want {
		b.t.Fatalf("GET %s: %d, want %d: %.600s", path, st, want, body)
	}
	return body
}

// post posts form to path and wants the status want.
func (b *browser) post(path string, form url.Values, want int) (string, http.Header) {
	b.t.Helper()
	st, body, h := b.do(http.MethodPost, path, form)
	if st != want {
		b.t.Fatalf("POST %s: %d, want %d: %.600s", path, st, want, body)
	}
	return body, h
}

// signIn signs b in with role's token.
func (b *browser) signIn(role admin.Role) *browser {
	b.t.Helper()
	_, h := b.post("/ax/signin", url.Values{"token": {secrets[role]}, "next": {"/"}}, http.StatusSeeOther)
	if loc := h.Get("Location"); loc != "/ax/" {
		b.t.Fatalf("signed in, sent to %q, want /ax/", loc)
	}
	return b
}

// eventually waits up to 20 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 20s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// seeded is a started scheduler on st with: 3 tasks of "fail", which fail for good
// (FAILED), 3 of "later", due in an hour, and a schedule "nightly".
func seeded(t *testing.T, st ax.Store) *ax.Scheduler {
	t.Helper()
	s, err := ax.New(ax.Config{Store: st, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	s.HandleFunc("fail", func(context.Context, *ax.Task) error { return errors.New("card declined <b>") }, ax.WithMaxRetry(0))
	s.HandleFunc("later", func(context.Context, *ax.Task) error { return nil })
	s.HandleFunc("nightly", func(context.Context, *ax.Task) error { return nil })
	if err := s.Cron("nightly", "30 2 * * *", ax.WithTimeZone(mustZone(t, "Europe/Berlin"))); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	for _, k := range []string{"f1", "f2", "f3"} {
		if _, err := s.Delay(ctx, "fail", k, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"l1", "l2", "l3"} {
		if _, err := s.Delay(ctx, "later", k, time.Hour, ax.WithPayload([]byte(`{"order":"`+k+`"}`))); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "3 tasks FAILED", func() bool {
		p, err := s.Tasks(ctx, ax.TaskQuery{Statuses: []ax.Status{ax.Failed}})
		return err == nil && len(p.Tasks) == 3
	})
	return s
}

func mustZone(t *testing.T, name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// lookup returns the task (name, key) of s.
func lookup(t *testing.T, s *ax.Scheduler, name, key string) *ax.Task {
	t.Helper()
	task, err := s.Lookup(context.Background(), name, key)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// audited returns the audit records of s that match q.
func audited(t *testing.T, s *ax.Scheduler, q ax.AuditQuery) []ax.AuditRecord {
	t.Helper()
	q.Limit = 1000
	recs, err := s.AuditLog(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// pages are the console's pages a signed-in caller visits.
var pages = []string{"/ax/", "/ax/tasks", "/ax/tasks?status=FAILED&order=soonest", "/ax/schedules", "/ax/schedules/nightly", "/ax/names", "/ax/cluster"}

// The main flows, on each SQL store: sign in, every page, cancel with a reason and
// its audit record, a bulk retry by filter after the count preview, a schedule paused,
// triggered and resumed, a viewer who sees no actions and whose forged POST is
// refused and recorded, a cross-origin POST refused, sign out.
func TestConsoleFlows(t *testing.T) {
	t.Parallel()
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := seeded(t, open(t))
			site := newSite(t, s, admin.Config{})

			// Not signed in: sent to sign in, and back.
			anon := site.browser(t)
			_, _, h := anon.do(http.MethodGet, "/ax/tasks?status=FAILED", nil)
			if loc := h.Get("Location"); loc != "/ax/signin?next="+url.QueryEscape("/tasks?status=FAILED") {
				t.Errorf("not signed in: sent to %q", loc)
			}
			if st, _, _ := anon.do(http.MethodPost, "/ax/signin", url.Values{"token": {"wrong"}}); st != http.StatusUnauthorized {
				t.Errorf("a wrong token: %d, want 401", st)
			}

			op := site.browser(t)
			_, h = op.post("/ax/signin", url.Values{"token": {secrets[admin.Operator]}, "next": {"/tasks?status=FAILED"}}, http.StatusSeeOther)
			if loc := h.Get("Location"); loc != "/ax/tasks?status=FAILED" {
				t.Errorf("signed in, sent to %q", loc)
			}
			ck := h.Get("Set-Cookie")
			for _, want := range []string{"ax_session=", "Path=/ax", "HttpOnly", "SameSite=Strict"} {
				if !strings.Contains(ck, want) {
					t.Errorf("the session cookie %q lacks %q", ck, want)
				}
			}
			if strings.Contains(ck, "Max-Age") || strings.Contains(ck, "Secure") {
				t.Errorf("the session cookie %q: no Max-Age, and not Secure over plain HTTP", ck)
			}
			for _, p := range pages {
				st, body, h := op.do(http.MethodGet, p, nil)
				if st != http.StatusOK {
					t.Fatalf("GET %s: %d: %.300s", p, st, body)
				}
				if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
					t.Errorf("GET %s: CSP %q", p, csp)
				}
				if h.Get("X-Content-Type-Options") != "nosniff" {
					t.Errorf("GET %s: no X-Content-Type-Options", p)
				}
			}
			if body := op.get("/ax/tasks?status=FAILED", http.StatusOK); strings.Count(body, `name="id"`) != 3 {
				t.Errorf("the FAILED filter lists %d selectable tasks, want 3", strings.Count(body, `name="id"`))
			}
			if body := op.get("/ax/schedules/nightly", http.StatusOK); !strings.Contains(body, "Europe/Berlin") || strings.Count(body, "<li><time") != 10 {
				t.Errorf("the schedule page lacks its zone or 10 next slots")
			}

			// Cancel one task with a reason.
			l1 := lookup(t, s, "later", "l1")
			path := "/ax/tasks/" + itoa(l1.ID)
			_, h = op.post(path+"/cancel", url.Values{"reason": {"customer asked"}}, http.StatusSeeOther)
			if loc := h.Get("Location"); !strings.HasPrefix(loc, path+"?done=cancel&audit=") {
				t.Errorf("after the cancel, sent to %q", loc)
			}
			if body := op.get(h.Get("Location"), http.StatusOK); !strings.Contains(body, "Cancelled.") || !strings.Contains(body, "CANCELLED") {
				t.Errorf("the task page after the cancel does not show it")
			}
			if recs := audited(t, s, ax.AuditQuery{Action: "task.cancel", Target: "task " + itoa(l1.ID)}); len(recs) != 1 ||
				recs[0].Reason != "customer asked" || recs[0].Actor != "operator" || recs[0].Result != "ok" {
				t.Errorf("the cancel's audit records: %+v", recs)
			}

			// Bulk retry by filter: the preview counts, a wrong confirmation is refused,
			// the right one retries each task with its own record.
			bulk := url.Values{"action": {"retry"}, "scope": {"filter"}, "filter": {"status=FAILED"}}
			body, _ := op.post("/ax/bulk", bulk, http.StatusOK)
			if !regexp.MustCompile(`<strong>3</strong> tasks would change`).MatchString(body) {
				t.Errorf("the preview does not count 3: %.2000s", body)
			}
			bulk.Set("reason", "card processor fixed")
			bulk.Set("confirm", "retry")
			op.post("/ax/bulk/confirm", bulk, http.StatusBadRequest)
			if n := len(audited(t, s, ax.AuditQuery{Action: "task.retry"})); n != 0 {
				t.Errorf("a wrong confirmation retried %d tasks", n)
			}
			bulk.Set("confirm", "RETRY")
			bulk.Set("expect", "2") // the preview showed 2: the selection moved since
			if body, _ := op.post("/ax/bulk/confirm", bulk, http.StatusConflict); !strings.Contains(body, "Nothing was done: 2 tasks") {
				t.Errorf("a confirmation whose count moved: %.2000s", body)
			}
			if n := len(audited(t, s, ax.AuditQuery{Action: "task.retry"})); n != 0 {
				t.Errorf("a confirmation whose count moved retried %d tasks", n)
			}
			bulk.Set("expect", "3")
			body, _ = op.post("/ax/bulk/confirm", bulk, http.StatusOK)
			if !strings.Contains(body, "<strong>3</strong> of 3 tasks changed") {
				t.Errorf("the bulk's result: %.2000s", body)
			}
			recs := audited(t, s, ax.AuditQuery{Action: "task.retry"})
			if len(recs) != 3 {
				t.Fatalf("%d task.retry records, want 3", len(recs))
			}
			for _, r := range recs {
				if r.Reason != "card processor fixed" || !strings.Contains(r.Result, "(bulk ") {
					t.Errorf("a retried task's record: %+v", r)
				}
			}
			if n := len(audited(t, s, ax.AuditQuery{Action: "task.bulk_retry"})); n != 1 {
				t.Errorf("%d task.bulk_retry records, want 1", n)
			}

			// A schedule paused, triggered and resumed.
			op.post("/ax/schedules/nightly/pause", url.Values{"reason": {"maintenance"}}, http.StatusSeeOther)
			if body := op.get("/ax/schedules/nightly", http.StatusOK); !strings.Contains(body, "paused") || !strings.Contains(body, "/schedules/nightly/resume") {
				t.Errorf("the paused schedule's page does not offer to resume it")
			}
			_, h = op.post("/ax/schedules/nightly/trigger", url.Values{"reason": {"rerun last night"}}, http.StatusSeeOther)
			if loc := h.Get("Location"); !strings.Contains(loc, "/ax/tasks/") {
				t.Errorf("after a schedule's trigger, sent to %q, want its occurrence", loc)
			}
			op.post("/ax/schedules/nightly/resume", url.Values{"reason": {"done"}}, http.StatusSeeOther)
			for _, a := range []string{"schedule.pause", "schedule.trigger", "schedule.resume"} {
				if recs := audited(t, s, ax.AuditQuery{Action: a, Target: "schedule nightly"}); len(recs) != 1 || recs[0].Result != "ok" {
					t.Errorf("%s: records %+v", a, recs)
				}
			}

			// A viewer sees no action, and a forged POST from its session is refused and
			// recorded.
			viewer := site.browser(t).signIn(admin.Viewer)
			l2 := lookup(t, s, "later", "l2")
			body = viewer.get("/ax/tasks/"+itoa(l2.ID), http.StatusOK)
			if strings.Contains(body, "/cancel") || strings.Contains(body, `method="post" action="/ax/tasks/`) {
				t.Errorf("a viewer is offered actions")
			}
			if strings.Contains(body, `{"order":`) || strings.Contains(body, "&#34;order&#34;") {
				t.Errorf("a viewer is shown the payload")
			}
			if body := op.get("/ax/tasks/"+itoa(l2.ID), http.StatusOK); !strings.Contains(body, "&#34;order&#34;: &#34;l2&#34;") {
				t.Errorf("an operator is not shown the payload, pretty-printed")
			}
			if body := viewer.get("/ax/tasks?status=FAILED", http.StatusOK); strings.Contains(body, `name="id"`) {
				t.Errorf("a viewer is offered bulk actions")
			}
			viewer.post("/ax/tasks/"+itoa(l2.ID)+"/cancel", url.Values{"reason": {"forged"}}, http.StatusForbidden)
			viewer.post("/ax/bulk", bulk, http.StatusForbidden)
			if got := lookup(t, s, "later", "l2"); got.Status != ax.Scheduled {
				t.Errorf("a viewer's forged cancel: the task is %s", got.Status)
			}
			if recs := audited(t, s, ax.AuditQuery{Actor: "viewer", Action: "task.cancel"}); len(recs) != 1 || !strings.HasPrefix(recs[0].Result, "forbidden") {
				t.Errorf("the forged cancel's record: %+v", recs)
			}
			viewer.get("/ax/audit", http.StatusForbidden)

			// The audit log by time: the records from before the test began are none;
			// those since it began hold the cancel.
			ad := site.browser(t).signIn(admin.Admin)
			since := url.QueryEscape(testStart.Add(-time.Minute).UTC().Format(time.RFC3339))
			if body := ad.get("/ax/audit?action=task.cancel&since="+since, http.StatusOK); !strings.Contains(body, "customer asked") {
				t.Errorf("the audit log since the test began lacks the cancel")
			}
			if body := ad.get("/ax/audit?action=task.cancel&until="+since, http.StatusOK); strings.Contains(body, "customer asked") {
				t.Errorf("the audit log until before the test began holds the cancel")
			}
			ad.get("/ax/audit?since=yesterday", http.StatusBadRequest)
			if body := ad.get("/ax/cluster", http.StatusOK); !regexp.MustCompile(`<td>(&#43;|−)[0-9.]+ (ms|s)</td></tr>`).MatchString(body) {
				t.Errorf("the cluster page shows no replica's clock offset: %s", body[strings.Index(body, "<tbody>"):])
			}
			// A failed task's page shows each attempt's due and claim times and lateness.
			f1 := lookup(t, s, "fail", "f1")
			if body := ad.get("/ax/tasks/"+itoa(f1.ID), http.StatusOK); !strings.Contains(body, "<th scope=\"col\">Lateness</th>") ||
				strings.Count(body, "card declined &lt;b&gt;") < 1 {
				t.Errorf("the failed task's attempts lack their lateness or error")
			}

			// A cross-origin POST is refused, whoever's session it carries.
			st, _, _ := op.do(http.MethodPost, "/ax/tasks/"+itoa(l2.ID)+"/cancel", url.Values{"reason": {"x"}}, "Sec-Fetch-Site", "cross-site")
			if st != http.StatusForbidden || lookup(t, s, "later", "l2").Status != ax.Scheduled {
				t.Errorf("a cross-origin POST: %d", st)
			}
			st, _, _ = op.do(http.MethodPost, "/ax/tasks/"+itoa(l2.ID)+"/cancel", url.Values{"reason": {"x"}}, "Origin", "https://evil.example")
			if st != http.StatusForbidden || lookup(t, s, "later", "l2").Status != ax.Scheduled {
				t.Errorf("a POST from another origin: %d", st)
			}

			// A script's bearer token works without a session.
			script := site.browser(t)
			if st, _, _ := script.do(http.MethodGet, "/ax/tasks", nil, "Authorization", "Bearer "+secrets[admin.Viewer]); st != http.StatusOK {
				t.Errorf("a bearer token: %d", st)
			}

			// Sign out ends the session on the server: its cookie, kept, is refused.
			u, _ := url.Parse(site.srv.URL + "/ax/")
			old := op.c.Jar.Cookies(u)
			op.post("/ax/signout", url.Values{}, http.StatusSeeOther)
			op.get("/ax/tasks", http.StatusSeeOther)
			replay := site.browser(t)
			replay.c.Jar.SetCookies(u, old)
			if st, _, h := replay.do(http.MethodGet, "/ax/tasks", nil); st != http.StatusSeeOther || !strings.Contains(h.Get("Location"), "/signin") {
				t.Errorf("the signed-out session's cookie, replayed: %d", st)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A schedule's name is one segment of the URLs that name it, whatever it holds:
// "/", "?", "#", "%2F", "..". A form's action, resolved as a browser resolves it,
// reaches that schedule and nothing else.
func TestScheduleNamesStayInTheirSegment(t *testing.T) {
	t.Parallel()
	s, err := ax.New(ax.Config{Store: stores["sqlite"](t), Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	names := []string{"reports/daily", "x/../../tasks/1/cancel?", "a%2Fb", "q?x=1#frag"}
	for _, n := range names {
		s.HandleFunc(n, func(context.Context, *ax.Task) error { return nil })
		if err := s.Every(n, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	task, err := s.Delay(ctx, "job", "k", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	site := newSite(t, s, admin.Config{})
	op := site.browser(t).signIn(admin.Operator)
	list := op.get("/ax/schedules", http.StatusOK)
	hrefs := regexp.MustCompile(`href="(/ax/schedules/[^"]+)"`).FindAllStringSubmatch(list, -1)
	if len(hrefs) != len(names) {
		t.Fatalf("the schedules page links %d schedules, want %d", len(hrefs), len(names))
	}
	base, _ := url.Parse(site.srv.URL + "/ax/schedules")
	for _, h := range hrefs {
		link, _ := base.Parse(html.UnescapeString(h[1]))
		page := op.get(link.RequestURI(), http.StatusOK)
		action := regexp.MustCompile(`action="([^"]+/pause)"`).FindStringSubmatch(page)
		if action == nil {
			t.Fatalf("%s: no pause form", link)
		}
		to, _ := link.Parse(html.UnescapeString(action[1]))
		op.post(to.RequestURI(), url.Values{"reason": {"test"}}, http.StatusSeeOther)
	}
	ss, err := s.Schedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != len(names) {
		t.Fatalf("Schedules lists %d schedules, want %d", len(ss), len(names))
	}
	for _, sc := range ss {
		if !sc.Paused {
			t.Errorf("schedule %q was not paused through its page", sc.Name)
		}
	}
	if got := lookup(t, s, "job", "k"); got.Status != ax.Scheduled || got.ID != task.ID {
		t.Errorf("a schedule's pause reached task %d: %s", got.ID, got.Status)
	}
}

// The names page, on each SQL store: the names the replicas handle, each with a
// pause form for an operator; a name paused with a reason (its record names the
// operator), then shown paused with a resume form; a name typed in paused; a
// reason is required; a viewer sees no form and its forged POST is refused and
// recorded; a resumed name's tasks run again.
func TestConsoleNames(t *testing.T) {
	t.Parallel()
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := seeded(t, open(t))
			site := newSite(t, s, admin.Config{})
			op := site.browser(t).signIn(admin.Operator)

			body := op.get("/ax/names", http.StatusOK)
			for _, n := range []string{"fail", "later", "nightly"} {
				if !strings.Contains(body, `action="/ax/names/`+n+`/pause"`) {
					t.Errorf("the names page offers no pause of %q", n)
				}
			}
			op.post("/ax/names/later/pause", url.Values{}, http.StatusBadRequest) // no reason
			_, h := op.post("/ax/names/later/pause", url.Values{"reason": {"warehouse closed"}}, http.StatusSeeOther)
			if loc := h.Get("Location"); !strings.HasPrefix(loc, "/ax/names?done=pause&audit=") {
				t.Errorf("after the pause, sent to %q", loc)
			}
			body = op.get(h.Get("Location"), http.StatusOK)
			if !strings.Contains(body, "Paused.") || !strings.Contains(body, `action="/ax/names/later/resume"`) ||
				strings.Contains(body, `action="/ax/names/later/pause"`) {
				t.Errorf("the names page after the pause does not show later paused, with a resume")
			}
			if recs := audited(t, s, ax.AuditQuery{Action: "name.pause", Target: "name later"}); len(recs) != 1 ||
				recs[0].Reason != "warehouse closed" || recs[0].Actor != "operator" || recs[0].Result != "ok" {
				t.Errorf("the pause's audit records: %+v", recs)
			}
			if ns, err := s.Names(context.Background()); err != nil || len(ns) != 1 || !ns[0].Paused || ns[0].ChangedBy != "operator" {
				t.Errorf("the names after the pause: %+v, %v; want later paused by operator", ns, err)
			}

			// A name no replica handles, typed in.
			op.post("/ax/names", url.Values{"action": {"pause"}, "name": {"invoice.send"}, "reason": {"not yet"}}, http.StatusSeeOther)
			if body := op.get("/ax/names", http.StatusOK); !strings.Contains(body, `action="/ax/names/invoice.send/resume"`) ||
				!strings.Contains(body, "no live handler") {
				t.Errorf("the typed-in name is not listed paused")
			}
			op.post("/ax/names", url.Values{"action": {"pause"}, "name": {" "}, "reason": {"x"}}, http.StatusBadRequest)

			// Limits typed in: the fields filled are set, each audited; the others stay.
			op.post("/ax/names", url.Values{"action": {"limits"}, "name": {"nightly"}, "reason": {"x"}}, http.StatusBadRequest) // none given
			op.post("/ax/names", url.Values{"action": {"limits"}, "name": {"nightly"}, "concurrency": {"-1"}, "reason": {"x"}}, http.StatusBadRequest)
			_, h = op.post("/ax/names", url.Values{"action": {"limits"}, "name": {"nightly"}, "concurrency": {"3"}, "rate": {"10"},
				"per": {"1m"}, "key_concurrency": {""}, "key_rate": {"2"}, "key_per": {"1h"}, "reason": {"warehouse slow"}}, http.StatusSeeOther)
			if body := op.get(h.Get("Location"), http.StatusOK); !strings.Contains(body, "Limits set.") || !strings.Contains(body, "0 of 3 in use") ||
				!strings.Contains(body, "10 per 1m0s") || !strings.Contains(body, "one at once; 2 per 1h0m0s") {
				t.Errorf("the names page after the limits does not show them")
			}
			if recs := audited(t, s, ax.AuditQuery{Target: "name nightly"}); len(recs) != 3 || recs[0].Result != "ok: key rate 2 per 1h0m0s" ||
				recs[1].Result != "ok: rate 10 per 1m0s" || recs[2].Result != "ok: concurrency 3" || recs[2].Reason != "warehouse slow" {
				t.Errorf("the limits' audit records: %+v", recs)
			}

			// A viewer sees no form; its forged POST is refused and recorded.
			viewer := site.browser(t).signIn(admin.Viewer)
			if body := viewer.get("/ax/names", http.StatusOK); strings.Contains(body, `method="post" action="/ax/names`) || !strings.Contains(body, "paused") {
				t.Errorf("a viewer is offered name actions, or not shown the pause")
			}
			viewer.post("/ax/names/later/resume", url.Values{"reason": {"forged"}}, http.StatusForbidden)
			if recs := audited(t, s, ax.AuditQuery{Actor: "viewer", Action: "name.resume"}); len(recs) != 1 || !strings.HasPrefix(recs[0].Result, "forbidden") {
				t.Errorf("the forged resume's record: %+v", recs)
			}

			// Paused, a due task of later waits; resumed, it runs.
			if _, err := s.Delay(context.Background(), "later", "now", 0); err != nil {
				t.Fatal(err)
			}
			other, err := s.Delay(context.Background(), "nightly", "now", 0)
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, "the task of an active name SUCCEEDED", func() bool { return lookup(t, s, "nightly", "now").Status == ax.Succeeded })
			if got := lookup(t, s, "later", "now"); got.Status != ax.Scheduled {
				t.Errorf("a paused name's due task is %s beside task %d, which ran", got.Status, other.ID)
			}
			op.post("/ax/names/later/resume", url.Values{"reason": {"warehouse open"}}, http.StatusSeeOther)
			eventually(t, "the resumed name's task SUCCEEDED", func() bool { return lookup(t, s, "later", "now").Status == ax.Succeeded })
			if recs := audited(t, s, ax.AuditQuery{Action: "name.resume", Target: "name later", Actor: "operator"}); len(recs) != 1 || recs[0].Result != "ok" {
				t.Errorf("the resume's records: %+v", recs)
			}
		})
	}
}
