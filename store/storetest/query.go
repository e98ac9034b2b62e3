package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

var queryTests = []test{
	{"Filters", testTasksFilters},
	{"Pages", testTasksPages},
	{"EveryKeyPrefix", testTasksEveryKeyPrefix},
	{"Invalid", testTasksInvalid},
	{"Counts", testCountTasks},
	{"CountsCapped", testCountTasksCapped},
}

// queryFixture writes tasks of every status, two names, keys that LIKE would take
// for patterns, two owners and a task key, plus a task of another namespace with the
// same name and key as one of them, and returns this namespace's tasks as stored.
func (e *env) queryFixture() []*store.Task {
	e.t.Helper()
	var out []*store.Task
	for _, st := range store.Statuses() {
		if st != store.Skipped { // SKIPPED is reached by overlap only (overlap.go)
			out = append(out, e.inState(st))
		}
	}
	base := e.future()
	for i, k := range []string{"a%b", "a_b", "ab", "aXb", "A%b", "b"} {
		nt := e.newTask(base.Add(time.Duration(i%3) * time.Minute)) // equal due times: ordered by id
		nt.Name, nt.Key = "invoice.send", k
		if i%2 == 1 {
			nt.OwnerService = "billing"
		}
		if i == 4 {
			nt.TaskKey, nt.Overlap = "tenant-7", store.OverlapQueue
		}
		out = append(out, e.insert(nt)[0])
	}
	ns := e.s
	other, err := ns.InNamespace("other")
	if err != nil {
		e.t.Fatal(err)
	}
	nt := e.newTask(base)
	nt.Name, nt.Key = "invoice.send", "ab"
	if _, err := other.Insert(e.ctx, []store.NewTask{nt}); err != nil {
		e.t.Fatalf("Insert in namespace other: %v", err)
	}
	for i, t := range out {
		out[i] = e.get(t.ID)
	}
	return out
}

// want is what q should return of all, the namespace's tasks: the reference.
func want(q store.TaskQuery, all []*store.Task) []int64 {
	var sel []*store.Task
	for _, t := range all {
		if driverkit.Selects(q, t) && driverkit.Follows(q, t) {
			sel = append(sel, t)
		}
	}
	slices.SortFunc(sel, func(a, b *store.Task) int {
		if driverkit.Before(q, a, b) {
			return -1
		}
		return 1
	})
	ids := make([]int64, 0, len(sel))
	for _, t := range sel[:min(len(sel), q.Limit)] {
		ids = append(ids, t.ID)
	}
	return ids
}

func (e *env) tasks(q store.TaskQuery) []store.Task {
	e.t.Helper()
	got, err := e.s.Tasks(e.ctx, q)
	if err != nil {
		e.t.Fatalf("Tasks(%+v) error: %v", q, err)
	}
	return got
}

func ids(tasks []store.Task) []int64 {
	out := make([]int64, len(tasks))
	for i, t := range tasks {
		out[i] = t.ID
	}
	return out
}

// Tasks selects by every filter, alone and combined, in both orders, and returns the
// tasks as Get does.
func testTasksFilters(e *env) {
	all := e.queryFixture()
	byID := map[int64]*store.Task{}
	for _, t := range all {
		byID[t.ID] = t
	}
	invoices := all[len(all)-6:]
	var finished time.Time // the SUCCEEDED task's
	for _, t := range all {
		if t.Status == store.Succeeded {
			finished = t.FinishedAt
		}
	}
	cases := []store.TaskQuery{
		{},
		{Statuses: []store.Status{store.Scheduled}},
		{Statuses: []store.Status{store.Failed, store.Cancelled, store.Running}},
		{Statuses: []store.Status{store.Skipped}},
		{Name: "invoice.send"},
		{Name: "invoice.send", KeyPrefix: "a"},
		{Name: "invoice.send", KeyPrefix: "a%"}, // a wildcard for LIKE, a byte here
		{Name: "invoice.send", KeyPrefix: "a_"},
		{KeyPrefix: "A"}, // case-sensitive
		{KeyPrefix: "order-"},
		{KeyPrefix: "zzz"},
		{OwnerService: "billing"},
		{OwnerService: "orders", Statuses: []store.Status{store.Scheduled}},
		{TaskKey: "tenant-7"},
		{DueFrom: invoices[1].DueAt},
		{DueBefore: invoices[1].DueAt},
		{DueFrom: invoices[0].DueAt, DueBefore: invoices[2].DueAt, Name: "invoice.send"},
		{FinishedFrom: finished},
		{FinishedBefore: finished.Add(time.Microsecond)},
		{FinishedFrom: finished.Add(time.Microsecond)},
	}
	for _, q := range cases {
		for _, soonest := range []bool{false, true} {
			q.Soonest, q.Limit = soonest, store.MaxQueryLimit
			got := e.tasks(q)
			if w := want(q, all); !slices.Equal(ids(got), w) {
				e.t.Errorf("Tasks(%+v) = %v, want %v", q, ids(got), w)
				continue
			}
			for i := range got {
				if d := diff(byID[got[i].ID], &got[i]); d != "" {
					e.t.Errorf("Tasks(%+v)[%d] differs from Get (-get +tasks):\n%s", q, i, d)
				}
			}
		}
	}
	if got := e.tasks(store.TaskQuery{Limit: 3}); !slices.Equal(ids(got), want(store.TaskQuery{Limit: 3}, all)) {
		e.t.Errorf("Tasks(limit 3) = %v, want the 3 newest", ids(got))
	}
}

// Paging through a query with its last task as the cursor returns every task it
// selects once, in order, whatever the page size; due times shared by several tasks
// are ordered by id across pages.
func testTasksPages(e *env) {
	base := e.future()
	var all []*store.Task
	var nts []store.NewTask
	for i := range 23 {
		nts = append(nts, e.newTask(base.Add(time.Duration(i%4)*time.Second)))
	}
	for _, t := range e.insert(nts...) {
		all = append(all, e.get(t.ID))
	}
	for _, soonest := range []bool{false, true} {
		for _, size := range []int{1, 5, 23, 50} {
			q := store.TaskQuery{Soonest: soonest, Limit: size}
			var seen []int64
			for pages := 0; ; pages++ {
				if pages > 30 {
					e.t.Fatalf("Tasks(%+v): more than 30 pages", q)
				}
				page := e.tasks(q)
				if w := want(q, all); !slices.Equal(ids(page), w) {
					e.t.Fatalf("Tasks(%+v) = %v, want %v", q, ids(page), w)
				}
				seen = append(seen, ids(page)...)
				if len(page) < size {
					break
				}
				last := page[len(page)-1]
				q.After = &store.TaskCursor{ID: last.ID, DueAt: last.DueAt}
			}
			full := want(store.TaskQuery{Soonest: soonest, Limit: store.MaxQueryLimit}, all)
			if !slices.Equal(seen, full) {
				e.t.Errorf("pages of %d (soonest %v) = %v, want %v", size, soonest, seen, full)
			}
		}
	}
}

// A key prefix selects exactly the keys that start with it, whatever its last rune:
// one that ends a range of UTF-8's encodings (U+007F, U+07FF, U+FFFF), one whose
// last byte is 0xBF or 0xFF (U+00BF, U+00FF), the last code point (U+10FFFF), four-
// byte runes. Keys equal to the prefix, just below it, at the least string above its
// range and above that are among them.
func testTasksEveryKeyPrefix(e *env) {
	last := []rune{0x7e, 0x7f, 0x80, 0xbe, 0xbf, 0xc0, 0xfe, 0xff, 0x100, 0x7fe, 0x7ff, 0x800, 0xd7ff, 0xe000,
		0xfffc, 0xfffd, 0xfffe, 0xffff, 0x10000, 0x1f5ff, 0x1f600, 0x1f601, 0x10fffe, 0x10ffff}
	keys := []string{"a", "b", "\u00bf", "\u00bfz", "\u00c0", "\uffff", "\U0010ffff", "\U0010ffff\U0010ffff", "\U0010ffffz"}
	for _, r := range last {
		k := "a" + string(r)
		keys = append(keys, k, k+"x", k+"\u00bf", k+"\U0010ffff")
	}
	nts := make([]store.NewTask, len(keys))
	due := e.future()
	for i, k := range keys {
		nts[i] = e.newTask(due)
		nts[i].Name, nts[i].Key = "key.prefix", k
	}
	e.insert(nts...)
	prefixes := []string{"a", "\u00bf", "\U0010ffff", "\U0010ffff\U0010ffff", "a\U0001f600", "a\u00c0"}
	for _, r := range []rune{0x7f, 0xbf, 0xff, 0x7ff, 0xd7ff, 0xfffd, 0xffff, 0x10ffff} {
		prefixes = append(prefixes, "a"+string(r))
	}
	for _, p := range prefixes {
		var want []string
		for _, k := range keys {
			if strings.HasPrefix(k, p) {
				want = append(want, k)
			}
		}
		slices.Sort(want)
		for _, name := range []string{"", "key.prefix"} {
			q := store.TaskQuery{Name: name, KeyPrefix: p, Limit: store.MaxQueryLimit}
			got, err := e.s.Tasks(e.ctx, q)
			if err != nil {
				e.t.Errorf("Tasks(name %q, key prefix %+q) error: %v", name, p, err)
				continue
			}
			gotKeys := make([]string, len(got))
			for i, t := range got {
				gotKeys[i] = t.Key
			}
			slices.Sort(gotKeys)
			if !slices.Equal(gotKeys, want) {
				e.t.Errorf("Tasks(name %q, key prefix %+q) keys = %+q, want %+q", name, p, gotKeys, want)
			}
		}
	}
}

// A malformed query is ErrInvalid.
func testTasksInvalid(e *env) {
	now := e.now()
	for name, q := range map[string]store.TaskQuery{
		"limit 0":                  {},
		"limit above the maximum":  {Limit: store.MaxQueryLimit + 1},
		"unknown status":           {Limit: 1, Statuses: []store.Status{"DONE"}},
		"empty due range":          {Limit: 1, DueFrom: now, DueBefore: now},
		"reversed finished range":  {Limit: 1, FinishedFrom: now, FinishedBefore: now.Add(-time.Second)},
		"cursor without id":        {Limit: 1, After: &store.TaskCursor{DueAt: now}},
		"soonest cursor, no time":  {Limit: 1, Soonest: true, After: &store.TaskCursor{ID: 3}},
		"key prefix invalid UTF-8": {Limit: 1, KeyPrefix: "a\xff"},
		"key prefix with a NUL":    {Limit: 1, KeyPrefix: "a\x00"},
	} {
		if _, err := e.s.Tasks(e.ctx, q); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("Tasks(%s) error = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := e.s.CountTasks(e.ctx, 0); !errors.Is(err, store.ErrInvalid) {
		e.t.Errorf("CountTasks(0) error = %v, want ErrInvalid", err)
	}
}

// CountTasks counts the namespace's tasks per status, every status present.
func testCountTasks(e *env) {
	all := e.queryFixture()
	wantCounts := driverkit.NewTaskStats().Counts
	for _, t := range all {
		wantCounts[t.Status]++
	}
	got, err := e.s.CountTasks(e.ctx, 100_000)
	if err != nil {
		e.t.Fatalf("CountTasks error: %v", err)
	}
	if d := diff(wantCounts, got); d != "" {
		e.t.Errorf("CountTasks (-want +got):\n%s", d)
	}
}

// A count above the cap is reported as cap + 1, the others exactly.
func testCountTasksCapped(e *env) {
	var nts []store.NewTask
	for range 5 {
		nts = append(nts, e.newTask(e.future()))
	}
	e.insert(nts...)
	e.inState(store.Running)
	for _, c := range []struct {
		atMost, scheduled int64
	}{{1, 2}, {3, 4}, {5, 5}, {6, 5}} {
		got, err := e.s.CountTasks(e.ctx, c.atMost)
		if err != nil {
			e.t.Fatalf("CountTasks(%d) error: %v", c.atMost, err)
		}
		if got[store.Scheduled] != c.scheduled || got[store.Running] != 1 || got[store.Succeeded] != 0 {
			e.t.Errorf("CountTasks(%d) = %v, want %d SCHEDULED, 1 RUNNING, 0 SUCCEEDED", c.atMost, fmt.Sprint(got), c.scheduled)
		}
	}
}
