package route

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/axsched/ax/internal/clock"
	"github.com/axsched/ax/internal/execute"
	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newRouter returns a router for replica "here" over an executor with 4 free slots and
// a handler for "job".
func newRouter(t *testing.T) *Router {
	t.Helper()
	return newObservedRouter(t, nil)
}

// newObservedRouter is newRouter with the executor's events sent to q.
func newObservedRouter(t *testing.T, q *observe.Queue) *Router {
	t.Helper()
	ex := execute.New(execute.Config{
		Store: memory.New(), Clock: clock.New(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Observe: q,
		Node: "here", Concurrency: 4, HeartbeatInterval: time.Second, MaxDispatchRetries: 3,
		Handler: func(string) *execute.Handler {
			return &execute.Handler{Timeout: time.Minute, Run: func(context.Context, *store.Task) error { return nil }}
		},
		Handlers: func() []string { return []string{"job"} },
	})
	return New(context.Background(), Config{Local: "here", Advertised: true, Exec: ex, Src: &execute.Source{},
		LocalHandles: func(name string) bool { return name == "job" }, Now: time.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// A leader starts tasks in its claims only while it is the one replica taking
// dispatches, as the registry last said: before the registry was read, and while
// another replica advertises an executor, tasks are claimed DISPATCHING and routed.
func TestReserveOnlyWhenAlone(t *testing.T) {
	r := newRouter(t)
	if on, k, wait := r.Reserve(10); k != 0 || wait || on.Node != "" {
		t.Errorf("before the registry was read: Reserve = %+v, %d, wait %v; want nothing reserved, no wait", on, k, wait)
	}
	r.SetNodes([]store.NodeInfo{{Name: "here", Advertise: "http://127.0.0.1:1"}, {Name: "quiet"}}) // "quiet" takes no dispatches
	on, k, wait := r.Reserve(10)
	if k != 4 || wait || on.Node != "here" || len(on.Handlers) != 1 || on.Handlers[0] != "job" {
		t.Errorf("alone: Reserve = %+v, %d, wait %v; want the 4 free slots on here, for job", on, k, wait)
	}
	r.Launch(nil, k, time.Time{}) // give the room back
	r.SetNodes([]store.NodeInfo{{Name: "here"}, {Name: "other", Advertise: "http://127.0.0.1:2", Handlers: []string{"job"}}})
	if on, k, wait := r.Reserve(10); k != 0 || wait || on.Node != "" {
		t.Errorf("with another executor: Reserve = %+v, %d, wait %v; want nothing reserved, no wait", on, k, wait)
	}
}
