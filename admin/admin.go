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
//	GET  /cluster                    viewer: the leader, its epoch and lease, the live replicas
//	POST /tasks/{id}/cancel          operator: ax.Cancel
//	POST /tasks/{id}/retry           operator: ax.Retry
//	POST /tasks/{id}/trigger         operator, a reason: ax.Trigger (run here, or handed to the scheduler with its handler)
//	POST /tasks/{id}/reschedule      operator, a reason and "at": ax.Reschedule
//	POST /schedules/{name}/pause     operator: ax.PauseSchedule
//	POST /schedules/{name}/resume    operator: ax.ResumeSchedule
//	POST /schedules/{name}/trigger   operator, a reason: ax.TriggerSchedule (an occurrence now, marked manual)
//	GET  /audit                      admin: the audit log, newest first (actor, action, target, before_id, limit)
//
// A mutating route's body is an ActionBody: one JSON object with no unknown fields, at
// most MaxBody (1 MiB; larger is 413 too_large), or empty. Its answer is an
// ActionResult: the task after the call and the audit record written for it. Every
// mutating call by a known token, allowed or refused, is one record in the store's
// audit log (ax.Audit; ax_audit): actor, role, action, target, reason, result, the
// task's status before and after, the execution a trigger claimed. On a store that
// writes in transactions (every SQL store) the record is written in the change's own
// transaction (ax.Scheduler.InTx), so neither is kept without the other: a record
// that cannot be written undoes the change, and the answer is 500 audit_failed with
// nothing done. A refused call has written nothing; its record is written on its own.
// A trigger on a scheduler that runs the task's handler claims it in the transaction
// and records the execution (which that scheduler runs after the commit, unless it is
// stopping: then the claim is handed back, and the task runs under another); one handed to another scheduler (an operations node,
// ax serve; a schedule's manual occurrence) is claimed after the commit, and the
// record names no execution: the task's detail shows it. On a store without
// transactions (the memory store) the record follows the change, and audit_failed
// means done but unrecorded. Triggers are limited per actor
// (Config.Triggers; 429 rate_limited, audited); Config.ReadOnly refuses every
// mutating route (403 read_only, audited). A call without a valid token is refused
// (401) and not audited: it has no actor.
//
// The query string of GET /tasks: status (repeated or comma-separated), name,
// key_prefix, owner, task_key, due_from, due_before, finished_from, finished_before
// (RFC 3339), order (newest or soonest), limit (1 to 1,000; default 100) and cursor
// (the next of the page before). An unknown parameter, a malformed value or a cursor
// of another query is 400.
//
// Errors are JSON, {"error": {"code": "…", "message": "…"}}, with a stable code:
// unauthorized (401: no token, or one that matches none), forbidden (403: the role
// does not allow the route), read_only (403), invalid (400), not_found (404),
// method_not_allowed (405), conflict (409: the task's state refuses the action),
// not_running (409), too_large (413), rate_limited (429), internal (500),
// audit_failed (500), unsupported (501: the store keeps no audit log).
package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

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
// by commas or white space (ax serve's AX_ADMIN_TOKENS). An entry of another shape, or
// with an unknown role, is ErrInvalid; NewHandler checks the rest.
func ParseTokens(s string) ([]Token, error) {
	var out []Token
	for _, entry := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' || r == '\r' }) {
		parts := strings.SplitN(entry, ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("ax: admin: token %q: want actor:role:sha256:<hex>: %w", entry, ax.ErrInvalid)
		}
		role, err := ParseRole(parts[1])
		if err != nil {
			return nil, err
		}
		out = append(out, Token{Actor: parts[0], Role: role, Hash: parts[2]})
	}
	return out, nil
}

// Config configures the handler.
type Config struct {
	// Tokens are the bearer tokens accepted. None: every request but /health is
	// refused.
	Tokens []Token
	// ReadOnly refuses every mutating route (403 read_only, audited).
	ReadOnly bool
	// Triggers bounds each actor's triggers. Default: 10 a minute.
	Triggers TriggerLimit
	// Logger receives what the API cannot answer with: an audit record that could
	// not be written after its action was done. Defaults to slog.Default().
	Logger *slog.Logger
}

// token is a configured token with its hash decoded.
type token struct {
	actor string
	role  Role
	sum   [sha256.Size]byte
}

// Handler is the admin API of one scheduler.
type Handler struct {
	s        *ax.Scheduler
	tokens   []token
	mux      *http.ServeMux
	readOnly bool
	noAudit  bool // the store keeps no audit log: every mutating route is refused
	triggers *rateLimiter
	log      *slog.Logger
}

// NewHandler returns the admin API of s. A token without an actor, with an unknown
// role or with a malformed hash is ErrInvalid.
func NewHandler(s *ax.Scheduler, cfg Config) (*Handler, error) {
	if s == nil {
		return nil, fmt.Errorf("ax: admin: nil scheduler: %w", ax.ErrInvalid)
	}
	h := &Handler{s: s, mux: http.NewServeMux(), readOnly: cfg.ReadOnly, triggers: newRateLimiter(cfg.Triggers), log: cfg.Logger}
	if h.log == nil {
		h.log = slog.Default()
	}
	// Does the store keep an audit log? A query of limit 0 asks without a read: the
	// store refuses it as invalid, or ax as unsupported before reaching one.
	if _, err := s.AuditLog(context.Background(), ax.AuditQuery{Limit: 0}); errors.Is(err, ax.ErrUnsupported) {
		h.noAudit = true
	}
	seen := map[string]bool{}
	for i, t := range cfg.Tokens {
		if seen[t.Hash] {
			return nil, fmt.Errorf("ax: admin: token %d (%s): the same token is configured twice: %w", i, t.Actor, ax.ErrInvalid)
		}
		seen[t.Hash] = true
		hexSum, ok := strings.CutPrefix(t.Hash, "sha256:")
		sum, err := hex.DecodeString(hexSum)
		switch {
		case strings.TrimSpace(t.Actor) == "" || len(t.Actor) > 200 || !store.CleanText(t.Actor):
			return nil, fmt.Errorf("ax: admin: token %d: no actor, one over 200 bytes, or not clean UTF-8: %w", i, ax.ErrInvalid)
		case t.Role < Viewer || t.Role > Admin:
			return nil, fmt.Errorf("ax: admin: token %d (%s): role %v: want Viewer, Operator or Admin: %w", i, t.Actor, t.Role, ax.ErrInvalid)
		case !ok || err != nil || len(sum) != sha256.Size:
			return nil, fmt.Errorf("ax: admin: token %d (%s): the hash is not \"sha256:\" and 64 hex digits (HashToken): %w", i, t.Actor, ax.ErrInvalid)
		}
		tk := token{actor: t.Actor, role: t.Role}
		copy(tk.sum[:], sum)
		h.tokens = append(h.tokens, tk)
	}
	h.mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	h.route("GET /tasks", Viewer, h.listTasks)
	h.route("GET /tasks/counts", Viewer, h.counts)
	h.route("GET /tasks/{id}", Viewer, h.task)
	h.route("GET /schedules", Viewer, h.schedules)
	h.route("GET /cluster", Viewer, h.cluster)
	h.routeActions()
	// What no route takes, answered in JSON like the rest (the mux's own answers are
	// plain text).
	for path, allow := range map[string]string{"/health": "GET", "/tasks": "GET", "/tasks/{id}": "GET", "/schedules": "GET",
		"/cluster": "GET", "/audit": "GET", "/tasks/{id}/{action}": "POST", "/schedules/{name}/{action}": "POST"} { // /tasks/{id} also covers /tasks/counts
		h.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed here")
		})
	}
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such route: "+r.URL.Path)
	})
	return h, nil
}

// ServeHTTP serves the API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

// Require serves next for requests whose bearer token is one of the handler's, with a
// role of at least least: for endpoints a service mounts beside the API behind the
// same tokens (ax serve's /metrics). Other requests are answered as the API answers
// them: 401 unauthorized, 403 forbidden.
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
		c, ok := h.authenticate(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ax"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "a valid bearer token is required")
			return
		}
		if c.role < least {
			writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("%s's role, %s, does not allow this; it needs %s", c.actor, c.role, least))
			return
		}
		f(w, r, c)
	})
}

// authenticate finds the token the request carries. Every configured hash is
// compared, in constant time, whichever matches.
func (h *Handler) authenticate(r *http.Request) (caller, bool) {
	secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || secret == "" {
		return caller{}, false
	}
	sum := sha256.Sum256([]byte(secret))
	var found caller
	ok = false
	for _, t := range h.tokens { // every one, whichever matches: NewHandler refused duplicates
		if subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1 {
			found, ok = caller{actor: t.actor, role: t.role}, true
		}
	}
	return found, ok
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

// writeErr writes err, an error of the scheduler, with the status its sentinel says.
func writeErr(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ax.ErrInvalid):
		writeError(w, http.StatusBadRequest, "invalid", err.Error())
	case errors.Is(err, ax.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}
