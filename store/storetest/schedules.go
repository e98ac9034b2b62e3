package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/store"
)

var scheduleTests = []test{
	{"RegisterNew", testRegisterNew},
	{"RegisterAgain", testRegisterAgain},
	{"RegisterInvalid", testRegisterInvalid},
	{"Fire", testFire},
	{"FireStale", testFireStale},
	{"FireDuplicateOccurrence", testFireDuplicateOccurrence},
	{"FireInvalid", testFireInvalid},
	{"PauseResume", testPauseResume},
	{"PauseUnknown", testPauseUnknown},
	{"Delete", testDeleteSchedule},
	{"DeleteUnknown", testDeleteUnknown},
	{"FireRace", testFireRace},
	{"DeleteRace", testDeleteRace},
}

// def returns a valid schedule definition starting at next.
func def(name string, next time.Time) store.ScheduleDef {
	return store.ScheduleDef{
		Name:       name,
		Spec:       "*/2 * * * * *",
		TimeZone:   "UTC",
		Overlap:    store.OverlapSkip,
		Misfire:    store.MisfireFireOnce,
		Payload:    []byte(`{"report":"daily"}`),
		NextFireAt: next,
	}
}

// register registers defs and fails unless it succeeds.
func (e *env) register(defs ...store.ScheduleDef) []store.Schedule {
	e.t.Helper()
	got, err := e.s.RegisterSchedules(e.ctx, defs)
	if err != nil {
		e.t.Fatalf("RegisterSchedules error: %v", err)
	}
	if len(got) != len(defs) {
		e.t.Fatalf("RegisterSchedules(%d) returned %d schedules", len(defs), len(got))
	}
	for i := range got {
		checkSchedule(e, "RegisterSchedules", &got[i])
	}
	return got
}

// schedule returns the stored schedule name.
func (e *env) schedule(name string) store.Schedule {
	e.t.Helper()
	all, err := e.s.Schedules(e.ctx)
	if err != nil {
		e.t.Fatalf("Schedules error: %v", err)
	}
	for _, s := range all {
		if s.Name == name {
			checkSchedule(e, "Schedules", &s)
			return s
		}
	}
	e.t.Fatalf("Schedules has no %q: %+v", name, all)
	return store.Schedule{}
}

func checkSchedule(e *env, op string, s *store.Schedule) {
	e.t.Helper()
	for name, ts := range map[string]time.Time{"NextFireAt": s.NextFireAt, "LastFireAt": s.LastFireAt,
		"CreatedAt": s.CreatedAt, "UpdatedAt": s.UpdatedAt} {
		if ts.Location() != time.UTC {
			e.t.Errorf("%s: schedule %q: %s = %v, want UTC", op, s.Name, name, ts)
		}
	}
}

// occurrence is an occurrence task of schedule name at slot.
func occurrence(name string, slot time.Time) store.NewTask {
	return store.NewTask{Name: name, Key: slot.UTC().Format(time.RFC3339Nano), DueAt: slot,
		TaskKey: name, Overlap: store.OverlapSkip, MaxRetry: 1}
}

// fire calls FireSchedule and fails on error.
func (e *env) fire(p store.FireParams) *store.FireResult {
	e.t.Helper()
	res, err := e.s.FireSchedule(e.ctx, p)
	if err != nil {
		e.t.Fatalf("FireSchedule(%q, expect %v) error: %v", p.Name, p.Expect, err)
	}
	return res
}

func testRegisterNew(e *env) {
	next := e.now().Add(time.Minute).Truncate(time.Second)
	traced := def("report", next)
	traced.Trace = longTrace(1)
	lo := e.now()
	got := e.register(traced, def("cleanup", next.Add(time.Hour)))
	hi := e.now()
	want := store.Schedule{Name: "report", Spec: "*/2 * * * * *", TimeZone: "UTC", Overlap: store.OverlapSkip,
		Misfire: store.MisfireFireOnce, Payload: []byte(`{"report":"daily"}`), NextFireAt: next, Trace: traced.Trace,
		CreatedAt: got[0].CreatedAt, UpdatedAt: got[0].UpdatedAt}
	if d := diff(want, got[0]); d != "" {
		e.t.Errorf("RegisterSchedules: new schedule differs (-want +got):\n%s", d)
	}
	e.stamped("CreatedAt", got[0].CreatedAt, lo, hi)
	all, err := e.s.Schedules(e.ctx)
	if err != nil {
		e.t.Fatalf("Schedules error: %v", err)
	}
	if len(all) != 2 || all[0].Name != "cleanup" || all[1].Name != "report" {
		e.t.Fatalf("Schedules = %+v, want cleanup and report, by name", all)
	}
	if d := diff(got[0], all[1]); d != "" {
		e.t.Errorf("Schedules differs from RegisterSchedules (-register +list):\n%s", d)
	}
	if all[0].Trace != "" || got[1].Trace != "" {
		e.t.Errorf("a schedule registered without a trace reads Trace %q (list) and %q (register), want empty", all[0].Trace, got[1].Trace)
	}
}

func testRegisterAgain(e *env) {
	next := e.now().Add(time.Minute).Truncate(time.Second)
	d := def("report", next)
	d.Trace = traceparent(1)
	first := e.register(d)[0]
	fired := e.fire(store.FireParams{Name: "report", Expect: next, Next: next.Add(2 * time.Second), Last: next,
		Tasks: []store.NewTask{occurrence("report", next)}})
	if !fired.Applied {
		e.t.Fatalf("FireSchedule = %+v, want applied", fired)
	}
	if _, err := e.s.PauseSchedule(e.ctx, "report"); err != nil {
		e.t.Fatalf("PauseSchedule error: %v", err)
	}

	// Same timing, new policies, payload and trace: progress and pause are kept.
	d = def("report", next.Add(time.Hour))
	d.Overlap, d.Misfire, d.Payload, d.Trace = store.OverlapQueue, store.MisfireCatchUp, []byte("v2"), traceparent(2)
	again := e.register(d)[0]
	want := first
	want.Overlap, want.Misfire, want.Payload, want.Trace = store.OverlapQueue, store.MisfireCatchUp, []byte("v2"), traceparent(2)
	want.NextFireAt, want.LastFireAt, want.Paused = next.Add(2*time.Second), next, true
	want.UpdatedAt = again.UpdatedAt
	if diff := diff(want, again); diff != "" {
		e.t.Errorf("re-registered with the same timing (-want +got):\n%s", diff)
	}

	// A new spec (or time zone) restarts from the given NextFireAt.
	for i, change := range []func(*store.ScheduleDef){
		func(d *store.ScheduleDef) { d.Spec = "@every 5s" },
		func(d *store.ScheduleDef) { d.Spec, d.TimeZone = "@every 5s", "Europe/Berlin" },
	} {
		d := def("report", next.Add(time.Duration(i+1)*time.Hour))
		change(&d)
		got := e.register(d)[0]
		if got.Spec != d.Spec || got.TimeZone != d.TimeZone || !got.NextFireAt.Equal(d.NextFireAt) ||
			!got.LastFireAt.Equal(next) || !got.Paused || got.Trace != "" {
			e.t.Errorf("re-registered with new timing %q %s = %+v; want it, NextFireAt %v, LastFireAt and Paused kept, no trace",
				d.Spec, d.TimeZone, got, d.NextFireAt)
		}
	}
}

func testRegisterInvalid(e *env) {
	next := e.future()
	cases := map[string]func(*store.ScheduleDef){
		"empty name":      func(d *store.ScheduleDef) { d.Name = "" },
		"empty spec":      func(d *store.ScheduleDef) { d.Spec = "" },
		"empty time zone": func(d *store.ScheduleDef) { d.TimeZone = "" },
		"unknown overlap": func(d *store.ScheduleDef) { d.Overlap = "never" },
		"unknown misfire": func(d *store.ScheduleDef) { d.Misfire = "" },
		"zero next":       func(d *store.ScheduleDef) { d.NextFireAt = time.Time{} },
		"long trace":      func(d *store.ScheduleDef) { d.Trace = strings.Repeat("t", store.MaxTraceLen+1) },
		"trace not UTF-8": func(d *store.ScheduleDef) { d.Trace = "traceparent=\xff" },
	}
	for name, spoil := range cases {
		bad := def("bad", next)
		spoil(&bad)
		if _, err := e.s.RegisterSchedules(e.ctx, []store.ScheduleDef{def("good", next), bad}); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("RegisterSchedules(good, %s) error = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := e.s.RegisterSchedules(e.ctx, []store.ScheduleDef{def("twice", next), def("twice", next)}); !errors.Is(err, store.ErrInvalid) {
		e.t.Errorf("RegisterSchedules with a name twice: error = %v, want ErrInvalid", err)
	}
	if all, err := e.s.Schedules(e.ctx); err != nil || len(all) != 0 {
		e.t.Errorf("after invalid registrations, Schedules = %+v, %v; want none", all, err)
	}
}

func testFire(e *env) {
	next := e.now().Add(-5 * time.Second).Truncate(time.Second)
	d := def("report", next)
	d.Trace = traceparent(1)
	e.register(d)
	slots := []time.Time{next, next.Add(2 * time.Second)}
	// The caller gives each occurrence the schedule's trace; the store keeps it.
	tasks := []store.NewTask{occurrence("report", slots[0]), occurrence("report", slots[1])}
	for i := range tasks {
		tasks[i].Trace = e.schedule("report").Trace
	}
	lo := e.now()
	res := e.fire(store.FireParams{Name: "report", Expect: next, Next: next.Add(4 * time.Second), Last: slots[1], Tasks: tasks})
	if !res.Applied || len(res.Inserted) != 2 {
		e.t.Fatalf("FireSchedule = %+v, want applied with 2 occurrences", res)
	}
	for i, in := range res.Inserted {
		if in.Err != nil || in.Task == nil || !in.Task.DueAt.Equal(slots[i]) || in.Task.TaskKey != "report" ||
			in.Task.Status != store.Scheduled || in.Task.Trace != d.Trace {
			e.t.Errorf("occurrence %d = %+v, %v; want SCHEDULED at %v with task key report and trace %q", i, in.Task, in.Err, slots[i], d.Trace)
			continue
		}
		if d := diff(in.Task, e.get(in.Task.ID)); d != "" {
			e.t.Errorf("occurrence %d differs from Get:\n%s", i, d)
		}
	}
	got := e.schedule("report")
	if !got.NextFireAt.Equal(next.Add(4*time.Second)) || !got.LastFireAt.Equal(slots[1]) {
		e.t.Errorf("after FireSchedule: NextFireAt, LastFireAt = %v, %v; want %v, %v", got.NextFireAt, got.LastFireAt,
			next.Add(4*time.Second), slots[1])
	}
	e.stamped("UpdatedAt after FireSchedule", got.UpdatedAt, lo, e.now())
	// The occurrences reach the wheel like any insert.
	r := e.changed(0, e.future(), 10)
	if len(r.Changed) != 2 {
		e.t.Errorf("Refill after FireSchedule: Changed = %v, want the 2 occurrences", r.Changed)
	}

	// Zero Last keeps LastFireAt; no tasks is fine (a misfire skipped).
	res = e.fire(store.FireParams{Name: "report", Expect: next.Add(4 * time.Second), Next: next.Add(time.Minute)})
	if !res.Applied || len(res.Inserted) != 0 {
		e.t.Errorf("FireSchedule without tasks = %+v, want applied", res)
	}
	if got := e.schedule("report"); !got.LastFireAt.Equal(slots[1]) || !got.NextFireAt.Equal(next.Add(time.Minute)) {
		e.t.Errorf("after FireSchedule without Last: %+v; want LastFireAt kept", got)
	}
}

func testFireStale(e *env) {
	next := e.future().Truncate(time.Second)
	e.register(def("report", next))
	for name, p := range map[string]store.FireParams{
		"stale expect":     {Name: "report", Expect: next.Add(-time.Second), Next: next.Add(time.Second)},
		"unknown schedule": {Name: "nope", Expect: next, Next: next.Add(time.Second)},
		// A scheduler planning with the spec it registered before another replaced it.
		"stale spec":      {Name: "report", Expect: next, Next: next.Add(time.Second), Spec: "@every 3s", TimeZone: "UTC"},
		"stale time zone": {Name: "report", Expect: next, Next: next.Add(time.Second), Spec: "*/2 * * * * *", TimeZone: "Europe/Berlin"},
	} {
		p.Tasks = []store.NewTask{occurrence(p.Name, next)}
		res := e.fire(p)
		if res.Applied || len(res.Inserted) != 0 {
			e.t.Errorf("FireSchedule(%s) = %+v, want not applied", name, res)
		}
		if _, err := e.s.Lookup(e.ctx, p.Name, p.Tasks[0].Key); !errors.Is(err, store.ErrNotFound) {
			e.t.Errorf("FireSchedule(%s) not applied, but its occurrence exists: %v", name, err)
		}
	}
	if got := e.schedule("report"); !got.NextFireAt.Equal(next) {
		e.t.Errorf("NextFireAt = %v after stale fires, want %v", got.NextFireAt, next)
	}
	// The stored spec and zone, given, apply.
	if res := e.fire(store.FireParams{Name: "report", Expect: next, Next: next.Add(2 * time.Second), Spec: "*/2 * * * * *", TimeZone: "UTC",
		Tasks: []store.NewTask{occurrence("report", next)}}); !res.Applied {
		e.t.Errorf("FireSchedule with the stored spec and zone = %+v, want applied", res)
	}
}

func testFireDuplicateOccurrence(e *env) {
	next := e.future().Truncate(time.Second)
	e.register(def("report", next))
	existing := e.insert(occurrence("report", next))[0]
	res := e.fire(store.FireParams{Name: "report", Expect: next, Next: next.Add(2 * time.Second), Last: next,
		Tasks: []store.NewTask{occurrence("report", next), occurrence("report", next.Add(time.Second))}})
	if !res.Applied || len(res.Inserted) != 2 {
		e.t.Fatalf("FireSchedule = %+v, want applied", res)
	}
	if !errors.Is(res.Inserted[0].Err, store.ErrDuplicate) || res.Inserted[0].Task == nil || res.Inserted[0].Task.ID != existing.ID {
		e.t.Errorf("occurrence already stored: %+v, want ErrDuplicate with task %d", res.Inserted[0], existing.ID)
	}
	if res.Inserted[1].Err != nil {
		e.t.Errorf("new occurrence: error %v", res.Inserted[1].Err)
	}
	if got := e.schedule("report"); !got.NextFireAt.Equal(next.Add(2 * time.Second)) {
		e.t.Errorf("NextFireAt = %v, want advanced", got.NextFireAt)
	}
}

func testFireInvalid(e *env) {
	next := e.future().Truncate(time.Second)
	e.register(def("report", next))
	bad := occurrence("report", next)
	bad.Key = ""
	for name, p := range map[string]store.FireParams{
		"empty name":   {Expect: next, Next: next.Add(time.Second)},
		"zero expect":  {Name: "report", Next: next.Add(time.Second)},
		"zero next":    {Name: "report", Expect: next},
		"invalid task": {Name: "report", Expect: next, Next: next.Add(time.Second), Tasks: []store.NewTask{bad}},
	} {
		if res, err := e.s.FireSchedule(e.ctx, p); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("FireSchedule(%s) = %+v, %v; want ErrInvalid", name, res, err)
		}
	}
	if got := e.schedule("report"); !got.NextFireAt.Equal(next) {
		e.t.Errorf("NextFireAt = %v after invalid fires, want %v unchanged", got.NextFireAt, next)
	}
}

func testPauseResume(e *env) {
	next := e.future().Truncate(time.Second)
	e.register(def("report", next), def("other", next))
	res := e.fire(store.FireParams{Name: "report", Expect: next, Next: next.Add(4 * time.Second), Last: next.Add(2 * time.Second),
		Tasks: []store.NewTask{occurrence("report", next), occurrence("report", next.Add(2*time.Second))}})
	running := e.holding("report", store.OverlapSkip, store.Running) // an earlier occurrence, running
	oneOff := e.insert(e.newTask(e.future()))[0]                     // another handler's task: untouched
	sameName := e.newTask(e.future())                                // the schedule's handler, no task key: untouched
	sameName.Name = "report"
	plain := e.insert(sameName)[0]

	paused, err := e.s.PauseSchedule(e.ctx, "report")
	if err != nil || paused == nil || !paused.Paused {
		e.t.Fatalf("PauseSchedule = %+v, %v; want paused", paused, err)
	}
	for _, in := range res.Inserted {
		if got := e.get(in.Task.ID); got.Status != store.Cancelled {
			e.t.Errorf("pending occurrence %d is %s after PauseSchedule, want CANCELLED", got.ID, got.Status)
		}
	}
	e.unchanged("PauseSchedule (running occurrence)", running)
	e.unchanged("PauseSchedule (another handler's task)", oneOff)
	e.unchanged("PauseSchedule (a task of the handler without the key)", plain)
	if got := e.schedule("other"); got.Paused {
		e.t.Errorf("PauseSchedule(report) paused other")
	}
	if again, err := e.s.PauseSchedule(e.ctx, "report"); err != nil || !again.Paused {
		e.t.Errorf("PauseSchedule twice = %+v, %v; want paused, no error", again, err)
	}

	// A paused schedule does not fire.
	if res := e.fire(store.FireParams{Name: "report", Expect: next.Add(4 * time.Second), Next: next.Add(6 * time.Second),
		Tasks: []store.NewTask{occurrence("report", next.Add(4*time.Second))}}); res.Applied {
		e.t.Errorf("FireSchedule while paused = %+v, want not applied", res)
	}
	// Paused survives re-registration (a restart).
	if got := e.register(def("report", next))[0]; !got.Paused {
		e.t.Errorf("re-registered paused schedule = %+v, want still paused", got)
	}

	resumeAt := next.Add(time.Hour)
	resumed, err := e.s.ResumeSchedule(e.ctx, "report", resumeAt)
	if err != nil || resumed.Paused || !resumed.NextFireAt.Equal(resumeAt) {
		e.t.Fatalf("ResumeSchedule = %+v, %v; want not paused, NextFireAt %v", resumed, err, resumeAt)
	}
	// Resuming a running schedule leaves it alone.
	if again, err := e.s.ResumeSchedule(e.ctx, "report", resumeAt.Add(time.Hour)); err != nil || !again.NextFireAt.Equal(resumeAt) {
		e.t.Errorf("ResumeSchedule of a running schedule = %+v, %v; want NextFireAt %v kept", again, err, resumeAt)
	}
	if res := e.fire(store.FireParams{Name: "report", Expect: resumeAt, Next: resumeAt.Add(2 * time.Second)}); !res.Applied {
		e.t.Errorf("FireSchedule after resume = %+v, want applied", res)
	}
}

func testPauseUnknown(e *env) {
	if s, err := e.s.PauseSchedule(e.ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		e.t.Errorf("PauseSchedule(unknown) = %+v, %v; want ErrNotFound", s, err)
	}
	if s, err := e.s.ResumeSchedule(e.ctx, "nope", e.future()); !errors.Is(err, store.ErrNotFound) {
		e.t.Errorf("ResumeSchedule(unknown) = %+v, %v; want ErrNotFound", s, err)
	}
}

func testDeleteSchedule(e *env) {
	next := e.future().Truncate(time.Second)
	e.register(def("report", next), def("other", next))
	res := e.fire(store.FireParams{Name: "report", Expect: next, Next: next.Add(4 * time.Second), Last: next.Add(2 * time.Second),
		Tasks: []store.NewTask{occurrence("report", next), occurrence("report", next.Add(2*time.Second))}})
	overdue := e.insert(occurrence("report", e.past().Truncate(time.Second)))[0] // pending, and due
	running := e.claim(e.insert(occurrence("report", e.past().Add(-time.Hour).Truncate(time.Second)))[0].ID)
	e.start(running)
	running = e.get(running.ID) // an earlier occurrence, RUNNING
	others := e.fire(store.FireParams{Name: "other", Expect: next, Next: next.Add(2 * time.Second), Last: next,
		Tasks: []store.NewTask{occurrence("other", next)}}) // another schedule's occurrence: untouched
	sameName := e.newTask(e.future()) // the schedule's handler, no task key: untouched
	sameName.Name = "report"
	plain := e.insert(sameName)[0]
	pending := []*store.Task{res.Inserted[0].Task, res.Inserted[1].Task, overdue}

	lo := e.settle(plain)
	n, err := e.s.DeleteSchedule(e.ctx, "report")
	hi := e.now()
	if err != nil || n != len(pending) {
		e.t.Fatalf("DeleteSchedule(report) = %d, %v; want %d cancelled", n, err, len(pending))
	}
	for _, p := range pending {
		got := e.get(p.ID)
		if got.Status != store.Cancelled {
			e.t.Errorf("pending occurrence %d is %s after DeleteSchedule, want CANCELLED", got.ID, got.Status)
		}
		e.stamped("FinishedAt of a cancelled occurrence", got.FinishedAt, lo, hi)
		e.stamped("UpdatedAt of a cancelled occurrence", got.UpdatedAt, lo, hi)
	}
	e.unchanged("DeleteSchedule (running occurrence)", running)
	e.unchanged("DeleteSchedule (another schedule's occurrence)", others.Inserted[0].Task)
	e.unchanged("DeleteSchedule (a task of the handler without the key)", plain)
	all, err := e.s.Schedules(e.ctx)
	if err != nil {
		e.t.Fatalf("Schedules error: %v", err)
	}
	if len(all) != 1 || all[0].Name != "other" {
		e.t.Errorf("Schedules after DeleteSchedule(report) = %+v, want other only", all)
	}
	if n, err := e.s.DeleteSchedule(e.ctx, "report"); !errors.Is(err, store.ErrNotFound) || n != 0 {
		e.t.Errorf("DeleteSchedule twice = %d, %v; want 0, ErrNotFound", n, err)
	}
	// A deleted schedule does not fire.
	if res := e.fire(store.FireParams{Name: "report", Expect: next.Add(4 * time.Second), Next: next.Add(6 * time.Second),
		Tasks: []store.NewTask{occurrence("report", next.Add(4*time.Second))}}); res.Applied {
		e.t.Errorf("FireSchedule after DeleteSchedule = %+v, want not applied", res)
	}

	// Registered again, it is new: its own NextFireAt, no LastFireAt, not paused.
	again := next.Add(time.Hour)
	lo = e.now()
	got := e.register(def("report", again))[0]
	e.stamped("CreatedAt of the schedule registered again", got.CreatedAt, lo, e.now())
	if !got.NextFireAt.Equal(again) || !got.LastFireAt.IsZero() || got.Paused {
		e.t.Errorf("registered after DeleteSchedule = %+v; want NextFireAt %v, no LastFireAt, not paused", got, again)
	}
	if d := diff(got, e.schedule("report")); d != "" {
		e.t.Errorf("Schedules differs from RegisterSchedules (-register +list):\n%s", d)
	}
	// Also when the deleted schedule was paused, which left nothing to cancel.
	if _, err := e.s.PauseSchedule(e.ctx, "report"); err != nil {
		e.t.Fatalf("PauseSchedule error: %v", err)
	}
	if n, err := e.s.DeleteSchedule(e.ctx, "report"); err != nil || n != 0 {
		e.t.Fatalf("DeleteSchedule of a paused schedule = %d, %v; want 0 cancelled", n, err)
	}
	if got := e.register(def("report", again))[0]; got.Paused {
		e.t.Errorf("registered after deleting a paused schedule = %+v, want not paused", got)
	}
}

func testDeleteUnknown(e *env) {
	e.register(def("report", e.future()))
	task := e.insert(occurrence("nope", e.future().Truncate(time.Second)))[0] // "occurrence" of no schedule
	if n, err := e.s.DeleteSchedule(e.ctx, "nope"); !errors.Is(err, store.ErrNotFound) || n != 0 {
		e.t.Errorf("DeleteSchedule(unknown) = %d, %v; want 0, ErrNotFound", n, err)
	}
	if n, err := e.s.DeleteSchedule(e.ctx, ""); !errors.Is(err, store.ErrInvalid) || n != 0 {
		e.t.Errorf("DeleteSchedule(\"\") = %d, %v; want 0, ErrInvalid", n, err)
	}
	e.unchanged("DeleteSchedule(unknown)", task)
	e.schedule("report")
}

// testFireRace has workers fire the same schedule from the same reading: exactly one
// may apply, and only its occurrences exist.
func testFireRace(e *env) {
	const workers, rounds = 8, 10
	next := e.now().Add(-time.Minute).Truncate(time.Second)
	e.register(def("race", next))
	for round := range rounds {
		slot := next.Add(time.Duration(round) * time.Second)
		var applied atomic.Int32
		e.race(workers, 30*time.Second, "FireSchedule racers", func(w int) error {
			// Each worker would write a different occurrence (as two schedulers
			// that read the clock at different moments might).
			nt := occurrence("race", slot)
			nt.Key = fmt.Sprintf("%s/%d", nt.Key, w)
			res, err := e.s.FireSchedule(e.ctx, store.FireParams{Name: "race", Expect: slot, Next: slot.Add(time.Second),
				Last: slot, Tasks: []store.NewTask{nt}})
			if err != nil {
				return err
			}
			if res.Applied {
				applied.Add(1)
			}
			return nil
		})
		if n := applied.Load(); n != 1 {
			e.t.Fatalf("round %d: %d FireSchedule calls applied, want exactly 1", round, n)
		}
		var found int
		for w := range workers {
			if _, err := e.s.Lookup(e.ctx, "race", fmt.Sprintf("%s/%d", slot.Format(time.RFC3339Nano), w)); err == nil {
				found++
			}
		}
		if found != 1 {
			e.t.Fatalf("round %d: %d occurrences stored, want 1", round, found)
		}
	}
}

// testDeleteRace has workers fire a schedule while another deletes it: a fire applies
// only before the delete, whose count then includes its occurrence, and afterwards no
// occurrence is left SCHEDULED.
func testDeleteRace(e *env) {
	const firers, rounds = 4, 10
	slot := e.now().Add(-time.Minute).Truncate(time.Second)
	for round := range rounds {
		name := fmt.Sprintf("race-%d", round)
		e.register(def(name, slot))
		var applied atomic.Int32
		var cancelled int
		e.race(firers+1, 30*time.Second, "FireSchedule and DeleteSchedule racers", func(w int) error {
			if w == firers {
				var err error
				cancelled, err = e.s.DeleteSchedule(e.ctx, name)
				return err
			}
			nt := occurrence(name, slot)
			nt.Key = fmt.Sprintf("%s/%d", nt.Key, w)
			res, err := e.s.FireSchedule(e.ctx, store.FireParams{Name: name, Expect: slot, Next: slot.Add(time.Second),
				Last: slot, Tasks: []store.NewTask{nt}})
			if err != nil {
				return err
			}
			if res.Applied {
				applied.Add(1)
			}
			return nil
		})
		if a := int(applied.Load()); a > 1 || cancelled != a {
			e.t.Fatalf("round %d: %d FireSchedule calls applied, DeleteSchedule cancelled %d; want at most 1 and as many", round, a, cancelled)
		}
		for w := range firers {
			task, err := e.s.Lookup(e.ctx, name, fmt.Sprintf("%s/%d", slot.Format(time.RFC3339Nano), w))
			if err == nil && task.Status != store.Cancelled {
				e.t.Fatalf("round %d: occurrence %d is %s after DeleteSchedule, want CANCELLED", round, task.ID, task.Status)
			}
		}
		if _, err := e.s.PauseSchedule(e.ctx, name); !errors.Is(err, store.ErrNotFound) {
			e.t.Fatalf("round %d: PauseSchedule after DeleteSchedule: error %v, want ErrNotFound", round, err)
		}
	}
}
