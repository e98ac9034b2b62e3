package storetest

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/axsched/ax/store"
)

var slotTests = []test{
	{"FireRecordsGaps", testFireRecordsGaps},
	{"FireNotAppliedRecordsNoGap", testFireNotAppliedNoGap},
	{"FireInvalidGap", testFireInvalidGap},
	{"ResumeRecordsPausedGap", testResumeRecordsGap},
	{"ResumeTxRecordsPausedGap", testResumeTxRecordsGap},
	{"GapsOverlappingRange", testGapsRange},
	{"GapsInvalid", testGapsInvalid},
	{"TasksByKeys", testTasksByKeys},
	{"TasksByKeyRange", testTasksByKeyRange},
	{"PruneGaps", testPruneGaps},
}

// gaps returns every gap of schedule name (at most 100), newest first.
func (e *env) gaps(name string) []store.SlotGap {
	e.t.Helper()
	got, err := e.s.SlotGaps(e.ctx, name, time.Unix(0, 0).UTC(), time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC), 100)
	if err != nil {
		e.t.Fatalf("SlotGaps(%q) error: %v", name, err)
	}
	for _, g := range got {
		for field, ts := range map[string]time.Time{"From": g.From, "Until": g.Until, "CreatedAt": g.CreatedAt} {
			if ts.Location() != time.UTC {
				e.t.Errorf("SlotGaps(%q): gap %d: %s = %v, want UTC", name, g.ID, field, ts)
			}
		}
	}
	return got
}

// gapSpans describes gaps as comparable strings: schedule, range, why and result.
func gapSpans(gaps []store.SlotGap) []string {
	out := make([]string, len(gaps))
	for i, g := range gaps {
		out[i] = fmt.Sprintf("%s [%s, %s) %s: %s", g.Schedule, g.From.UTC().Format(time.RFC3339Nano),
			g.Until.UTC().Format(time.RFC3339Nano), g.Why, g.Result)
	}
	return out
}

func span(name string, from, until time.Time, why, result string) string {
	return gapSpans([]store.SlotGap{{Schedule: name, From: from, Until: until, Why: why, Result: result}})[0]
}

func testFireRecordsGaps(e *env) {
	next := e.now().Add(-time.Hour).Truncate(time.Second)
	e.register(def("report", next), def("other", next))
	last := next.Add(50 * time.Minute)
	lo := e.now()
	res := e.fire(store.FireParams{Name: "report", Expect: next, Next: last.Add(2 * time.Second), Last: last,
		Tasks: []store.NewTask{occurrence("report", last)},
		Gaps:  []store.SlotGap{{From: next, Until: last, Why: store.GapMissed, Result: "fired the last one"}}})
	hi := e.now()
	if !res.Applied {
		e.t.Fatalf("FireSchedule with a gap did not apply")
	}
	got := e.gaps("report")
	want := []string{span("report", next, last, store.GapMissed, "fired the last one")}
	if d := diff(want, gapSpans(got)); d != "" {
		e.t.Fatalf("SlotGaps after FireSchedule (-want +got):\n%s", d)
	}
	if got[0].ID == 0 {
		e.t.Errorf("gap ID = 0, want one set by the store")
	}
	e.stamped("gap CreatedAt", got[0].CreatedAt, lo, hi)
	if other := e.gaps("other"); len(other) != 0 {
		e.t.Errorf("SlotGaps(other) = %v, want none", gapSpans(other))
	}
	// A fire with gaps and no task records them too.
	res = e.fire(store.FireParams{Name: "report", Expect: last.Add(2 * time.Second), Next: last.Add(time.Minute),
		Gaps: []store.SlotGap{{Schedule: "report", From: last.Add(2 * time.Second), Until: last.Add(time.Minute), Why: store.GapMissed, Result: "skipped"}}})
	if !res.Applied {
		e.t.Fatalf("FireSchedule with a gap and no task did not apply")
	}
	want = append([]string{span("report", last.Add(2*time.Second), last.Add(time.Minute), store.GapMissed, "skipped")}, want...)
	if d := diff(want, gapSpans(e.gaps("report"))); d != "" {
		e.t.Errorf("SlotGaps after a second FireSchedule (-want +got):\n%s", d)
	}
}

func testFireNotAppliedNoGap(e *env) {
	next := e.now().Add(-time.Hour).Truncate(time.Second)
	e.register(def("report", next))
	gap := []store.SlotGap{{From: next, Until: next.Add(time.Minute), Why: store.GapMissed, Result: "skipped"}}
	// Another scheduler's stale view: the compare-and-set fails, nothing is recorded.
	if res := e.fire(store.FireParams{Name: "report", Expect: next.Add(-2 * time.Second), Next: next.Add(time.Minute), Gaps: gap}); res.Applied {
		e.t.Fatalf("FireSchedule with a stale Expect applied")
	}
	if _, err := e.s.PauseSchedule(e.ctx, "report"); err != nil {
		e.t.Fatalf("PauseSchedule error: %v", err)
	}
	if res := e.fire(store.FireParams{Name: "report", Expect: next, Next: next.Add(time.Minute), Gaps: gap}); res.Applied {
		e.t.Fatalf("FireSchedule of a paused schedule applied")
	}
	if got := e.gaps("report"); len(got) != 0 {
		e.t.Errorf("SlotGaps after FireSchedule calls that did not apply = %v, want none", gapSpans(got))
	}
}

func testFireInvalidGap(e *env) {
	next := e.now().Add(-time.Hour).Truncate(time.Second)
	e.register(def("report", next))
	for name, g := range map[string]store.SlotGap{
		"empty range":    {From: next, Until: next, Why: store.GapMissed},
		"zero from":      {Until: next, Why: store.GapMissed},
		"unknown why":    {From: next, Until: next.Add(time.Minute), Why: "bored"},
		"other schedule": {Schedule: "other", From: next, Until: next.Add(time.Minute), Why: store.GapMissed},
		"long result":    {From: next, Until: next.Add(time.Minute), Why: store.GapMissed, Result: string(make([]byte, store.MaxGapText+1))},
	} {
		res, err := e.s.FireSchedule(e.ctx, store.FireParams{Name: "report", Expect: next, Next: next.Add(time.Minute),
			Tasks: []store.NewTask{occurrence("report", next)}, Gaps: []store.SlotGap{g}})
		if !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("FireSchedule with a gap of %s = %+v, %v; want ErrInvalid", name, res, err)
		}
	}
	if got := e.schedule("report"); !got.NextFireAt.Equal(next) {
		e.t.Errorf("NextFireAt after refused fires = %v, want %v unchanged", got.NextFireAt, next)
	}
	if got := e.gaps("report"); len(got) != 0 {
		e.t.Errorf("SlotGaps after refused fires = %v, want none", gapSpans(got))
	}
}

func testResumeRecordsGap(e *env) {
	next := e.now().Add(-time.Hour).Truncate(time.Second)
	e.register(def("report", next))
	if _, err := e.s.PauseSchedule(e.ctx, "report"); err != nil {
		e.t.Fatalf("PauseSchedule error: %v", err)
	}
	resumeAt := next.Add(time.Hour)
	if sc, err := e.s.ResumeSchedule(e.ctx, "report", resumeAt); err != nil || sc.Paused || !sc.NextFireAt.Equal(resumeAt) {
		e.t.Fatalf("ResumeSchedule = %+v, %v; want resumed at %v", sc, err, resumeAt)
	}
	want := []string{span("report", next, resumeAt, store.GapPaused, store.PausedResult)}
	if d := diff(want, gapSpans(e.gaps("report"))); d != "" {
		e.t.Fatalf("SlotGaps after ResumeSchedule (-want +got):\n%s", d)
	}
	// Resuming a schedule that is not paused records nothing.
	if _, err := e.s.ResumeSchedule(e.ctx, "report", resumeAt.Add(time.Hour)); err != nil {
		e.t.Fatalf("ResumeSchedule again error: %v", err)
	}
	// Nor does a resume that passes over no slot.
	if _, err := e.s.PauseSchedule(e.ctx, "report"); err != nil {
		e.t.Fatalf("PauseSchedule error: %v", err)
	}
	if _, err := e.s.ResumeSchedule(e.ctx, "report", resumeAt); err != nil {
		e.t.Fatalf("ResumeSchedule at NextFireAt error: %v", err)
	}
	if d := diff(want, gapSpans(e.gaps("report"))); d != "" {
		e.t.Errorf("SlotGaps after resumes that passed over no slot (-want +got):\n%s", d)
	}
}

func testResumeTxRecordsGap(e *env) {
	txs, ok := e.s.(store.Transactor)
	if !ok {
		e.t.Skipf("%T does not implement store.Transactor", e.s)
	}
	next := e.now().Add(-time.Hour).Truncate(time.Second)
	e.register(def("report", next))
	if _, err := e.s.PauseSchedule(e.ctx, "report"); err != nil {
		e.t.Fatalf("PauseSchedule error: %v", err)
	}
	resumeAt := next.Add(time.Hour)
	rollback := errors.New("roll back")
	if err := txs.InTx(e.ctx, func(tx store.Tx) error {
		if _, err := tx.ResumeSchedule(e.ctx, "report", resumeAt); err != nil {
			return err
		}
		return rollback
	}); !errors.Is(err, rollback) {
		e.t.Fatalf("InTx(Tx.ResumeSchedule, rolled back) = %v, want the rollback", err)
	}
	if got := e.gaps("report"); len(got) != 0 {
		e.t.Fatalf("SlotGaps after a rolled back resume = %v, want none", gapSpans(got))
	}
	if err := txs.InTx(e.ctx, func(tx store.Tx) error {
		_, err := tx.ResumeSchedule(e.ctx, "report", resumeAt)
		return err
	}); err != nil {
		e.t.Fatalf("InTx(Tx.ResumeSchedule) error: %v", err)
	}
	want := []string{span("report", next, resumeAt, store.GapPaused, store.PausedResult)}
	if d := diff(want, gapSpans(e.gaps("report"))); d != "" {
		e.t.Errorf("SlotGaps after Tx.ResumeSchedule (-want +got):\n%s", d)
	}
}

// fireGaps registers schedule name at base and fires it past the gaps [base+k*10m,
// base+k*10m+5m) for k in 0..n-1, one call each; it returns the gaps' starts.
func (e *env) fireGaps(name string, base time.Time, n int) []time.Time {
	e.t.Helper()
	e.register(def(name, base))
	var starts []time.Time
	expect := base
	for k := range n {
		from := base.Add(time.Duration(k) * 10 * time.Minute)
		next := from.Add(10 * time.Minute)
		if res := e.fire(store.FireParams{Name: name, Expect: expect, Next: next,
			Gaps: []store.SlotGap{{From: from, Until: from.Add(5 * time.Minute), Why: store.GapMissed, Result: "skipped"}}}); !res.Applied {
			e.t.Fatalf("FireSchedule %d did not apply", k)
		}
		starts, expect = append(starts, from), next
	}
	return starts
}

func testGapsRange(e *env) {
	h := e.s
	base := e.now().Add(-24 * time.Hour).Truncate(time.Minute)
	starts := e.fireGaps("report", base, 6) // [0, 5m) [10m, 15m) … [50m, 55m)
	e.fireGaps("other", base, 2)
	for _, tc := range []struct {
		name     string
		from, to time.Time
		limit    int
		want     []int // indexes into starts, newest first
	}{
		{"all", base, base.Add(time.Hour), 100, []int{5, 4, 3, 2, 1, 0}},
		{"limit keeps the newest", base, base.Add(time.Hour), 2, []int{5, 4}},
		{"a point inside a gap", base.Add(12 * time.Minute), base.Add(12 * time.Minute), 10, []int{1}},
		{"a point between gaps", base.Add(7 * time.Minute), base.Add(7 * time.Minute), 10, nil},
		{"until is exclusive", base.Add(15 * time.Minute), base.Add(19 * time.Minute), 10, nil},
		{"from is inclusive", base.Add(16 * time.Minute), base.Add(20 * time.Minute), 10, []int{2}},
		{"a range across three", base.Add(14 * time.Minute), base.Add(30 * time.Minute), 10, []int{3, 2, 1}},
		{"before all", base.Add(-time.Hour), base.Add(-time.Minute), 10, nil},
	} {
		got, err := h.SlotGaps(e.ctx, "report", tc.from, tc.to, tc.limit)
		if err != nil {
			e.t.Fatalf("SlotGaps(%s) error: %v", tc.name, err)
		}
		var want []string
		for _, i := range tc.want {
			want = append(want, span("report", starts[i], starts[i].Add(5*time.Minute), store.GapMissed, "skipped"))
		}
		if d := diff(want, gapSpans(got)); d != "" {
			e.t.Errorf("SlotGaps(%s) (-want +got):\n%s", tc.name, d)
		}
	}
	n := e.s
	v, err := n.InNamespace("elsewhere")
	if err != nil {
		e.t.Fatalf("InNamespace error: %v", err)
	}
	if got, err := v.SlotGaps(e.ctx, "report", base, base.Add(time.Hour), 10); err != nil || len(got) != 0 {
		e.t.Errorf("SlotGaps in another namespace = %v, %v; want none", gapSpans(got), err)
	}
}

func testGapsInvalid(e *env) {
	h := e.s
	now := e.now()
	for _, limit := range []int{0, -1, store.MaxQueryLimit + 1} {
		if _, err := h.SlotGaps(e.ctx, "report", now, now, limit); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("SlotGaps(limit %d) error %v, want ErrInvalid", limit, err)
		}
	}
	if _, err := h.SlotGaps(e.ctx, "report", now, now.Add(-time.Second), 10); !errors.Is(err, store.ErrInvalid) {
		e.t.Errorf("SlotGaps(from after to) error %v, want ErrInvalid", err)
	}
	if _, err := h.PruneSlotGaps(e.ctx, time.Time{}, 10); !errors.Is(err, store.ErrInvalid) {
		e.t.Errorf("PruneSlotGaps(zero time) error %v, want ErrInvalid", err)
	}
	for _, limit := range []int{0, store.MaxPrune + 1} {
		if _, err := h.PruneSlotGaps(e.ctx, now, limit); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("PruneSlotGaps(limit %d) error %v, want ErrInvalid", limit, err)
		}
	}
}

// withKey inserts a task named name with key k.
func (e *env) withKey(name, k string) *store.Task {
	e.t.Helper()
	nt := e.newTask(e.future())
	nt.Name, nt.Key = name, k
	return e.insert(nt)[0]
}

func testTasksByKeys(e *env) {
	h := e.s
	a := e.withKey("report", "2026-01-01T00:00:00Z")
	b := e.withKey("report", "2026-01-01T00:01:00Z")
	e.withKey("report", "2026-01-01T00:02:00Z")
	e.withKey("other", "2026-01-01T00:00:00Z")
	got, err := h.TasksByKeys(e.ctx, "report", []string{"2026-01-01T00:01:00Z", "2026-01-01T00:00:00Z", "nope"})
	if err != nil {
		e.t.Fatalf("TasksByKeys error: %v", err)
	}
	if d := diff([]*store.Task{a, b}, taskPtrs(got)); d != "" {
		e.t.Errorf("TasksByKeys (-want +got):\n%s", d)
	}
	// A key given up and taken again: both tasks.
	if _, err := e.s.Cancel(e.ctx, "report", a.Key, "storetest"); err != nil {
		e.t.Fatalf("Cancel error: %v", err)
	}
	again := e.withKey("report", a.Key)
	if got, err = h.TasksByKeys(e.ctx, "report", []string{a.Key}); err != nil || !slices.Equal(ids(got), []int64{a.ID, again.ID}) {
		e.t.Errorf("TasksByKeys(a reused key) = %v, %v; want ids %d, %d", ids(got), err, a.ID, again.ID)
	}
	if got, err := h.TasksByKeys(e.ctx, "report", nil); err != nil || len(got) != 0 {
		e.t.Errorf("TasksByKeys(no keys) = %v, %v; want none", ids(got), err)
	}
	if _, err := h.TasksByKeys(e.ctx, "report", make([]string, store.MaxKeys+1)); !errors.Is(err, store.ErrInvalid) {
		e.t.Errorf("TasksByKeys(%d keys) error %v, want ErrInvalid", store.MaxKeys+1, err)
	}
	if _, err := h.TasksByKeys(e.ctx, "report", []string{"a\x00b"}); !errors.Is(err, store.ErrInvalid) {
		e.t.Errorf("TasksByKeys(a key with a NUL) error %v, want ErrInvalid", err)
	}
}

func taskPtrs(tasks []store.Task) []*store.Task {
	out := make([]*store.Task, len(tasks))
	for i := range tasks {
		out[i] = &tasks[i]
	}
	return out
}

func testTasksByKeyRange(e *env) {
	h := e.s
	var tasks []*store.Task
	for _, k := range []string{"manual/2026-01-01T00:00:00Z", "manual/2026-01-01T00:00:00.5Z", "manual/2026-01-01T00:00:01Z",
		"manual/2026-01-02T00:00:00Z", "2026-01-01T00:00:00Z"} {
		tasks = append(tasks, e.withKey("report", k))
	}
	e.withKey("other", "manual/2026-01-01T00:00:00Z")
	for _, tc := range []struct {
		from, before string
		limit        int
		want         []int
	}{
		{"manual/", "manual0", 100, []int{3, 2, 0, 1}}, // byte order: "…00.5Z" < "…00Z"
		{"manual/", "manual0", 2, []int{3, 2}},
		{"manual/2026-01-01T00:00:00", "manual/2026-01-01T00:00:01", 100, []int{0, 1}},
		{"manual/2026-01-03", "manual0", 100, nil},
	} {
		got, err := h.TasksByKeyRange(e.ctx, "report", tc.from, tc.before, tc.limit)
		if err != nil {
			e.t.Fatalf("TasksByKeyRange(%q, %q) error: %v", tc.from, tc.before, err)
		}
		var want []*store.Task
		for _, i := range tc.want {
			want = append(want, tasks[i])
		}
		if d := diff(want, taskPtrs(got)); d != "" {
			e.t.Errorf("TasksByKeyRange(%q, %q, %d) (-want +got):\n%s", tc.from, tc.before, tc.limit, d)
		}
	}
	for _, tc := range []struct {
		from, before string
		limit        int
	}{{"b", "a", 10}, {"a", "a", 10}, {"a", "b", 0}, {"a", "b", store.MaxQueryLimit + 1}, {"a\x00", "b", 10}} {
		if _, err := h.TasksByKeyRange(e.ctx, "report", tc.from, tc.before, tc.limit); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("TasksByKeyRange(%q, %q, %d) error %v, want ErrInvalid", tc.from, tc.before, tc.limit, err)
		}
	}
}

func testPruneGaps(e *env) {
	h := e.s
	base := e.now().Add(-24 * time.Hour).Truncate(time.Minute)
	starts := e.fireGaps("report", base, 5) // ends at 5m, 15m, 25m, 35m, 45m
	e.fireGaps("other", base, 1)            // ends at 5m
	// Until 25m inclusive: three of report's and other's one; two at a time, oldest first.
	n, err := h.PruneSlotGaps(e.ctx, base.Add(25*time.Minute), 2)
	if err != nil || n != 2 {
		e.t.Fatalf("PruneSlotGaps(limit 2) = %d, %v; want 2", n, err)
	}
	n, err = h.PruneSlotGaps(e.ctx, base.Add(25*time.Minute), 10)
	if err != nil || n != 2 {
		e.t.Fatalf("PruneSlotGaps again = %d, %v; want the 2 left", n, err)
	}
	var want []string
	for _, i := range []int{4, 3} {
		want = append(want, span("report", starts[i], starts[i].Add(5*time.Minute), store.GapMissed, "skipped"))
	}
	if d := diff(want, gapSpans(e.gaps("report"))); d != "" {
		e.t.Errorf("SlotGaps after PruneSlotGaps (-want +got):\n%s", d)
	}
	if got := e.gaps("other"); len(got) != 0 {
		e.t.Errorf("SlotGaps(other) after PruneSlotGaps = %v, want none", gapSpans(got))
	}
	if n, err := h.PruneSlotGaps(e.ctx, base.Add(25*time.Minute), 10); err != nil || n != 0 {
		e.t.Errorf("PruneSlotGaps with nothing left = %d, %v; want 0", n, err)
	}
}
