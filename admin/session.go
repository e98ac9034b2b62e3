package admin

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// SessionCookie is the name of the cookie that carries a session's id.
const SessionCookie = "ax_session"

// DefaultSessionTTL is Config.SessionTTL's default: a session lasts a working day.
const DefaultSessionTTL = 12 * time.Hour

// MaxSessions is the most sessions a handler keeps: past it, signing in ends the
// session that would expire first.
const MaxSessions = 10_000

// ErrUnauthorized is SignIn's error for a token that matches none; ErrRateLimited
// for an address past Config.FailedAuth, whose sign-ins are refused, valid or not,
// until its window ends.
var (
	ErrUnauthorized = errors.New("ax: admin: unknown token")
	ErrRateLimited  = errors.New("ax: admin: too many failed sign-ins from this address")
)

// Caller is who a request is from, once authenticated: the actor its token names
// and the token's role.
type Caller struct {
	Actor string
	Role  Role
}

// session is one signed-in caller, until expires.
type session struct {
	c       caller
	expires time.Time
}

// sessions are the handler's sessions, by the SHA-256 of their ids: the ids
// themselves are kept by the browsers only.
type sessions struct {
	ttl time.Duration
	max int
	mu  sync.Mutex
	by  map[[sha256.Size]byte]session
}

func newSessions(ttl time.Duration, max int) *sessions {
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	return &sessions{ttl: ttl, max: max, by: map[[sha256.Size]byte]session{}}
}

// start keeps a new session of c from now, returning its id: 32 random bytes,
// base64url. Full, it forgets the expired sessions, then the one expiring first.
func (s *sessions) start(c caller, now time.Time) string {
	var b [32]byte
	rand.Read(b[:])
	id := base64.RawURLEncoding.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.by) >= s.max {
		var first [sha256.Size]byte
		var firstAt time.Time
		for k, v := range s.by {
			if !now.Before(v.expires) {
				delete(s.by, k)
			} else if firstAt.IsZero() || v.expires.Before(firstAt) {
				first, firstAt = k, v.expires
			}
		}
		if len(s.by) >= s.max {
			delete(s.by, first)
		}
	}
	s.by[sha256.Sum256([]byte(id))] = session{c: c, expires: now.Add(s.ttl)}
	return id
}

// find returns the caller of the live session id.
func (s *sessions) find(id string, now time.Time) (caller, bool) {
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.by[k]
	if ok && !now.Before(v.expires) {
		delete(s.by, k)
		ok = false
	}
	return v.c, ok
}

// end forgets the session id.
func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.by, sha256.Sum256([]byte(id)))
}

// SignIn starts a session for the holder of secret, one of the handler's bearer
// tokens, and sets its cookie on w: SessionCookie, HttpOnly, SameSite=Strict,
// Secure when r came over TLS, with Path path (the prefix the pages are mounted at;
// "" is "/") and no Max-Age, so that it ends with the browser, while the server ends
// it after Config.SessionTTL or at SignOut. The handler's routes then take the
// cookie as they take the token. A secret that matches no token is ErrUnauthorized,
// counted and logged as a failed authentication of r's address; an address past
// Config.FailedAuth is ErrRateLimited, valid secret or not, until its window ends
// (retryAfter says when).
func (h *Handler) SignIn(w http.ResponseWriter, r *http.Request, secret, path string) (c Caller, retryAfter time.Duration, err error) {
	now := time.Now()
	if h.failedAuth.limited(r.RemoteAddr, now) {
		f := h.failedAuth.fail(r.RemoteAddr, now)
		h.failedAuth.logSummaries(h.log, f.ended)
		return Caller{}, f.retryAfter, ErrRateLimited
	}
	found, ok := h.match(secret)
	if !ok {
		f := h.failedAuth.fail(r.RemoteAddr, now)
		h.failedAuth.logSummaries(h.log, f.ended)
		if f.logIt {
			h.log.WarnContext(r.Context(), "ax: admin: sign-in failed; further failures from this address are counted until the window ends",
				"remote", f.key, "path", r.URL.Path, "why", "unknown token", "window", h.failedAuth.limit.Per)
		}
		if f.limited {
			return Caller{}, f.retryAfter, ErrRateLimited
		}
		return Caller{}, 0, ErrUnauthorized
	}
	id := h.sessions.start(found, now)
	http.SetCookie(w, sessionCookie(r, id, path, false))
	return Caller{Actor: found.actor, Role: found.role}, 0, nil
}

// SignOut ends r's session, if any, and clears its cookie (set with path, as
// SignIn set it).
func (h *Handler) SignOut(w http.ResponseWriter, r *http.Request, path string) {
	if ck, err := r.Cookie(SessionCookie); err == nil {
		h.sessions.end(ck.Value)
	}
	http.SetCookie(w, sessionCookie(r, "", path, true))
}

// Caller returns who r is from: its bearer token's holder, or its live session's.
// It counts no failure: a page asks it to decide whether to show the sign-in form.
func (h *Handler) Caller(r *http.Request) (Caller, bool) {
	c, why := h.authenticate(r)
	return Caller{Actor: c.actor, Role: c.role}, why == ""
}

// ReadOnly reports whether the handler refuses every mutating route
// (Config.ReadOnly), for pages to hide what would be refused.
func (h *Handler) ReadOnly() bool { return h.readOnly || h.noAudit }

// sessionCookie is the cookie of session id, or the one that clears it.
func sessionCookie(r *http.Request, id, path string, clear bool) *http.Cookie {
	if path == "" {
		path = "/"
	}
	ck := &http.Cookie{Name: SessionCookie, Value: id, Path: path, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
	if clear {
		ck.MaxAge = -1
	}
	return ck
}

// match returns the holder of secret among the handler's tokens. Every configured
// hash is compared, in constant time, whichever matches.
func (h *Handler) match(secret string) (caller, bool) {
	if secret == "" {
		return caller{}, false
	}
	sum := sha256.Sum256([]byte(secret))
	var found caller
	ok := false
	for _, t := range h.tokens { // every one, whichever matches: NewHandler refused duplicates
		if subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1 {
			found, ok = caller{actor: t.actor, role: t.role}, true
		}
	}
	return found, ok
}

// sessionCaller is the caller of r's session cookie, or why there is none.
func (h *Handler) sessionCaller(r *http.Request) (caller, string) {
	ck, err := r.Cookie(SessionCookie)
	if err != nil || ck.Value == "" {
		return caller{}, "no bearer token"
	}
	c, ok := h.sessions.find(ck.Value, time.Now())
	if !ok {
		return caller{}, "unknown or expired session"
	}
	return c, ""
}

// String names the caller for messages: "alice (operator)".
func (c Caller) String() string { return fmt.Sprintf("%s (%s)", c.Actor, c.Role) }
