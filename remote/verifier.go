package remote

import (
	"crypto/hmac"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/axsched/ax/internal/lograte"
)

// Defaults of NewVerifier, each changed by the option of the same name.
const (
	// DefaultWindow is how far, behind or ahead, a request's timestamp may be from the
	// verifier's clock: 30 seconds.
	DefaultWindow = 30 * time.Second
	// DefaultNonceCapacity is how many unexpired nonces a Verifier remembers: 262,144,
	// about 20 MiB at most, enough for some 7,000 requests a second sustained with the
	// default window.
	DefaultNonceCapacity = 1 << 18
	// DefaultMaxBodyBytes is the largest request body the middleware reads: 8 MiB.
	DefaultMaxBodyBytes = 8 << 20
)

// nonceMargin is how long past the end of its window a nonce is remembered, so that
// a wall clock stepped back a little does not reopen the window of a forgotten nonce.
const nonceMargin = 5 * time.Second

// Verifier checks signed requests: headers present, timestamp within the window,
// signature, nonce not seen before. Create it with NewVerifier; a Verifier is safe for
// concurrent use.
type Verifier struct {
	mac          *macPool
	window       time.Duration
	now          func() time.Time
	logger       *slog.Logger
	maxBodyBytes int64
	nonces       *nonceCache
	refusals     *lograte.Limiter // of the refusals' log lines
}

// VerifierOption changes a default of NewVerifier.
type VerifierOption func(*verifierConfig)

type verifierConfig struct {
	window        time.Duration
	now           func() time.Time
	logger        *slog.Logger
	nonceCapacity int
	maxBodyBytes  int64
}

// WithWindow sets how far a request's timestamp may be from the verifier's clock,
// either way; it must be positive. Defaults to DefaultWindow.
func WithWindow(d time.Duration) VerifierOption {
	return func(c *verifierConfig) { c.window = d }
}

// WithLogger sets the logger of refused requests (Middleware logs them at WARN).
// Defaults to slog.Default(); nil keeps the default.
func WithLogger(l *slog.Logger) VerifierOption {
	return func(c *verifierConfig) { c.logger = l }
}

// WithClock sets the clock that timestamps are checked against, for tests. Defaults to
// time.Now; nil keeps the default.
func WithClock(now func() time.Time) VerifierOption {
	return func(c *verifierConfig) { c.now = now }
}

// WithNonceCapacity bounds how many unexpired nonces the Verifier remembers; it must
// be positive. When that many are remembered, new requests are refused with
// ErrNonceCacheFull until some expire. Defaults to DefaultNonceCapacity.
func WithNonceCapacity(n int) VerifierOption {
	return func(c *verifierConfig) { c.nonceCapacity = n }
}

// WithMaxBodyBytes bounds the request body Middleware reads, in bytes; it must be
// positive. A larger body is answered 413. Defaults to DefaultMaxBodyBytes.
func WithMaxBodyBytes(n int64) VerifierOption {
	return func(c *verifierConfig) { c.maxBodyBytes = n }
}

// NewVerifier returns a Verifier for secret, which it copies. It returns an error
// wrapping ErrNoSecret for an empty secret, ErrWeakSecret for one shorter than
// MinSecretLen, and an error naming the option for a bad option value.
func NewVerifier(secret []byte, opts ...VerifierOption) (*Verifier, error) {
	if err := checkSecret(secret); err != nil {
		return nil, fmt.Errorf("ax: remote: new verifier: %w", err)
	}
	c := verifierConfig{
		window:        DefaultWindow,
		now:           time.Now,
		logger:        slog.Default(),
		nonceCapacity: DefaultNonceCapacity,
		maxBodyBytes:  DefaultMaxBodyBytes,
	}
	for _, opt := range opts {
		opt(&c)
	}
	switch {
	case c.window <= 0:
		return nil, fmt.Errorf("ax: remote: new verifier: WithWindow must be positive, got %v", c.window)
	case c.nonceCapacity <= 0:
		return nil, fmt.Errorf("ax: remote: new verifier: WithNonceCapacity must be positive, got %d", c.nonceCapacity)
	case c.maxBodyBytes <= 0:
		return nil, fmt.Errorf("ax: remote: new verifier: WithMaxBodyBytes must be positive, got %d", c.maxBodyBytes)
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	return &Verifier{
		mac:          newMacPool(secret),
		window:       c.window,
		now:          c.now,
		logger:       c.logger,
		maxBodyBytes: c.maxBodyBytes,
		nonces:       newNonceCache(c.nonceCapacity),
		refusals:     newRefusalLimiter(),
	}, nil
}

// Verify checks req, whose body is body, and returns the fencing token it carries. The
// checks run in this order, and the error wraps the sentinel of the first that fails:
// every Ax-* header present (ErrUnsigned); each in its canonical form and given once
// (ErrBadSignature); the timestamp within the window of the clock (ErrStale); the
// signature matching (ErrBadSignature); the timestamp still within the window, once
// the body is read (ErrStale); the nonce not accepted before (ErrReplayed) and room to
// remember it (ErrNonceCacheFull). The checks before the signature need no body:
// Middleware runs them before it reads one. Only a request that passes every
// check uses up its nonce. Verify does not read req.Body.
func (v *Verifier) Verify(req *http.Request, body []byte) (token int64, err error) {
	h, err := v.checkHeaders(req)
	if err != nil {
		return 0, err
	}
	return v.checkSignature(req, h, body)
}

// signedHeaders are a request's Ax-* headers, parsed.
type signedHeaders struct {
	ts        int64
	nonceText string
	nonce     [16]byte
	token     int64
	sig       [32]byte
}

// checkHeaders runs Verify's checks that need no body: every header present, in its
// canonical form, once, and the timestamp within the window.
func (v *Verifier) checkHeaders(req *http.Request) (h signedHeaders, err error) {
	tsText, err := header(req, HeaderTimestamp)
	if err != nil {
		return h, err
	}
	nonceText, err := header(req, HeaderNonce)
	if err != nil {
		return h, err
	}
	tokenText, err := header(req, HeaderToken)
	if err != nil {
		return h, err
	}
	sigText, err := header(req, HeaderSignature)
	if err != nil {
		return h, err
	}

	h.ts, err = strconv.ParseInt(tsText, 10, 64)
	if err != nil || strconv.FormatInt(h.ts, 10) != tsText {
		return h, malformed(HeaderTimestamp, "not a decimal Unix-millisecond time")
	}
	if !lowerHex(h.nonce[:], nonceText) {
		return h, malformed(HeaderNonce, "not 32 lowercase hex digits")
	}
	h.nonceText = nonceText
	h.token, err = strconv.ParseInt(tokenText, 10, 64)
	if err != nil || h.token <= 0 || strconv.FormatInt(h.token, 10) != tokenText {
		return h, malformed(HeaderToken, "not a positive decimal int64")
	}
	if !lowerHex(h.sig[:], sigText) {
		return h, malformed(HeaderSignature, "not 64 lowercase hex digits")
	}

	return h, v.inWindow(h.ts, v.now().UnixMilli())
}

// inWindow refuses a timestamp ts (Unix milliseconds) further than the window from
// now (ErrStale).
func (v *Verifier) inWindow(ts, now int64) error {
	window := v.window.Milliseconds()
	if skew := now - ts; skew > window || skew < -window {
		dir := "behind"
		if skew < 0 {
			dir, skew = "ahead of", -skew
		}
		return fmt.Errorf("ax: remote: %w: timestamp %v %s the verifier's clock, window %v",
			ErrStale, time.Duration(skew)*time.Millisecond, dir, v.window)
	}
	return nil
}

// checkSignature runs Verify's checks that need the body: the signature, the window
// once more (a body sent slowly may have outlasted it, and the nonce would then be
// remembered no longer than it), then the nonce.
func (v *Verifier) checkSignature(req *http.Request, h signedHeaders, body []byte) (int64, error) {
	var buf [32]byte
	want := v.mac.sum(buf[:0], requestMethod(req), requestPath(req), h.ts, h.nonceText, h.token, body)
	if !hmac.Equal(want, h.sig[:]) {
		return 0, fmt.Errorf("ax: remote: %w", ErrBadSignature)
	}
	now := v.now().UnixMilli()
	if err := v.inWindow(h.ts, now); err != nil {
		return 0, err
	}
	if err := v.nonces.add(h.nonce, h.ts+v.window.Milliseconds()+nonceMargin.Milliseconds(), now); err != nil {
		return 0, fmt.Errorf("ax: remote: %w", err)
	}
	return h.token, nil
}

// lowerHex decodes text, which must be exactly 2×len(dst) lowercase hex digits, into
// dst: the one spelling the signer writes, so that one signature has one reading.
func lowerHex(dst []byte, text string) bool {
	if len(text) != 2*len(dst) {
		return false
	}
	for i := 0; i < len(text); i++ {
		if c := text[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	_, err := hex.Decode(dst, []byte(text))
	return err == nil
}

// header returns the one value of the header name, ErrUnsigned if it is missing or
// empty, ErrBadSignature if it is repeated.
func header(req *http.Request, name string) (string, error) {
	values := req.Header.Values(name)
	switch {
	case len(values) == 0 || values[0] == "":
		return "", fmt.Errorf("ax: remote: %w: no %s header", ErrUnsigned, name)
	case len(values) > 1:
		return "", malformed(name, "repeated")
	}
	return values[0], nil
}

func malformed(name, why string) error {
	return fmt.Errorf("ax: remote: %w: %s header %s", ErrBadSignature, name, why)
}
