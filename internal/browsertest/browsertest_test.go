package browsertest_test

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/axsched/ax/internal/browsertest"
)

// The console's policy: no inline script or style, nothing from elsewhere.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

var browser browsertest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	if err := browser.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "stop chromium:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

var page = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/style.css">
<script src="/app.js" defer></script>
</head>
<body>
<main>
<h1>{{.Title}}</h1>
<p id="js-status">JavaScript has not run</p>
{{if .Greeting}}<p id="greeting">{{.Greeting}}</p>{{end}}
<form method="post" action="/submit">
<label for="name">Name</label>
<input id="name" name="name" autocomplete="name">
<button type="submit">Send</button>
</form>
{{.Extra}}
</main>
</body>
</html>
`))

type pageData struct {
	Title, Greeting string
	Extra           template.HTML
}

// console is a test server with a few pages under the console's CSP.
type console struct {
	*httptest.Server
	refused atomic.Int32 // cross-origin writes refused
}

func consoleServer(t *testing.T) *console {
	t.Helper()
	render := func(w http.ResponseWriter, d pageData) {
		w.Header().Set("Content-Security-Policy", csp)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err := page.Execute(w, d); err != nil {
			t.Error(err)
		}
	}
	c := new(console)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		render(w, pageData{Title: "Tasks"})
	})
	mux.HandleFunc("GET /app.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprint(w, `document.getElementById("js-status").textContent = "JavaScript ran";`)
	})
	mux.HandleFunc("GET /style.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css")
		fmt.Fprint(w, `body { font-family: sans-serif; margin: 2rem; }`)
	})
	mux.HandleFunc("POST /submit", func(w http.ResponseWriter, r *http.Request) {
		render(w, pageData{Title: "Sent", Greeting: "Hello, " + r.PostFormValue("name")})
	})
	mux.HandleFunc("GET /inline", func(w http.ResponseWriter, r *http.Request) {
		render(w, pageData{Title: "Inline", Extra: `<script>document.title = "inline ran";</script>`})
	})
	mux.HandleFunc("GET /bad", func(w http.ResponseWriter, r *http.Request) {
		render(w, pageData{Title: "Bad", Extra: `<img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=">`})
	})
	mux.HandleFunc("GET /signin", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{
			Name: "session", Value: r.FormValue("user"), Path: "/",
			HttpOnly: true, SameSite: http.SameSiteStrictMode,
		})
		render(w, pageData{Title: "Signed in", Greeting: "Hello, " + r.FormValue("user")})
	})
	mux.HandleFunc("POST /write", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Origin") != "" && r.Header.Get("Origin") != "http://"+r.Host {
			c.refused.Add(1)
			http.Error(w, "cross-origin write refused", http.StatusForbidden)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	c.Server = httptest.NewServer(mux)
	t.Cleanup(c.Close)
	return c
}

func TestNavigateReadsTheTextAndTheLocation(t *testing.T) {
	t.Parallel()
	srv := consoleServer(t)
	tab := browser.Get(t).Tab(t)

	tab.Navigate(srv.URL + "/")
	if got, want := tab.Text("h1"), "Tasks"; got != want {
		t.Errorf("Text(h1) = %q, want %q", got, want)
	}
	if got, want := tab.Location(), srv.URL+"/"; got != want {
		t.Errorf("Location() = %q, want %q", got, want)
	}
	if !tab.Exists("form") || tab.Exists("#greeting") {
		t.Errorf("Exists(form), Exists(#greeting) = %v, %v, want true, false", tab.Exists("form"), tab.Exists("#greeting"))
	}
	if errs := tab.Errors(); len(errs) != 0 {
		t.Errorf("Errors() = %q, want none", errs)
	}
}

func TestAFormSubmitsWithJavaScriptOff(t *testing.T) {
	t.Parallel()
	srv := consoleServer(t)
	tab := browser.Get(t).Tab(t, browsertest.WithoutJavaScript())

	tab.Navigate(srv.URL + "/")
	tab.SendKeys("#name", "Ada <b>")
	tab.Click("button[type=submit]")
	if got, want := tab.Location(), srv.URL+"/submit"; got != want {
		t.Errorf("after the click, Location() = %q, want %q", got, want)
	}
	if got, want := tab.Text("#greeting"), "Hello, Ada <b>"; got != want {
		t.Errorf("Text(#greeting) = %q, want %q", got, want)
	}
}

func TestSubmitSendsTheFormOfAnElement(t *testing.T) {
	t.Parallel()
	srv := consoleServer(t)
	tab := browser.Get(t).Tab(t)

	tab.Navigate(srv.URL + "/")
	tab.SetValue("#name", "Grace")
	tab.Submit("#name")
	if got, want := tab.Text("#greeting"), "Hello, Grace"; got != want {
		t.Errorf("Text(#greeting) = %q, want %q", got, want)
	}
	if got, want := tab.Location(), srv.URL+"/submit"; got != want {
		t.Errorf("Location() = %q, want %q", got, want)
	}
}

func TestAScriptFromSelfRunsOnlyWithJavaScriptOn(t *testing.T) {
	t.Parallel()
	srv := consoleServer(t)
	b := browser.Get(t)
	for _, c := range []struct {
		name string
		opt  browsertest.Option
		want string
	}{
		{"on", browsertest.WithJavaScript(), "JavaScript ran"},
		{"off", browsertest.WithoutJavaScript(), "JavaScript has not run"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tab := b.Tab(t, c.opt)
			tab.Navigate(srv.URL + "/")
			if got := tab.Text("#js-status"); got != c.want {
				t.Errorf("Text(#js-status) = %q, want %q", got, c.want)
			}
			if errs := tab.Errors(); len(errs) != 0 {
				t.Errorf("Errors() = %q, want none", errs)
			}
		})
	}
}

func TestAnInlineScriptIsBlockedAndReported(t *testing.T) {
	t.Parallel()
	srv := consoleServer(t)
	tab := browser.Get(t).Tab(t)

	tab.Navigate(srv.URL + "/inline")
	var title string
	tab.Eval(`document.title`, &title)
	if title != "Inline" {
		t.Errorf("document.title = %q: the inline script ran", title)
	}
	errs := tab.Errors()
	if len(errs) != 1 || !strings.Contains(errs[0], "Content Security Policy") {
		t.Errorf("Errors() = %q, want one Content Security Policy violation", errs)
	}
}

func TestAxeFindsAMissingAltAndNothingOnAGoodPage(t *testing.T) {
	t.Parallel()
	srv := consoleServer(t)
	b := browser.Get(t)
	for _, c := range []struct {
		name string
		opt  browsertest.Option
	}{
		{"javascript on", browsertest.WithJavaScript()},
		{"javascript off", browsertest.WithoutJavaScript()},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tab := b.Tab(t, c.opt)

			tab.Navigate(srv.URL + "/bad")
			vs := tab.Axe(t)
			if len(vs) != 1 || vs[0].ID != "image-alt" || !vs[0].Serious() ||
				len(vs[0].Nodes) != 1 || vs[0].Nodes[0].Target != "img" {
				t.Errorf("Axe(bad page) = %v, want one serious image-alt on img", vs)
			}

			tab.Navigate(srv.URL + "/")
			if vs := tab.Axe(t); len(vs) != 0 {
				t.Errorf("Axe(good page) = %v, want none", vs)
			}
			browsertest.AssertNoSeriousAxe(t, tab)
			if errs := tab.Errors(); len(errs) != 0 {
				t.Errorf("Errors() = %q, want none: axe-core broke the page's CSP", errs)
			}
		})
	}
}

func TestTwoTabsKeepTheirOwnCookies(t *testing.T) {
	t.Parallel()
	srv := consoleServer(t)
	b := browser.Get(t)
	ops, viewer := b.Tab(t), b.Tab(t)

	ops.Navigate(srv.URL + "/signin?user=ops")
	viewer.Navigate(srv.URL + "/signin?user=viewer")
	for _, c := range []struct {
		tab  *browsertest.Tab
		want string
	}{{ops, "ops"}, {viewer, "viewer"}} {
		cookies := c.tab.Cookies()
		if len(cookies) != 1 {
			t.Fatalf("Cookies() = %+v, want one", cookies)
		}
		got := cookies[0]
		want := browsertest.Cookie{Name: "session", Value: c.want, Domain: "127.0.0.1", Path: "/", HTTPOnly: true, SameSite: "Strict"}
		if got != want {
			t.Errorf("Cookies() = %+v, want %+v", got, want)
		}
	}
}

func TestScreenshotWritesAPNG(t *testing.T) {
	t.Parallel()
	srv := consoleServer(t)
	for _, c := range []struct {
		name string
		opt  browsertest.Option
	}{
		{"desktop", browsertest.WithViewport(browsertest.DesktopWidth, browsertest.DesktopHeight)},
		{"mobile", browsertest.WithMobile()},
	} {
		t.Run(c.name, func(t *testing.T) {
			tab := browser.Get(t).Tab(t, c.opt)
			tab.Navigate(srv.URL + "/")
			path := tab.Screenshot("tasks")
			png, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 1000 {
				t.Errorf("%s: %d bytes, not a PNG of a page", path, len(png))
			}
			var width int
			tab.Eval(`window.innerWidth`, &width)
			if want := map[string]int{"desktop": browsertest.DesktopWidth, "mobile": browsertest.MobileWidth}[c.name]; width != want {
				t.Errorf("window.innerWidth = %d, want %d", width, want)
			}
		})
	}
}

func TestFetchFromAnotherOriginIsRefused(t *testing.T) {
	t.Parallel()
	srv := consoleServer(t)
	// Another site, with no policy of its own: a page there may fetch anywhere.
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html lang="en"><title>Elsewhere</title><main>Elsewhere</main></html>`)
	}))
	t.Cleanup(other.Close)
	tab := browser.Get(t).Tab(t)

	tab.Navigate(other.URL + "/")
	if got := tab.Fetch("POST", other.URL+"/", "x=1", nil); got != http.StatusOK {
		t.Errorf("same-origin Fetch = %d, want %d", got, http.StatusOK)
	}
	// The console refuses the write (403), and the browser does not even let the
	// page read that answer (no CORS), so the page sees 0.
	if got := tab.Fetch("POST", srv.URL+"/write", "x=1", map[string]string{"Content-Type": "text/plain"}); got != 0 {
		t.Errorf("cross-origin Fetch = %d, want 0", got)
	}
	if got := srv.refused.Load(); got != 1 {
		t.Errorf("the console refused %d cross-origin writes, want 1", got)
	}

	// The console's own policy forbids fetch() from its pages (connect-src 'none').
	tab.Navigate(srv.URL + "/")
	if got := tab.Fetch("POST", srv.URL+"/write", "", nil); got != 0 {
		t.Errorf("Fetch under connect-src 'none' = %d, want 0", got)
	}
	if errs := tab.Errors(); len(errs) == 0 {
		t.Errorf("Errors() is empty, want the connect-src violation")
	}
}

// fatalRecorder is a testing.TB whose Fatalf and Skipf record the message and end
// the goroutine, as the real ones do, so a test can check what a failure says.
type fatalRecorder struct {
	testing.TB
	msg chan string
}

func (r *fatalRecorder) Helper() {}
func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg <- "fatal: " + fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *fatalRecorder) Skipf(format string, args ...any) {
	r.msg <- "skip: " + fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// Not parallel: it changes the package's list of Chromiums, which parallel tests,
// paused until it ends, read.
func TestWithoutChromiumATestSkipsOrFailsWhenRequired(t *testing.T) {
	browsertest.SetChromiums(t, "/nonexistent/chromium", "no-such-chromium")
	for _, c := range []struct{ require, want string }{
		{"", "skip: browsertest: chromium not found"},
		{"1", "fatal: browsertest: chromium not found"},
	} {
		t.Setenv("AX_REQUIRE_SERVICES", c.require)
		rec := &fatalRecorder{TB: t, msg: make(chan string, 1)}
		go func() {
			browsertest.New(rec)
			rec.msg <- "New returned"
		}()
		if msg := <-rec.msg; !strings.HasPrefix(msg, c.want) {
			t.Errorf("AX_REQUIRE_SERVICES=%q: New says %q, want %q…", c.require, msg, c.want)
		}
	}
}

func TestAnActionThatTimesOutNamesTheSelectorAndThePage(t *testing.T) {
	t.Parallel()
	srv := consoleServer(t)
	rec := &fatalRecorder{TB: t, msg: make(chan string, 1)}
	b := browser.Get(t)

	// Everything that may fail on rec runs on a goroutine of its own, which
	// rec.Fatalf ends.
	go func() {
		tab := b.Tab(rec, browsertest.WithTimeout(3*time.Second))
		tab.Navigate(srv.URL + "/")
		tab.Click("#missing")
		rec.msg <- "Click returned"
	}()
	msg := <-rec.msg
	for _, want := range []string{`click "#missing"`, srv.URL + "/", "timed out after 3s"} {
		if !strings.Contains(msg, want) {
			t.Errorf("failure %q does not say %q", msg, want)
		}
	}
}

func TestNewStopsChromiumWhenTheTestEnds(t *testing.T) {
	t.Parallel()
	srv := consoleServer(t)
	var pid int
	t.Run("with a browser of its own", func(t *testing.T) {
		b := browsertest.New(t, browsertest.WithMobile())
		pid = browsertest.PID(b)
		tab := b.Tab(t) // takes the browser's options
		tab.Navigate(srv.URL + "/")
		var width int
		tab.Eval(`window.innerWidth`, &width)
		if width != browsertest.MobileWidth {
			t.Errorf("window.innerWidth = %d, want %d", width, browsertest.MobileWidth)
		}
	})
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill(%d, 0) = %v after the test ended, want ESRCH: chromium still runs", pid, err)
	}
}
