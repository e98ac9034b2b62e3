package admin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// DefaultRefresh is Config.Refresh's default: the console's pages refresh every 5
// seconds, and a shared read is at most that old.
const DefaultRefresh = 5 * time.Second

// SharedHeader is the request header of a shared read: "Ax-Shared: 1" on a GET asks
// for an answer that may be shared with every caller allowed the same view, read at
// most once per Config.Refresh. The console's live refresh sets it, so that any number
// of viewers cost the store one read per view per interval.
const SharedHeader = "Ax-Shared"

// MaxSharedViews is the most distinct views (route, query string, and whether
// payloads are shown) whose answers are kept at once; past it, the one read least
// recently is forgotten.
const MaxSharedViews = 256

// sharedReads are the answers of shared reads, by view. An answer is read once per
// interval: a caller arriving while it is read waits for it. A change made through
// the handler forgets them all, so that whoever made it sees it at once.
type sharedReads struct {
	every time.Duration
	mu    sync.Mutex
	by    map[string]*sharedRead
	gen   uint64 // raised by forget: a read begun before is not kept
}

// sharedRead is one view's answer, read at at; ready is closed once it is.
type sharedRead struct {
	ready  chan struct{}
	at     time.Time
	status int
	header http.Header
	body   []byte
}

func newSharedReads(every time.Duration) *sharedReads {
	if every <= 0 {
		every = DefaultRefresh
	}
	return &sharedReads{every: every, by: map[string]*sharedRead{}}
}

// sharedReadTimeout bounds a shared read: it runs for every caller of the view, on
// a context of its own, so that the first caller leaving does not fail the others.
const sharedReadTimeout = 30 * time.Second

// serve answers w with view's shared answer, reading it with read when there is none
// younger than the interval. Past MaxSharedViews the view read least recently is
// forgotten. A caller waiting for a read that failed reads for itself.
func (s *sharedReads) serve(w http.ResponseWriter, r *http.Request, view string, read http.HandlerFunc) {
	now := time.Now()
	s.mu.Lock()
	e := s.by[view]
	if e != nil && e.done() && now.Sub(e.at) >= s.every {
		delete(s.by, view)
		e = nil
	}
	if e == nil && len(s.by) >= MaxSharedViews {
		s.evict(now)
	}
	if e == nil && len(s.by) >= MaxSharedViews { // every one is being read: read alone
		s.mu.Unlock()
		read(w, r)
		return
	}
	mine := e == nil
	if mine {
		e = &sharedRead{ready: make(chan struct{}), at: now}
		s.by[view] = e
	}
	gen := s.gen
	s.mu.Unlock()
	if mine {
		s.fill(e, r, view, gen, read)
	} else {
		select {
		case <-e.ready:
		case <-r.Context().Done():
			writeError(w, http.StatusServiceUnavailable, "unavailable", "the request ended while its answer was read")
			return
		}
		if e.status != http.StatusOK { // another caller's read failed: this caller's own may not
			read(w, r)
			return
		}
	}
	for k, v := range e.header {
		w.Header()[k] = v
	}
	w.WriteHeader(e.status)
	w.Write(e.body)
}

// fill reads view's answer into e, on a context of its own bounded by
// sharedReadTimeout, and then closes e.ready, whatever happened, a panic included:
// an answer that failed, or one read before a change was made, is not kept.
func (s *sharedReads) fill(e *sharedRead, r *http.Request, view string, gen uint64, read http.HandlerFunc) {
	e.status = http.StatusInternalServerError // unless read answers
	defer func() {
		s.mu.Lock()
		if (s.gen != gen || e.status != http.StatusOK) && s.by[view] == e {
			delete(s.by, view)
		}
		s.mu.Unlock()
		close(e.ready)
	}()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), sharedReadTimeout)
	defer cancel()
	rec := httptest.NewRecorder()
	read(rec, r.WithContext(ctx))
	e.status, e.header, e.body = rec.Code, rec.Header(), rec.Body.Bytes()
}

// evict forgets the answers older than the interval, and if none was, the one read
// least recently. s.mu is held.
func (s *sharedReads) evict(now time.Time) {
	oldest, oldestAt := "", time.Time{}
	for k, v := range s.by {
		if !v.done() {
			continue
		}
		if now.Sub(v.at) >= s.every {
			delete(s.by, k)
			oldest = ""
			continue
		}
		if oldestAt.IsZero() || v.at.Before(oldestAt) {
			oldest, oldestAt = k, v.at
		}
	}
	if len(s.by) >= MaxSharedViews && oldest != "" {
		delete(s.by, oldest)
	}
}

// done reports whether e's read has ended.
func (e *sharedRead) done() bool {
	select {
	case <-e.ready:
		return true
	default:
		return false
	}
}

// forget drops every shared answer: a change was made.
func (s *sharedReads) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	clear(s.by)
}
