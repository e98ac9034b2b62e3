package console_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/admin"
	"github.com/axsched/ax/store/memory"
)

// hostile are texts that would be live markup, script or a spoof if a page wrote
// them as they are.
var hostile = []string{
	`<script>alert(1)</script>`,
	`"onmouseover="alert(1)`,
	`'><img src=x onerror=alert(2)>`,
	`javascript:alert(3)`,
	"\u202egnp.exe",
	`</textarea><svg onload=alert(4)>`,
}

// live patterns: markup the pages' own templates never write, so that finding one
// means a hostile text got through.
var live = []*regexp.Regexp{
	regexp.MustCompile(`(?i)<script[^>]*>[^<]*alert`),
	regexp.MustCompile(`(?i)<img`),
}

// tag is a start tag, its attributes quoted or not; attr is one of them.
var (
	tag  = regexp.MustCompile(`<[a-zA-Z][a-zA-Z0-9-]*((?:\s+[^\s"'>/=]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'=<>` + "`" + `]+))?)*)\s*/?>`)
	attr = regexp.MustCompile(`([^\s"'>/=]+)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s"'=<>` + "`" + `]+))?`)
)

// liveAttrs returns the attributes of body's tags that run script: an event
// handler, or a URL of the javascript: scheme.
func liveAttrs(body string) []string {
	var out []string
	for _, m := range tag.FindAllStringSubmatch(body, -1) {
		for _, a := range attr.FindAllStringSubmatch(m[1], -1) {
			name, val := strings.ToLower(a[1]), strings.Trim(a[2], `"'`)
			if strings.HasPrefix(name, "on") || strings.HasPrefix(strings.ToLower(strings.TrimSpace(val)), "javascript:") {
				out = append(out, a[0])
			}
		}
	}
	return out
}

// Every page, with names, keys, payloads, errors, owners, actors, reasons and
// schedule names that are hostile, 1 MiB and invalid UTF-8 payloads, writes none of
// them live.
func TestPagesEscapeEverything(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(t testing.TB) ax.Store{
		"memory": func(testing.TB) ax.Store { return memory.New() }, "sqlite": stores["sqlite"],
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			site, b, paths := hostileSite(t, open(t))
			ids := site.ids
			bulk := url.Values{"action": {"cancel"}, "scope": {"filter"}, "filter": {"name=" + url.QueryEscape(hostile[0])}}
			for _, p := range paths {
				st, body, _ := b.do(http.MethodGet, p, nil)
				if st != http.StatusOK {
					t.Errorf("GET %s: %d", p, st)
				}
				checkEscaped(t, p, body)
			}
			_, body, _ := b.do(http.MethodPost, "/ax/bulk", bulk)
			checkEscaped(t, "POST /ax/bulk", body)
			if _, body, _ := b.do(http.MethodGet, "/ax/tasks/"+itoa(ids[len(hostile)]), nil); len(body) > 200<<10 {
				t.Errorf("the page of a task with a 1 MiB payload is %d bytes", len(body))
			}
		})
	}
}

// hostileSet is a site whose store holds the hostile texts everywhere a page shows one,
// signed in as an admin whose actor is hostile too; paths are its pages.
type hostileSet struct {
	*site
	ids []int64
}

func hostileSite(t *testing.T, st ax.Store) (*hostileSet, *browser, []string) {
	t.Helper()
	s, err := ax.New(ax.Config{Store: st, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	evil := strings.Join(hostile, " ")
	s.HandleFunc("fails", func(context.Context, *ax.Task) error { return errors.New(evil) }, ax.WithMaxRetry(0))
	s.HandleFunc(`sched<script>alert(5)</script>"x`, func(context.Context, *ax.Task) error { return nil })
	if err := s.Every(`sched<script>alert(5)</script>"x`, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	var ids []int64
	for i, h := range hostile {
		task, err := s.Delay(ctx, h, h, time.Hour, ax.WithOwner(h), ax.WithPayload([]byte(h)))
		if err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
		ids = append(ids, task.ID)
	}
	big := bytes.Repeat([]byte(`<script>alert(6)</script>`), (1<<20)/25)
	for _, p := range [][]byte{big, []byte("\xff\xfe<script>alert(7)</script>\xc3\x28"), []byte(`{"a":"<script>alert(8)</script>"}`)} {
		task, err := s.Delay(ctx, "payloads", string(rune('a'+len(ids))), time.Hour, ax.WithPayload(p))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	failed, err := s.Delay(ctx, "fails", "x", 0)
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, failed.ID)
	eventually(t, "the failing task FAILED", func() bool {
		task, err := s.Get(ctx, failed.ID)
		return err == nil && task.Status == ax.Failed
	})

	toks := []admin.Token{{Actor: evil, Role: admin.Admin, Hash: admin.HashToken("evil-admin")}}
	site := newSite(t, s, admin.Config{Tokens: toks})
	b := site.browser(t)
	b.post("/ax/signin", url.Values{"token": {"evil-admin"}}, http.StatusSeeOther)
	// Actions with hostile reasons, for the audit log and the task pages.
	b.post("/ax/tasks/"+itoa(ids[0])+"/cancel", url.Values{"reason": {evil}}, http.StatusSeeOther)
	b.post("/ax/tasks/"+itoa(failed.ID)+"/retry", url.Values{"reason": {evil}}, http.StatusSeeOther)
	b.do(http.MethodPost, "/ax/tasks/"+itoa(ids[1])+"/retry", url.Values{"reason": {evil}}) // refused: audited with its reason
	b.post("/ax/names", url.Values{"action": {"pause"}, "name": {hostile[0]}, "reason": {evil}}, http.StatusSeeOther)
	b.post("/ax/names/"+url.PathEscape(hostile[2])+"/pause", url.Values{"reason": {evil}}, http.StatusSeeOther)

	paths := []string{"/ax/", "/ax/tasks", "/ax/schedules", "/ax/names", "/ax/cluster", "/ax/audit",
		"/ax/schedules/" + url.PathEscape(`sched<script>alert(5)</script>"x`),
		"/ax/tasks?name=" + url.QueryEscape(hostile[0]) + "&key_prefix=" + url.QueryEscape(hostile[1]),
		"/ax/audit?actor=" + url.QueryEscape(hostile[2]),
		"/ax/signin?next=" + url.QueryEscape("javascript:alert(9)"),
	}
	for _, id := range ids {
		paths = append(paths, "/ax/tasks/"+itoa(id))
	}
	return &hostileSet{site: site, ids: ids}, b, paths
}

// checkEscaped fails t if body, the page at path, holds live markup, or does not
// load the one script the console serves.
func checkEscaped(t *testing.T, path, body string) {
	t.Helper()
	for _, re := range live {
		if m := re.FindString(body); m != "" {
			t.Errorf("%s: live markup %q", path, m)
		}
	}
	if a := liveAttrs(body); len(a) > 0 {
		t.Errorf("%s: live attributes %q", path, a)
	}
	if n := strings.Count(strings.ToLower(body), "<script"); n != 1 {
		t.Errorf("%s: %d script elements, want the console's one", path, n)
	}
}

// The check finds what it looks for, and not escaped text.
func TestLiveMarkupCheck(t *testing.T) {
	for _, c := range []struct {
		html string
		live bool
	}{
		{`<a href="javascript:alert(1)">x</a>`, true},
		{`<a href=JavaScript:alert(1)>x</a>`, true},
		{`<div class="a" onclick="x()">`, true},
		{`<input value="" onmouseover="alert(1)">`, true},
		{`<input value="&#34;onmouseover=&#34;alert(1)">`, false},
		{`<input name="actor" value="&#39;&gt;&lt;img src=x onerror=alert(2)&gt;">`, false},
		{`<td>&lt;script&gt;alert(1)&lt;/script&gt;</td>`, false},
	} {
		found := len(liveAttrs(c.html)) > 0
		for _, re := range live {
			found = found || re.MatchString(c.html)
		}
		if found != c.live {
			t.Errorf("%s: live %v, want %v", c.html, found, c.live)
		}
	}
}

// The pages' scripts stay small: at most 120 KB of JavaScript in all, served from
// the console itself.
func TestScriptsAreSmall(t *testing.T) {
	entries, err := os.ReadDir("static")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".js") {
			info, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			total += int(info.Size())
		}
	}
	if total == 0 || total > 120<<10 {
		t.Errorf("the console's scripts are %d bytes, want some and at most 120 KB", total)
	}
}
