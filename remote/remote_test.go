package remote

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var (
	testSecret  = []byte("0123456789abcdef0123456789abcdef")
	otherSecret = []byte("fedcba9876543210fedcba9876543210")
	testStart   = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

// fakeClock is the verifier's clock in tests: it moves only when told.
type fakeClock struct{ unixNano atomic.Int64 }

func newFakeClock(t time.Time) *fakeClock {
	c := &fakeClock{}
	c.set(t)
	return c
}
func (c *fakeClock) set(t time.Time)     { c.unixNano.Store(t.UnixNano()) }
func (c *fakeClock) now() time.Time      { return time.Unix(0, c.unixNano.Load()) }
func (c *fakeClock) add(d time.Duration) { c.unixNano.Add(int64(d)) }

// logCapture records every log record; safe for concurrent use.
type logCapture struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *logCapture) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logCapture) WithGroup(string) slog.Handler      { return h }

func (h *logCapture) lines() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.records {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
		r.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
			return true
		})
		out = append(out, b.String())
	}
	return out
}

type fixture struct {
	signer   *Signer
	verifier *Verifier
	clock    *fakeClock
	logs     *logCapture
}

func setup(t *testing.T, opts ...VerifierOption) *fixture {
	t.Helper()
	signer, err := NewSigner(testSecret)
	if err != nil {
		t.Fatalf("NewSigner: %v", err)
	}
	f := &fixture{signer: signer, clock: newFakeClock(testStart), logs: &logCapture{}}
	opts = append([]VerifierOption{WithClock(f.clock.now), WithLogger(slog.New(f.logs))}, opts...)
	f.verifier, err = NewVerifier(testSecret, opts...)
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	return f
}

// signed returns a request to url with body, signed at the fixture's clock.
func (f *fixture) signed(t *testing.T, method, url string, body []byte, token int64) *http.Request {
	t.Helper()
	req := httptest.NewRequest(method, url, bytes.NewReader(body))
	if err := f.signer.Sign(req, body, token, f.clock.now()); err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return req
}

func TestSignatureMatchesDocumentedCanonicalString(t *testing.T) {
	t.Parallel()
	f := setup(t)
	body := []byte(`{"id":1}`)
	req := f.signed(t, http.MethodPost, "http://x/ax/v1/dispatch?a=1&b=%2F", body, 42)

	bodySum := sha256.Sum256(body)
	canonical := strings.Join([]string{
		"POST",
		"/ax/v1/dispatch?a=1&b=%2F",
		fmt.Sprint(testStart.UnixMilli()),
		req.Header.Get(HeaderNonce),
		"42",
		hex.EncodeToString(bodySum[:]),
	}, "\n")
	mac := hmac.New(sha256.New, testSecret)
	mac.Write([]byte(canonical))
	if got, want := req.Header.Get(HeaderSignature), hex.EncodeToString(mac.Sum(nil)); got != want {
		t.Errorf("Ax-Signature = %s, want %s", got, want)
	}
	if got := req.Header.Get(HeaderNonce); len(got) != 32 || strings.ToLower(got) != got {
		t.Errorf("Ax-Nonce = %q, want 32 lowercase hex digits", got)
	}
}

func TestRoundTripThroughServer(t *testing.T) {
	t.Parallel()
	f := setup(t)
	type seen struct {
		token int64
		ok    bool
		body  string
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(f.verifier.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := TokenFrom(r.Context())
		b, _ := io.ReadAll(r.Body)
		got <- seen{token, ok, string(b)}
		io.WriteString(w, "done")
	})))
	t.Cleanup(srv.Close)

	for _, tc := range []struct{ method, path, body string }{
		{http.MethodPost, "/ax/v1/dispatch", `{"task_id":"t1"}`},
		{http.MethodGet, "/ax/v1/dispatch?x=1&y=a%20b", ""},
		{http.MethodPost, "/ax/v1/a%2Fb", "x"},
	} {
		body := []byte(tc.body)
		req, err := http.NewRequest(tc.method, srv.URL+tc.path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.signer.Sign(req, body, 7, f.clock.now()); err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: status %d, want 200; logs %q", tc.method, tc.path, resp.StatusCode, f.logs.lines())
		}
		if s := <-got; s != (seen{7, true, tc.body}) {
			t.Errorf("%s %s: handler saw %+v, want token 7 and body %q", tc.method, tc.path, s, tc.body)
		}
	}
}

func TestTamperedRequestsRefused(t *testing.T) {
	t.Parallel()
	body := []byte(`{"task_id":"t1"}`)
	for _, tc := range []struct {
		name   string
		tamper func(req *http.Request) (*http.Request, []byte)
		want   error
	}{
		{"body changed", func(r *http.Request) (*http.Request, []byte) { return r, []byte(`{"task_id":"t2"}`) }, ErrBadSignature},
		{"path changed", func(r *http.Request) (*http.Request, []byte) {
			r.URL.Path = "/ax/v1/other"
			return r, body
		}, ErrBadSignature},
		{"query changed", func(r *http.Request) (*http.Request, []byte) {
			r.URL.RawQuery = "x=2"
			return r, body
		}, ErrBadSignature},
		{"method changed", func(r *http.Request) (*http.Request, []byte) {
			r.Method = http.MethodPut
			return r, body
		}, ErrBadSignature},
		{"token changed", func(r *http.Request) (*http.Request, []byte) {
			r.Header.Set(HeaderToken, "43")
			return r, body
		}, ErrBadSignature},
		{"token not canonical", func(r *http.Request) (*http.Request, []byte) {
			r.Header.Set(HeaderToken, "042")
			return r, body
		}, ErrBadSignature},
		{"nonce changed", func(r *http.Request) (*http.Request, []byte) {
			r.Header.Set(HeaderNonce, strings.Repeat("ab", 16))
			return r, body
		}, ErrBadSignature},
		{"timestamp changed", func(r *http.Request) (*http.Request, []byte) {
			r.Header.Set(HeaderTimestamp, fmt.Sprint(testStart.UnixMilli()+1))
			return r, body
		}, ErrBadSignature},
		{"signature repeated", func(r *http.Request) (*http.Request, []byte) {
			r.Header.Add(HeaderSignature, r.Header.Get(HeaderSignature))
			return r, body
		}, ErrBadSignature},
		{"signature missing", func(r *http.Request) (*http.Request, []byte) {
			r.Header.Del(HeaderSignature)
			return r, body
		}, ErrUnsigned},
		{"no headers", func(r *http.Request) (*http.Request, []byte) {
			for _, h := range []string{HeaderTimestamp, HeaderNonce, HeaderToken, HeaderSignature} {
				r.Header.Del(h)
			}
			return r, body
		}, ErrUnsigned},
		{"wrong secret", func(r *http.Request) (*http.Request, []byte) {
			other, err := NewSigner(otherSecret)
			if err != nil {
				t.Fatal(err)
			}
			if err := other.Sign(r, body, 42, testStart); err != nil {
				t.Fatal(err)
			}
			return r, body
		}, ErrBadSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			req, sentBody := tc.tamper(f.signed(t, http.MethodPost, "http://x/ax/v1/dispatch?x=1", body, 42))

			// Verify itself: the sentinel.
			if _, err := f.verifier.Verify(req, sentBody); !errors.Is(err, tc.want) {
				t.Errorf("Verify = %v, want %v", err, tc.want)
			}
			// The middleware: 401, next not called.
			req.Body = io.NopCloser(bytes.NewReader(sentBody))
			req.ContentLength = int64(len(sentBody))
			rec := httptest.NewRecorder()
			f.verifier.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				t.Error("next handler called for a refused request")
			})).ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized {
				t.Errorf("status = %d, want 401", rec.Code)
			}
			if got := strings.TrimSpace(rec.Body.String()); got != tc.want.Error() {
				t.Errorf("response body = %q, want %q", got, tc.want.Error())
			}
		})
	}
}

func TestWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		skew time.Duration // verifier clock minus signing time
		want error
	}{
		{-31 * time.Second, ErrStale},
		{-29 * time.Second, nil},
		{0, nil},
		{29 * time.Second, nil},
		{31 * time.Second, ErrStale},
	} {
		t.Run(fmt.Sprint(tc.skew), func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			req := f.signed(t, http.MethodPost, "http://x/ax/v1/dispatch", nil, 1)
			f.clock.add(tc.skew)
			if _, err := f.verifier.Verify(req, nil); !errors.Is(err, tc.want) {
				t.Errorf("Verify at skew %v = %v, want %v", tc.skew, err, tc.want)
			}
		})
	}
}

func TestReplay(t *testing.T) {
	t.Parallel()
	f := setup(t)
	body := []byte("payload")
	req := f.signed(t, http.MethodPost, "http://x/ax/v1/dispatch", body, 5)

	if token, err := f.verifier.Verify(req, body); err != nil || token != 5 {
		t.Fatalf("Verify = %d, %v, want 5, nil", token, err)
	}
	f.clock.add(10 * time.Second)
	if _, err := f.verifier.Verify(req, body); !errors.Is(err, ErrReplayed) {
		t.Errorf("replay within the window: Verify = %v, want ErrReplayed", err)
	}
	f.clock.add(21 * time.Second) // 31 s after signing
	if _, err := f.verifier.Verify(req, body); !errors.Is(err, ErrStale) {
		t.Errorf("replay after the window: Verify = %v, want ErrStale", err)
	}
	// Long after, the nonce is forgotten and the replay is still refused.
	f.clock.add(time.Hour)
	fresh := f.signed(t, http.MethodPost, "http://x/ax/v1/dispatch", body, 5)
	if _, err := f.verifier.Verify(fresh, body); err != nil {
		t.Fatalf("fresh request: Verify = %v", err)
	}
	if n := f.verifier.nonces.len(); n != 1 {
		t.Errorf("nonces remembered = %d, want 1 (the old one evicted)", n)
	}
	if _, err := f.verifier.Verify(req, body); !errors.Is(err, ErrStale) {
		t.Errorf("replay after eviction: Verify = %v, want ErrStale", err)
	}
}

func TestReplayThroughMiddleware(t *testing.T) {
	t.Parallel()
	f := setup(t)
	h := f.verifier.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	req := f.signed(t, http.MethodPost, "http://x/ax/v1/dispatch", []byte("b"), 5)
	for i, want := range []int{http.StatusOK, http.StatusUnauthorized} {
		r := req.Clone(context.Background())
		r.Body = io.NopCloser(strings.NewReader("b"))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != want {
			t.Errorf("request %d: status %d, want %d", i, rec.Code, want)
		}
	}
}

func TestNonceCacheFull(t *testing.T) {
	t.Parallel()
	f := setup(t, WithNonceCapacity(2))
	for i := range 2 {
		if _, err := f.verifier.Verify(f.signed(t, http.MethodPost, "http://x/d", nil, 1), nil); err != nil {
			t.Fatalf("request %d: Verify = %v", i, err)
		}
	}
	third := f.signed(t, http.MethodPost, "http://x/d", nil, 1)
	if _, err := f.verifier.Verify(third, nil); !errors.Is(err, ErrNonceCacheFull) {
		t.Errorf("third request: Verify = %v, want ErrNonceCacheFull", err)
	}
	rec := httptest.NewRecorder()
	f.verifier.Middleware(http.NotFoundHandler()).ServeHTTP(rec, third)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("middleware: status %d, Retry-After %q, want 503 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	// Once the first two expire (window + margin), there is room again.
	f.clock.add(DefaultWindow + nonceMargin + time.Millisecond)
	if _, err := f.verifier.Verify(f.signed(t, http.MethodPost, "http://x/d", nil, 1), nil); err != nil {
		t.Errorf("after expiry: Verify = %v, want nil", err)
	}
}

func TestBodyTooLarge(t *testing.T) {
	t.Parallel()
	f := setup(t, WithMaxBodyBytes(16))
	h := f.verifier.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("next handler called for an oversized body")
	}))
	body := bytes.Repeat([]byte("x"), 17)
	for _, known := range []bool{true, false} {
		req := f.signed(t, http.MethodPost, "http://x/d", body, 1)
		if !known {
			req.ContentLength = -1 // chunked: only the reader can tell
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusRequestEntityTooLarge {
			t.Errorf("content length known=%v: status %d, want 413", known, rec.Code)
		}
	}
}

func TestRefusalLoggedWithoutSignature(t *testing.T) {
	t.Parallel()
	f := setup(t)
	body := []byte("secret-payload")
	req := f.signed(t, http.MethodPost, "http://x/ax/v1/dispatch", body, 3)
	req.RemoteAddr = "10.1.2.3:4567"
	sig := req.Header.Get(HeaderSignature)
	req.Body = io.NopCloser(strings.NewReader("other-payload"))
	req.ContentLength = -1
	rec := httptest.NewRecorder()
	f.verifier.Middleware(http.NotFoundHandler()).ServeHTTP(rec, req)

	lines := f.logs.lines()
	if len(lines) != 1 {
		t.Fatalf("log lines = %q, want one", lines)
	}
	line := lines[0]
	for _, want := range []string{"WARN", "method=POST", "path=/ax/v1/dispatch", "remote_addr=10.1.2.3:4567", "reason=", ErrBadSignature.Error()} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %q lacks %q", line, want)
		}
	}
	for _, leak := range []string{sig, "payload"} {
		if strings.Contains(line, leak) {
			t.Errorf("log line %q holds %q", line, leak)
		}
	}
}

func TestConcurrentVerify(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const n, workers = 1000, 8
	reqs := make([]*http.Request, n)
	bodies := make([][]byte, n)
	for i := range reqs {
		bodies[i] = fmt.Appendf(nil, `{"task":%d}`, i)
		reqs[i] = f.signed(t, http.MethodPost, "http://x/ax/v1/dispatch", bodies[i], int64(i+1))
	}
	h := f.verifier.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := TokenFrom(r.Context()); !ok {
			t.Error("no token in context")
		}
	}))
	var next atomic.Int64
	var accepted atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < n; i = next.Add(1) - 1 {
				if i%2 == 0 {
					if token, err := f.verifier.Verify(reqs[i], bodies[i]); err != nil || token != i+1 {
						t.Errorf("request %d: Verify = %d, %v", i, token, err)
						continue
					}
				} else {
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, reqs[i])
					if rec.Code != http.StatusOK {
						t.Errorf("request %d: status %d", i, rec.Code)
						continue
					}
				}
				accepted.Add(1)
			}
		})
	}
	wg.Wait()
	if got := accepted.Load(); got != n {
		t.Errorf("accepted %d requests, want %d", got, n)
	}
}

func TestListenGuard(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr string
		ok   bool // without a secret
	}{
		{"127.0.0.1:0", true},
		{"127.8.9.10:80", true},
		{"[::1]:80", true},
		{"localhost:9", true},
		{"[::ffff:127.0.0.1]:80", true},
		{":8080", false},
		{"0.0.0.0:80", false},
		{"[::]:80", false},
		{"10.0.0.1:80", false},
		{"example.com:80", false},
		{"127.0.0.1", false}, // no port: not an address
	} {
		err := ListenGuard(tc.addr, nil)
		if tc.ok && err != nil {
			t.Errorf("ListenGuard(%q, nil) = %v, want nil", tc.addr, err)
		}
		if !tc.ok && !errors.Is(err, ErrInsecureListen) {
			t.Errorf("ListenGuard(%q, nil) = %v, want ErrInsecureListen", tc.addr, err)
		}
		if err := ListenGuard(tc.addr, testSecret); err != nil {
			t.Errorf("ListenGuard(%q, secret) = %v, want nil", tc.addr, err)
		}
	}
}

func TestSecretChecks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		secret []byte
		want   error
	}{
		{nil, ErrNoSecret},
		{[]byte{}, ErrNoSecret},
		{testSecret[:MinSecretLen-1], ErrWeakSecret},
		{testSecret, nil},
	} {
		if _, err := NewSigner(tc.secret); !errors.Is(err, tc.want) {
			t.Errorf("NewSigner(%d bytes) = %v, want %v", len(tc.secret), err, tc.want)
		}
		if _, err := NewVerifier(tc.secret); !errors.Is(err, tc.want) {
			t.Errorf("NewVerifier(%d bytes) = %v, want %v", len(tc.secret), err, tc.want)
		}
	}
}

func TestBadOptionsAndTokens(t *testing.T) {
	t.Parallel()
	for name, opt := range map[string]VerifierOption{
		"WithWindow":        WithWindow(0),
		"WithNonceCapacity": WithNonceCapacity(-1),
		"WithMaxBodyBytes":  WithMaxBodyBytes(0),
	} {
		if _, err := NewVerifier(testSecret, opt); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("NewVerifier(%s bad) = %v, want an error naming %s", name, err, name)
		}
	}
	f := setup(t)
	req := httptest.NewRequest(http.MethodPost, "http://x/d", nil)
	if err := f.signer.Sign(req, nil, 0, testStart); err == nil {
		t.Error("Sign with token 0 = nil, want an error")
	}
}

// BenchmarkVerify measures Verify of a fresh request. The clock moves 1 ms a request,
// so the nonce cache reaches its steady state (window + margin worth) and evicts.
func BenchmarkVerify(b *testing.B) {
	signer, err := NewSigner(testSecret)
	if err != nil {
		b.Fatal(err)
	}
	clock := newFakeClock(testStart)
	verifier, err := NewVerifier(testSecret, WithClock(clock.now))
	if err != nil {
		b.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 1<<10)
	req := httptest.NewRequest(http.MethodPost, "http://x/ax/v1/dispatch", nil)
	b.Run("size=1KiB", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			clock.add(time.Millisecond)
			if err := signer.Sign(req, body, 1, clock.now()); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, err := verifier.Verify(req, body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
