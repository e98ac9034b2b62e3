package console

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"

	"github.com/axsched/ax/admin"
)

// apiError is an error answer of the admin API: its status, stable code and message.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// get reads the admin API's route path (no leading slash) with the query string
// query, as the caller of r, into out: a shared read (admin.SharedHeader). It
// returns the API's error, unless the answer is 200.
func (c *Console) get(r *http.Request, path, query string, out any) *apiError {
	return c.call(r, http.MethodGet, path, query, nil, out)
}

// post calls the admin API's mutating route path with the JSON body, as the caller
// of r, into out.
func (c *Console) post(r *http.Request, path string, body, out any) *apiError {
	return c.call(r, http.MethodPost, path, "", body, out)
}

// read is get, answering w with the API's error as a page when there is one: false
// then.
func (c *Console) read(w http.ResponseWriter, r *http.Request, path, query string, out any) bool {
	return c.answered(w, r, c.get(r, path, query, out))
}

// send is post, answering w with the API's error as a page when there is one: false
// then.
func (c *Console) send(w http.ResponseWriter, r *http.Request, path string, body, out any) bool {
	return c.answered(w, r, c.post(r, path, body, out))
}

// answered writes e, if any, as the error page, and reports whether there was none.
func (c *Console) answered(w http.ResponseWriter, r *http.Request, e *apiError) bool {
	if e != nil {
		c.fail(w, r, e.Status, e.Code, e.Message)
	}
	return e == nil
}

// call makes a request to the admin API in the process, carrying what identifies the
// caller of r (its session cookie or bearer token) and what the API's checks read
// (its address, TLS, origin headers), so that the API judges and records it as it
// would the caller's own request.
func (c *Console) call(r *http.Request, method, path, query string, body, out any) *apiError {
	var rd io.Reader = http.NoBody
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: "the request could not be encoded"}
		}
		rd = bytes.NewReader(b)
	}
	u, err := url.Parse("/" + path) // path is escaped: a schedule's name may hold "/" as %2F
	if err != nil {
		return &apiError{Status: http.StatusBadRequest, Code: "invalid", Message: "the request could not be made"}
	}
	u.RawQuery = query
	req, err := http.NewRequestWithContext(r.Context(), method, u.String(), rd)
	if err != nil {
		return &apiError{Status: http.StatusBadRequest, Code: "invalid", Message: "the request could not be made"}
	}
	req.Host, req.RemoteAddr, req.TLS = r.Host, r.RemoteAddr, r.TLS
	req.RequestURI = u.RequestURI()
	for _, h := range []string{"Authorization", "Cookie", "Origin", "Sec-Fetch-Site", "User-Agent"} {
		if v, ok := r.Header[h]; ok {
			req.Header[h] = v
		}
	}
	if method == http.MethodGet {
		req.Header.Set(admin.SharedHeader, "1")
	} else {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	c.api.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		var e struct {
			Error apiError `json:"error"`
		}
		if json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error.Code == "" {
			e.Error = apiError{Code: "internal", Message: http.StatusText(rec.Code)}
		}
		e.Error.Status = rec.Code
		return &e.Error
	}
	if out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			c.log.ErrorContext(r.Context(), "ax: console: the admin API's answer could not be read", "path", path, "err", err)
			return &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: "the admin API's answer could not be read"}
		}
	}
	return nil
}
