package admin_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/axsched/ax/admin"
)

// errorMessage is the message of an error answer.
func errorMessage(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

// A query string is bounded: repeated values of a parameter count once, more
// distinct values than can mean something are refused, and so are a query string
// over MaxQueryBytes or MaxQueryParams and a malformed one.
func TestQueryStringBounds(t *testing.T) {
	t.Parallel()
	h, _ := newAPI(t)
	repeat := func(param string, n int) string {
		return strings.TrimSuffix(strings.Repeat(param+"&", n), "&")
	}
	for _, c := range []struct {
		target string
		status int
		want   string // in the error's message
	}{
		{"/tasks?" + repeat("status=SCHEDULED", admin.MaxQueryParams), 200, ""},
		{"/tasks?status=scheduled,SCHEDULED,%20Scheduled&status=FAILED&status=failed", 200, ""},
		{"/tasks?name=order.close&name=order.close", 200, ""},
		{"/tasks?" + repeat("status=SCHEDULED", admin.MaxQueryParams+1), 400, "65 parameters, over 64"},
		{"/tasks?status=" + strings.Repeat("SCHEDULED,", 2000), 400, "over 16384 bytes"},
		{"/tasks?status=a,b,c,d,e,f,g,h", 400, "status: more than 7 distinct values"},
		{"/tasks?status=SCHEDULED,DISPATCHING,RUNNING,SUCCEEDED,FAILED,CANCELLED,SKIPPED&status=scheduled", 200, ""},
		{"/tasks?name=a&name=b", 400, `parameter name given with different values`},
		{"/tasks?limit=5;x=1", 400, "malformed"},
		{"/tasks?" + strings.Repeat("x", 300) + "=1", 400, `unknown parameter "` + strings.Repeat("x", 100) + `"…`},
		{"/audit?actor=a&actor=b", 400, "parameter actor given with different values"},
		{"/audit?limit=5&limit=5", 200, ""},
		{"/audit?" + repeat("limit=5", admin.MaxQueryParams+1), 400, "over 64"},
		{"/audit?target=" + strings.Repeat("t", admin.MaxQueryBytes), 400, "over 16384 bytes"},
	} {
		status, body, _ := call(t, h, http.MethodGet, c.target, secrets[admin.Admin])
		if status != c.status || (c.want != "" && (code(body) != "invalid" || !strings.Contains(errorMessage(body), c.want))) {
			t.Errorf("GET %.120s: %d %.300v, want %d %q", c.target, status, body, c.status, c.want)
		}
	}
	if _, body, _ := call(t, h, http.MethodGet, "/tasks?status=scheduled&status=SCHEDULED,cancelled", secrets[admin.Viewer]); len(body["tasks"].([]any)) != 5 {
		t.Errorf("GET /tasks of SCHEDULED and CANCELLED, repeated: %v, want the 5 tasks", body)
	}
}

// A mutating route's body is strict JSON: a member in another case than its field's,
// or given twice, is refused, and the message names it.
func TestActionBodyIsStrict(t *testing.T) {
	t.Parallel()
	h, _ := newAPI(t)
	for body, want := range map[string]string{
		`{"Reason":"x"}`:                `member "Reason" matches field "reason" only when case is ignored`,
		`{"reason":"x","reason":"y"}`:   `duplicate member "reason"`,
		`{"reason":"x","force":true}`:   `unknown member "force"`,
		`{"reason":"x"} {"reason":"y"}`: `data after the top-level value`,
	} {
		status, got := post(t, h, "/tasks/1/cancel", secrets[admin.Operator], body)
		if status != http.StatusBadRequest || code(got) != "invalid" || !strings.Contains(errorMessage(got), want) {
			t.Errorf("POST /tasks/1/cancel %s: %d %v, want 400 invalid with %q", body, status, got, want)
		}
	}
}
