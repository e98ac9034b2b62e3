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

// TestInFlightBound: with MaxInFlight requests being served, one more is answered 503
// at once (ErrBusy, which the leader takes as busy), before its body is read; once
// they end, requests are served again.
func TestInFlightBound(t *testing.T) {
	t.Parallel()
	exec := &blockingExecutor{fakeExecutor: fakeExecutor{free: 1000}, entered: make(chan struct{}), release: make(chan struct{})}
	srv, c := signedServer(t, exec)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range MaxInFlight {
		wg.Go(func() {
			if _, err := c.Dispatch(ctx, srv.URL, dispatchOf(1, int64(i+1))); err != nil {
				t.Errorf("dispatch %d: %v", i, err)
			}
		})
		<-exec.entered
	}
	if _, err := c.Dispatch(ctx, srv.URL, dispatchOf(1, 1000)); !errors.Is(err, ErrBusy) {
		t.Errorf("dispatch %d: %v, want ErrBusy", MaxInFlight+1, err)
	}
	close(exec.release)
	wg.Wait()
	if _, err := c.Dispatch(ctx, srv.URL, dispatchOf(1, 1001)); err != nil {
		t.Errorf("dispatch after the others ended: %v", err)
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
}

// TestRefusalsLogRateLimited: a flood of refused requests from one address writes one
// log line a minute (the count of those held back is in the next: see lograte), and a
// refusal from another address is logged.
func TestRefusalsLogRateLimited(t *testing.T) {
	t.Parallel()
	f := setup(t)
	srv := NewServer("ns", "exec-1", &fakeExecutor{}, f.verifier, slog.New(f.logs))
	for range 300 {
		req := httptest.NewRequest(http.MethodPost, "http://x"+DispatchPath, strings.NewReader(`{}`))
		req.RemoteAddr = "10.1.2.3:" + strconv.Itoa(1024)
		srv.ServeHTTP(httptest.NewRecorder(), req)
	}
	if lines := f.logs.lines(); len(lines) != 1 {
		t.Fatalf("300 refused requests from one address wrote %d log lines, want 1", len(lines))
	}
	req := httptest.NewRequest(http.MethodPost, "http://x"+DispatchPath, strings.NewReader(`{}`))
	req.RemoteAddr = "10.9.9.9:1"
	srv.ServeHTTP(httptest.NewRecorder(), req)
	if lines := f.logs.lines(); len(lines) != 2 {
		t.Fatalf("a refusal from another address: %d log lines, want 2", len(lines))
	}
}

// TestStrictDispatchBody: a dispatch body with a member given twice or in another case
// than the protocol's is refused, 400: two parsers could read it two ways.
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
		"unknown member":    strings.Replace(string(good), `"token":1`, `"token":1,"extra":true`, 1),
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
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, f.signed(t, http.MethodPost, "http://x"+DispatchPath, good, 1))
	if rec.Code != http.StatusOK || len(exec.taken) != 1 {
		t.Fatalf("the well-formed body: %d %s, %d taken; want 200, 1", rec.Code, rec.Body, len(exec.taken))
	}
}
