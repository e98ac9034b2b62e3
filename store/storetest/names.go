package storetest

import (
	"errors"
	"slices"
	"strings"

	"github.com/axsched/ax/store"
)

var nameTests = []test{
	{"PauseHoldsClaims", testNamePauseHoldsClaims},
	{"ResumeRestamps", testNameResumeRestamps},
	{"States", testNameStates},
	{"PerNamespace", testNamePerNamespace},
	{"Invalid", testNameInvalid},
}

// nameTask inserts a SCHEDULED task named name, due at due.
func (e *env) nameTask(name string, nt store.NewTask) *store.Task {
	e.t.Helper()
	nt.Name = name
	return e.insert(nt)[0]
}

// A paused name's due tasks, keyed ones too, are left SCHEDULED and reported Paused
// by Claim and ClaimStart; other names are claimed as before; a task not yet due is
// NotDue whatever its name; Trigger is not held back.
func testNamePauseHoldsClaims(e *env) {
	held := e.nameTask("report", e.newTask(e.past()))
	heldKeyed := e.nameTask("report", e.keyed(e.past(), "k", store.OverlapQueue))
	later := e.nameTask("report", e.newTask(e.future()))
	free := e.nameTask("mail", e.newTask(e.past()))
	if st, err := e.s.PauseName(e.ctx, "report", "alice"); err != nil || !st.Paused || st.Name != "report" || st.ChangedBy != "alice" {
		e.t.Fatalf("PauseName = %+v, %v; want report paused by alice", st, err)
	}
	res := e.claimAll(held.ID, heldKeyed.ID, later.ID, free.ID)
	if d := diff([]store.Due{{ID: held.ID, DueAt: held.DueAt}, {ID: heldKeyed.ID, DueAt: heldKeyed.DueAt}}, res.Paused); d != "" {
		e.t.Errorf("Claim of a paused name's tasks: Paused mismatch (-want +got):\n%s", d)
	}
	if len(res.Claimed) != 1 || res.Claimed[0].ID != free.ID || len(res.NotDue) != 1 || res.NotDue[0].ID != later.ID ||
		len(res.Blocked)+len(res.Skipped)+len(res.Started) != 0 {
		e.t.Errorf("Claim = %+v, want only %d claimed and %d not due besides the paused", res, free.ID, later.ID)
	}
	e.unchanged("a paused name's claim", held)
	e.unchanged("a paused name's claim", heldKeyed)
	other := e.nameTask("report", e.newTask(e.past()))
	started, err := e.s.ClaimStart(e.ctx, store.Fence{}, store.StartOn{Node: "node-1", Handlers: []string{"report"}},
		[]store.Claim{{ID: other.ID, ExecutionID: newExecID(), Start: true}})
	if err != nil || len(started.Paused) != 1 || started.Paused[0].ID != other.ID || len(started.Started) != 0 {
		e.t.Errorf("ClaimStart of a paused name's task = %+v, %v; want it Paused", started, err)
	}
	e.unchanged("a paused name's ClaimStart", other)
	if got, err := e.s.Trigger(e.ctx, held.ID, newExecID()); err != nil || got.Status != store.Dispatching {
		e.t.Errorf("Trigger of a paused name's task = %+v, %v; want it DISPATCHING: an operator's own act", got, err)
	}
}

// Resuming a name lets its tasks be claimed, and gives each SCHEDULED one a fresh
// sequence number: the refill's change cursor finds those it left behind.
func testNameResumeRestamps(e *env) {
	a := e.nameTask("report", e.newTask(e.past()))
	b := e.nameTask("report", e.newTask(e.past()))
	e.nameTask("mail", e.newTask(e.past())) // another name: not restamped
	if _, err := e.s.PauseName(e.ctx, "report", "alice"); err != nil {
		e.t.Fatal(err)
	}
	if res := e.claimAll(a.ID, b.ID); len(res.Paused) != 2 {
		e.t.Fatalf("Claim while paused = %+v, want both Paused", res)
	}
	cur := e.cursor()
	st, err := e.s.ResumeName(e.ctx, "report", "bob")
	if err != nil || st.Paused || st.ChangedBy != "bob" || st.ChangedAt.IsZero() {
		e.t.Fatalf("ResumeName = %+v, %v; want resumed by bob", st, err)
	}
	changed := e.changed(cur, e.future(), 10)
	var ids []int64
	for _, d := range changed.Changed {
		ids = append(ids, d.ID)
	}
	slices.Sort(ids)
	if d := diff([]int64{a.ID, b.ID}, ids); d != "" {
		e.t.Errorf("Refill after ResumeName: changed mismatch (-want +got):\n%s", d)
	}
	if res := e.claimAll(a.ID, b.ID); len(res.Claimed) != 2 {
		e.t.Errorf("Claim after ResumeName = %+v, want both claimed", res)
	}
	cur = e.cursor()
	if st, err := e.s.ResumeName(e.ctx, "report", "carol"); err != nil || st.ChangedBy != "bob" {
		e.t.Errorf("a second ResumeName = %+v, %v; want it unchanged (resumed by bob)", st, err)
	}
	if res := e.changed(cur, e.future(), 10); len(res.Changed) != 0 {
		e.t.Errorf("a second ResumeName restamped %v", res.Changed)
	}
	if st, err := e.s.ResumeName(e.ctx, "never-paused", "bob"); err != nil || st.Paused || st.Name != "never-paused" || !st.ChangedAt.IsZero() {
		e.t.Errorf("ResumeName of a name never paused = %+v, %v; want its zero state", st, err)
	}
}

// Names lists the names ever paused, by name; pausing twice keeps the first pause.
func testNameStates(e *env) {
	if got, err := e.s.Names(e.ctx); err != nil || len(got) != 0 {
		e.t.Fatalf("Names of a new store = %+v, %v; want none", got, err)
	}
	lo := e.now()
	first, err := e.s.PauseName(e.ctx, "report", "alice")
	hi := e.now()
	if err != nil {
		e.t.Fatal(err)
	}
	e.stamped("PauseName: ChangedAt", first.ChangedAt, lo, hi)
	if again, err := e.s.PauseName(e.ctx, "report", "bob"); err != nil || diff(first, again) != "" {
		e.t.Errorf("a second PauseName = %+v, %v; want the first pause %+v", again, err, first)
	}
	if _, err := e.s.PauseName(e.ctx, "billing", "alice"); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.s.ResumeName(e.ctx, "billing", "bob"); err != nil {
		e.t.Fatal(err)
	}
	got, err := e.s.Names(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var summary []string
	for _, st := range got {
		summary = append(summary, st.Name+":"+map[bool]string{true: "paused", false: "running"}[st.Paused]+":"+st.ChangedBy)
	}
	if want := "billing:running:bob report:paused:alice"; strings.Join(summary, " ") != want {
		e.t.Errorf("Names = %v, want %s", summary, want)
	}
}

// A pause holds only its own namespace's tasks.
func testNamePerNamespace(e *env) {
	a, b := e.view("a"), e.view("b")
	ta := a.nameTask("report", a.newTask(a.past()))
	tb := b.nameTask("report", b.newTask(b.past()))
	if _, err := a.s.PauseName(e.ctx, "report", "alice"); err != nil {
		e.t.Fatal(err)
	}
	if res := a.claimAll(ta.ID); len(res.Paused) != 1 {
		e.t.Errorf("Claim in the paused namespace = %+v, want Paused", res)
	}
	if res := b.claimAll(tb.ID); len(res.Claimed) != 1 {
		e.t.Errorf("Claim in another namespace = %+v, want claimed", res)
	}
	if got, err := b.s.Names(e.ctx); err != nil || len(got) != 0 {
		e.t.Errorf("Names of another namespace = %+v, %v; want none", got, err)
	}
}

func testNameInvalid(e *env) {
	for _, c := range [][2]string{{"", "alice"}, {"report", ""}, {"a\x00b", "alice"}, {"report", "\xff"},
		{strings.Repeat("n", store.MaxNameLen+1), "alice"}, {"report", strings.Repeat("b", store.MaxCancelledBy+1)}} {
		if _, err := e.s.PauseName(e.ctx, c[0], c[1]); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("PauseName(%q, %q) error = %v, want ErrInvalid", c[0], c[1], err)
		}
		if _, err := e.s.ResumeName(e.ctx, c[0], c[1]); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("ResumeName(%q, %q) error = %v, want ErrInvalid", c[0], c[1], err)
		}
	}
	if got, err := e.s.Names(e.ctx); err != nil || len(got) != 0 {
		e.t.Errorf("Names after invalid calls = %+v, %v; want none", got, err)
	}
}
