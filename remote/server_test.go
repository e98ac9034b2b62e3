package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

// fakeExecutor takes up to free tasks, and none named "nobody".
type fakeExecutor struct {
	mu       sync.Mutex
	free     int
	taken    []store.Task
	valid    []func() error
	released []int64
	epoch    int64 // the store's recorded epoch, as Epoch answers
	epochErr error // Epoch's error, when set
}

func (f *fakeExecutor) Epoch(context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.epoch, f.epochErr
}

func (f *fakeExecutor) Released(token int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, token)
}

func (f *fakeExecutor) releases() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.released...)
}

func (f *fakeExecutor) Take(token int64, tasks []store.Task, valid func() error) []Outcome {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Outcome, len(tasks))
	for i, t := range tasks {
		switch {
		case t.Name == "nobody":
			out[i] = Unhandled
		case f.free == 0:
			out[i] = Busy
		default:
			f.free--
			f.taken = append(f.taken, t)
			out[i] = Accepted
		}
	}
	f.valid = append(f.valid, valid)
	return out
}

func (f *fakeExecutor) Load() (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.taken), f.free
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func dispatchOf(token int64, ids ...int64) DispatchRequest {
	dr := DispatchRequest{Namespace: "ns", Node: "exec-1", Token: token}
	for _, id := range ids {
		name := "job"
		if id < 0 {
			name, id = "nobody", -id
		}
		dr.Tasks = append(dr.Tasks, store.Task{ID: id, Name: name, ExecutionID: fmt.Sprintf("e%d", id), Status: store.Dispatching})
	}
	return dr
}

// signedServer serves exec as node exec-1 of namespace ns, verifying with testSecret,
// and returns the server and a client that signs with it.
func signedServer(t *testing.T, exec Executor) (*httptest.Server, *Client) {
	t.Helper()
	v, err := NewVerifier(testSecret, WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewServer("ns", "exec-1", exec, v, quiet()))
	t.Cleanup(srv.Close)
	signer, _ := NewSigner(testSecret)
	c := NewClient(signer, 5*time.Second, nil)
	t.Cleanup(c.Close)
	return srv, c
}

// TestServerDispatch: a signed dispatch is taken up to the free slots, the rest answered
// busy or unhandled; a token below the highest seen is refused 409 (ErrFenced) and
// makes the older token's tasks invalid; a dispatch addressed to another node or
// namespace is refused; an unsigned or forged one never reaches the executor.
func TestServerDispatch(t *testing.T) {
	t.Parallel()
	exec := &fakeExecutor{free: 2}
	srv, c := signedServer(t, exec)
	ctx := context.Background()

	resp, err := c.Dispatch(ctx, srv.URL, dispatchOf(5, 1, 2, 3, -4))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Accepted) != 2 || len(resp.Busy) != 1 || resp.Busy[0] != 3 || len(resp.Unhandled) != 1 || resp.Unhandled[0] != 4 {
		t.Fatalf("answer %+v, want 1 and 2 accepted, 3 busy, 4 unhandled", resp)
	}
	if resp.Running != 2 || resp.Free != 0 {
		t.Fatalf("answer's load %d running, %d free; want 2, 0", resp.Running, resp.Free)
	}
	if err := exec.valid[0](); err != nil {
		t.Fatalf("token 5's tasks invalid while it is the highest: %v", err)
	}
	exec.free = 1
	if _, err := c.Dispatch(ctx, srv.URL, dispatchOf(7, 5)); err != nil {
		t.Fatal(err)
	}
	if err := exec.valid[0](); !errors.Is(err, ErrFenced) {
		t.Fatalf("token 5's tasks after token 7: valid() = %v, want ErrFenced", err)
	}
	_, err = c.Dispatch(ctx, srv.URL, dispatchOf(6, 6))
	var fe *FencedError
	if !errors.As(err, &fe) || !errors.Is(err, ErrFenced) || fe.Highest != 7 {
		t.Fatalf("dispatch under token 6 after 7: %v, want a FencedError naming 7", err)
	}
	misdirected := dispatchOf(7, 8)
	misdirected.Node = "exec-2"
	if _, err := c.Dispatch(ctx, srv.URL, misdirected); err == nil || !strings.Contains(err.Error(), "421") {
		t.Fatalf("dispatch addressed to another node: %v, want 421", err)
	}
	unsigned := NewClient(nil, 5*time.Second, nil)
	defer unsigned.Close()
	if _, err := unsigned.Dispatch(ctx, srv.URL, dispatchOf(9, 9)); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("unsigned dispatch: %v, want 401", err)
	}
	other, _ := NewSigner(otherSecret)
	forged := NewClient(other, 5*time.Second, nil)
	defer forged.Close()
	if _, err := forged.Dispatch(ctx, srv.URL, dispatchOf(9, 9)); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("dispatch signed with another secret: %v, want 401", err)
	}
	if len(exec.taken) != 3 {
		t.Fatalf("executor took %d tasks, want 3 (none from refused requests)", len(exec.taken))
	}
	if err := c.Health(ctx, srv.URL); err != nil {
		t.Fatalf("health: %v", err)
	}
}

// TestDispatchTooLarge: a dispatch whose body is over the executor's limit is refused
// 413 as ErrTooLarge, which the leader answers by splitting the batch; other refusals
// (another secret, 401) are not ErrTooLarge. Neither reaches the executor.
func TestDispatchTooLarge(t *testing.T) {
	t.Parallel()
	exec := &fakeExecutor{free: 100}
	v, err := NewVerifier(testSecret, WithLogger(quiet()), WithMaxBodyBytes(2048))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewServer("ns", "exec-1", exec, v, quiet()))
	defer srv.Close()
	signer, _ := NewSigner(testSecret)
	c := NewClient(signer, 5*time.Second, nil)
	defer c.Close()
	ctx := context.Background()
	big := dispatchOf(1)
	for id := range int64(40) {
		big.Tasks = append(big.Tasks, store.Task{ID: id + 1, Name: "job", ExecutionID: "e", Status: store.Dispatching})
	}
	if _, err := c.Dispatch(ctx, srv.URL, big); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "413") {
		t.Fatalf("dispatch of 40 tasks over a 2 KiB limit: %v, want ErrTooLarge (413)", err)
	}
	if _, err := c.Dispatch(ctx, srv.URL, dispatchOf(1, 1)); err != nil {
		t.Fatalf("dispatch of one task under the limit: %v", err)
	}
	other, _ := NewSigner(otherSecret)
	forged := NewClient(other, 5*time.Second, nil)
	defer forged.Close()
	if _, err := forged.Dispatch(ctx, srv.URL, dispatchOf(1, 2)); err == nil || errors.Is(err, ErrTooLarge) || errors.Is(err, ErrUnreachable) {
		t.Fatalf("dispatch signed with another secret: %v, want a refusal that is neither ErrTooLarge nor ErrUnreachable", err)
	}
	if len(exec.taken) != 1 {
		t.Fatalf("executor took %d tasks, want 1 (none from refused requests)", len(exec.taken))
	}
}

// TestDispatchUnreadableAnswer: a 200 whose body is not a dispatch answer may follow
// a dispatch the executor took, so it reads as ErrUnreachable (outcome unknown), not
// as a refusal the leader would pass to another replica.
func TestDispatchUnreadableAnswer(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("<html>a proxy's page</html>"))
	}))
	defer srv.Close()
	c := NewClient(nil, 5*time.Second, nil)
	defer c.Close()
	if _, err := c.Dispatch(context.Background(), srv.URL, dispatchOf(1, 1)); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("dispatch answered 200 with HTML: %v, want ErrUnreachable", err)
	}
}

// TestServerReleased: a signed release notice reaches the executor's Released; one of a
// token below the highest seen, one addressed to another node, an unsigned and a forged
// one do not.
func TestServerReleased(t *testing.T) {
	t.Parallel()
	exec := &fakeExecutor{free: 1}
	srv, c := signedServer(t, exec)
	ctx := context.Background()
	notice := func(token int64) ReleasedNotice { return ReleasedNotice{Namespace: "ns", Node: "exec-1", Token: token} }

	if err := c.Released(ctx, srv.URL, notice(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Dispatch(ctx, srv.URL, dispatchOf(5, 1)); err != nil {
		t.Fatal(err)
	}
	if err := c.Released(ctx, srv.URL, notice(4)); err != nil {
		t.Fatalf("notice of an older term: %v, want nil (taken, and ignored)", err)
	}
	if err := c.Released(ctx, srv.URL, notice(5)); err != nil {
		t.Fatal(err)
	}
	misdirected := notice(6)
	misdirected.Node = "exec-2"
	if err := c.Released(ctx, srv.URL, misdirected); err == nil || !strings.Contains(err.Error(), "421") {
		t.Fatalf("notice addressed to another node: %v, want 421", err)
	}
	unsigned := NewClient(nil, 5*time.Second, nil)
	defer unsigned.Close()
	if err := unsigned.Released(ctx, srv.URL, notice(7)); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("unsigned notice: %v, want 401", err)
	}
	other, _ := NewSigner(otherSecret)
	forged := NewClient(other, 5*time.Second, nil)
	defer forged.Close()
	if err := forged.Released(ctx, srv.URL, notice(8)); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("notice signed with another secret: %v, want 401", err)
	}
	if got := exec.releases(); !slices.Equal(got, []int64{3, 5}) {
		t.Fatalf("executor told of releases %v, want [3 5]", got)
	}
}

// TestServerWithoutSecret serves a loopback connection and refuses any other (403).
func TestServerWithoutSecret(t *testing.T) {
	t.Parallel()
	exec := &fakeExecutor{free: 10, epoch: 1}
	s := NewServer("ns", "exec-1", exec, nil, quiet())
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := NewClient(nil, 5*time.Second, nil)
	defer c.Close()
	if _, err := c.Dispatch(context.Background(), srv.URL, dispatchOf(1, 1)); err != nil {
		t.Fatalf("unsigned dispatch on loopback: %v", err)
	}
	// A connection whose local address is not loopback: refused before reading.
	req := httptest.NewRequest(http.MethodPost, DispatchPath, strings.NewReader(`{}`))
	req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 7070}))
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		body, _ := io.ReadAll(rec.Body)
		t.Fatalf("unsigned dispatch on 10.0.0.7: %d %s, want 403", rec.Code, body)
	}
	if len(exec.taken) != 1 {
		t.Fatalf("executor took %d tasks, want 1", len(exec.taken))
	}
	req = httptest.NewRequest(http.MethodPost, ReleasedPath, strings.NewReader(`{"namespace":"ns","node":"exec-1","token":1}`))
	req.Header.Set(HeaderToken, "1")
	req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 7070}))
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden || len(exec.releases()) != 0 {
		t.Fatalf("unsigned release notice on 10.0.0.7: %d, executor told %v; want 403, nothing", rec.Code, exec.releases())
	}
}

// TestClientUnreachable: a refused connection is ErrUnreachable.
func TestClientUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := NewClient(nil, time.Second, nil)
	defer c.Close()
	if _, err := c.Dispatch(context.Background(), "http://"+addr, dispatchOf(1, 1)); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("dispatch to a closed port: %v, want ErrUnreachable", err)
	}
	if err := c.Health(context.Background(), "http://"+addr); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("health of a closed port: %v, want ErrUnreachable", err)
	}
}
