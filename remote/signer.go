package remote

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Header names of the signed protocol; doc.go describes each.
const (
	// HeaderTimestamp carries the signing time in Unix milliseconds, decimal.
	HeaderTimestamp = "Ax-Timestamp"
	// HeaderNonce carries 128 random bits as 32 lowercase hex digits, new for every request.
	HeaderNonce = "Ax-Nonce"
	// HeaderToken carries the sender's fencing token, a positive decimal int64.
	HeaderToken = "Ax-Token"
	// HeaderSignature carries the HMAC-SHA256 of the canonical string, 64 lowercase hex digits.
	HeaderSignature = "Ax-Signature"
)

// MinSecretLen is the shortest cluster secret, in bytes, that NewSigner and NewVerifier
// accept: 32 bytes, the size of an HMAC-SHA256 key that matches the hash's strength.
const MinSecretLen = 32

// Signer signs outgoing requests with the cluster secret. Create it with NewSigner; a
// Signer is safe for concurrent use.
type Signer struct {
	mac *macPool
}

// NewSigner returns a Signer for secret, which it copies. It returns an error wrapping
// ErrNoSecret for an empty secret and ErrWeakSecret for one shorter than MinSecretLen.
func NewSigner(secret []byte) (*Signer, error) {
	if err := checkSecret(secret); err != nil {
		return nil, fmt.Errorf("ax: remote: new signer: %w", err)
	}
	return &Signer{mac: newMacPool(secret)}, nil
}

// Sign sets the four Ax-* headers on req, signing its method, its path and query as
// sent (req.URL), now, a fresh nonce, token and body. body must be the exact bytes the
// request will carry (nil or empty for none); Sign does not read or set req.Body. token
// must be positive: a zero token means "no leader". Sign replaces any Ax-* headers
// already on req, so a retried request must be signed again, with a new nonce.
func (s *Signer) Sign(req *http.Request, body []byte, token int64, now time.Time) error {
	if token <= 0 {
		return fmt.Errorf("ax: remote: sign request: fencing token must be positive, got %d", token)
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never returns an error (Go 1.24+)
	nonce := hex.EncodeToString(raw[:])
	ts := now.UnixMilli()
	sig := s.mac.sum(nil, requestMethod(req), requestPath(req), ts, nonce, token, body)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderNonce, nonce)
	req.Header.Set(HeaderToken, strconv.FormatInt(token, 10))
	req.Header.Set(HeaderSignature, hex.EncodeToString(sig))
	return nil
}

func checkSecret(secret []byte) error {
	if len(secret) == 0 {
		return ErrNoSecret
	}
	if len(secret) < MinSecretLen {
		return fmt.Errorf("%w: %d bytes, need at least %d", ErrWeakSecret, len(secret), MinSecretLen)
	}
	return nil
}

// requestMethod is the method the client sends: net/http sends GET for an empty one.
func requestMethod(req *http.Request) string {
	if req.Method == "" {
		return http.MethodGet
	}
	return req.Method
}

// requestPath is the request target as it travels on the wire: the escaped path
// ("/" when empty, as net/http sends it) and "?" and the raw query if there is one.
// The client's and the server's URL agree on it.
func requestPath(req *http.Request) string {
	p := req.URL.EscapedPath()
	if p == "" {
		p = "/"
	}
	if req.URL.RawQuery != "" || req.URL.ForceQuery {
		p += "?" + req.URL.RawQuery
	}
	return p
}

// macPool computes signatures with one secret; it pools HMAC states and scratch
// buffers so that signing and verifying allocate little.
type macPool struct {
	pool sync.Pool // of *macState
}

type macState struct {
	mac hash.Hash
	buf []byte
}

func newMacPool(secret []byte) *macPool {
	key := append([]byte(nil), secret...)
	return &macPool{pool: sync.Pool{New: func() any {
		return &macState{mac: hmac.New(sha256.New, key), buf: make([]byte, 0, 256)}
	}}}
}

// sum appends to dst the HMAC-SHA256 of the canonical string
//
//	method "\n" path "\n" timestamp "\n" nonce "\n" token "\n" hex(sha256(body))
func (p *macPool) sum(dst []byte, method, path string, ts int64, nonce string, token int64, body []byte) []byte {
	st := p.pool.Get().(*macState)
	defer p.pool.Put(st)
	bodySum := sha256.Sum256(body)
	b := st.buf[:0]
	b = append(b, method...)
	b = append(b, '\n')
	b = append(b, path...)
	b = append(b, '\n')
	b = strconv.AppendInt(b, ts, 10)
	b = append(b, '\n')
	b = append(b, nonce...)
	b = append(b, '\n')
	b = strconv.AppendInt(b, token, 10)
	b = append(b, '\n')
	b = hex.AppendEncode(b, bodySum[:])
	st.buf = b
	st.mac.Reset()
	st.mac.Write(b)
	return st.mac.Sum(dst)
}
