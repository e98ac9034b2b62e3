package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	neturl "net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/admin"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/sqlite"
)

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// The smoke test of ax serve on SQLite: a service (a scheduler with the handlers) and
// ax serve share the file; every operators' command goes through ax serve's admin
// API, and each does what it says — the trigger runs in the service, not in ax
// serve, which claims nothing. /metrics needs a token.
func TestServeSmoke(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ax.db")
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	service, err := ax.New(ax.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RefillInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan string, 10)
	service.HandleFunc("order.close", func(_ context.Context, task *ax.Task) error { ran <- task.Key; return nil })
	service.HandleFunc("charge", func(context.Context, *ax.Task) error { return errors.New("declined") }, ax.WithMaxRetry(0))
	service.HandleFunc("payment.reconcile", func(context.Context, *ax.Task) error { return nil })
	if err := service.Every("payment.reconcile", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := service.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer service.Stop(context.Background())
	ctx := context.Background()
	ids := map[string]string{}
	for _, key := range []string{"to-cancel", "to-move", "to-trigger"} {
		task, err := service.Delay(ctx, "order.close", key, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		ids[key] = strconv.FormatInt(task.ID, 10)
	}
	charge, err := service.Delay(ctx, "charge", "c-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	ids["failed"] = strconv.FormatInt(charge.ID, 10)
	waitTask(t, service, charge.ID, ax.Failed)

	tokens := "ops:operator:" + admin.HashToken("ops-secret") + ",dash:viewer:" + admin.HashToken("dash-secret")
	url := startServe(t, path, tokens)
	op := []string{"--server", url, "--token", "ops-secret"}
	viewer := []string{"--server", url, "--token", "dash-secret"}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{append([]string{"tasks", "list", "--name", "order.close"}, viewer...), exitOK, "to-trigger"},
		{append([]string{"tasks", "show", ids["failed"]}, viewer...), exitOK, "FAILED"},
		{append([]string{"tasks", "cancel", ids["to-cancel"]}, viewer...), exitFail, "forbidden (403)"},
		{append([]string{"tasks", "cancel", ids["to-cancel"], "--reason", "paid"}, op...), exitOK, "CANCELLED"},
		{append([]string{"tasks", "reschedule", ids["to-move"], "--at", "3h", "--reason", "asked"}, op...), exitOK, "SCHEDULED"},
		{append([]string{"tasks", "trigger", ids["to-trigger"], "--reason", "now"}, op...), exitOK, "SCHEDULED"},
		{append([]string{"tasks", "retry", ids["failed"]}, op...), exitOK, "SCHEDULED"},
		{append([]string{"schedules", "pause", "payment.reconcile"}, op...), exitOK, "schedule.pause"},
		{append([]string{"schedules", "list"}, viewer...), exitOK, "paused"},
		{append([]string{"schedules", "resume", "payment.reconcile"}, op...), exitOK, "schedule.resume"},
		{append([]string{"schedules", "list"}, viewer...), exitOK, "active"},
		{append([]string{"schedules", "trigger", "payment.reconcile", "--reason", "after the outage"}, op...), exitOK, "schedule.trigger"},
	} {
		code, stdout, stderr := runAx(t, c.args...)
		got := stdout
		if c.code != exitOK {
			got = stderr
		}
		if code != c.code || !strings.Contains(got, c.want) {
			t.Errorf("ax %s: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d with %q", strings.Join(c.args, " "), code, stdout, stderr, c.code, c.want)
		}
	}
	select {
	case key := <-ran:
		if key != "to-trigger" {
			t.Errorf("the service ran %q, want the triggered task", key)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("the triggered task did not run in the service within 10s")
	}
	if task, err := service.Lookup(ctx, "order.close", "to-move"); err != nil || task.DueAt.Before(time.Now().Add(2*time.Hour)) {
		t.Errorf("the rescheduled task: %+v, %v; want due in about 3 hours", task, err)
	}
	if task, err := service.Lookup(ctx, "order.close", "to-cancel"); err != nil || task.Status != ax.Cancelled {
		t.Errorf("the cancelled task: %+v, %v", task, err)
	}
	log, err := service.AuditLog(ctx, ax.AuditQuery{Limit: 100})
	if err != nil || len(log) != 8 {
		t.Errorf("audit log: %d records, %v; want 8 (the refused cancel and seven actions)", len(log), err)
	}
	if code, _ := scrape(t, url, ""); code != http.StatusUnauthorized {
		t.Errorf("GET /metrics without a token: %d, want 401", code)
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, body := scrape(t, url, "dash-secret")
		if code == http.StatusOK && strings.Contains(body, `ax_tasks{status="CANCELLED"} 1`) {
			break
		}
		if time.Now().After(end) {
			t.Errorf("GET /metrics with a viewer's token: %d, want 200 and the task counts within 10s\n%.600s", code, body)
			break
		}
	}
	// A browser at the root is sent to the console, a client of the API is answered
	// by it; the console signs in with the API's tokens.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("GET", url+"/", nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	if resp, err := noFollow.Do(req); err != nil || resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/" {
		t.Errorf("a browser at /: %v %v, want 303 to /console/", resp, err)
	} else {
		resp.Body.Close()
	}
	if resp, err := noFollow.PostForm(url+"/console/signin", neturl.Values{"token": {"dash-secret"}}); err != nil ||
		resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Set-Cookie"), "Path=/console") {
		t.Errorf("sign in to the console: %v %v, want 303 and a cookie of path /console", resp, err)
	} else {
		resp.Body.Close()
	}
}

// startServe runs ax serve on the SQLite file at path with tokens, stats read every
// 50 ms, until the test ends (when it must exit cleanly), and returns its URL.
func startServe(t *testing.T, path, tokens string, args ...string) string {
	t.Helper()
	url, _ := startServeLogs(t, append([]string{"--dsn", path, "--tokens", tokens}, args...)...)
	return url
}

// startServeLogs runs ax serve with args, listening on 127.0.0.1:0 unless args say
// otherwise, until the test ends (when it must exit cleanly), and returns its URL
// and its stderr.
func startServeLogs(t *testing.T, args ...string) (string, *syncBuffer) {
	t.Helper()
	serveCtx, stop := context.WithCancel(context.Background())
	var out, errs syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(serveCtx, append([]string{"serve", "--listen", "127.0.0.1:0", "--stats-interval", "50ms"}, args...), &out, &errs)
	}()
	t.Cleanup(func() {
		stop()
		if code := <-done; code != exitOK {
			t.Errorf("ax serve exited %d\nstderr:\n%s", code, errs.String())
		}
	})
	addr := regexp.MustCompile(`listening on (https?://\S+)`)
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if m := addr.FindStringSubmatch(out.String()); m != nil {
			return m[1], &errs
		}
		select {
		case code := <-done:
			done <- code
			t.Fatalf("ax serve exited %d before listening\nstdout:\n%s\nstderr:\n%s", code, out.String(), errs.String())
		default:
		}
		if time.Now().After(end) {
			t.Fatalf("ax serve did not listen within 10s\nstdout:\n%s\nstderr:\n%s", out.String(), errs.String())
		}
	}
}

// scrape GETs url's /metrics with token (none when empty).
func scrape(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// waitTask waits until the task is in status.
func waitTask(t *testing.T, s *ax.Scheduler, id int64, status ax.Status) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		task, err := s.Get(context.Background(), id)
		if err == nil && task.Status == status {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("task %d: %+v, %v; want %s within 10s", id, task, err, status)
		}
	}
}

// ax serve's /metrics reports the queue lag, as a scheduling replica's do: how long
// the soonest SCHEDULED task has been due. Here nothing schedules the store, and a
// task due a minute ago waits.
func TestServeQueueLag(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ax.db")
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Insert(context.Background(), []store.NewTask{
		{Name: "order.close", Key: "late", DueAt: time.Now().Add(-time.Minute)},
		{Name: "order.close", Key: "later", DueAt: time.Now().Add(time.Hour)},
	}); err != nil {
		t.Fatal(err)
	}
	tokens := "dash:viewer:" + admin.HashToken("dash-secret")
	url := startServe(t, path, tokens)
	lag := regexp.MustCompile(`(?m)^ax_queue_lag_seconds (\S+)$`)
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, body := scrape(t, url, "dash-secret")
		if m := lag.FindStringSubmatch(body); m != nil {
			if s, _ := strconv.ParseFloat(m[1], 64); s >= 60 && s < 3600 {
				return
			}
		}
		if time.Now().After(end) {
			t.Fatalf("GET /metrics: %d, want ax_queue_lag_seconds of a minute or more within 10s\n%s", code, lag.FindString(body))
		}
	}
}
