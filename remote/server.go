package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/axsched/ax/internal/clientaddr"
	"github.com/axsched/ax/internal/lograte"
	"github.com/axsched/ax/internal/strictjson"
	"github.com/axsched/ax/store"
)

// The paths the executor serves.
const (
	DispatchPath = "/ax/v1/dispatch"
	ReleasedPath = "/ax/v1/released"
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

// ReleasedNotice is the body of a release notice (POST ReleasedPath): the leader of
// Namespace under Token released its lease — a graceful stop, or a term it ended
// itself — so that the replica Node campaigns at once instead of at its next attempt.
// It is signed like a dispatch, with Token in the Ax-Token header.
type ReleasedNotice struct {
	Namespace string `json:"namespace"`
	Node      string `json:"node"`
	Token     int64  `json:"token"`
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
	// Epoch returns the fencing epoch the store recorded for the namespace (0 when
	// none was). Without a cluster secret, a token above it is refused: an unsigned
	// request cannot fence out the real leader.
	Epoch(ctx context.Context) (int64, error)
	// Take takes tasks dispatched under token and returns, in input order, what it did
	// with each. It must not wait for handlers to run. The Server has checked the token:
	// it is the highest seen. valid reports, whenever asked, whether the token is
	// still the highest seen: a task taken under an older one must not start.
	Take(token int64, tasks []store.Task, valid func() error) []Outcome
	// Load returns the handlers running and the slots free.
	Load() (running, free int)
	// Released is told that the leader under token released its lease (a verified
	// ReleasedNotice whose token is not below the highest seen): a replica that
	// campaigns tries at once (elect.Waker). It must not block.
	Released(token int64)
}

// Bounds of the executor endpoint.
const (
	// MaxDispatchTasks is the most tasks one dispatch may carry: a dispatch of more is
	// answered 413 (ErrTooLarge), and the leader splits its batches to fit.
	MaxDispatchTasks = 1000
	// MaxInFlight bounds the requests to DispatchPath and ReleasedPath being served: at
	// most this many from one client address (clientaddr.Key), and at most this many
	// past verification. One more is 503 (ErrBusy), which the leader takes as busy.
	// Requests without the secret hold no slot but their own address's.
	MaxInFlight = 16
)

// Server is an executor's HTTP endpoint: it serves DispatchPath and ReleasedPath (POST,
// verified by a Verifier when there is a cluster secret) and HealthPath (GET, unsigned, answered at
// once, never behind a dispatch), and refuses a dispatch whose token is below the
// highest it has seen (409, ErrFenced), so that a stale leader starts nothing here.
// Create it with NewServer; it is safe for concurrent use.
type Server struct {
	namespace, node string
	exec            Executor
	log             *slog.Logger
	dispatch        http.Handler
	released        http.Handler
	maxBody         int64
	unsigned        bool             // no secret: loopback only, token read from the unsigned header
	inFlight        chan struct{}    // a slot per request past verification (MaxInFlight)
	refusals        *lograte.Limiter // of the log lines of requests refused, the Verifier's too

	epochMu sync.Mutex // held while the store's epoch is read: concurrent reads wait for one
	epoch   int64      // the store's epoch as last read (no secret only)
	epochAt time.Time  // when

	clientsMu sync.Mutex
	clients   map[string]int // client address → its requests being served, verified or not

	mu      sync.Mutex
	highest int64
}

// NewServer returns the endpoint of executor exec, node node of namespace namespace.
// v verifies every dispatch; a nil v (no cluster secret) serves only connections to
// a loopback address, refusing others 403 (ErrInsecureListen), and takes the token
// header as sent up to the epoch the store recorded (Executor.Epoch).
func NewServer(namespace, node string, exec Executor, v *Verifier, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	s := &Server{namespace: namespace, node: node, exec: exec, log: log, maxBody: DefaultMaxBodyBytes, unsigned: v == nil,
		inFlight: make(chan struct{}, MaxInFlight), refusals: newRefusalLimiter(), clients: make(map[string]int)}
	s.dispatch, s.released = s.bounded(s.serveDispatch), s.bounded(s.serveReleased)
	if v != nil {
		s.dispatch, s.released = v.Middleware(s.dispatch), v.Middleware(s.released)
		s.maxBody = v.maxBodyBytes
		s.refusals = v.refusals // one line a minute per address, whichever refuses
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

// ServeHTTP serves DispatchPath, ReleasedPath and HealthPath.
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
		s.signed(w, req, s.dispatch)
	case ReleasedPath:
		s.signed(w, req, s.released)
	default:
		http.NotFound(w, req)
	}
}

// signed serves a POST through h: verified by the middleware with a secret, on
// loopback only without one, and at most MaxInFlight at once from one client address.
func (s *Server) signed(w http.ResponseWriter, req *http.Request, h http.Handler) {
	if req.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if s.unsigned && !loopbackConn(req) {
		s.refuse(w, req, http.StatusForbidden, ErrInsecureListen.Error(), "no cluster secret and not on loopback")
		return
	}
	host := clientaddr.Key(req.RemoteAddr)
	if !s.enter(host) {
		w.Header().Set("Retry-After", "1")
		s.refuse(w, req, http.StatusServiceUnavailable, ErrBusy.Error(), fmt.Sprintf("%d requests in flight from this address", MaxInFlight))
		return
	}
	defer s.leave(host)
	h.ServeHTTP(w, req)
}

// enter counts a request of the client address host, unless it has MaxInFlight being
// served.
func (s *Server) enter(host string) bool {
	s.clientsMu.Lock()
	defer s.clientsMu.Unlock()
	if s.clients[host] >= MaxInFlight {
		return false
	}
	s.clients[host]++
	return true
}

// leave uncounts a request of host.
func (s *Server) leave(host string) {
	s.clientsMu.Lock()
	defer s.clientsMu.Unlock()
	if s.clients[host]--; s.clients[host] <= 0 {
		delete(s.clients, host)
	}
}

// bounded serves a request past verification through next, at most MaxInFlight at
// once.
func (s *Server) bounded(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case s.inFlight <- struct{}{}:
			defer func() { <-s.inFlight }()
		default:
			w.Header().Set("Retry-After", "1")
			s.refuse(w, req, http.StatusServiceUnavailable, ErrBusy.Error(), fmt.Sprintf("%d verified requests in flight", MaxInFlight))
			return
		}
		next(w, req)
	})
}

// refuse answers status with the short text and logs why, within the rate of
// refusals logged per client address.
func (s *Server) refuse(w http.ResponseWriter, req *http.Request, status int, short, why string) {
	refuse(s.log, s.refusals, w, req, status, short, why)
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

// readSigned returns the request's fencing token and body, or answers the request
// and returns false.
func (s *Server) readSigned(w http.ResponseWriter, req *http.Request) (int64, []byte, bool) {
	token, ok := TokenFrom(req.Context())
	if s.unsigned {
		text := req.Header.Get(HeaderToken)
		var err error
		token, err = strconv.ParseInt(text, 10, 64)
		ok = err == nil && token > 0 && strconv.FormatInt(token, 10) == text
	}
	if !ok {
		s.refuse(w, req, http.StatusBadRequest, "missing fencing token", "no positive decimal "+HeaderToken)
		return 0, nil, false
	}
	if body, ok := req.Context().Value(bodyKey{}).([]byte); ok { // read and verified by the Middleware
		return token, body, true
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, s.maxBody))
	if err != nil {
		http.Error(w, "cannot read request body", http.StatusRequestEntityTooLarge)
		return 0, nil, false
	}
	return token, body, true
}

// addressedBody is a request body that names its target and its token.
type addressedBody interface {
	target() (namespace, node string, token int64)
}

func (dr *DispatchRequest) target() (string, string, int64) { return dr.Namespace, dr.Node, dr.Token }
func (n *ReleasedNotice) target() (string, string, int64)   { return n.Namespace, n.Node, n.Token }

// readRequest reads a signed request's JSON body (a what) into v and checks that it
// carries the signed token and is addressed to this server; it returns the token, or
// answers the request and returns false. A request signed for another executor,
// replayed here, is answered 421.
func (s *Server) readRequest(w http.ResponseWriter, req *http.Request, what string, v addressedBody) (int64, bool) {
	token, body, ok := s.readSigned(w, req)
	if !ok {
		return 0, false
	}
	if err := strictjson.UnmarshalExtensible(body, v); err != nil {
		http.Error(w, "malformed "+what+": "+err.Error(), http.StatusBadRequest)
		return 0, false
	}
	namespace, node, bodyToken := v.target()
	switch {
	case bodyToken != token:
		http.Error(w, "the body's token differs from the signed one", http.StatusBadRequest)
		return 0, false
	case namespace != s.namespace || node != s.node:
		http.Error(w, fmt.Sprintf("this is node %q of namespace %q", s.node, s.namespace), http.StatusMisdirectedRequest)
		return 0, false
	}
	return token, true
}

// vouched reports whether an unsigned token above the highest seen is vouched for:
// not above the epoch the store recorded, so that a local process cannot fence out
// the real leader. It answers the request otherwise: 403 ErrUnverifiedToken, or 503
// when the epoch cannot be read. The epoch is read at most once a second, whatever
// the number of requests; a leader's token is recorded before its first dispatch.
func (s *Server) vouched(w http.ResponseWriter, req *http.Request, token int64) bool {
	s.epochMu.Lock()
	defer s.epochMu.Unlock()
	if token > s.epoch && time.Since(s.epochAt) >= time.Second {
		epoch, err := s.exec.Epoch(req.Context())
		if err != nil {
			w.Header().Set("Retry-After", "1")
			s.refuse(w, req, http.StatusServiceUnavailable, ErrBusy.Error(), "cannot read the store's epoch to check an unsigned token: "+err.Error())
			return false
		}
		s.epoch, s.epochAt = epoch, time.Now()
	}
	if token > s.epoch {
		s.refuse(w, req, http.StatusForbidden, ErrUnverifiedToken.Error(), fmt.Sprintf("unsigned token %d above the store's epoch %d", token, s.epoch))
		return false
	}
	return true
}

// cleanText reports whether s is non-empty, at most limit bytes, valid UTF-8 and
// without a NUL: text every store keeps as it is.
func cleanText(s string, limit int) bool {
	return s != "" && len(s) <= limit && store.CleanText(s)
}

// checkTasks refuses a dispatch of more than MaxDispatchTasks tasks (ErrTooLarge:
// the leader splits it) and one with a task that could not be a claim of a leader's: an
// id that is not positive or given twice, an empty or malformed execution id or name.
func checkTasks(tasks []store.Task) (status int, err error) {
	if len(tasks) > MaxDispatchTasks {
		return http.StatusRequestEntityTooLarge, fmt.Errorf("%d tasks, over %d: %w", len(tasks), MaxDispatchTasks, ErrTooLarge)
	}
	seen := make(map[int64]bool, len(tasks))
	for i, t := range tasks {
		switch {
		case t.ID <= 0 || seen[t.ID]:
			return http.StatusBadRequest, fmt.Errorf("task %d: id %d not positive or given twice", i, t.ID)
		case !cleanText(t.ExecutionID, store.MaxExecutionIDLen):
			return http.StatusBadRequest, fmt.Errorf("task %d (id %d): the execution id is empty, over %d bytes or not clean UTF-8", i, t.ID, store.MaxExecutionIDLen)
		case !cleanText(t.Name, store.MaxNameLen):
			return http.StatusBadRequest, fmt.Errorf("task %d (id %d): the name is empty, over %d bytes or not clean UTF-8", i, t.ID, store.MaxNameLen)
		}
		seen[t.ID] = true
	}
	return 0, nil
}

func (s *Server) serveReleased(w http.ResponseWriter, req *http.Request) {
	var n ReleasedNotice
	token, ok := s.readRequest(w, req, "release notice", &n)
	if !ok {
		return
	}
	if highest := s.Highest(); token < highest {
		// The release of a term older than one already seen here: nothing to take over.
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.exec.Released(token)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) serveDispatch(w http.ResponseWriter, req *http.Request) {
	var dr DispatchRequest
	token, ok := s.readRequest(w, req, "dispatch", &dr)
	if !ok {
		return
	}
	if status, err := checkTasks(dr.Tasks); err != nil {
		http.Error(w, "malformed dispatch: "+err.Error(), status)
		return
	}
	if s.unsigned && token > s.Highest() && !s.vouched(w, req, token) {
		return
	}
	if highest, ok := s.observe(token); !ok {
		logRefusal(s.log, s.refusals, req, "ax: remote: dispatch refused: token below the highest seen",
			slog.Int64("token", token), slog.Int64("highest", highest))
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
