package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/axsched/ax/internal/clientaddr"
	"github.com/axsched/ax/internal/lograte"
)

type tokenKey struct{}

// bodyKey is the context key of the body Middleware read and verified, so that a
// Server behind it need not read it again.
type bodyKey struct{}

// TokenFrom returns the fencing token that Middleware verified for the request whose
// context is ctx, and false if there is none.
func TokenFrom(ctx context.Context) (int64, bool) {
	token, ok := ctx.Value(tokenKey{}).(int64)
	return token, ok
}

// Middleware returns a handler that checks each request before it calls next. The
// handler is safe for concurrent use. In order, it:
//
//  1. checks the request's Ax-* headers (present, canonical, the timestamp within the
//     window) before it reads a byte of the body;
//  2. reads the body, at most the WithMaxBodyBytes bound, else 413;
//  3. verifies the signature and the nonce;
//  4. if every check passed, calls next with the token in the context (TokenFrom) and
//     the body restored.
//
// A refused request is answered 401 with a short plain-text reason and a
// WWW-Authenticate header, or 503 with Retry-After when the nonce cache is full.
//
// Refusals are logged at WARN with the method, path, remote address and reason. At
// most one line a minute is logged per client address. Each line holds the count of
// refusals not logged since the line before. The log never holds the signature or the
// body.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h, err := v.checkHeaders(req)
		if err != nil {
			v.unauthorized(w, req, err)
			return
		}
		body, err := v.readBody(w, req)
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				v.refuse(w, req, http.StatusRequestEntityTooLarge, "request body too large", err)
			} else {
				v.refuse(w, req, http.StatusBadRequest, "cannot read request body", err)
			}
			return
		}
		token, err := v.checkSignature(req, h, body)
		if err != nil {
			v.unauthorized(w, req, err)
			return
		}
		ctx := context.WithValue(req.Context(), tokenKey{}, token)
		req = req.WithContext(context.WithValue(ctx, bodyKey{}, body))
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		next.ServeHTTP(w, req)
	})
}

// unauthorized answers a request that failed a check of Verify's.
func (v *Verifier) unauthorized(w http.ResponseWriter, req *http.Request, err error) {
	if errors.Is(err, ErrNonceCacheFull) {
		w.Header().Set("Retry-After", "1")
		v.refuse(w, req, http.StatusServiceUnavailable, ErrNonceCacheFull.Error(), err)
		return
	}
	w.Header().Set("WWW-Authenticate", "Ax-HMAC-SHA256")
	v.refuse(w, req, http.StatusUnauthorized, reason(err), err)
}

func (v *Verifier) readBody(w http.ResponseWriter, req *http.Request) ([]byte, error) {
	if req.ContentLength > v.maxBodyBytes {
		return nil, &http.MaxBytesError{Limit: v.maxBodyBytes}
	}
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	return io.ReadAll(http.MaxBytesReader(w, req.Body, v.maxBodyBytes))
}

// refuse answers status with the short reason and logs the full error, within the
// rate of refusals logged per client address.
func (v *Verifier) refuse(w http.ResponseWriter, req *http.Request, status int, short string, err error) {
	refuse(v.logger, v.refusals, w, req, status, short, err.Error())
}

// refuse answers req status with the short text and logs why, at WARN, unless limit
// holds the line back.
func refuse(log *slog.Logger, limit *lograte.Limiter, w http.ResponseWriter, req *http.Request, status int, short, why string) {
	logRefusal(log, limit, req, "ax: remote: request refused", slog.Int("status", status), slog.String("reason", why))
	http.Error(w, short, status)
}

// logRefusal logs a refused request at WARN, unless limit holds it back: at most one
// line a minute per client address (clientaddr.Key), with the count of the refusals
// not logged since the line before.
func logRefusal(log *slog.Logger, limit *lograte.Limiter, req *http.Request, msg string, attrs ...slog.Attr) {
	ok, held := limit.Allow(clientaddr.Key(req.RemoteAddr))
	if !ok {
		return
	}
	attrs = append([]slog.Attr{slog.String("method", req.Method), slog.String("path", req.URL.Path), slog.String("remote_addr", req.RemoteAddr)}, attrs...)
	if held > 0 {
		attrs = append(attrs, slog.Int("refusals_not_logged", held))
	}
	log.LogAttrs(req.Context(), slog.LevelWarn, msg, attrs...)
}

// newRefusalLimiter returns the limiter of refusal log lines: one a minute per client
// address, for at most 1,024 addresses at once.
func newRefusalLimiter() *lograte.Limiter { return lograte.New(time.Minute, 1024, nil) }

// reason is the sentinel a refusal wraps, as a short text for the response body: the
// detail stays in the log.
func reason(err error) string {
	for _, sentinel := range []error{ErrUnsigned, ErrBadSignature, ErrStale, ErrReplayed} {
		if errors.Is(err, sentinel) {
			return sentinel.Error()
		}
	}
	return "unauthorized"
}
