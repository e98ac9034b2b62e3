package admin

import (
	"log/slog"
	"sync"
	"time"

	"github.com/axsched/ax/internal/clientaddr"
)

// failedAuth counts failed authentications by client address, in fixed windows of
// limit.Per that start at an address's first failure (Config.FailedAuth). Past
// limit.N failures in its window an address is limited; only its first failure of a
// window is logged one by one, the others are counted and logged in one line when
// the window has ended. At most max addresses are counted apart: past them, new
// addresses share one count, under otherAddresses. Windows that ended are swept once
// per limit.Per.
type failedAuth struct {
	limit     Limit
	max       int
	mu        sync.Mutex
	by        map[string]*authWindow
	nextSweep time.Time
}

// authWindow is an address's failures in its current window.
type authWindow struct {
	start time.Time
	n     int
}

// authSummary is the failures of an address that were counted, not logged one by
// one, in the window [from, to).
type authSummary struct {
	key      string
	n        int
	from, to time.Time
}

// authFailure is what a failure means: the address's key, whether to log it one by
// one and whether the address is limited (and until when), and the summaries of
// windows that ended, to log.
type authFailure struct {
	key        string
	logIt      bool
	limited    bool
	retryAfter time.Duration
	ended      []authSummary
}

// otherAddresses is the key of the addresses past failedAuth.max.
const otherAddresses = "other addresses"

func newFailedAuth(l Limit, max int) *failedAuth {
	return &failedAuth{limit: l, max: max, by: map[string]*authWindow{}}
}

// fail counts a failed authentication from remoteAddr (http.Request.RemoteAddr) at
// now.
func (a *failedAuth) fail(remoteAddr string, now time.Time) authFailure {
	a.mu.Lock()
	defer a.mu.Unlock()
	f := authFailure{key: clientaddr.Key(remoteAddr)}
	if !now.Before(a.nextSweep) {
		for key, w := range a.by {
			if !now.Before(w.start.Add(a.limit.Per)) {
				f.ended = a.end(f.ended, key, w)
			}
		}
		a.nextSweep = now.Add(a.limit.Per)
	}
	w := a.by[f.key]
	if w != nil && !now.Before(w.start.Add(a.limit.Per)) {
		f.ended, w = a.end(f.ended, f.key, w), nil
	}
	if w == nil && len(a.by) >= a.max {
		f.key = otherAddresses
		if w = a.by[f.key]; w != nil && !now.Before(w.start.Add(a.limit.Per)) {
			f.ended, w = a.end(f.ended, f.key, w), nil
		}
	}
	if w == nil {
		w = &authWindow{start: now}
		a.by[f.key] = w
	}
	w.n++
	f.logIt = w.n == 1
	f.limited = w.n > a.limit.N
	f.retryAfter = w.start.Add(a.limit.Per).Sub(now)
	return f
}

// end forgets the window w of key, adding the summary of its unlogged failures, if
// any, to ended.
func (a *failedAuth) end(ended []authSummary, key string, w *authWindow) []authSummary {
	delete(a.by, key)
	if w.n > 1 {
		ended = append(ended, authSummary{key: key, n: w.n - 1, from: w.start, to: w.start.Add(a.limit.Per)})
	}
	return ended
}

// flush returns the summaries of every window's unlogged failures, and forgets the
// windows.
func (a *failedAuth) flush() []authSummary {
	a.mu.Lock()
	defer a.mu.Unlock()
	var ended []authSummary
	for key, w := range a.by {
		ended = a.end(ended, key, w)
	}
	return ended
}

// logSummaries logs each summary at WARN.
func (a *failedAuth) logSummaries(log *slog.Logger, ss []authSummary) {
	for _, s := range ss {
		log.Warn("ax: admin: failed authentications counted, not logged one by one", "remote", s.key, "failures", s.n,
			"from", s.from.UTC(), "to", s.to.UTC())
	}
}
