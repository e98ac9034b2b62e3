package storetest

import (
	"errors"
	"slices"
	"time"

	"github.com/axsched/ax/store"
)

// The Namespace group checks [store.Store.InNamespace]: two views of one database never see,
// claim, count or fire each other's rows, and the business key is unique per namespace.
// The Nodes group checks [store.NodeRegistry].

var namespaceTests = []test{
	{"SameKeyInTwo", testNamespaceSameKey},
	{"ReadsAndWrites", testNamespaceReadsAndWrites},
	{"RefillClaimStale", testNamespaceRefillClaimStale},
	{"Stats", testNamespaceStats},
	{"Schedules", testNamespaceSchedules},
	{"Default", testNamespaceDefault},
	{"Invalid", testNamespaceInvalid},
	{"CloseShared", testNamespaceCloseShared},
}

// view returns the store's view of namespace ns.
func (e *env) view(ns string) *env {
	e.t.Helper()
	v, err := e.s.InNamespace(ns)
	if err != nil {
		e.t.Fatalf("InNamespace(%q) error: %v", ns, err)
	}
	return &env{t: e.t, s: v, ctx: e.ctx, n: e.n}
}

func testNamespaceSameKey(e *env) {
	a, b := e.view("a"), e.view("b")
	nt := e.newTask(e.future())
	ta, tb := a.insert(nt)[0], b.insert(nt)[0]
	if ta.ID == tb.ID {
		e.t.Fatalf("one (name, key) in two namespaces got one id %d", ta.ID)
	}
	res, err := a.s.Insert(e.ctx, []store.NewTask{nt})
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, store.ErrDuplicate) || res[0].Task.ID != ta.ID {
		e.t.Fatalf("Insert of a's key again in a = %+v, %v; want ErrDuplicate with task %d", res, err, ta.ID)
	}
	for _, c := range []struct {
		v    *env
		want int64
	}{{a, ta.ID}, {b, tb.ID}} {
		got, err := c.v.s.Lookup(e.ctx, nt.Name, nt.Key)
		if err != nil || got.ID != c.want {
			e.t.Fatalf("Lookup in a view = %+v, %v; want task %d", got, err, c.want)
		}
	}
}

func testNamespaceReadsAndWrites(e *env) {
	a, b := e.view("a"), e.view("b")
	tb := b.insert(e.newTask(e.future()))[0]
	running := b.inState(store.Running)
	if _, err := a.s.Get(e.ctx, tb.ID); !errors.Is(err, store.ErrNotFound) {
		e.t.Errorf("Get of b's task in a: error %v, want ErrNotFound", err)
	}
	if _, err := a.s.Executions(e.ctx, running.ID); !errors.Is(err, store.ErrNotFound) {
		e.t.Errorf("Executions of b's task in a: error %v, want ErrNotFound", err)
	}
	if _, err := a.s.Lookup(e.ctx, tb.Name, tb.Key); !errors.Is(err, store.ErrNotFound) {
		e.t.Errorf("Lookup of b's key in a: error %v, want ErrNotFound", err)
	}
	if _, err := a.s.Cancel(e.ctx, tb.Name, tb.Key, "storetest"); !errors.Is(err, store.ErrNotFound) {
		e.t.Errorf("Cancel of b's key in a: error %v, want ErrNotFound", err)
	}
	if _, err := a.s.Trigger(e.ctx, tb.ID, newExecID()); !errors.Is(err, store.ErrNotFound) {
		e.t.Errorf("Trigger of b's task in a: error %v, want ErrNotFound", err)
	}
	if _, err := a.s.Reschedule(e.ctx, tb.Name, tb.Key, e.past()); !errors.Is(err, store.ErrNotFound) {
		e.t.Errorf("Reschedule of b's key in a: error %v, want ErrNotFound", err)
	}
	failed := b.inState(store.Failed)
	if _, err := a.s.Retry(e.ctx, failed.ID); !errors.Is(err, store.ErrNotFound) {
		e.t.Errorf("Retry of b's task in a: error %v, want ErrNotFound", err)
	}
	if got, err := a.s.Tasks(e.ctx, store.TaskQuery{Limit: store.MaxQueryLimit}); err != nil || len(got) != 0 {
		e.t.Errorf("Tasks in a = %d tasks, %v; want none of b's", len(got), err)
	}
	if counts, err := a.s.CountTasks(e.ctx, 100); err != nil || counts[store.Scheduled]+counts[store.Running]+counts[store.Failed] != 0 {
		e.t.Errorf("CountTasks in a = %v, %v; want none of b's", counts, err)
	}
	b.unchanged("a's calls on b's task", tb)
	b.unchanged("a's calls on b's failed task", failed)
}

func testNamespaceRefillClaimStale(e *env) {
	a, b := e.view("a"), e.view("b")
	ta := a.scheduled(e.past())
	tb := b.scheduled(e.past())
	r := a.refill(store.RefillParams{AfterSeq: 0, To: e.future(), Limit: 100})
	for _, set := range [][]store.Due{r.Changed, r.Entered} {
		for _, d := range set {
			if d.ID == tb.ID {
				e.t.Fatalf("Refill in a returned b's task %d", tb.ID)
			}
		}
	}
	if !slices.ContainsFunc(r.Entered, func(d store.Due) bool { return d.ID == ta.ID }) {
		e.t.Fatalf("Refill in a = %+v, want a's task %d entered", r, ta.ID)
	}
	res, err := a.s.Claim(e.ctx, store.Fence{}, []store.Claim{{ID: ta.ID, ExecutionID: newExecID()}, {ID: tb.ID, ExecutionID: newExecID()}})
	if err != nil || len(res.Claimed) != 1 || res.Claimed[0].ID != ta.ID {
		e.t.Fatalf("Claim in a of a's and b's tasks = %+v, %v; want a's only", res, err)
	}
	b.unchanged("a's claim", tb)
	stale, err := b.s.Stale(e.ctx, store.Dispatching, e.future(), 10)
	if err != nil || len(stale) != 0 {
		e.t.Fatalf("Stale(DISPATCHING) in b = %+v, %v; want none (a's claim is a's)", stale, err)
	}
	stale, err = a.s.Stale(e.ctx, store.Dispatching, e.future(), 10)
	if err != nil || len(stale) != 1 || stale[0].ID != ta.ID {
		e.t.Fatalf("Stale(DISPATCHING) in a = %+v, %v; want a's claimed task", stale, err)
	}
}

func testNamespaceStats(e *env) {
	a, b := e.view("a"), e.view("b")
	a.scheduled(e.past())
	a.scheduled(e.future())
	b.inState(store.Succeeded)
	sa, sb := a.taskStats(e.now()), b.taskStats(e.now())
	if sa.Counts[store.Scheduled] != 2 || sa.Counts[store.Succeeded] != 0 || sa.OldestDue.IsZero() {
		e.t.Errorf("TaskStats in a = %+v, want 2 SCHEDULED (one due), none SUCCEEDED", sa)
	}
	if sb.Counts[store.Scheduled] != 0 || sb.Counts[store.Succeeded] != 1 || !sb.OldestDue.IsZero() {
		e.t.Errorf("TaskStats in b = %+v, want 1 SUCCEEDED and nothing due", sb)
	}
}

func testNamespaceSchedules(e *env) {
	a, b := e.view("a"), e.view("b")
	next := e.now().Add(time.Minute).Truncate(time.Second)
	a.register(def("report", next))
	b.register(def("report", next.Add(time.Hour)), def("cleanup", next))
	if all, err := a.s.Schedules(e.ctx); err != nil || len(all) != 1 || !all[0].NextFireAt.Equal(next) {
		e.t.Fatalf("Schedules in a = %+v, %v; want a's report only", all, err)
	}
	res := a.fire(store.FireParams{Name: "report", Expect: next, Next: next.Add(2 * time.Second),
		Tasks: []store.NewTask{occurrence("report", next)}})
	if !res.Applied {
		e.t.Fatalf("FireSchedule of a's report in a = %+v, want applied", res)
	}
	if got := b.schedule("report"); !got.NextFireAt.Equal(next.Add(time.Hour)) {
		e.t.Fatalf("b's report after a fired its own: NextFireAt %v, want unchanged", got.NextFireAt)
	}
	if res := b.fire(store.FireParams{Name: "cleanup", Expect: next, Next: next.Add(time.Second)}); !res.Applied {
		e.t.Fatalf("FireSchedule of b's cleanup = %+v, want applied", res)
	}
	if res := a.fire(store.FireParams{Name: "cleanup", Expect: next.Add(time.Second), Next: next.Add(2 * time.Second)}); res.Applied {
		e.t.Fatal("FireSchedule in a of b's cleanup applied")
	}
	if _, err := a.s.PauseSchedule(e.ctx, "cleanup"); !errors.Is(err, store.ErrNotFound) {
		e.t.Errorf("PauseSchedule in a of b's cleanup: error %v, want ErrNotFound", err)
	}
	if _, err := a.s.DeleteSchedule(e.ctx, "cleanup"); !errors.Is(err, store.ErrNotFound) {
		e.t.Errorf("DeleteSchedule in a of b's cleanup: error %v, want ErrNotFound", err)
	}
	if _, err := b.s.Lookup(e.ctx, "report", occurrence("report", next).Key); !errors.Is(err, store.ErrNotFound) {
		e.t.Errorf("b sees a's occurrence: error %v, want ErrNotFound", err)
	}
}

func testNamespaceDefault(e *env) {
	t := e.scheduled(e.future())
	d := e.view(store.DefaultNamespace)
	if got := d.get(t.ID); got.Key != t.Key {
		e.t.Fatalf("the default view's Get = %+v, want the store's own task", got)
	}
	a := e.view("a")
	ta := a.scheduled(e.future())
	if _, err := e.s.Get(e.ctx, ta.ID); !errors.Is(err, store.ErrNotFound) {
		e.t.Fatalf("the store as opened sees a's task: error %v, want ErrNotFound", err)
	}
}

func testNamespaceInvalid(e *env) {
	for _, ns := range []string{"", "a b", "tab\tns", string(make([]byte, store.MaxNamespace+1))} {
		if _, err := e.s.InNamespace(ns); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("InNamespace(%q) error %v, want ErrInvalid", ns, err)
		}
	}
}

func testNamespaceCloseShared(e *env) {
	a := e.view("a")
	if err := a.s.Close(); err != nil {
		e.t.Fatalf("Close of a view: %v", err)
	}
	if _, err := e.s.Now(e.ctx); !errors.Is(err, store.ErrClosed) {
		e.t.Fatalf("the store after its view's Close: error %v, want ErrClosed", err)
	}
}

func (e *env) listNodes(r store.NodeRegistry, within time.Duration) []store.NodeInfo {
	e.t.Helper()
	ns, err := r.Nodes(e.ctx, within)
	if err != nil {
		e.t.Fatalf("Nodes(%v) error: %v", within, err)
	}
	for _, n := range ns {
		if n.HeartbeatAt.Location() != time.UTC || n.StartedAt.Location() != time.UTC {
			e.t.Errorf("Nodes: %q has times not in UTC: %v, %v", n.Name, n.StartedAt, n.HeartbeatAt)
		}
	}
	return ns
}
