package admin

import (
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
// payloads are shown) whose answers are shared at once; past it, a view not yet
// shared is read for its caller alone.
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

// serve answers w with view's shared answer, reading it with read when there is none
// younger than the interval.
func (s *sharedReads) serve(w http.ResponseWriter, r *http.Request, view string, read http.HandlerFunc) {
	now := time.Now()
	s.mu.Lock()
	e := s.by[view]
	if e != nil && now.Sub(e.at) >= s.every {
		select {
		case <-e.ready: // old: read anew
			delete(s.by, view)
			e = nil
		default: // still being read: wait for it
		}
	}
	if e == nil && len(s.by) >= MaxSharedViews {
		for k, v := range s.by {
			select {
			case <-v.ready:
				if now.Sub(v.at) >= s.every {
					delete(s.by, k)
				}
			default:
			}
		}
	}
	if e == nil && len(s.by) >= MaxSharedViews {
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
		rec := httptest.NewRecorder()
		read(rec, r)
		e.status, e.header, e.body = rec.Code, rec.Header(), rec.Body.Bytes()
		s.mu.Lock()
		if s.gen != gen || e.status != http.StatusOK { // forgotten meanwhile, or a failure: not shared
			if s.by[view] == e {
				delete(s.by, view)
			}
		}
		s.mu.Unlock()
		close(e.ready)
	} else {
		select {
		case <-e.ready:
		case <-r.Context().Done():
			return
		}
	}
	for k, v := range e.header {
		w.Header()[k] = v
	}
	w.WriteHeader(e.status)
	w.Write(e.body)
}

// forget drops every shared answer: a change was made.
func (s *sharedReads) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	clear(s.by)
}
