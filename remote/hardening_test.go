package remote

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

// unreadable is a request body whose Read fails the test: what is refused on its
// headers must be refused before a byte of the body is read.
type unreadable struct{ t *testing.T }

func (u unreadable) Read([]byte) (int, error) {
	u.t.Error("the body was read")
	return 0, errors.New("read")
}

// TestHeadersCheckedBeforeBody: a request with a missing, non-canonical or stale
// header is refused without reading its body (which may be slow or large).
func TestHeadersCheckedBeforeBody(t *testing.T) {
	t.Parallel()
	for name, tamper := range map[string]func(r *http.Request){
		"unsigned":    func(r *http.Request) { r.Header.Del(HeaderSignature) },
		"bad token":   func(r *http.Request) { r.Header.Set(HeaderToken, "+1") },
		"short nonce": func(r *http.Request) { r.Header.Set(HeaderNonce, "abc") },
		"stale": func(r *http.Request) {
			r.Header.Set(HeaderTimestamp, fmt.Sprint(testStart.Add(-time.Hour).UnixMilli()))
		},
		"ahead":         func(r *http.Request) { r.Header.Set(HeaderTimestamp, fmt.Sprint(testStart.Add(time.Hour).UnixMilli())) },
		"bad signature": func(r *http.Request) { r.Header.Set(HeaderSignature, "zz") },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			req := f.signed(t, http.MethodPost, "http://x"+DispatchPath, []byte(`{}`), 1)
			tamper(req)
			req.Body, req.ContentLength = io.NopCloser(unreadable{t}), 1<<20
			rec := httptest.NewRecorder()
			f.verifier.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				t.Error("next handler called")
			})).ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", rec.Code)
			}
		})
	}
}

// TestOnlyCanonicalSignaturesAccepted: a signature or nonce in uppercase hex is refused
// (ErrBadSignature), though it decodes to the right bytes: one signature has one
// reading, as the package doc says.
func TestOnlyCanonicalSignaturesAccepted(t *testing.T) {
	t.Parallel()
	f := setup(t)
	body := []byte(`{"id":1}`)

	req := f.signed(t, http.MethodPost, "http://x"+DispatchPath, body, 42)
	req.Header.Set(HeaderSignature, strings.ToUpper(req.Header.Get(HeaderSignature)))
	if _, err := f.verifier.Verify(req, body); !errors.Is(err, ErrBadSignature) {
		t.Errorf("uppercase signature: Verify = %v, want ErrBadSignature", err)
	}

	// An uppercase nonce, signed as sent: the HMAC matches the canonical string.
	nonce := strings.Repeat("AB", 16)
	bodySum := sha256.Sum256(body)
	mac := hmac.New(sha256.New, testSecret)
	fmt.Fprintf(mac, "POST\n%s\n%d\n%s\n42\n%s", DispatchPath, testStart.UnixMilli(), nonce, hex.EncodeToString(bodySum[:]))
	req = httptest.NewRequest(http.MethodPost, "http://x"+DispatchPath, bytes.NewReader(body))
	req.Header.Set(HeaderTimestamp, fmt.Sprint(testStart.UnixMilli()))
	req.Header.Set(HeaderNonce, nonce)
	req.Header.Set(HeaderToken, "42")
	req.Header.Set(HeaderSignature, hex.EncodeToString(mac.Sum(nil)))
	if _, err := f.verifier.Verify(req, body); !errors.Is(err, ErrBadSignature) {
		t.Errorf("uppercase nonce: Verify = %v, want ErrBadSignature", err)
	}
	req.Header.Set(HeaderNonce, strings.ToLower(nonce)) // the same nonce, canonical: the signature no longer matches
	if _, err := f.verifier.Verify(req, body); !errors.Is(err, ErrBadSignature) {
		t.Errorf("lowercase nonce under the uppercase one's signature: Verify = %v, want ErrBadSignature", err)
	}
}

// TestDispatchOverMaxTasks: a dispatch of more than MaxDispatchTasks tasks is refused as
// ErrTooLarge (the leader splits it) before the executor sees any of them.
func TestDispatchOverMaxTasks(t *testing.T) {
	t.Parallel()
	exec := &fakeExecutor{free: 2 * MaxDispatchTasks}
	srv, c := signedServer(t, exec)
	ids := make([]int64, MaxDispatchTasks+1)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	if _, err := c.Dispatch(context.Background(), srv.URL, dispatchOf(1, ids...)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("dispatch of %d tasks: %v, want ErrTooLarge", len(ids), err)
	}
	if resp, err := c.Dispatch(context.Background(), srv.URL, dispatchOf(1, ids[:MaxDispatchTasks]...)); err != nil || len(resp.Accepted) != MaxDispatchTasks {
		t.Fatalf("dispatch of %d tasks: %+v, %v; want all accepted", MaxDispatchTasks, resp, err)
	}
}

// TestMalformedTasksRefused: a dispatch with a task no leader could have claimed (an id
// that is not positive or given twice, an execution id or a name that is empty, too long
// or holding a NUL) is refused whole, 400, before the executor sees it. (JSON carries
// no invalid UTF-8: the decoder replaces it.)
func TestMalformedTasksRefused(t *testing.T) {
	t.Parallel()
	exec := &fakeExecutor{free: 100}
	srv, c := signedServer(t, exec)
	ok := store.Task{ID: 1, Name: "job", ExecutionID: "e1", Status: store.Dispatching}
	for name, bad := range map[string]store.Task{
		"id 0":                  {ID: 0, Name: "job", ExecutionID: "e2"},
		"negative id":           {ID: -2, Name: "job", ExecutionID: "e2"},
		"id given twice":        {ID: 1, Name: "job", ExecutionID: "e2"},
		"no execution id":       {ID: 2, Name: "job"},
		"execution id with NUL": {ID: 2, Name: "job", ExecutionID: "e\x00"},
		"long execution id":     {ID: 2, Name: "job", ExecutionID: strings.Repeat("e", 101)},
		"no name":               {ID: 2, ExecutionID: "e2"},
		"long name":             {ID: 2, Name: strings.Repeat("n", 201), ExecutionID: "e2"},
	} {
		dr := dispatchOf(1)
		dr.Tasks = []store.Task{ok, bad}
		_, err := c.Dispatch(context.Background(), srv.URL, dr)
		if err == nil || !strings.Contains(err.Error(), "400") {
			t.Errorf("%s: %v, want 400", name, err)
		}
	}
	if len(exec.taken) != 0 {
		t.Fatalf("the executor took %d tasks of refused dispatches", len(exec.taken))
	}
}

// blockingExecutor holds every Take until release is closed.
type blockingExecutor struct {
	fakeExecutor
	entered chan struct{}
	release chan struct{}
}

func (b *blockingExecutor) Take(token int64, tasks []store.Task, valid func() error) []Outcome {
	select {
	case b.entered <- struct{}{}:
		<-b.release
	case <-b.release:
	}
	return b.fakeExecutor.Take(token, tasks, valid)
}

// TestInFlightBound: with MaxInFlight verified requests being served, one more, from
// any address, is answered 503 at once (ErrBusy to the client, which the leader takes
// as busy); once they end, requests are served again.
func TestInFlightBound(t *testing.T) {
	t.Parallel()
	exec := &blockingExecutor{fakeExecutor: fakeExecutor{free: 1000}, entered: make(chan struct{}), release: make(chan struct{})}
	f := setup(t)
	srv := NewServer("ns", "exec-1", exec, f.verifier, quiet())
	post := func(id int64, addr string) int {
		body, err := json.Marshal(dispatchOf(1, id))
		if err != nil {
			t.Error(err)
		}
		req := f.signed(t, http.MethodPost, "http://x"+DispatchPath, body, 1)
		req.RemoteAddr = addr
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec.Code
	}
	var wg sync.WaitGroup
	for i := range MaxInFlight {
		wg.Go(func() {
			if code := post(int64(i+1), fmt.Sprintf("10.0.0.%d:1", i)); code != http.StatusOK {
				t.Errorf("dispatch %d: %d", i, code)
			}
		})
		<-exec.entered
	}
	if code := post(1000, "10.0.1.1:1"); code != http.StatusServiceUnavailable {
		t.Errorf("dispatch %d, from another address: %d, want 503", MaxInFlight+1, code)
	}
	close(exec.release)
	wg.Wait()
	if code := post(1001, "10.0.1.1:1"); code != http.StatusOK {
		t.Errorf("dispatch after the others ended: %d", code)
	}
	c := NewClient(nil, time.Second, nil)
	defer c.Close()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, ErrBusy.Error(), http.StatusServiceUnavailable)
	}))
	defer hs.Close()
	if _, err := c.Dispatch(context.Background(), hs.URL, dispatchOf(1, 1)); !errors.Is(err, ErrBusy) {
		t.Errorf("a 503 answer: %v, want ErrBusy", err)
	}
}

// TestUnsignedTokenBoundedByEpoch: without a cluster secret, a local process posting a
// dispatch under the largest token cannot fence out the leader: a token above the
// store's recorded epoch is refused (403, ErrUnverifiedToken) and changes nothing, and
// the leader's dispatches under the recorded epoch go on being taken. Before, it raised
// the highest token seen, and every later dispatch of the leader was refused 409.
func TestUnsignedTokenBoundedByEpoch(t *testing.T) {
	t.Parallel()
	exec := &fakeExecutor{free: 10, epoch: 7}
	s := NewServer("ns", "exec-1", exec, nil, quiet())
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := NewClient(nil, 5*time.Second, nil)
	defer c.Close()
	ctx := context.Background()
	for _, token := range []int64{math.MaxInt64, 8} {
		_, err := c.Dispatch(ctx, srv.URL, dispatchOf(token, 1))
		if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), ErrUnverifiedToken.Error()) {
			t.Errorf("unsigned dispatch under token %d above the epoch 7: %v, want 403 %v", token, err, ErrUnverifiedToken)
		}
		if h := s.Highest(); h != 0 {
			t.Fatalf("highest token seen after a refused unsigned token: %d, want 0", h)
		}
	}
	if _, err := c.Dispatch(ctx, srv.URL, dispatchOf(7, 2)); err != nil {
		t.Fatalf("dispatch under the recorded epoch: %v", err)
	}
	if _, err := c.Dispatch(ctx, srv.URL, dispatchOf(6, 3)); !errors.Is(err, ErrFenced) {
		t.Fatalf("dispatch under an older token than one taken: %v, want ErrFenced", err)
	}
	if len(exec.taken) != 1 || exec.taken[0].ID != 2 {
		t.Fatalf("executor took %+v, want task 2 only", exec.taken)
	}

	// The epoch cannot be read: refused 503 (busy), nothing raised.
	down := &fakeExecutor{free: 10, epochErr: errors.New("store unreachable")}
	ds := NewServer("ns", "exec-1", down, nil, quiet())
	dsrv := httptest.NewServer(ds)
	defer dsrv.Close()
	if _, err := c.Dispatch(ctx, dsrv.URL, dispatchOf(1, 2)); !errors.Is(err, ErrBusy) || ds.Highest() != 0 {
		t.Fatalf("unsigned dispatch while the epoch cannot be read: %v, highest %d; want ErrBusy (503), 0", err, ds.Highest())
	}
}

// TestUnsignedEpochReadOncePerSecond: a flood of unsigned dispatches above the epoch
// reads the store's epoch once, not once a request.
func TestUnsignedEpochReadOncePerSecond(t *testing.T) {
	t.Parallel()
	exec := &countingEpoch{fakeExecutor: fakeExecutor{free: 10, epoch: 3}}
	s := NewServer("ns", "exec-1", exec, nil, quiet())
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := NewClient(nil, 5*time.Second, nil)
	defer c.Close()
	for i := range 50 {
		if _, err := c.Dispatch(context.Background(), srv.URL, dispatchOf(int64(4+i), 1)); err == nil {
			t.Fatalf("unsigned token %d above the epoch 3 was taken", 4+i)
		}
	}
	if n := exec.reads.Load(); n != 1 {
		t.Fatalf("50 unsigned dispatches above the epoch read it %d times, want 1", n)
	}
}

// countingEpoch counts the reads of the store's epoch.
type countingEpoch struct {
	fakeExecutor
	reads atomic.Int64
}

func (c *countingEpoch) Epoch(ctx context.Context) (int64, error) {
	c.reads.Add(1)
	return c.fakeExecutor.Epoch(ctx)
}

// TestRefusalsLogRateLimited: a flood of refused requests from one address, from any
// of its ports and refused by the Verifier or the Server, writes one log line a minute
// (the count of those held back is in the next: see lograte); a refusal from another
// address is logged.
func TestRefusalsLogRateLimited(t *testing.T) {
	t.Parallel()
	f := setup(t)
	srv := NewServer("ns", "exec-1", &fakeExecutor{}, f.verifier, slog.New(f.logs))
	for i := range 300 {
		// Unsigned (the Verifier refuses) or under a stale token (the Server does), each
		// from another port of one address.
		req := httptest.NewRequest(http.MethodPost, "http://x"+DispatchPath, strings.NewReader(`{}`))
		if i%2 == 1 {
			req = f.signed(t, http.MethodPost, "http://x"+DispatchPath, []byte(`{}`), 1)
		}
		req.RemoteAddr = "10.1.2.3:" + strconv.Itoa(1024+i)
		srv.ServeHTTP(httptest.NewRecorder(), req)
	}
	if lines := f.logs.lines(); len(lines) != 1 {
		t.Fatalf("300 refused requests from one address wrote %d log lines, want 1:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	req := httptest.NewRequest(http.MethodPost, "http://x"+DispatchPath, strings.NewReader(`{}`))
	req.RemoteAddr = "10.9.9.9:1"
	srv.ServeHTTP(httptest.NewRecorder(), req)
	if lines := f.logs.lines(); len(lines) != 2 {
		t.Fatalf("a refusal from another address: %d log lines, want 2", len(lines))
	}
}

// TestStrictDispatchBody: a dispatch body with a member given twice or in another case
// than the protocol's is refused, 400: two parsers could read it two ways. A member
// the protocol does not know is ignored, so that a newer leader can add one.
func TestStrictDispatchBody(t *testing.T) {
	t.Parallel()
	exec := &fakeExecutor{free: 10}
	f := setup(t)
	srv := NewServer("ns", "exec-1", exec, f.verifier, quiet())
	good, err := json.Marshal(dispatchOf(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"token twice":       strings.Replace(string(good), `"token":1`, `"token":1,"token":1`, 1),
		"node in capitals":  strings.Replace(string(good), `"node"`, `"Node"`, 1),
		"task name twice":   strings.Replace(string(good), `"Name":"job"`, `"Name":"job","Name":"nobody"`, 1),
		"task id lowercase": strings.Replace(string(good), `"ID":1`, `"id":1`, 1),
		"trailing data":     string(good) + "{}",
	} {
		if body == string(good) {
			t.Fatalf("%s: the body was not changed", name)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, f.signed(t, http.MethodPost, "http://x"+DispatchPath, []byte(body), 1))
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", name, rec.Code, rec.Body)
		}
	}
	extended := strings.Replace(string(good), `"token":1`, `"token":1,"added":{"x":[1]}`, 1)
	for _, body := range []string{string(good), extended} {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, f.signed(t, http.MethodPost, "http://x"+DispatchPath, []byte(body), 1))
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %s, want 200", body, rec.Code, rec.Body)
		}
	}
	if len(exec.taken) != 2 {
		t.Fatalf("%d taken, want 2", len(exec.taken))
	}
}

// blockedBody is a request body that sends nothing until release is closed, as a
// client that trickles its body would.
type blockedBody struct{ reading, release chan struct{} }

func (b blockedBody) Read(p []byte) (int, error) {
	b.reading <- struct{}{}
	<-b.release
	return 0, io.EOF
}

// TestUnverifiedRequestsHoldNoSlot: requests with well-formed headers but no secret
// behind them, whose bodies trickle in, hold only their own address's slots: the
// leader's signed dispatch from another address is served meanwhile. Before, they took
// the endpoint's slots, and every dispatch of the leader was answered busy until they
// ended.
func TestUnverifiedRequestsHoldNoSlot(t *testing.T) {
	t.Parallel()
	exec := &fakeExecutor{free: 10}
	f := setup(t)
	srv := NewServer("ns", "exec-1", exec, f.verifier, quiet())
	reading, release := make(chan struct{}, MaxInFlight+1), make(chan struct{})
	var wg sync.WaitGroup
	forged := func(port int) *http.Request {
		req := httptest.NewRequest(http.MethodPost, "http://x"+DispatchPath, blockedBody{reading, release})
		req.ContentLength = 1000
		req.RemoteAddr = fmt.Sprintf("10.0.0.9:%d", port)
		req.Header.Set(HeaderTimestamp, fmt.Sprint(f.clock.now().UnixMilli()))
		req.Header.Set(HeaderNonce, strings.Repeat("ab", 16))
		req.Header.Set(HeaderToken, "1")
		req.Header.Set(HeaderSignature, strings.Repeat("cd", 32))
		return req
	}
	for i := range MaxInFlight {
		wg.Go(func() { srv.ServeHTTP(httptest.NewRecorder(), forged(i)) })
	}
	for range MaxInFlight { // each past the headers, reading its body
		<-reading
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, forged(MaxInFlight))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("request %d from the flooding address: %d, want 503", MaxInFlight+1, rec.Code)
	}
	body, err := json.Marshal(dispatchOf(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	req := f.signed(t, http.MethodPost, "http://x"+DispatchPath, body, 1)
	req.RemoteAddr = "10.0.0.1:7000"
	rec = httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || len(exec.taken) != 1 {
		t.Errorf("the leader's dispatch during the flood: %d %s, %d taken; want 200, 1", rec.Code, rec.Body, len(exec.taken))
	}
	close(release)
	wg.Wait()
}

// slowBody is a request body that, read, moves the verifier's clock on by d first: a
// body that took that long to arrive.
type slowBody struct {
	io.Reader
	clock *fakeClock
	d     time.Duration
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.d > 0 {
		b.clock.add(b.d)
		b.d = 0
	}
	return b.Reader.Read(p)
}

// TestSlowBodyOutlastsTheWindow: a request whose headers were in the window but whose
// body arrived after it is refused as stale, so that it cannot be taken once the
// window has ended, when its nonce is no longer remembered — and so taken twice.
func TestSlowBodyOutlastsTheWindow(t *testing.T) {
	t.Parallel()
	f := setup(t)
	body := []byte(`{"id":1}`)
	taken := 0
	h := f.verifier.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { taken++ }))
	for _, late := range []time.Duration{0, 40 * time.Second} {
		req := f.signed(t, http.MethodPost, "http://x"+DispatchPath, body, 1)
		req.Body = io.NopCloser(&slowBody{Reader: bytes.NewReader(body), clock: f.clock, d: late})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if want := map[bool]int{true: 401, false: 200}[late > 0]; rec.Code != want {
			t.Errorf("a body %v late: %d %s, want %d", late, rec.Code, rec.Body, want)
		}
	}
	if taken != 1 {
		t.Fatalf("the handler ran %d times, want once", taken)
	}
}
