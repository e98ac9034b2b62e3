package tracing_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/axsched/ax"
	"github.com/axsched/ax/elect/sqllease"
	"github.com/axsched/ax/store/sqlite"
	"github.com/axsched/ax/tracing"
)

// openShared opens the SQLite file at path as a replica of its own would: its own
// store on the shared file, closed when the test ends.
func openShared(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// replica returns a scheduler on st with test-friendly timings, modified by mod,
// stopped when the test ends once started.
func replica(t *testing.T, st ax.Store, mod func(*ax.Config)) *ax.Scheduler {
	t.Helper()
	cfg := ax.Config{Store: st, Logger: slog.New(slog.DiscardHandler), RefillInterval: 50 * time.Millisecond,
		HeartbeatInterval: 200 * time.Millisecond, OrphanAfter: 5 * time.Second}
	mod(&cfg)
	s, err := ax.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// start starts s under ctx and stops it when the test ends.
func start(t *testing.T, ctx context.Context, s *ax.Scheduler) {
	t.Helper()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// named returns the exported spans named name, by their attempt.
func named(exp *tracetest.InMemoryExporter, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b tracetest.SpanStub) int {
		return int(attrs(a)[tracing.AttrAttempt].AsInt64() - attrs(b)[tracing.AttrAttempt].AsInt64())
	})
	return out
}

// childOf reports whether s is a child of parent, in its trace, without links.
func childOf(s tracetest.SpanStub, parent trace.SpanContext) bool {
	return s.Parent.SpanID() == parent.SpanID() && s.SpanContext.TraceID() == parent.TraceID() && len(s.Links) == 0
}

// linkedTo reports whether s starts a trace of its own, linked to span alone (read
// back from the store, the link's span context is remote: only the ids compare).
func linkedTo(s tracetest.SpanStub, span trace.SpanContext) bool {
	return !s.Parent.IsValid() && s.SpanContext.TraceID() != span.TraceID() && len(s.Links) == 1 &&
		s.Links[0].SpanContext.TraceID() == span.TraceID() && s.Links[0].SpanContext.SpanID() == span.SpanID()
}

// Two replicas share one SQLite file, each through a store of its own: the submitter
// schedules nothing and has no handler, the runner runs everything. The trace of the
// submitting request reaches the runner through the store: the first attempt is the
// request's child, with an error status; the retry is a trace of its own linked to
// the request; a schedule's occurrence links to the runner's deploy span. No span
// carries the payload or the key. A scheduler without a Tracer stores no trace.
func TestTwoReplicasTraceSubmitToRun(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ax.db")
	stSubmit, stRun := openShared(t, path), openShared(t, path)
	tpSubmit, expSubmit := provider(t)
	tpRun, expRun := provider(t)
	no := false
	submitter := replica(t, stSubmit, func(c *ax.Config) {
		c.Node, c.CanLead, c.Tracer = "submitter", &no, tracing.New(tracing.WithTracerProvider(tpSubmit))
	})
	runner := replica(t, stRun, func(c *ax.Config) {
		c.Node, c.Tracer = "runner", tracing.New(tracing.WithTracerProvider(tpRun))
	})
	runner.HandleFunc("order.close", func(ctx context.Context, task *ax.Task) error {
		if !trace.SpanContextFromContext(ctx).IsValid() {
			return fmt.Errorf("the handler's context carries no span")
		}
		if task.Attempt == 0 {
			return fmt.Errorf("payment pending")
		}
		return nil
	}, ax.WithBackoff(func(int) time.Duration { return 10 * time.Millisecond }))
	runner.HandleFunc("tick", func(context.Context, *ax.Task) error { return nil })
	if err := runner.Every("tick", time.Second); err != nil {
		t.Fatal(err)
	}
	deployCtx, deploy := tpRun.Tracer("ops").Start(context.Background(), "deploy")
	start(t, deployCtx, runner)
	deploy.End()
	start(t, context.Background(), submitter)

	ctx, checkout := tpSubmit.Tracer("shop").Start(context.Background(), "checkout")
	task, err := submitter.Delay(ctx, "order.close", "order-42", 0, ax.WithPayload([]byte("card=4111")))
	if err != nil {
		t.Fatal(err)
	}
	untraced := replica(t, stSubmit, func(c *ax.Config) { c.Node, c.CanLead = "plain", &no })
	plain, err := untraced.Delay(ctx, "order.remind", "order-42", time.Hour)
	checkout.End()
	if err != nil {
		t.Fatal(err)
	}

	sc := checkout.SpanContext()
	if stored, err := stRun.Get(context.Background(), task.ID); err != nil ||
		stored.Trace != fmt.Sprintf("traceparent=00-%s-%s-01", sc.TraceID(), sc.SpanID()) {
		t.Errorf("the runner reads the task's Trace as %+v, %v; want the checkout span's traceparent", stored, err)
	}
	if stored, err := stRun.Get(context.Background(), plain.ID); err != nil || stored.Trace != "" {
		t.Errorf("a task submitted without a Tracer: %+v, %v; want no Trace", stored, err)
	}

	waitFor(t, 20*time.Second, "both attempts and a slot to be traced", func() bool {
		return len(named(expRun, "ax.run order.close")) == 2 && len(named(expRun, "ax.run tick")) > 0
	})
	execs, err := runner.Executions(context.Background(), task.ID)
	if err != nil || len(execs) != 2 || execs[0].Node != "runner" {
		t.Fatalf("Executions = %+v, %v; want two, on the runner", execs, err)
	}
	runs := named(expRun, "ax.run order.close")
	first, retry := runs[0], runs[1]
	if !childOf(first, sc) {
		t.Errorf("first attempt: parent %v, trace %v, links %v; want a child of checkout %v", first.Parent, first.SpanContext.TraceID(), first.Links, sc)
	}
	if first.Status.Code != codes.Error || first.Status.Description != "payment pending" {
		t.Errorf("first attempt: status %+v, want Error %q", first.Status, "payment pending")
	}
	if !linkedTo(retry, sc) {
		t.Errorf("retry: parent %v, trace %v, links %+v; want a trace of its own linked to checkout %v", retry.Parent, retry.SpanContext.TraceID(), retry.Links, sc)
	}
	if retry.Status.Code != codes.Unset {
		t.Errorf("retry: status %+v, want unset: it succeeded", retry.Status)
	}
	for i, s := range runs {
		a := attrs(s)
		if a[tracing.AttrExecution].AsString() != execs[i].ID || a[tracing.AttrTaskID].AsInt64() != task.ID ||
			a[tracing.AttrAttempt].AsInt64() != int64(i) || a[tracing.AttrOccurrence].AsBool() {
			t.Errorf("attempt %d: attributes %v; want execution %s of task %d", i, s.Attributes, execs[i].ID, task.ID)
		}
		for _, kv := range s.Attributes {
			if v := kv.Value.Emit(); strings.Contains(v, "4111") || strings.Contains(v, "order-42") {
				t.Errorf("attempt %d: attribute %s = %q shows the payload or the key", i, kv.Key, v)
			}
		}
	}
	for _, tick := range named(expRun, "ax.run tick") {
		if !linkedTo(tick, deploy.SpanContext()) || !attrs(tick)[tracing.AttrOccurrence].AsBool() {
			t.Errorf("a slot's run: parent %v, links %+v, attributes %v; want an occurrence linked to deploy %v",
				tick.Parent, tick.Links, tick.Attributes, deploy.SpanContext())
		}
	}
	for _, s := range expSubmit.GetSpans() {
		if s.Name != "checkout" {
			t.Errorf("the submitter exported span %q; it runs nothing", s.Name)
		}
	}
}

// The elected leader hands a task to another replica's executor over the executor
// protocol (signed HTTP): that replica makes the span of the run, a child of the
// submitting span, from the trace context it reads with the task from the store.
func TestRemoteExecutorTracesTheRun(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ax.db")
	secret := make([]byte, 32)
	rand.Read(secret)
	tpLeader, _ := provider(t)
	tpExec, expExec := provider(t)
	var scheds [2]*ax.Scheduler
	for i, tp := range []trace.TracerProvider{tpLeader, tpExec} {
		st := openShared(t, path)
		el, err := sqllease.New(st, sqllease.WithTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		// The endpoint is served before the scheduler exists: through an indirection.
		var mu sync.Mutex
		var s *ax.Scheduler
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			cur := s
			mu.Unlock()
			if cur == nil {
				http.Error(w, "starting", http.StatusServiceUnavailable)
				return
			}
			cur.ExecutorHandler().ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		sc := replica(t, st, func(c *ax.Config) {
			c.Node, c.Elector, c.Tracer = fmt.Sprintf("node-%d", i), el, tracing.New(tracing.WithTracerProvider(tp))
			c.Cluster = ax.ClusterConfig{Advertise: srv.URL, Secret: secret}
			if i > 0 {
				no := false
				c.CanLead = &no // node-0 leads, and has no handler: node-1 runs the task
			}
		})
		mu.Lock()
		s = sc
		mu.Unlock()
		if i > 0 {
			sc.HandleFunc("remote.job", func(context.Context, *ax.Task) error { return nil })
		}
		start(t, context.Background(), sc)
		scheds[i] = sc
	}
	leader := scheds[0]
	waitFor(t, 10*time.Second, "a leader with both replicas registered", func() bool {
		cs, err := leader.Cluster(context.Background())
		return err == nil && cs.IsLeader && len(cs.Nodes) == 2
	})

	ctx, request := tpLeader.Tracer("shop").Start(context.Background(), "request")
	task, err := leader.Delay(ctx, "remote.job", "1", 0)
	request.End()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the executor's span of the run", func() bool { return len(named(expExec, "ax.run remote.job")) == 1 })
	execs, err := leader.Executions(context.Background(), task.ID)
	if err != nil || len(execs) != 1 || execs[0].Node != "node-1" {
		t.Fatalf("Executions = %+v, %v; want one, on node-1", execs, err)
	}
	if s := named(expExec, "ax.run remote.job")[0]; !childOf(s, request.SpanContext()) {
		t.Errorf("the remote run: parent %v, trace %v, links %v; want a child of the request %v",
			s.Parent, s.SpanContext.TraceID(), s.Links, request.SpanContext())
	}
}
