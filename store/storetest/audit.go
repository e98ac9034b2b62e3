package storetest

import (
	"errors"
	"strings"
	"time"

	"github.com/axsched/ax/store"
)

var auditTests = []test{
	{"RoundTrip", testAuditRoundTrip},
	{"Query", testAuditQuery},
	{"ByTime", testAuditByTime},
	{"Invalid", testAuditInvalid},
	{"Prune", testAuditPrune},
}

func (e *env) audit(rec store.AuditRecord) *store.AuditRecord {
	e.t.Helper()
	got, err := e.s.Audit(e.ctx, rec)
	if err != nil {
		e.t.Fatalf("Audit(%+v) error: %v", rec, err)
	}
	return got
}

func (e *env) auditLog(q store.AuditQuery) []store.AuditRecord {
	e.t.Helper()
	got, err := e.s.AuditLog(e.ctx, q)
	if err != nil {
		e.t.Fatalf("AuditLog(%+v) error: %v", q, err)
	}
	return got
}

func testAuditRoundTrip(e *env) {
	rec := store.AuditRecord{Actor: "alice", Role: "operator", Action: "task.trigger", Target: "task 42",
		Reason: "customer called: 订单 42", Result: "ok", StatusBefore: store.Failed, StatusAfter: store.Dispatching,
		ExecutionID: newExecID()}
	lo := e.now()
	got := e.audit(rec)
	hi := e.now()
	if got.ID <= 0 {
		e.t.Errorf("Audit: ID = %d, want > 0", got.ID)
	}
	e.stamped("Audit: At", got.At, lo, hi)
	want := rec
	want.ID, want.At = got.ID, got.At
	if d := diff(&want, got); d != "" {
		e.t.Errorf("Audit mismatch (-want +got):\n%s", d)
	}
	if log := e.auditLog(store.AuditQuery{Limit: 10}); len(log) != 1 || diff(want, log[0]) != "" {
		e.t.Errorf("AuditLog = %+v, want the one record %+v", log, want)
	}
	if log := e.view("audit-other").auditLog(store.AuditQuery{Limit: 10}); len(log) != 0 {
		e.t.Errorf("AuditLog of another namespace = %+v, want none", log)
	}
}

// AuditLog is newest first; its filters match exactly; BeforeID pages.
func testAuditQuery(e *env) {
	var recs []*store.AuditRecord
	for i, r := range []struct{ actor, action string }{
		{"alice", "task.cancel"}, {"bob", "task.cancel"}, {"alice", "task.retry"}, {"alice", "task.cancel"}, {"bob", "schedule.pause"},
	} {
		recs = append(recs, e.audit(store.AuditRecord{Actor: r.actor, Role: "operator", Action: r.action,
			Target: []string{"task 1", "task 2"}[i%2], Result: "ok"}))
	}
	ids := func(log []store.AuditRecord) []int64 {
		out := []int64{}
		for _, r := range log {
			out = append(out, r.ID)
		}
		return out
	}
	for _, c := range []struct {
		q    store.AuditQuery
		want []int
	}{
		{store.AuditQuery{Limit: 10}, []int{4, 3, 2, 1, 0}},
		{store.AuditQuery{Limit: 2}, []int{4, 3}},
		{store.AuditQuery{Limit: 2, BeforeID: recs[3].ID}, []int{2, 1}},
		{store.AuditQuery{Actor: "alice", Limit: 10}, []int{3, 2, 0}},
		{store.AuditQuery{Actor: "alice", Action: "task.cancel", Limit: 10}, []int{3, 0}},
		{store.AuditQuery{Target: "task 2", Limit: 10}, []int{3, 1}},
		{store.AuditQuery{Actor: "carol", Limit: 10}, nil},
	} {
		want := []int64{}
		for _, i := range c.want {
			want = append(want, recs[i].ID)
		}
		if got := ids(e.auditLog(c.q)); diff(want, got) != "" {
			e.t.Errorf("AuditLog(%+v) = ids %v, want %v", c.q, got, want)
		}
	}
}

func testAuditInvalid(e *env) {
	ok := store.AuditRecord{Actor: "alice", Role: "admin", Action: "task.cancel", Target: "task 1", Result: "ok"}
	for name, mod := range map[string]func(*store.AuditRecord){
		"no actor":    func(r *store.AuditRecord) { r.Actor = "" },
		"no action":   func(r *store.AuditRecord) { r.Action = "" },
		"no result":   func(r *store.AuditRecord) { r.Result = "" },
		"long target": func(r *store.AuditRecord) { r.Target = strings.Repeat("x", store.MaxAuditText+1) },
		"long reason": func(r *store.AuditRecord) { r.Reason = strings.Repeat("x", store.MaxAuditReason+1) },
		"not UTF-8":   func(r *store.AuditRecord) { r.Actor = "\xff" },
		"a NUL":       func(r *store.AuditRecord) { r.Reason = "a\x00b" },
		"a status":    func(r *store.AuditRecord) { r.StatusAfter = "DONE" },
	} {
		rec := ok
		mod(&rec)
		if _, err := e.s.Audit(e.ctx, rec); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("Audit(%s) error = %v, want ErrInvalid", name, err)
		}
	}
	for _, limit := range []int{0, store.MaxQueryLimit + 1} {
		if _, err := e.s.AuditLog(e.ctx, store.AuditQuery{Limit: limit}); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("AuditLog(limit %d) error = %v, want ErrInvalid", limit, err)
		}
	}
	if log := e.auditLog(store.AuditQuery{Limit: 10}); len(log) != 0 {
		e.t.Errorf("AuditLog after invalid records = %+v, want none", log)
	}
	if _, err := e.s.PruneAudit(e.ctx, e.now(), 0); !errors.Is(err, store.ErrInvalid) {
		e.t.Errorf("PruneAudit(limit 0) error = %v, want ErrInvalid", err)
	}
}

// PruneAudit deletes the records older than its time, oldest first, at most its limit.
func testAuditPrune(e *env) {
	var recs []*store.AuditRecord
	for range 3 {
		recs = append(recs, e.audit(store.AuditRecord{Actor: "alice", Action: "task.cancel", Result: "ok"}))
		e.after(recs[len(recs)-1].At.Add(2 * slack))
	}
	cut := e.now()
	late := e.audit(store.AuditRecord{Actor: "alice", Action: "task.cancel", Result: "ok"})
	if n, err := e.s.PruneAudit(e.ctx, cut, 2); err != nil || n != 2 {
		e.t.Fatalf("PruneAudit(limit 2) = %d, %v; want 2", n, err)
	}
	if n, err := e.s.PruneAudit(e.ctx, cut, 10); err != nil || n != 1 {
		e.t.Fatalf("PruneAudit again = %d, %v; want 1", n, err)
	}
	if log := e.auditLog(store.AuditQuery{Limit: 10}); len(log) != 1 || log[0].ID != late.ID {
		e.t.Errorf("AuditLog after PruneAudit = %+v, want only record %d", log, late.ID)
	}
}

// testAuditByTime: Since and Until bound At (Since <= At < Until), combine with the
// other filters, and page by BeforeID in (At, ID) order, newest first; a cursor that
// names no record selects none; a Since not before Until is ErrInvalid.
func testAuditByTime(e *env) {
	var recs []*store.AuditRecord
	for i := range 6 {
		if i > 0 {
			e.after(recs[i-1].At.Add(2 * slack))
		}
		recs = append(recs, e.audit(store.AuditRecord{Actor: []string{"alice", "bob"}[i%2], Role: "operator",
			Action: "task.cancel", Target: "task 1", Result: "ok"}))
	}
	at := func(i int) time.Time { return recs[i].At }
	for _, c := range []struct {
		name string
		q    store.AuditQuery
		want []int
	}{
		{"since and until", store.AuditQuery{Since: at(1), Until: at(4), Limit: 10}, []int{3, 2, 1}},
		{"since", store.AuditQuery{Since: at(3), Limit: 10}, []int{5, 4, 3}},
		{"until", store.AuditQuery{Until: at(2), Limit: 10}, []int{1, 0}},
		{"just after a record", store.AuditQuery{Since: at(2).Add(time.Microsecond), Until: at(3), Limit: 10}, nil},
		{"with an actor", store.AuditQuery{Actor: "bob", Since: at(1), Limit: 10}, []int{5, 3, 1}},
		{"first page", store.AuditQuery{Since: at(1), Limit: 2}, []int{5, 4}},
		{"next page", store.AuditQuery{Since: at(1), Limit: 2, BeforeID: recs[4].ID}, []int{3, 2}},
		{"last page", store.AuditQuery{Since: at(1), Limit: 2, BeforeID: recs[2].ID}, []int{1}},
		{"a page past the bound", store.AuditQuery{Until: at(3), Limit: 10, BeforeID: recs[5].ID}, []int{2, 1, 0}},
		{"a cursor of no record", store.AuditQuery{Since: at(0), Limit: 10, BeforeID: recs[5].ID + 1000}, nil},
		{"zone of the bounds", store.AuditQuery{Since: at(1).In(time.FixedZone("X", 5*3600)), Until: at(2), Limit: 10}, []int{1}},
	} {
		want := []int64{}
		for _, i := range c.want {
			want = append(want, recs[i].ID)
		}
		got := []int64{}
		for _, r := range e.auditLog(c.q) {
			got = append(got, r.ID)
		}
		if diff(want, got) != "" {
			e.t.Errorf("AuditLog(%s: %+v) = ids %v, want %v", c.name, c.q, got, want)
		}
	}
	for name, q := range map[string]store.AuditQuery{
		"since = until": {Since: at(2), Until: at(2), Limit: 10},
		"since > until": {Since: at(3), Until: at(2), Limit: 10},
	} {
		if got, err := e.s.AuditLog(e.ctx, q); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("AuditLog(%s) = %d records, %v; want ErrInvalid", name, len(got), err)
		}
	}
}
