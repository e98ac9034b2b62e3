package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
)

type tokenKey struct{}

// TokenFrom returns the fencing token that Middleware verified for the request whose
// context is ctx, and false if there is none.
func TokenFrom(ctx context.Context) (int64, bool) {
	token, ok := ctx.Value(tokenKey{}).(int64)
	return token, ok
}

// Middleware returns a handler that reads the request body (at most the
// WithMaxBodyBytes bound, else 413), verifies the request with Verify and, if it
// passes, calls next with the token in the context (TokenFrom) and the body restored.
// A refused request is answered 401 with a short plain-text reason and a
// WWW-Authenticate header, or 503 with Retry-After when the nonce cache is full, and
// logged at WARN with its method, path, remote address and reason; the log never
// holds the signature or the body. The returned handler is safe for concurrent use.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
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
		token, err := v.Verify(req, body)
		if err != nil {
			if errors.Is(err, ErrNonceCacheFull) {
				w.Header().Set("Retry-After", "1")
				v.refuse(w, req, http.StatusServiceUnavailable, ErrNonceCacheFull.Error(), err)
				return
			}
			w.Header().Set("WWW-Authenticate", "Ax-HMAC-SHA256")
			v.refuse(w, req, http.StatusUnauthorized, reason(err), err)
			return
		}
		req = req.WithContext(context.WithValue(req.Context(), tokenKey{}, token))
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		next.ServeHTTP(w, req)
	})
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

// refuse answers status with the short reason and logs the full error.
func (v *Verifier) refuse(w http.ResponseWriter, req *http.Request, status int, short string, err error) {
	v.logger.WarnContext(req.Context(), "ax: remote: request refused",
		"method", req.Method,
		"path", req.URL.Path,
		"remote_addr", req.RemoteAddr,
		"status", status,
		"reason", err.Error(),
	)
	http.Error(w, short, status)
}

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
