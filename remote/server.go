package remote

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"

	"github.com/axsched/ax/store"
)

// The paths the executor serves.
const (
	DispatchPath = "/ax/v1/dispatch"
	HealthPath   = "/ax/v1/health"
)

// DispatchRequest is the body of a dispatch: claimed tasks, each DISPATCHING with its
// execution id, for one executor (Node) of one namespace, under the leader's fencing
// token (also in the signed Ax-Token header; the two must agree).
type DispatchRequest struct {
	Namespace string       `json:"namespace"`
	Node      string       `json:"node"`
	Token     int64        `json:"token"`
	Tasks     []store.Task `json:"tasks"`
}

// DispatchResponse answers a dispatch: what the executor did with each task, by id.
// An accepted task is recorded and started by the executor (or found a duplicate
// delivery and runs nothing); a busy one found no free slot, an unhandled one no
// handler: the leader tries another executor for those.
type DispatchResponse struct {
	Accepted  []int64 `json:"accepted"`
	Busy      []int64 `json:"busy"`
	Unhandled []int64 `json:"unhandled"`
	// Running and Free are the executor's handlers running and slots free after this
	// request, for the leader's routing.
	Running int `json:"running"`
	Free    int `json:"free"`
}

// fencedBody is the body of a 409 answer: the token is below the highest seen.
type fencedBody struct {
	Error   string `json:"error"`
	Highest int64  `json:"highest"`
}

// Outcome is what an Executor did with one dispatched task.
type Outcome int

// The outcomes of Executor.Take.
const (
	Accepted  Outcome = iota + 1 // taken: it will be started (or found a duplicate)
	Busy                         // no free slot
	Unhandled                    // no handler for its name here
)

// Executor is the replica's executor as the dispatch endpoint sees it.
type Executor interface {
	// Take takes tasks dispatched under token and returns, in input order, what it did
	// with each. It must not wait for handlers to run. The Server has checked the token:
	// it is the highest seen. valid reports, whenever asked, whether the token is
	// still the highest seen: a task taken under an older one must not start.
	Take(token int64, tasks []store.Task, valid func() error) []Outcome
	// Load returns the handlers running and the slots free.
	Load() (running, free int)
}

// Server is an executor's HTTP endpoint: it serves DispatchPath (POST, verified by a
// Verifier when there is a cluster secret) and HealthPath (GET, unsigned, answered at
// once, never behind a dispatch), and refuses a dispatch whose token is below the
// highest it has seen (409, ErrFenced), so that a stale leader starts nothing here.
// Create it with NewServer; it is safe for concurrent use.
type Server struct {
	namespace, node string
	exec            Executor
	log             *slog.Logger
	dispatch        http.Handler
	maxBody         int64
	unsigned        bool // no secret: loopback only, token read from the unsigned header

	mu      sync.Mutex
	highest int64
}

// NewServer returns the endpoint of executor exec, node node of namespace namespace.
// v verifies every dispatch; a nil v (no cluster secret) serves only connections to
// a loopback address, refusing others 403 (ErrInsecureListen), and trusts the token
// header as sent.
func NewServer(namespace, node string, exec Executor, v *Verifier, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	s := &Server{namespace: namespace, node: node, exec: exec, log: log, maxBody: DefaultMaxBodyBytes, unsigned: v == nil}
	h := http.HandlerFunc(s.serveDispatch)
	if v != nil {
		s.dispatch = v.Middleware(h)
		s.maxBody = v.maxBodyBytes
	} else {
		s.dispatch = h
	}
	return s
}

// Highest returns the highest fencing token this executor has accepted a dispatch
// under; zero before the first.
func (s *Server) Highest() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.highest
}

// Raise records a fencing token learnt elsewhere — this replica's own term as leader,
// or the epoch the store recorded for the namespace — so that dispatches under lower
// tokens are refused, and their tasks not yet started never start, before a dispatch
// of the newer leader has arrived here.
func (s *Server) Raise(token int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.highest = max(s.highest, token)
}

// observe raises the highest token seen to token, or reports the higher one already
// seen.
func (s *Server) observe(token int64) (highest int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.highest {
		return s.highest, false
	}
	s.highest = token
	return token, true
}

// ServeHTTP serves DispatchPath and HealthPath.
func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch req.URL.Path {
	case HealthPath:
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"node":%q,"ok":true}`, s.node)
	case DispatchPath:
		if req.Method != http.MethodPost {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if s.unsigned && !loopbackConn(req) {
			s.log.WarnContext(req.Context(), "ax: remote: dispatch refused: no cluster secret and not on loopback",
				"remote_addr", req.RemoteAddr)
			http.Error(w, ErrInsecureListen.Error(), http.StatusForbidden)
			return
		}
		s.dispatch.ServeHTTP(w, req)
	default:
		http.NotFound(w, req)
	}
}

// loopbackConn reports whether the request came in on a loopback address.
func loopbackConn(req *http.Request) bool {
	addr, ok := req.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	host, _, err := net.SplitHostPort(addr.String())
	return err == nil && isLoopback(host)
}

func (s *Server) serveDispatch(w http.ResponseWriter, req *http.Request) {
	token, ok := TokenFrom(req.Context())
	if s.unsigned {
		var err error
		token, err = strconv.ParseInt(req.Header.Get(HeaderToken), 10, 64)
		ok = err == nil && token > 0
	}
	if !ok {
		http.Error(w, "missing fencing token", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, s.maxBody))
	if err != nil {
		http.Error(w, "cannot read request body", http.StatusRequestEntityTooLarge)
		return
	}
	var dr DispatchRequest
	if err := json.Unmarshal(body, &dr); err != nil {
		http.Error(w, "malformed dispatch: "+err.Error(), http.StatusBadRequest)
		return
	}
	switch {
	case dr.Token != token:
		http.Error(w, "the body's token differs from the signed one", http.StatusBadRequest)
		return
	case dr.Namespace != s.namespace || dr.Node != s.node:
		// A request signed for another executor, replayed here: refuse it.
		http.Error(w, fmt.Sprintf("this is node %q of namespace %q", s.node, s.namespace), http.StatusMisdirectedRequest)
		return
	}
	if highest, ok := s.observe(token); !ok {
		s.log.WarnContext(req.Context(), "ax: remote: dispatch refused: token below the highest seen",
			"token", token, "highest", highest, "remote_addr", req.RemoteAddr)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		json.NewEncoder(w).Encode(fencedBody{Error: ErrFenced.Error(), Highest: highest})
		return
	}
	valid := func() error {
		if h := s.Highest(); h > token {
			return fmt.Errorf("token %d below the highest seen %d: %w", token, h, ErrFenced)
		}
		return nil
	}
	outcomes := s.exec.Take(token, dr.Tasks, valid)
	resp := DispatchResponse{Accepted: []int64{}, Busy: []int64{}, Unhandled: []int64{}}
	for i, o := range outcomes {
		id := dr.Tasks[i].ID
		switch o {
		case Accepted:
			resp.Accepted = append(resp.Accepted, id)
		case Unhandled:
			resp.Unhandled = append(resp.Unhandled, id)
		default:
			resp.Busy = append(resp.Busy, id)
		}
	}
	resp.Running, resp.Free = s.exec.Load()
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(resp); err != nil && !errors.Is(err, http.ErrHandlerTimeout) {
		s.log.WarnContext(req.Context(), "ax: remote: write dispatch answer", "err", err)
	}
}
