// Package admin serves ax's operations API: JSON over HTTP, as an http.Handler the
// service mounts where it wants (ax never listens by itself).
//
//	h, err := admin.NewHandler(s, admin.Config{Tokens: []admin.Token{
//		{Actor: "alice", Role: admin.Viewer, Hash: admin.HashToken(os.Getenv("ALICE_TOKEN"))},
//	}})
//	mux.Handle("/ax/", http.StripPrefix("/ax", h))
//
// Every request but GET /health carries "Authorization: Bearer <token>". Tokens are
// configured by their hashes (HashToken: SHA-256), never kept in the clear, and a
// presented token is hashed and compared with each configured hash in constant time.
// With no tokens configured the handler refuses every request but /health: there are
// no default credentials. Roles are ordered: Viewer (read) < Operator < Admin.
//
// Routes:
//
//	GET  /health                     200 {"status":"ok"}; no token needed
//	GET  /tasks                      viewer: a page of tasks (ax.TaskQuery from the query string)
//	GET  /tasks/counts               viewer: tasks per status, capped (ax.Counts)
//	GET  /tasks/{id}                 viewer: one task and its executions
//	GET  /schedules                  viewer: the schedules, paused or not, with their next and last slots
//	GET  /schedules/{name}           viewer: a schedule, its next 10 slots, and what became of its last 50 (ScheduleDetail)
//	GET  /names                      viewer: the task names ever paused or limited, with their state, who changed it last and when (Names)
//	GET  /cluster                    viewer: the leader, its epoch and lease, the live replicas, the last 20 leadership changes
//	GET  /overview                   viewer: tasks per status, the queue's lag, the last hour's executions per minute, the leader, its epoch, the replicas (Overview)
//	GET  /whoami                     viewer: the caller's actor and role, and what the handler allows (Whoami)
//	POST /tasks/{id}/cancel          operator: ax.Cancel
//	POST /tasks/{id}/retry           operator: ax.Retry
//	POST /tasks/{id}/trigger         operator, a reason: ax.Trigger (run here, or handed to the scheduler with its handler)
//	POST /tasks/{id}/reschedule      operator, a reason and "at": ax.Reschedule
//	POST /tasks/bulk/cancel          operator, a reason: cancel tasks by ids or by filter (BulkBody)
//	POST /tasks/bulk/retry           operator, a reason: retry them
//	POST /tasks/bulk/trigger         operator, a reason: trigger them
//	POST /schedules/{name}/pause     operator: ax.PauseSchedule
//	POST /schedules/{name}/resume    operator: ax.ResumeSchedule
//	POST /schedules/{name}/trigger   operator, a reason: ax.TriggerSchedule (an occurrence now, marked manual)
//	POST /names/{name}/pause         operator: ax.PauseName, by the caller (ax.WithActor): no claim takes the name's tasks
//	POST /names/{name}/resume        operator: ax.ResumeName, by the caller
//	POST /names/{name}/concurrency   operator: ax.SetConcurrency to the body's concurrency (0: none), by the caller
//	POST /names/{name}/rate          operator: ax.SetRate to the body's rate per per (0: none), by the caller
//	POST /names/{name}/key-concurrency operator: ax.SetKeyConcurrency to the body's key_concurrency, by the caller
//	POST /names/{name}/key-rate      operator: ax.SetKeyRate to the body's rate per per for each task key (0: none), by the caller
//	GET  /audit                      admin: the audit log, newest first (actor, action, target, since, until, before_id, limit)
//
// A mutating route's body is an ActionBody: one JSON object of its fields, at most
// MaxBody (1 MiB; larger is 413 too_large), or empty. It is read strictly: an
// unknown member, a member given twice, one whose name matches a field only when
// case is ignored ("Reason"), or anything after the object is 400 invalid. Its
// answer is an ActionResult: the task after the call (or the task name's state) and
// the audit record written for it. Every mutating call by a known token, allowed or refused, is one record in
// the store's audit log (ax.Audit; ax_audit): actor, role, action, target, reason,
// result, the task's status before and after, the execution a trigger claimed. On a
// store that writes in transactions (every SQL store) the record is written in the
// change's own transaction (ax.Scheduler.InTx), so neither is kept without the
// other: a record that cannot be written undoes the change, and the answer is 500
// audit_failed with nothing done. A refused call has written nothing; its record is
// written on its own. A trigger on a scheduler that runs the task's handler claims
// it in the transaction and records the execution (which that scheduler runs after
// the commit, unless it is stopping: then the claim is handed back, and the task
// runs under another); one handed to another scheduler (an operations node, ax
// serve; a schedule's manual occurrence) is claimed after the commit, and the record
// names no execution: the task's detail shows it. On a store without transactions
// (the memory store) the record follows the change, and audit_failed means done but
// unrecorded. A task name's pause and resume join no transaction (ax.Scheduler.PauseName
// takes none): on every store their record follows the change, as on the memory store.
// Triggers are limited per actor (Config.Triggers; 429 rate_limited,
// audited); Config.ReadOnly refuses every mutating route (403 read_only, audited).
//
// A record keeps what the request said, made safe for every store: in its target
// (the path's task id, schedule name or task name), reason and result, each invalid UTF-8
// sequence and each NUL becomes U+FFFD, and a text over the store's bound
// (store.MaxAuditText, store.MaxAuditReason) is cut at a rune boundary. The result
// of a record so changed ends with a note naming the fields, " [sanitized: target,
// reason]", which GET /audit shows.
//
// Refusals cannot flood the log. An actor's refused calls past Config.Refusals
// (default 30 in a window of a minute from its first refusal) are counted by action,
// not recorded one by one, and a WARN line says so once per window. When the window
// has ended the counts become one record, action SuppressedAction
// ("audit.suppressed"), whose result says how many refusals of which actions, from
// when to when. It is written at the next mutating call or read of GET /audit,
// whoever makes it, or by Handler.Flush, which a service calls when it stops (ax
// serve does): counts still pending when a process exits without Flush are lost, but
// the WARN line remains. Allowed calls are always recorded one by one.
//
// A call without a valid token is refused (401) and not audited: it has no actor. It
// is logged at WARN (the client's address, the route, and why: no bearer token, or an
// unknown one; never the token), once per address per window of Config.FailedAuth; the
// failures not logged one by one are counted in one line, logged at the first failed
// authentication after the window ended, or by Flush. Past Config.FailedAuth (default
// 20 a minute) an address's failed attempts are answered 429 rate_limited, with
// Retry-After, until its window ends; a valid token from it is still served, so that
// clients behind one proxy or NAT are not locked out by another's mistakes. The
// address is the request's RemoteAddr (an IPv6 address counts by its /64): behind a
// proxy, set it from the proxy's header in a middleware of your own. At most
// MaxTrackedAddresses addresses are counted apart; past them, new addresses share one
// count. Tokens are meant to be long random secrets: the limit bounds the noise of
// failures, guessing is hopeless anyway.
//
// A bulk action (POST /tasks/bulk/…) takes a BulkBody: the tasks by ids (at most
// MaxBulk, 10,000) or by filter (GET /tasks's query string, among the tasks in a state
// the action may change; of more than MaxBulk, the newest), a reason, and dry_run to
// count them only. It runs the single action on each task, each in its own
// transaction with its own audit record, whose result ends "(bulk <id>)"; a task the
// action does not change has no record, and its refusal is in the answer
// (BulkResult). The bulk's own record, action "task.bulk_cancel" (…_retry,
// …_trigger), names the ids or the filter and counts what changed and what did not.
// A bulk trigger counts each task it takes against the actor's trigger limit. An
// allowed dry run writes no record and counts against no limit. A call stops taking
// tasks after 40 seconds, inside a server's write timeout, and says how far it got.
//
// Sessions: SignIn starts a session for the holder of a token (the web console's
// sign-in, package console) and sets its cookie, SessionCookie: an opaque random id,
// HttpOnly, SameSite=Strict, Secure under TLS, with the path it is given. The
// session is kept on the server, by the SHA-256 of its id, until Config.SessionTTL
// (default 12 hours) or SignOut; at most MaxSessions are kept (past them, the one
// expiring first ends). Every route takes the cookie as it takes the token, when the
// request has no Authorization header. Failed sign-ins are failed authentications of
// the address (Config.FailedAuth, logged the same way); past the limit, sign-ins from
// the address are refused, valid or not, until its window ends. A browser's
// cross-origin request that changes state (Sec-Fetch-Site or Origin of another site)
// is refused before any route, 403 cross_origin (net/http.CrossOriginProtection),
// unless it carries a bearer token: only a cookie is sent by a browser on its own.
// Clients that send neither header, scripts, are not concerned.
//
// Shared reads: a GET with the header "Ax-Shared: 1" (SharedHeader) may be answered
// with an answer read for another caller allowed the same view (the route, its query
// string, and whether payloads are shown), at most Config.Refresh old (default 5
// seconds). Each view is read at most once per interval, whoever asks; a change made
// through the handler forgets every shared answer. The console's pages read so, which
// keeps the store's work per interval the same however many viewers watch.
//
// The query string of GET /tasks: status (repeated or comma-separated), name,
// key_prefix, owner, task_key, due_from, due_before, finished_from, finished_before
// (RFC 3339), order (newest or soonest), limit (1 to 1,000; default 100) and cursor
// (the next of the page before). Statuses count once each, however often given; more
// distinct ones than there are statuses is 400. Any other parameter (here and in GET
// /audit) given twice must have one value.
//
// The query string of GET /audit: actor, action and target (exact), since and until
// (RFC 3339; since <= time < until, since before until), before_id (the next of the
// page before) and limit (1 to 1,000; default 100). With since or until the records
// come newest first by time, then id; without, by id. A query string over MaxQueryBytes (16
// KiB) or MaxQueryParams (64 parameters), a malformed one, an unknown parameter, a
// malformed value or a cursor of another query is 400.
//
// Errors are JSON, {"error": {"code": "…", "message": "…"}}, with a stable code:
// unauthorized (401: no token, or one that matches none), forbidden (403: the role
// does not allow the route), read_only (403), invalid (400), not_found (404),
// method_not_allowed (405), conflict (409: the task's state refuses the action),
// not_running (409), too_large (413), rate_limited (429), internal (500),
// audit_failed (500), unsupported (501: the store does not offer what was asked). A
// message never holds a database driver's text: a 4xx from the scheduler shows ax's
// own words only, and a 500 says what failed with an error id, "(error id
// 3f9c0a7e12d45b68; the server's log has the cause)", under which the cause is
// logged at ERROR.
package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store"
)

// Role is what a token may do. Roles are ordered: each allows what the ones below it
// do.
type Role int

// The roles, lowest first. The zero Role allows nothing.
const (
	Viewer   Role = iota + 1 // read tasks, counts, schedules, the cluster
	Operator                 // also cancel, retry, trigger, reschedule, pause and resume
	Admin                    // everything, the audit log included
)

// String returns the role's name: "viewer", "operator" or "admin".
func (r Role) String() string {
	switch r {
	case Viewer:
		return "viewer"
	case Operator:
		return "operator"
	case Admin:
		return "admin"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// ParseRole returns the role named s ("viewer", "operator", "admin").
func ParseRole(s string) (Role, error) {
	for _, r := range []Role{Viewer, Operator, Admin} {
		if r.String() == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("ax: admin: unknown role %q: want viewer, operator or admin: %w", s, ax.ErrInvalid)
}

// Token is one bearer token the handler accepts: whose it is (the actor recorded for
// what it does), its role, and its hash as HashToken writes it.
type Token struct {
	Actor string
	Role  Role
	Hash  string // "sha256:" and 64 hex digits
}

// HashToken returns the hash a Token is configured with for the bearer token secret.
func HashToken(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ParseTokens reads tokens written as "actor:role:sha256:<64 hex digits>", separated
// by commas or white space (ax serve's AX_ADMIN_TOKENS). An entry of another shape,
// without an actor, with an unknown role or a malformed hash is ErrInvalid. Its
// error says which entry, by its position (1 for the first) and, when the entry has
// the shape, its actor, and why — never the entry's text: it may be a secret pasted
// by mistake.
func ParseTokens(s string) ([]Token, error) {
	var out []Token
	for i, entry := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' || r == '\r' }) {
		parts := strings.SplitN(entry, ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("ax: admin: token entry %d: not actor:role:sha256:<64 hex digits> (%d colon-separated fields): %w",
				i+1, len(parts), ax.ErrInvalid)
		}
		t := Token{Actor: parts[0], Hash: parts[2]}
		if err := checkActor(t.Actor); err != nil {
			return nil, fmt.Errorf("ax: admin: token entry %d: %w", i+1, err)
		}
		var err error
		if t.Role, err = ParseRole(parts[1]); err != nil {
			return nil, fmt.Errorf("ax: admin: token entry %d (actor %q): unknown role: want viewer, operator or admin: %w", i+1, t.Actor, ax.ErrInvalid)
		}
		if _, ok := parseHash(t.Hash); !ok {
			return nil, fmt.Errorf("ax: admin: token entry %d (actor %q): the hash is not \"sha256:\" and 64 hex digits (admin.HashToken): %w",
				i+1, t.Actor, ax.ErrInvalid)
		}
		out = append(out, t)
	}
	return out, nil
}

// checkActor refuses an actor that is empty, over 200 bytes, or not clean UTF-8.
func checkActor(actor string) error {
	if strings.TrimSpace(actor) == "" || len(actor) > 200 || !store.CleanText(actor) {
		return fmt.Errorf("no actor, one over 200 bytes, or not clean UTF-8: %w", ax.ErrInvalid)
	}
	return nil
}

// parseHash decodes a Token's Hash: "sha256:" and 64 hex digits.
func parseHash(hash string) (sum [sha256.Size]byte, ok bool) {
	hexSum, ok := strings.CutPrefix(hash, "sha256:")
	b, err := hex.DecodeString(hexSum)
	if !ok || err != nil || len(b) != sha256.Size {
		return sum, false
	}
	copy(sum[:], b)
	return sum, true
}

// Config configures the handler.
type Config struct {
	// Tokens are the bearer tokens accepted. None: every request but /health is
	// refused.
	Tokens []Token
	// ReadOnly refuses every mutating route (403 read_only, audited).
	ReadOnly bool
	// Triggers bounds each actor's triggers, counted over a sliding window.
	// Default: DefaultTriggersPerMinute a minute.
	Triggers TriggerLimit
	// Refusals bounds the audit rows of each actor's refused calls: past N in a
	// window of Per, a refusal is counted instead of written, and the counts are
	// written as one summary row (see the package doc). Default:
	// DefaultRefusalsPerMinute a minute.
	Refusals Limit
	// FailedAuth bounds the failed authentications of each client address: past N
	// in a window of Per, a failed attempt is answered 429 rate_limited instead of
	// 401 until the window ends (see the package doc). Default:
	// DefaultFailedAuthPerMinute a minute.
	FailedAuth Limit
	// Logger receives what the API does not answer with: the cause of a 500 (under
	// its error id), failed authentications, refusals counted instead of recorded.
	// Defaults to slog.Default().
	Logger *slog.Logger
	// SessionTTL is how long a session started by SignIn lasts (default
	// DefaultSessionTTL, 12 hours).
	SessionTTL time.Duration
	// HidePayloads keeps tasks' payloads from every caller; otherwise GET
	// /tasks/{id} shows them to operators and admins.
	HidePayloads bool
	// Refresh is the interval of shared reads (the header Ax-Shared; see the package
	// doc): default DefaultRefresh.
	Refresh time.Duration
	// SecureCookies marks the session cookie Secure even when a request did not come
	// over TLS: for a service behind a proxy that terminates TLS.
	SecureCookies bool
}

// Limit is at most N events per Per. A zero field takes the default of the Config
// field it sets.
type Limit struct {
	N   int
	Per time.Duration
}

// TriggerLimit is the Limit of Config.Triggers.
type TriggerLimit = Limit

// The defaults of Config's limits, each a number per minute, and the number of
// client addresses whose failed authentications are counted apart.
const (
	DefaultTriggersPerMinute   = 10
	DefaultRefusalsPerMinute   = 30
	DefaultFailedAuthPerMinute = 20
	MaxTrackedAddresses        = 1024
)

// orDefault is l with the zero fields set: n a minute.
func (l Limit) orDefault(n int) Limit {
	if l.N <= 0 {
		l.N = n
	}
	if l.Per <= 0 {
		l.Per = time.Minute
	}
	return l
}

// token is a configured token with its hash decoded.
type token struct {
	actor string
	role  Role
	sum   [sha256.Size]byte
}

// Handler is the admin API of one scheduler.
type Handler struct {
	s          *ax.Scheduler
	tokens     []token
	mux        *http.ServeMux
	readOnly   bool
	triggers   *rateLimiter
	refusals   *refusalLimiter
	failedAuth *failedAuth
	bulkBudget time.Duration // how long a bulk call changes tasks
	sessions   *sessions
	secure     bool // SecureCookies
	hidePay    bool
	shared     *sharedReads
	serve      http.Handler // mux behind the cross-origin check
	log        *slog.Logger
}

// NewHandler returns the admin API of s. A token without an actor, with an unknown
// role or with a malformed hash, or given twice, is ErrInvalid; the error names it by
// its place in Config.Tokens, counted from 1 as ParseTokens counts its entries.
func NewHandler(s *ax.Scheduler, cfg Config) (*Handler, error) {
	if s == nil {
		return nil, fmt.Errorf("ax: admin: nil scheduler: %w", ax.ErrInvalid)
	}
	h := &Handler{s: s, mux: http.NewServeMux(), readOnly: cfg.ReadOnly, log: cfg.Logger, bulkBudget: bulkBudget,
		triggers:   newRateLimiter(cfg.Triggers.orDefault(DefaultTriggersPerMinute)),
		refusals:   newRefusalLimiter(cfg.Refusals.orDefault(DefaultRefusalsPerMinute)),
		failedAuth: newFailedAuth(cfg.FailedAuth.orDefault(DefaultFailedAuthPerMinute), MaxTrackedAddresses),
		sessions:   newSessions(cfg.SessionTTL, MaxSessions, MaxSessionsPerActor),
		secure:     cfg.SecureCookies,
		hidePay:    cfg.HidePayloads,
		shared:     newSharedReads(cfg.Refresh),
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	seen := map[[sha256.Size]byte]bool{}
	for i, t := range cfg.Tokens {
		n := i + 1 // counted from 1, as ParseTokens counts its entries
		if err := checkActor(t.Actor); err != nil {
			return nil, fmt.Errorf("ax: admin: token entry %d: %w", n, err)
		}
		sum, ok := parseHash(t.Hash)
		switch {
		case t.Role < Viewer || t.Role > Admin:
			return nil, fmt.Errorf("ax: admin: token entry %d (%q): role %v: want Viewer, Operator or Admin: %w", n, t.Actor, t.Role, ax.ErrInvalid)
		case !ok:
			return nil, fmt.Errorf("ax: admin: token entry %d (%q): the hash is not \"sha256:\" and 64 hex digits (HashToken): %w", n, t.Actor, ax.ErrInvalid)
		case seen[sum]:
			return nil, fmt.Errorf("ax: admin: token entry %d (%q): the same token is configured twice: %w", n, t.Actor, ax.ErrInvalid)
		}
		seen[sum] = true
		h.tokens = append(h.tokens, token{actor: t.Actor, role: t.Role, sum: sum})
	}
	h.mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	h.read("GET /tasks", Viewer, h.listTasks)
	h.read("GET /tasks/counts", Viewer, h.counts)
	h.read("GET /tasks/{id}", Viewer, h.task)
	h.read("GET /schedules", Viewer, h.schedules)
	h.read("GET /schedules/{name}", Viewer, h.schedule)
	h.read("GET /names", Viewer, h.names)
	h.read("GET /cluster", Viewer, h.cluster)
	h.read("GET /overview", Viewer, h.overview)
	h.route("GET /whoami", Viewer, h.whoami) // the caller's own: never shared
	h.routeActions()
	// What no route takes, answered in JSON like the rest (the mux's own answers are
	// plain text).
	for path, allow := range map[string]string{"/health": "GET", "/tasks": "GET", "/tasks/{id}": "GET", "/schedules": "GET", "/schedules/{name}": "GET",
		"/cluster": "GET", "/whoami": "GET", "/overview": "GET", "/audit": "GET", "/tasks/{id}/{action}": "POST", "/schedules/{name}/{action}": "POST",
		"/names": "GET", "/names/{name}/{action}": "POST"} { // /tasks/{id} also covers /tasks/counts
		h.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed here")
		})
	}
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such route: "+r.URL.Path)
	})
	// A browser's cross-origin request is refused before it reaches a route: a session
	// cookie must not act for another site's page.
	// Only a session's cookie is sent by a browser on its own: a request carrying
	// its bearer token is a client's choice, and is not judged by its origin.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, "cross_origin", "a cross-origin request that changes state is refused")
	}))
	checked := cop.Handler(h.mux)
	h.serve = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			h.mux.ServeHTTP(w, r)
			return
		}
		checked.ServeHTTP(w, r)
	})
	return h, nil
}

// ServeHTTP serves the API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.serve.ServeHTTP(w, r)
}

// Flush writes what the handler still counts: the summary rows of the refusals
// counted instead of recorded (Config.Refusals), whatever their window, and the log
// lines of the failed authentications not yet logged. Call it when the service
// stops, after its server has shut down; a count still pending at an exit without
// Flush is lost, though the WARN line logged when the counting began remains. The
// error is that of a summary row that could not be written (also logged).
func (h *Handler) Flush(ctx context.Context) error {
	h.failedAuth.logSummaries(h.log, h.failedAuth.flush())
	return h.writeSummaries(ctx, true)
}

// Require serves next for requests whose bearer token is one of the handler's, with a
// role of at least least: for endpoints a service mounts beside the API behind the
// same tokens (ax serve's /metrics). Other requests are answered as the API answers
// them: 401 unauthorized (429 rate_limited past Config.FailedAuth), 403 forbidden.
func (h *Handler) Require(least Role, next http.Handler) http.Handler {
	mux := http.NewServeMux()
	h.routeOn(mux, "/", least, func(w http.ResponseWriter, r *http.Request, _ caller) { next.ServeHTTP(w, r) })
	return mux
}

// caller is who made a request.
type caller struct {
	actor string
	role  Role
}

// route registers f for pattern, for callers whose role is at least least.
func (h *Handler) route(pattern string, least Role, f func(w http.ResponseWriter, r *http.Request, c caller)) {
	h.routeOn(h.mux, pattern, least, f)
}

// routeOn is route on mux.
func (h *Handler) routeOn(mux *http.ServeMux, pattern string, least Role, f func(w http.ResponseWriter, r *http.Request, c caller)) {
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		c, ok := h.authorize(w, r)
		if !ok {
			return
		}
		if c.role < least {
			writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("%s's role, %s, does not allow this; it needs %s", c.actor, c.role, least))
			return
		}
		f(w, r, c)
	})
}

// read registers a read route whose answer depends on the caller only through its
// role's right to it and, for a task, whether the payload is shown: a shared read
// (SharedHeader) is answered from the view's shared answer.
func (h *Handler) read(pattern string, least Role, f func(w http.ResponseWriter, r *http.Request, c caller)) {
	h.route(pattern, least, func(w http.ResponseWriter, r *http.Request, c caller) {
		if r.Header.Get(SharedHeader) != "1" {
			f(w, r, c)
			return
		}
		view := r.URL.Path + "?" + r.URL.RawQuery
		if pattern == "GET /tasks/{id}" {
			view += "|payloads=" + strconv.FormatBool(h.showPayloads(c))
		}
		h.shared.serve(w, r, view, func(w http.ResponseWriter, r *http.Request) { f(w, r, c) })
	})
}

// showPayloads reports whether c is shown tasks' payloads: operators and admins,
// unless Config.HidePayloads.
func (h *Handler) showPayloads(c caller) bool { return c.role >= Operator && !h.hidePay }

// authorize finds the token r carries, or answers r: 401 unauthorized, or 429
// rate_limited when r's address is past Config.FailedAuth. A failure is logged at
// WARN once per address per window (see failedAuth); the token is never logged.
func (h *Handler) authorize(w http.ResponseWriter, r *http.Request) (caller, bool) {
	c, why := h.authenticate(r)
	if why == "" {
		return c, true
	}
	f := h.failed(r, "authentication", why)
	if f.limited {
		w.Header().Set("Retry-After", strconv.Itoa(int(max(f.retryAfter.Round(time.Second), time.Second)/time.Second)))
		writeError(w, http.StatusTooManyRequests, "rate_limited", fmt.Sprintf("over %d failed authentications from this address per %v",
			h.failedAuth.limit.N, h.failedAuth.limit.Per))
		return caller{}, false
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="ax"`)
	writeError(w, http.StatusUnauthorized, "unauthorized", "a valid bearer token is required")
	return caller{}, false
}

// failed counts a failed authentication (what: "authentication", "sign-in") of r's
// address, and logs it at WARN once per address per window, with why.
func (h *Handler) failed(r *http.Request, what, why string) authFailure {
	f := h.failedAuth.fail(r.RemoteAddr, time.Now())
	h.failedAuth.logSummaries(h.log, f.ended)
	if f.logIt {
		h.log.WarnContext(r.Context(), "ax: admin: "+what+" failed; further failures from this address are counted until the window ends",
			"remote", f.key, "method", r.Method, "path", r.URL.Path, "why", why, "window", h.failedAuth.limit.Per)
	}
	return f
}

// authenticate finds who the request is from, or says why nobody: its bearer token
// (see match), or else its session cookie (SignIn). A request with an Authorization
// header is judged by it alone.
func (h *Handler) authenticate(r *http.Request) (caller, string) {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return h.sessionCaller(r)
	}
	secret, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || secret == "" {
		return caller{}, "no bearer token"
	}
	found, ok := h.match(secret)
	if !ok {
		return caller{}, "unknown token"
	}
	return found, ""
}

// writeJSON writes v as the response, with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// apiError is the body of every error response.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	var e apiError
	e.Error.Code, e.Error.Message = code, msg
	writeJSON(w, status, e)
}

// writeErr writes err, an error of the scheduler, as failure classifies it.
func (h *Handler) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	f := h.failure(r, err)
	writeError(w, f.status, f.code, f.msg)
}

// failure classifies err, an error of the scheduler or of the API, into the answer
// the API gives. A 4xx built from the scheduler's error shows ax's own text only
// (publicText); anything else is a 500 whose message is fixed but for its error id,
// and whose cause goes to the log (internal).
func (h *Handler) failure(r *http.Request, err error) *apiFailure {
	var f *apiFailure
	if errors.As(err, &f) {
		return f
	}
	for _, c := range []struct {
		sentinel     error
		status       int
		code, orElse string
	}{
		{ax.ErrNotCancellable, http.StatusConflict, "conflict", "the task's state refuses the action"},
		{ax.ErrNotRetryable, http.StatusConflict, "conflict", "the task's state refuses the action"},
		{ax.ErrNotTriggerable, http.StatusConflict, "conflict", "the task's state refuses the action"},
		{ax.ErrNotReschedulable, http.StatusConflict, "conflict", "the task's state refuses the action"},
		{ax.ErrNotRunning, http.StatusConflict, "not_running", "the scheduler is not running"},
		{ax.ErrInvalid, http.StatusBadRequest, "invalid", "invalid input"},
		{ax.ErrNotFound, http.StatusNotFound, "not_found", "not found"},
		{ax.ErrUnsupported, http.StatusNotImplemented, "unsupported", "not supported by the store"},
	} {
		if errors.Is(err, c.sentinel) {
			return &apiFailure{status: c.status, code: c.code, msg: publicText(err, c.sentinel, c.orElse)}
		}
	}
	var tse *ax.TaskStateError
	if errors.As(err, &tse) {
		return fail(http.StatusConflict, "conflict", "task %d is %s: the action is refused", tse.Task.ID, tse.Task.Status)
	}
	return h.internal(r, "internal", "internal error", err)
}

// publicText is err's message as an answer shows it: ax's own text, up to the end of
// the text of sentinel, which classified it. A driver writes its own text after the
// sentinel it maps an error to ("invalid input (ERROR: … (SQLSTATE 22021))"): that
// is cut. A message without the sentinel's text is orElse.
func publicText(err, sentinel error, orElse string) string {
	msg, s := err.Error(), sentinel.Error()
	if i := strings.Index(msg, s); i >= 0 {
		return msg[:i+len(s)]
	}
	return orElse
}

// internal logs err at ERROR under a new error id and returns the 500 the API
// answers with: code, and what failed with the id, never err's text (a driver's
// message, a query).
func (h *Handler) internal(r *http.Request, code, what string, err error) *apiFailure {
	id := newID()
	h.log.ErrorContext(r.Context(), "ax: admin: "+what, "error_id", id, "method", r.Method, "path", r.URL.Path, "err", err)
	return fail(http.StatusInternalServerError, code, "%s (error id %s; the server's log has the cause)", what, id)
}

// newID returns a random id, 16 hex digits: of an error, tying an answer to its log
// line, or of a bulk action, tying its audit records.
func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
