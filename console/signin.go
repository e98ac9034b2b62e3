package console

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax/admin"
)

// signInData is the sign-in page's.
type signInData struct {
	Next string
}

// signInPage is GET /signin: the form.
func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	v := &view{Base: base(r), Title: "Sign in", Data: signInData{Next: safeNext(r.URL.Query().Get("next"))}}
	w.Header().Set("Cache-Control", "no-store")
	c.render(w, r, "signin", v)
}

// signIn is POST /signin: a token, from the form, starts a session.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	v := &view{Base: base(r), Title: "Sign in"}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		c.fail(w, r, http.StatusBadRequest, "invalid", "the form could not be read")
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	v.Data = signInData{Next: next}
	_, retry, err := c.api.SignIn(w, r, strings.TrimSpace(r.PostForm.Get("token")), cookiePath(v.Base))
	switch {
	case errors.Is(err, admin.ErrRateLimited):
		w.Header().Set("Retry-After", strconv.Itoa(int(max(retry.Round(time.Second), time.Second)/time.Second)))
		v.Error, v.ErrorCode = "Too many failed sign-ins from this address: try again later.", "rate_limited"
		c.renderStatus(w, r, http.StatusTooManyRequests, "signin", v)
	case err != nil:
		v.Error, v.ErrorCode = "That token is not one of this server's.", "unauthorized"
		c.renderStatus(w, r, http.StatusUnauthorized, "signin", v)
	default:
		http.Redirect(w, r, v.Base+next, http.StatusSeeOther)
	}
}

// signOut is POST /signout: the session ends.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	b := base(r)
	c.api.SignOut(w, r, cookiePath(b))
	http.Redirect(w, r, b+"/signin", http.StatusSeeOther)
}

// cookiePath is the session cookie's path for the mount prefix b.
func cookiePath(b string) string {
	if b == "" {
		return "/"
	}
	return b
}

// safeNext is where to go after signing in: a path of the console's own ("/tasks?…"),
// never another site's ("//evil.example", "https://…"); "/" otherwise.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") || strings.ContainsAny(next, "\r\n\t") {
		return "/"
	}
	return next
}
