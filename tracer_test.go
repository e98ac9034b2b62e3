package ax_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store/memory"
)

// callKey marks a context with the name of the call it belongs to.
type callKey struct{}

// spanKey marks the context a fakeTracer's Start returned.
type spanKey struct{}

// fakeTracer stores "trace:<call>" for a context of a call, nothing for another, and
// records each execution it is told of.
type fakeTracer struct {
	mu   sync.Mutex
	runs []fakeRun
}

type fakeRun struct {
	info  ax.RunInfo
	ended bool
	err   error
}

func (f *fakeTracer) Inject(ctx context.Context) string {
	call, _ := ctx.Value(callKey{}).(string)
	if call == "" {
		return ""
	}
	return "trace:" + call
}

func (f *fakeTracer) Start(ctx context.Context, run ax.RunInfo) (context.Context, func(error)) {
	f.mu.Lock()
	f.runs = append(f.runs, fakeRun{info: run})
	i := len(f.runs) - 1
	f.mu.Unlock()
	return context.WithValue(ctx, spanKey{}, run.ExecutionID), func(err error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.runs[i].ended {
			panic("span ended twice")
		}
		f.runs[i].ended, f.runs[i].err = true, err
	}
}

// ended returns the runs whose span has ended, of task name.
func (f *fakeTracer) ended(name string) []fakeRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeRun
	for _, r := range f.runs {
		if r.ended && r.info.Name == name {
			out = append(out, r)
		}
	}
	return out
}

// callCtx returns the context of a call named name.
func callCtx(name string) context.Context {
	return context.WithValue(context.Background(), callKey{}, name)
}

// The submitting call's trace is stored with the task, and each execution is told it
// with its attempt: the first a first run, the retry not; the span ends once per
// execution with the attempt's error, and the handler's context is the one Start
// returned.
func TestTracerFollowsSubmitToRetry(t *testing.T) {
	t.Parallel()
	st := memory.New()
	defer st.Close()
	tr := &fakeTracer{}
	s := newScheduler(t, st, func(c *ax.Config) { c.Tracer = tr })
	var mu sync.Mutex
	var inSpan []string // the execution ids the handler found in its context
	errFirst := errors.New("first attempt fails")
	s.HandleFunc("traced", func(ctx context.Context, task *ax.Task) error {
		mu.Lock()
		id, _ := ctx.Value(spanKey{}).(string)
		inSpan = append(inSpan, id)
		mu.Unlock()
		if task.Attempt == 0 {
			return errFirst
		}
		return nil
	}, ax.WithBackoff(func(int) time.Duration { return time.Millisecond }))
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	task, err := s.Delay(callCtx("checkout"), "traced", "order-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if task.Trace != "trace:checkout" {
		t.Errorf("Delay(...).Trace = %q, want %q", task.Trace, "trace:checkout")
	}
	waitFor(t, 10*time.Second, "the retry to succeed", func() bool { return mustGet(t, s, task.ID).Status == ax.Succeeded })
	waitFor(t, 10*time.Second, "both spans to end", func() bool { return len(tr.ended("traced")) == 2 })
	execs, err := s.Executions(context.Background(), task.ID)
	if err != nil || len(execs) != 2 {
		t.Fatalf("Executions = %+v, %v; want two", execs, err)
	}
	runs := tr.ended("traced")
	for i, r := range runs {
		want := ax.RunInfo{Trace: "trace:checkout", TaskID: task.ID, Name: "traced", ExecutionID: execs[i].ID, Attempt: i,
			Lateness: execs[i].Lateness()}
		if r.info != want {
			t.Errorf("run %d: RunInfo = %+v, want %+v", i, r.info, want)
		}
		if r.info.FirstRun() != (i == 0) {
			t.Errorf("run %d: FirstRun = %v, want %v", i, r.info.FirstRun(), i == 0)
		}
	}
	if !errors.Is(runs[0].err, errFirst) || runs[1].err != nil {
		t.Errorf("spans ended with %v and %v; want the first attempt's error, then nil", runs[0].err, runs[1].err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(inSpan, []string{execs[0].ID, execs[1].ID}) {
		t.Errorf("the handler's contexts were Start's of %v, want %v", inSpan, []string{execs[0].ID, execs[1].ID})
	}
}

// SubmitMany stores its call's trace with every task; a task submitted under a
// context without one stores none; a text a Tracer should not return is dropped, and
// the task submitted without it.
func TestTracerTraceStoredPerCall(t *testing.T) {
	t.Parallel()
	st := memory.New()
	defer st.Close()
	s := newScheduler(t, st, func(c *ax.Config) { c.Tracer = &fakeTracer{} })
	due := time.Now().Add(time.Hour)
	many, err := s.SubmitMany(callCtx("import"), []ax.TaskSpec{{Name: "a", Key: "1", DueAt: due}, {Name: "a", Key: "2", DueAt: due}})
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range many {
		if got := mustGet(t, s, task.ID).Trace; got != "trace:import" {
			t.Errorf("SubmitMany: task %s has Trace %q, want %q", task.Key, got, "trace:import")
		}
	}
	plain, err := s.At(context.Background(), "a", "3", due)
	if err != nil || plain.Trace != "" {
		t.Errorf("At under a context without a trace = %+v, %v; want no Trace", plain, err)
	}
	for name, bad := range map[string]string{
		"too long":   strings.Repeat("x", ax.MaxTraceLen-len("trace:")+1),
		"with a NUL": "nul\x00",
		"not UTF-8":  "\xff",
	} {
		task, err := s.At(callCtx(bad), "a", name, due)
		if err != nil || task.Trace != "" || mustGet(t, s, task.ID).Trace != "" {
			t.Errorf("At with a Tracer's text %s = %+v, %v; want the task, without a Trace", name, task, err)
		}
	}
}

// A schedule stores the trace of the Start that stored it, and its occurrences carry
// it, as occurrences: the span of each links to the registration. A TriggerSchedule's
// occurrence carries the trace of its own call, and is a first run.
func TestTracerScheduleOccurrences(t *testing.T) {
	t.Parallel()
	st := memory.New()
	defer st.Close()
	tr := &fakeTracer{}
	s := newScheduler(t, st, func(c *ax.Config) { c.Tracer = tr })
	s.HandleFunc("tick", func(context.Context, *ax.Task) error { return nil })
	if err := s.Every("tick", time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(callCtx("deploy")); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	manual, err := s.TriggerSchedule(callCtx("operator"), "tick")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the manual run and a slot's", func() bool { return len(tr.ended("tick")) >= 2 })
	var slot, byHand int
	for _, r := range tr.ended("tick") {
		switch {
		case r.info.TaskID == manual.ID:
			byHand++
			if r.info.Trace != "trace:operator" || r.info.Occurrence || !r.info.FirstRun() {
				t.Errorf("TriggerSchedule's run: %+v; want the trigger's trace, not an occurrence, a first run", r.info)
			}
		default:
			slot++
			if r.info.Trace != "trace:deploy" || !r.info.Occurrence || r.info.FirstRun() {
				t.Errorf("a slot's run: %+v; want the registration's trace, an occurrence, not a first run", r.info)
			}
		}
	}
	if slot == 0 || byHand != 1 {
		t.Errorf("%d slot runs and %d manual ones, want some and one", slot, byHand)
	}
}

// Without a Tracer nothing is stored, whatever the context.
func TestNoTracerStoresNoTrace(t *testing.T) {
	t.Parallel()
	st := memory.New()
	defer st.Close()
	s := newScheduler(t, st, nil)
	task, err := s.Delay(callCtx("checkout"), "a", "1", time.Hour)
	if err != nil || task.Trace != "" || mustGet(t, s, task.ID).Trace != "" {
		t.Errorf("Delay without a Tracer = %+v, %v; want no Trace", task, err)
	}
}
