package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/admin"
	"github.com/axsched/ax/internal/browsertest"
)

// withPaging adds 1,100 tasks of "bulkjob", due in a day, to s.
func withPaging(t *testing.T, s *ax.Scheduler) {
	t.Helper()
	s.HandleFunc("bulkjob", func(context.Context, *ax.Task) error { return nil })
	specs := make([]ax.TaskSpec, 1100)
	for i := range specs {
		specs[i] = ax.TaskSpec{Name: "bulkjob", Key: fmt.Sprintf("b-%04d", i), DueAt: time.Now().Add(24 * time.Hour)}
	}
	if _, err := s.SubmitMany(context.Background(), specs); err != nil {
		t.Fatal(err)
	}
}

// signInTab signs tab in at site with role's token, as a person does.
func signInTab(t *testing.T, tab *browsertest.Tab, site *site, role admin.Role) {
	t.Helper()
	tab.Navigate(site.srv.URL + "/ax/tasks")
	if !strings.Contains(tab.Location(), "/ax/signin?next=") {
		t.Fatalf("not signed in, at %s, want the sign-in page", tab.Location())
	}
	tab.SetValue("#token", secrets[role])
	tab.Submit("#signin")
	if !strings.HasSuffix(tab.Location(), "/ax/tasks") {
		t.Fatalf("signed in, at %s, want /ax/tasks", tab.Location())
	}
}

// visit goes to path, checks the page with axe-core and for errors, and saves a
// screenshot named name.
func visit(t *testing.T, tab *browsertest.Tab, site *site, path, name string) {
	t.Helper()
	tab.Navigate(site.srv.URL + path)
	if loc := tab.Location(); !strings.HasSuffix(loc, path) {
		t.Fatalf("visit %s: at %s", path, loc)
	}
	inspect(t, tab, name)
}

// inspect checks the page tab shows with axe-core and saves a screenshot of it
// named name.
func inspect(t *testing.T, tab *browsertest.Tab, name string) {
	t.Helper()
	browsertest.AssertNoSeriousAxe(t, tab)
	tab.Screenshot(name)
}

// The console in Chromium, on each SQL store: sign in; every page, with axe-core;
// filter and page past 1,000 tasks; cancel a task with a reason and find its audit
// record; bulk-retry the failed tasks by filter after the count preview; pause,
// trigger and resume a schedule; a viewer sees no action and its forged POST is
// refused; a cross-origin POST is refused; sign out ends the session. Then the main
// flows again with JavaScript off.
func TestInBrowser(t *testing.T) {
	t.Parallel()
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := chromium.Get(t)
			s := seeded(t, open(t))
			withPaging(t, s)
			site := newSite(t, s, admin.Config{})
			tab := b.Tab(t)
			signInTab(t, tab, site, admin.Admin)
			if cks := tab.Cookies(); len(cks) != 1 || !cks[0].HTTPOnly || cks[0].SameSite != "Strict" || cks[0].Path != "/ax" {
				t.Errorf("the session cookie in the browser: %+v", cks)
			}

			// Every page, with axe-core and a screenshot.
			l1 := lookup(t, s, "later", "l1")
			for _, p := range []struct{ path, name string }{
				{"/ax/", "overview"}, {"/ax/tasks", "tasks"}, {"/ax/tasks/" + itoa(l1.ID), "task"}, {"/ax/schedules", "schedules"},
				{"/ax/schedules/nightly", "schedule"}, {"/ax/names", "names"}, {"/ax/cluster", "cluster"}, {"/ax/audit", "audit"},
			} {
				visit(t, tab, site, p.path, name+"-"+p.name)
			}

			// Filter and page past 1,000 tasks: 500 a page, the third has the last 100.
			tab.Navigate(site.srv.URL + "/ax/tasks")
			tab.SetValue("input[name=name]", "bulkjob")
			tab.SetValue("select[name=limit]", "500")
			tab.Submit("form.filters")
			for page := 1; page <= 2; page++ {
				if n := rows(tab); n != 500 {
					t.Fatalf("page %d of bulkjob: %d rows, want 500", page, n)
				}
				tab.Click("a[rel=next]")
			}
			if n := rows(tab); n != 100 || tab.Exists("a[rel=next]") {
				t.Errorf("the last page of bulkjob: %d rows, a next link %v; want 100 and none", n, tab.Exists("a[rel=next]"))
			}
			if !strings.Contains(tab.Text("tbody"), "b-0000") {
				t.Errorf("the last page (newest first) lacks the first task submitted")
			}

			// Cancel one task with a reason; its audit record is on its page and in the log.
			tab.Navigate(site.srv.URL + "/ax/tasks/" + itoa(l1.ID))
			tab.SetValue("#cancel-reason", "customer paid by phone")
			tab.Submit("#cancel-reason")
			if got := tab.Text(".notice"); !strings.HasPrefix(got, "Cancelled.") {
				t.Errorf("after the cancel the page says %q", got)
			}
			if !strings.Contains(tab.Text("table.audit"), "customer paid by phone") {
				t.Errorf("the task's audit records lack the cancel's reason")
			}
			tab.Navigate(site.srv.URL + "/ax/audit?action=task.cancel")
			if !strings.Contains(tab.Text("table.audit"), "task "+itoa(l1.ID)) {
				t.Errorf("the audit log lacks the cancel of task %d", l1.ID)
			}

			// Bulk-retry the failed tasks by filter, after the count preview.
			tab.Navigate(site.srv.URL + "/ax/tasks?status=FAILED")
			tab.SetValue("select[name=action]", "retry")
			tab.Click("input[name=scope][value=filter]")
			tab.Submit("#bulk")
			if got := tab.Text(".count strong"); got != "3" {
				t.Fatalf("the preview counts %q, want 3", got)
			}
			inspect(t, tab, name+"-bulk-preview")
			tab.SetValue("#reason", "card processor back")
			tab.SetValue("#confirm-word", "RETRY")
			tab.Submit("#confirm")
			if got := tab.Text("[role=status]"); !strings.Contains(got, "3 of 3 tasks changed") {
				t.Errorf("the bulk's result: %q", got)
			}
			if n := len(audited(t, s, ax.AuditQuery{Action: "task.retry"})); n != 3 {
				t.Errorf("%d task.retry records, want 3", n)
			}

			// Pause, trigger and resume the schedule.
			tab.Navigate(site.srv.URL + "/ax/schedules/nightly")
			tab.SetValue("#pause-reason", "database maintenance")
			tab.Submit("#pause-reason")
			if !tab.Exists("#resume-reason") {
				t.Fatalf("the paused schedule offers no resume")
			}
			tab.SetValue("#trigger-reason", "rerun last night")
			tab.Submit("#trigger-reason")
			if !strings.Contains(tab.Location(), "/ax/tasks/") {
				t.Errorf("after the trigger, at %s, want the occurrence's page", tab.Location())
			}
			tab.Navigate(site.srv.URL + "/ax/schedules/nightly")
			tab.SetValue("#resume-reason", "maintenance over")
			tab.Submit("#resume-reason")
			if !tab.Exists("#pause-reason") {
				t.Errorf("the resumed schedule offers no pause")
			}

			// Pause the task name "later" and resume it, each with a reason.
			tab.Navigate(site.srv.URL + "/ax/names")
			tab.SetValue("form[action$='/names/later/pause'] input[name=reason]", "warehouse closed")
			tab.Submit("form[action$='/names/later/pause'] input[name=reason]")
			if got := tab.Text(".notice"); !strings.HasPrefix(got, "Paused.") || !tab.Exists("form[action$='/names/later/resume']") {
				t.Fatalf("after the name's pause the page says %q, and offers a resume: %v", got, tab.Exists("form[action$='/names/later/resume']"))
			}
			inspect(t, tab, name+"-names-paused")
			tab.SetValue("form[action$='/names/later/resume'] input[name=reason]", "warehouse open")
			tab.Submit("form[action$='/names/later/resume'] input[name=reason]")
			if !tab.Exists("form[action$='/names/later/pause']") {
				t.Errorf("the resumed name offers no pause")
			}
			for _, a := range []string{"name.pause", "name.resume"} {
				if recs := audited(t, s, ax.AuditQuery{Action: a, Target: "name later"}); len(recs) != 1 || recs[0].Result != "ok" || recs[0].Actor != "admin" {
					t.Errorf("%s: records %+v", a, recs)
				}
			}

			// A viewer sees no action; its forged POST is refused.
			viewer := b.Tab(t)
			signInTab(t, viewer, site, admin.Viewer)
			l2 := lookup(t, s, "later", "l2")
			viewer.Navigate(site.srv.URL + "/ax/tasks/" + itoa(l2.ID))
			if viewer.Exists("form[action$='/cancel']") || viewer.Exists("#bulk select") {
				t.Errorf("a viewer is offered actions")
			}
			st := viewer.Fetch("POST", site.srv.URL+"/ax/tasks/"+itoa(l2.ID)+"/cancel", "reason=forged",
				map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
			if st != http.StatusForbidden || lookup(t, s, "later", "l2").Status != ax.Scheduled {
				t.Errorf("a viewer's forged POST: %d", st)
			}

			// Sign out ends the session.
			tab.Navigate(site.srv.URL + "/ax/")
			tab.Submit("header form")
			if !strings.Contains(tab.Location(), "/ax/signin") {
				t.Errorf("signed out, at %s", tab.Location())
			}
			tab.Navigate(site.srv.URL + "/ax/tasks")
			if !strings.Contains(tab.Location(), "/ax/signin") {
				t.Errorf("after sign-out /ax/tasks is served: at %s", tab.Location())
			}
			if errs := tab.Errors(); len(errs) > 0 {
				t.Errorf("the pages logged errors: %q", errs)
			}

			// A POST from a page of another origin is refused (the page cannot read the
			// answer: the task tells).
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				fmt.Fprint(w, `<!doctype html><html lang="en"><title>other</title><p>another site</p></html>`)
			}))
			defer other.Close()
			attacker := b.Tab(t) // signed in as the operator, then lured to another site
			signInTab(t, attacker, site, admin.Operator)
			attacker.Navigate(other.URL + "/")
			attacker.Fetch("POST", site.srv.URL+"/ax/tasks/"+itoa(l2.ID)+"/cancel", "reason=cross",
				map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
			if got := lookup(t, s, "later", "l2"); got.Status != ax.Scheduled {
				t.Errorf("a cross-origin POST cancelled the task")
			}
			if recs := audited(t, s, ax.AuditQuery{Action: "task.cancel", Target: "task " + itoa(l2.ID)}); len(recs) != 1 || recs[0].Actor != "viewer" {
				t.Errorf("task %d's cancel records: %+v, want the viewer's refusal only", l2.ID, recs)
			}

		})
	}
}

// rows counts the rows of the tasks table.
func rows(tab *browsertest.Tab) int {
	var n int
	tab.Eval(`document.querySelectorAll("table.tasks tbody input[name=id]").length`, &n)
	return n
}

// With JavaScript off: sign in, filter, cancel with a reason, bulk-cancel selected
// rows after the preview, pause a schedule; each a plain form.
func TestInBrowserWithoutJavaScript(t *testing.T) {
	t.Parallel()
	b := chromium.Get(t)
	s := seeded(t, stores["sqlite"](t))
	site := newSite(t, s, admin.Config{})
	tab := b.Tab(t, browsertest.WithoutJavaScript())
	signInTab(t, tab, site, admin.Operator)
	for _, p := range []string{"/ax/", "/ax/schedules", "/ax/names", "/ax/cluster"} {
		visit(t, tab, site, p, "nojs-"+strings.Trim(strings.ReplaceAll(p, "/", "-"), "-"))
	}
	tab.Navigate(site.srv.URL + "/ax/tasks")
	tab.SetValue("input[name=name]", "later")
	tab.Submit("form.filters")
	if n := rows(tab); n != 3 {
		t.Fatalf("filtered by name: %d rows, want 3", n)
	}
	l1 := lookup(t, s, "later", "l1")
	tab.Navigate(site.srv.URL + "/ax/tasks/" + itoa(l1.ID))
	tab.SetValue("#cancel-reason", "no script needed")
	tab.Submit("#cancel-reason")
	if got := lookup(t, s, "later", "l1"); got.Status != ax.Cancelled {
		t.Fatalf("cancelled without JavaScript: the task is %s", got.Status)
	}
	// Bulk-cancel two selected rows.
	tab.Navigate(site.srv.URL + "/ax/tasks?name=later&status=SCHEDULED")
	tab.SetValue("select[name=action]", "cancel")
	tab.Click("table.tasks tbody tr:nth-child(1) input[name=id]")
	tab.Click("table.tasks tbody tr:nth-child(2) input[name=id]")
	tab.Submit("#bulk")
	if got := tab.Text(".count strong"); got != "2" {
		t.Fatalf("the preview counts %q, want 2", got)
	}
	tab.SetValue("#reason", "both paid")
	tab.SetValue("#confirm-word", "CANCEL")
	tab.Submit("#confirm")
	if got := tab.Text("[role=status]"); !strings.Contains(got, "2 of 2 tasks changed") {
		t.Errorf("the bulk's result: %q", got)
	}
	tab.Navigate(site.srv.URL + "/ax/schedules/nightly")
	tab.SetValue("#pause-reason", "no script")
	tab.Submit("#pause-reason")
	if !tab.Exists("#resume-reason") {
		t.Errorf("the schedule was not paused without JavaScript")
	}
	// A task name typed in, paused with a plain form.
	tab.Navigate(site.srv.URL + "/ax/names")
	tab.SetValue("#pause-name-name", "invoice.send")
	tab.SetValue("#pause-name-reason", "no script")
	tab.Submit("#pause-name")
	if !tab.Exists("form[action$='/names/invoice.send/resume']") {
		t.Errorf("the name was not paused without JavaScript")
	}
	if ns, err := s.Names(context.Background()); err != nil || len(ns) != 1 || !ns[0].Paused || ns[0].ChangedBy != "operator" {
		t.Errorf("the names after the pause without JavaScript: %+v, %v", ns, err)
	}
	if errs := tab.Errors(); len(errs) > 0 {
		t.Errorf("the pages logged errors: %q", errs)
	}
}

// In dark mode every page keeps its contrast (axe-core), and the page is dark.
func TestInBrowserDarkMode(t *testing.T) {
	t.Parallel()
	b := chromium.Get(t)
	s := seeded(t, stores["sqlite"](t))
	site := newSite(t, s, admin.Config{})
	tab := b.Tab(t, browsertest.WithDarkMode())
	tab.Navigate(site.srv.URL + "/ax/signin")
	inspect(t, tab, "dark-signin")
	signInTab(t, tab, site, admin.Admin)
	l1 := lookup(t, s, "later", "l1")
	for _, p := range []string{"/ax/", "/ax/tasks", "/ax/tasks/" + itoa(l1.ID), "/ax/schedules", "/ax/schedules/nightly", "/ax/names", "/ax/cluster", "/ax/audit"} {
		visit(t, tab, site, p, "dark"+strings.ReplaceAll(p, "/", "-"))
	}
	var bg string
	tab.Eval(`getComputedStyle(document.body).backgroundColor`, &bg)
	if bg != "rgb(13, 17, 23)" {
		t.Errorf("in dark mode the page's background is %s", bg)
	}
}

// At 390×844 every page fits: nothing is wider than the viewport but the tables,
// which scroll in their own box.
func TestInBrowserMobile(t *testing.T) {
	t.Parallel()
	b := chromium.Get(t)
	s := seeded(t, stores["sqlite"](t))
	site := newSite(t, s, admin.Config{})
	tab := b.Tab(t, browsertest.WithMobile())
	signInTab(t, tab, site, admin.Admin)
	l1 := lookup(t, s, "later", "l1")
	for _, p := range []string{"/ax/", "/ax/tasks", "/ax/tasks/" + itoa(l1.ID), "/ax/schedules/nightly", "/ax/names", "/ax/cluster", "/ax/audit"} {
		visit(t, tab, site, p, "mobile"+strings.ReplaceAll(p, "/", "-"))
		var wide bool
		tab.Eval(`document.documentElement.scrollWidth > window.innerWidth + 1`, &wide)
		if wide {
			t.Errorf("%s: the page is wider than 390 px", p)
		}
	}
}

// The live refresh replaces a page's content in place (no reload) once per
// interval, and the pause link stops it.
func TestInBrowserLiveRefresh(t *testing.T) {
	t.Parallel()
	b := chromium.Get(t)
	s := seeded(t, stores["sqlite"](t))
	site := newSite(t, s, admin.Config{Refresh: time.Second})
	tab := b.Tab(t)
	signInTab(t, tab, site, admin.Viewer)
	tab.Navigate(site.srv.URL + "/ax/")
	tab.Eval(`window.axMarker = 1`, nil)
	scheduled := func() string { // read in one evaluation: the refresh replaces the nodes
		var n string
		tab.Eval(`document.querySelector(".tiles li:first-child .n").textContent`, &n)
		return n
	}
	if got := scheduled(); got != "3" {
		t.Fatalf("SCHEDULED reads %q, want 3", got)
	}
	if _, err := s.Delay(context.Background(), "later", "l4", time.Hour); err != nil {
		t.Fatal(err)
	}
	waitText(t, tab, scheduled, "4")
	var marker int
	tab.Eval(`window.axMarker || 0`, &marker)
	if marker != 1 {
		t.Fatalf("the page was reloaded, not refreshed in place")
	}
	// Paused, it stays as it is, while a live tab beside it, on the same interval,
	// refreshes three times: that tab is the clock, not a sleep.
	tab.Click("[data-live-toggle]")
	if got := tab.Text("[data-live-control]"); !strings.Contains(got, "Paused") {
		t.Fatalf("after the pause link the control reads %q", got)
	}
	const countRefreshes = `window.axRefreshes = 0;
		new MutationObserver(() => window.axRefreshes++).observe(document.getElementById("main"), {childList: true}); 0`
	tab.Eval(countRefreshes, nil)
	watcher := b.Tab(t)
	signInTab(t, watcher, site, admin.Viewer)
	watcher.Navigate(site.srv.URL + "/ax/")
	watcher.Eval(countRefreshes, nil)
	if _, err := s.Delay(context.Background(), "later", "l5", time.Hour); err != nil {
		t.Fatal(err)
	}
	refreshes := func(tab *browsertest.Tab) int {
		var n int
		tab.Eval(`window.axRefreshes`, &n)
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); refreshes(watcher) < 3; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the live tab refreshed %d times in 10 s, want 3", refreshes(watcher))
		}
	}
	if n, got := refreshes(tab), scheduled(); n != 0 || got != "4" {
		t.Errorf("paused, the page refreshed %d times while the live one did 3: SCHEDULED reads %q", n, got)
	}
	tab.Click("[data-live-toggle]")
	waitText(t, tab, scheduled, "5")
}

// waitText waits up to 10 s for read to return want.
func waitText(t *testing.T, tab *browsertest.Tab, read func() string, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := read()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page reads %q, want %q within 10s", got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// domCheck lists what in the page's DOM could run or load a script: a script element
// other than the console's, an event handler attribute, a javascript: URL, an image,
// frame, object or embed, an SVG other than a chart.
const domCheck = `(() => {
	const bad = [];
	for (const s of document.scripts) if (!s.src.endsWith("/static/console.js")) bad.push("script " + s.outerHTML.slice(0, 80));
	for (const el of document.querySelectorAll("*")) {
		for (const a of el.attributes) {
			if (a.name.startsWith("on")) bad.push("attribute " + a.name + " on " + el.tagName);
			if (["href", "src", "action", "formaction", "xlink:href"].includes(a.name) && /^\s*javascript:/i.test(a.value)) bad.push("url " + a.value);
		}
		if (["IMG", "IFRAME", "OBJECT", "EMBED"].includes(el.tagName)) bad.push("element " + el.tagName);
		if (el.tagName.toLowerCase() === "svg" && !el.classList.contains("chart")) bad.push("svg");
	}
	return bad;
})()`

// In Chromium, every page of a store full of hostile texts (names, keys, payloads,
// errors, owners, actors, reasons, schedule names; 1 MiB and invalid UTF-8 payloads)
// has none of them live in its DOM, and logs no error (a CSP violation included).
func TestInBrowserNothingHostileIsLive(t *testing.T) {
	t.Parallel()
	b := chromium.Get(t)
	set, _, paths := hostileSite(t, stores["sqlite"](t))
	tab := b.Tab(t)
	// The check finds what it looks for.
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<!doctype html><title>t</title><img src=x onerror="1"><a href="javascript:1">x</a>`)
	}))
	defer other.Close()
	tab.Navigate(other.URL)
	var found []string
	tab.Eval(domCheck, &found)
	if len(found) != 3 {
		t.Fatalf("the DOM check finds %q in a page with an image, its handler and a javascript: link", found)
	}
	tab = b.Tab(t) // a tab whose errors are the console's alone
	tab.Navigate(set.srv.URL + "/ax/signin")
	tab.SetValue("#token", "evil-admin")
	tab.Submit("#signin")
	for _, p := range paths {
		tab.Navigate(set.srv.URL + p)
		var bad []string
		tab.Eval(domCheck, &bad)
		if len(bad) > 0 {
			t.Errorf("%s: live in the DOM: %q", p, bad)
		}
	}
	if errs := tab.Errors(); len(errs) > 0 {
		t.Errorf("the pages logged errors: %q", errs)
	}
}
