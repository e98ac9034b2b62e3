// Package console serves ax's web console: pages to see and steer a scheduler —
// an overview, the tasks with bulk actions, each task's attempts, the schedules,
// the task names (paused or not), the cluster and the audit log — as an http.Handler the service mounts beside the
// admin API, at any prefix:
//
//	api, err := admin.NewHandler(s, admin.Config{Tokens: tokens})
//	pages, err := console.New(api, console.Config{})
//	mux.Handle("/ax/api/", http.StripPrefix("/ax/api", api))
//	mux.Handle("/ax/", http.StripPrefix("/ax", pages))
//
// # One rulebook
//
// The console decides nothing about what a caller may do. Every page reads, and
// every form acts, through the admin API's handler, in the process, with the
// caller's own credentials: its session cookie, or the bearer token a script sends.
// So the API's tokens, roles, read-only switch, trigger limits, refusal limits and
// audit log apply to the pages exactly as they do to the API; a form the page hides
// from a role is refused by the API all the same (403), and recorded. The pages hide
// only what the caller's role cannot do (admin's GET /whoami says which).
//
// # Signing in
//
// A caller signs in with one of the API's tokens (admin.Config.Tokens; there is no
// built-in one). The console then keeps a session on the server (admin.Handler.SignIn):
// an opaque random id in a cookie that is HttpOnly, SameSite=Strict, Secure when
// served over TLS, and scoped to the mount prefix; it ends after
// admin.Config.SessionTTL (default 12 hours) or at sign-out. Failed sign-ins count
// against the client address's admin.Config.FailedAuth; past it, sign-ins from the
// address are answered 429 until its window ends (a valid token is still taken, as
// the API takes it), and so are requests for pages that carry a bearer token that
// matches none. A cross-origin request that changes state (a form posted from
// another site) is refused, by the console and by the API
// (net/http.CrossOriginProtection).
//
// # Live, at a fixed cost
//
// Pages refresh on their own every admin.Config.Refresh (default 5 s); a control on
// each page pauses it. Every read of a page is an admin API shared read (the
// Ax-Shared header): each view is read from the store at most once per interval in
// the process, however many tabs and users watch it, and forgotten when a change is
// made through the handler, so that whoever made it sees it at once. Views are the
// route and its query string: a page of tasks, a task, the schedules, the names, the
// cluster.
//
// # Pages without JavaScript
//
// Pages are rendered on the server (html/template): every filter and page is a URL
// that can be bookmarked, every action a plain form, and everything works with
// JavaScript off (a page then says to reload it to see what changed: a timed meta
// refresh is an accessibility failure). The one script, console.js, served from the
// console itself, replaces a page's live part in place, pauses refresh while a form
// is being filled, fills the sign-in form from a link's "#token=", and counts the
// lease down. The
// Content-Security-Policy forbids inline scripts and styles, other origins and
// framing.
package console

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/axsched/ax/admin"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Config configures the console.
type Config struct {
	// Logger receives the causes of pages that failed. Defaults to slog.Default().
	Logger *slog.Logger
}

// Console is the web console of one admin API handler.
type Console struct {
	api    *admin.Handler
	mux    *http.ServeMux
	serve  http.Handler
	pages  map[string]*template.Template
	static http.Handler
	log    *slog.Logger
}

// csp is the Content-Security-Policy of every answer: scripts and styles only from
// the console's own files, nothing inline, no other origin, no framing.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// New returns the console of api: its pages read and act through api.
func New(api *admin.Handler, cfg Config) (*Console, error) {
	if api == nil {
		return nil, fmt.Errorf("ax: console: nil admin handler")
	}
	c := &Console{api: api, mux: http.NewServeMux(), log: cfg.Logger, pages: map[string]*template.Template{}}
	if c.log == nil {
		c.log = slog.Default()
	}
	for _, page := range []string{"signin", "overview", "tasks", "task", "bulk", "schedules", "schedule", "names", "cluster", "audit", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/parts.html", "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("ax: console: template %s: %w", page, err)
		}
		c.pages[page] = t
	}
	sub, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, fmt.Errorf("ax: console: %w", err)
	}
	c.static = http.FileServerFS(sub)
	c.routes()
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusForbidden, "cross_origin", "a cross-origin request that changes state is refused")
	}))
	c.serve = cop.Handler(c.mux)
	return c, nil
}

// ServeHTTP serves the console.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	c.serve.ServeHTTP(w, r)
}

// routes registers the pages and forms.
func (c *Console) routes() {
	c.mux.Handle("GET /static/", http.StripPrefix("/static", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		c.static.ServeHTTP(w, r)
	})))
	c.mux.HandleFunc("GET /signin", c.signInPage)
	c.mux.HandleFunc("POST /signin", c.signIn)
	c.mux.HandleFunc("POST /signout", c.signOut)
	c.page("GET /{$}", c.overview)
	c.page("GET /tasks", c.tasks)
	c.page("GET /tasks/{id}", c.task)
	c.page("POST /tasks/{id}/{action}", c.taskAction)
	c.page("POST /bulk", c.bulkPreview)
	c.page("POST /bulk/confirm", c.bulkConfirm)
	c.page("GET /schedules", c.schedules)
	c.page("GET /schedules/{name}", c.schedule)
	c.page("POST /schedules/{name}/{action}", c.scheduleAction)
	c.page("GET /names", c.names)
	c.page("POST /names", c.nameAction)
	c.page("POST /names/{name}/{action}", c.nameAction)
	c.page("GET /cluster", c.cluster)
	c.page("GET /audit", c.audit)
	c.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusNotFound, "not_found", "no such page")
	})
}

// view is what every page's layout shows: who is signed in, where the console is
// mounted, the live refresh.
type view struct {
	Base      string // the mount prefix, "" at the root
	Title     string
	Nav       string // the section, for the navigation's current mark
	Me        admin.Whoami
	Live      bool // the page refreshes on its own
	Paused    bool // the caller paused it (?live=off)
	LiveURL   string
	PauseURL  string
	RefreshS  int
	CanAct    bool // the caller's role is operator or above, and the API is not read-only
	IsAdmin   bool
	Error     string
	ErrorCode string
	Data      any
}

// page registers a page or form of signed-in callers: one without a session or
// token is sent to sign in (a GET), or refused (401).
func (c *Console) page(pattern string, f func(w http.ResponseWriter, r *http.Request, v *view)) {
	c.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		v := &view{Base: base(r)}
		_, err := c.api.Authenticate(r)
		if errors.Is(err, admin.ErrRateLimited) {
			c.fail(w, r, http.StatusTooManyRequests, "rate_limited", "too many failed authentications from this address: try again later")
			return
		}
		if err != nil {
			if r.Method == http.MethodGet {
				next := r.URL.EscapedPath()
				if r.URL.RawQuery != "" {
					next += "?" + r.URL.RawQuery
				}
				http.Redirect(w, r, v.Base+"/signin?next="+url.QueryEscape(next), http.StatusSeeOther)
				return
			}
			c.fail(w, r, http.StatusUnauthorized, "unauthorized", "sign in first")
			return
		}
		if !c.read(w, r, "whoami", "", &v.Me) {
			return
		}
		v.CanAct = (v.Me.Role == admin.Operator.String() || v.Me.Role == admin.Admin.String()) && !v.Me.ReadOnly
		v.IsAdmin = v.Me.Role == admin.Admin.String()
		v.RefreshS = max(int(v.Me.RefreshMS/1000), 1)
		w.Header().Set("Cache-Control", "no-store")
		f(w, r, v)
	})
}

// live marks v as a page that refreshes on its own, unless the caller paused it.
func live(r *http.Request, v *view) {
	v.Live = true
	q := r.URL.Query()
	v.Paused = q.Get("live") == "off"
	q.Del("live")
	v.LiveURL = v.Base + r.URL.EscapedPath() + encodeQuery(q)
	q.Set("live", "off")
	v.PauseURL = v.Base + r.URL.EscapedPath() + encodeQuery(q)
}

// render writes page with v, status 200.
func (c *Console) render(w http.ResponseWriter, r *http.Request, page string, v *view) {
	c.renderStatus(w, r, http.StatusOK, page, v)
}

// renderStatus writes page with v and status.
func (c *Console) renderStatus(w http.ResponseWriter, r *http.Request, status int, page string, v *view) {
	var b strings.Builder
	if err := c.pages[page].Execute(&b, v); err != nil {
		c.log.ErrorContext(r.Context(), "ax: console: a page failed to render", "page", page, "err", err)
		http.Error(w, "the page failed to render; the server's log has the cause", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, b.String())
}

// fail writes the error page: status, the API's stable code and its message.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	v := &view{Base: base(r), Title: http.StatusText(status), Error: msg, ErrorCode: code}
	if me, ok := c.api.Caller(r); ok {
		v.Me = admin.Whoami{Actor: me.Actor, Role: me.Role.String()}
	}
	c.renderStatus(w, r, status, "error", v)
}

// safePrefix is the shape of a mount prefix the console links under.
var safePrefix = regexp.MustCompile(`^(/[A-Za-z0-9._~!$&()*+,=:@%-]+)*$`)

// base returns the prefix the console is mounted at — what http.StripPrefix took
// from the request's path, "" at the root — or "" when it is not of safePrefix's
// plain shape.
func base(r *http.Request) string {
	path, _, _ := strings.Cut(r.RequestURI, "?")
	if path == "" || !strings.HasSuffix(path, r.URL.EscapedPath()) {
		return ""
	}
	p := strings.TrimSuffix(path, r.URL.EscapedPath())
	if !safePrefix.MatchString(p) {
		return ""
	}
	return p
}
