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

// MaxSessions is the most sessions a handler keeps, and MaxSessionsPerActor the
// most of one actor's: past either, signing in ends the session that would expire
// first — the actor's own, when it is the actor's bound — so that one token's holder
// signing in again and again ends nobody else's session before the handler is full.
const (
	MaxSessions         = 10_000
	MaxSessionsPerActor = 100
)

// ErrUnauthorized is the error of a token or session that matches none; ErrRateLimited
// that of an address past Config.FailedAuth, whose failed attempts are refused until
// its window ends.
var (
	ErrUnauthorized = errors.New("ax: admin: unknown token or session")
	ErrRateLimited  = errors.New("ax: admin: too many failed authentications from this address")
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
	ttl       time.Duration
	max       int
	perActor  int
	mu        sync.Mutex
	by        map[[sha256.Size]byte]session
	nextSweep time.Time
}

func newSessions(ttl time.Duration, max, perActor int) *sessions {
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	return &sessions{ttl: ttl, max: max, perActor: perActor, by: map[[sha256.Size]byte]session{}}
}

// start keeps a new session of c from now, returning its id: 32 random bytes,
// base64url. Expired sessions are forgotten once a minute; at c's actor's bound,
// the actor's session expiring first ends; at the handler's, anyone's.
func (s *sessions) start(c caller, now time.Time) string {
	var b [32]byte
	rand.Read(b[:])
	id := base64.RawURLEncoding.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if !now.Before(s.nextSweep) {
		for k, v := range s.by {
			if !now.Before(v.expires) {
				delete(s.by, k)
			}
		}
		s.nextSweep = now.Add(time.Minute)
	}
	mine := 0
	for _, v := range s.by {
		if v.c.actor == c.actor {
			mine++
		}
	}
	if mine >= s.perActor {
		s.endFirst(func(v session) bool { return v.c.actor == c.actor })
	} else if len(s.by) >= s.max {
		s.endFirst(func(session) bool { return true })
	}
	s.by[sha256.Sum256([]byte(id))] = session{c: c, expires: now.Add(s.ttl)}
	return id
}

// endFirst ends the session that expires first among those of which.
func (s *sessions) endFirst(which func(session) bool) {
	var first [sha256.Size]byte
	var firstAt time.Time
	for k, v := range s.by {
		if which(v) && (firstAt.IsZero() || v.expires.Before(firstAt)) {
			first, firstAt = k, v.expires
		}
	}
	delete(s.by, first)
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
// tokens, and sets its cookie on w. A session r already carried ends. The handler's
// routes then take the cookie as they take the token. The cookie is SessionCookie:
//
//   - HttpOnly and SameSite=Strict;
//   - Secure when r came over TLS (or Config.SecureCookies);
//   - with Path path, the prefix the pages are mounted at ("" is "/");
//   - with no Max-Age, so that it ends with the browser.
//
// The server ends the session after Config.SessionTTL or at SignOut.
//
// A secret that matches no token is ErrUnauthorized. It is counted and logged as a
// failed authentication of r's address (Config.FailedAuth). Past the limit it is
// ErrRateLimited, with the time until the address's window ends. A valid secret from a
// limited address still signs in, as the API serves a valid token from one. So clients
// behind one proxy are not locked out by another's mistakes. Tokens are long random
// secrets: the limit bounds the noise of failures; guessing is hopeless anyway.
func (h *Handler) SignIn(w http.ResponseWriter, r *http.Request, secret, path string) (c Caller, retryAfter time.Duration, err error) {
	found, ok := h.match(secret)
	if !ok {
		f := h.failed(r, "sign-in", "unknown token")
		if f.limited {
			return Caller{}, f.retryAfter, ErrRateLimited
		}
		return Caller{}, 0, ErrUnauthorized
	}
	if ck, err := r.Cookie(SessionCookie); err == nil {
		h.sessions.end(ck.Value)
	}
	id := h.sessions.start(found, time.Now())
	http.SetCookie(w, h.sessionCookie(r, id, path, false))
	return Caller{Actor: found.actor, Role: found.role}, 0, nil
}

// Authenticate returns who r is from, as the routes find it: its bearer token's
// holder, or its live session's. A bearer token that matches none is a failed
// authentication of r's address, counted and logged as the API counts it
// (Config.FailedAuth): ErrUnauthorized, or ErrRateLimited past the limit. A request
// with neither a token nor a live session is ErrUnauthorized, not counted: it tried
// nothing (a session's id is 256 random bits, which nobody guesses; an expired
// one's cookie is a browser's leftover).
func (h *Handler) Authenticate(r *http.Request) (Caller, error) {
	c, why := h.authenticate(r)
	switch {
	case why == "":
		return Caller{Actor: c.actor, Role: c.role}, nil
	case r.Header.Get("Authorization") == "":
		return Caller{}, ErrUnauthorized
	}
	if f := h.failed(r, "authentication", why); f.limited {
		return Caller{}, ErrRateLimited
	}
	return Caller{}, ErrUnauthorized
}

// SignOut ends r's session, if any, and clears its cookie (set with path, as
// SignIn set it).
func (h *Handler) SignOut(w http.ResponseWriter, r *http.Request, path string) {
	if ck, err := r.Cookie(SessionCookie); err == nil {
		h.sessions.end(ck.Value)
	}
	http.SetCookie(w, h.sessionCookie(r, "", path, true))
}

// Caller returns who r is from, as Authenticate does, but counts no failure: for a
// page that only shows who is signed in.
func (h *Handler) Caller(r *http.Request) (Caller, bool) {
	c, why := h.authenticate(r)
	return Caller{Actor: c.actor, Role: c.role}, why == ""
}

// ReadOnly reports whether the handler refuses every mutating route
// (Config.ReadOnly), for pages to hide what would be refused.
func (h *Handler) ReadOnly() bool { return h.readOnly }

// sessionCookie is the cookie of session id, or the one that clears it.
func (h *Handler) sessionCookie(r *http.Request, id, path string, clear bool) *http.Cookie {
	if path == "" {
		path = "/"
	}
	ck := &http.Cookie{Name: SessionCookie, Value: id, Path: path, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || h.secure}
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
