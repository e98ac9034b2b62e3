package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax"
)

// MaxBulk is the most tasks one bulk action takes: more ids are 400 invalid, and of a
// filter that selects more, the newest MaxBulk are taken (BulkResult.More). A call
// also stops taking tasks after 40 seconds, inside a server's write timeout
// (BulkResult.Stopped).
const MaxBulk = 10_000

// BulkBody is the JSON body of POST /tasks/bulk/{cancel,retry,trigger}: the tasks, by
// IDs or by Filter (one of the two), why, and whether only to count them.
type BulkBody struct {
	// IDs are the tasks, at most MaxBulk, each once.
	IDs []int64 `json:"ids,omitempty"`
	// Filter selects the tasks as GET /tasks's query string does (status, name,
	// key_prefix, owner, task_key, due_from, due_before, finished_from,
	// finished_before; no order, limit or cursor), among those in a state the action
	// may change: "status=FAILED&name=invoice.send". The empty string selects every
	// such task.
	Filter *string `json:"filter,omitempty"`
	// Reason is why, required, at most 2,000 bytes: in the bulk's audit record and
	// in each task's.
	Reason string `json:"reason"`
	// DryRun counts the tasks the action would change, and changes nothing.
	DryRun bool `json:"dry_run,omitempty"`
}

// BulkResult is the answer of a bulk action.
type BulkResult struct {
	// Bulk ties the audit records of the action together: the bulk's own and each
	// changed task's end with "(bulk <Bulk>)". Empty in a dry run.
	Bulk   string `json:"bulk,omitempty"`
	DryRun bool   `json:"dry_run,omitempty"`
	// Selected is how many tasks the ids name, or the filter selects in a state the
	// action may change (at most MaxBulk).
	Selected int `json:"selected"`
	// More: the filter selects more than MaxBulk such tasks; the newest MaxBulk were
	// taken.
	More bool `json:"more,omitempty"`
	// Changed is how many tasks the action changed or, in a dry run, would change
	// (those in a state it may change now).
	Changed int `json:"changed"`
	// Tasks says what became of each task taken (not in a dry run), in the order taken.
	Tasks []BulkTask `json:"tasks,omitempty"`
	// Stopped says why the call stopped before taking every task selected: its time
	// ran out (see MaxBulk), the request ended, or a change failed in a way the next
	// would too. Empty when it took them all.
	Stopped string `json:"stopped,omitempty"`
	// Audit is the bulk's own audit record (not in a dry run). AuditFailed says, when
	// it could not be written, what the server logged under which error id; each
	// changed task's record was written all the same.
	Audit       *AuditEntry `json:"audit,omitempty"`
	AuditFailed string      `json:"audit_failed,omitempty"`
}

// BulkTask is what a bulk action did with one task.
type BulkTask struct {
	ID     int64  `json:"id"`
	Result string `json:"result"`           // "ok", or the refusal's code and message
	Status string `json:"status,omitempty"` // the task's status after
	Audit  int64  `json:"audit,omitempty"`  // its audit record, when it changed
}

// bulkBudget bounds the time a bulk call spends changing tasks, well inside a server's
// write timeout (ax serve's is a minute): past it the call stops taking tasks and says
// how far it got (BulkResult.Stopped); a second call takes the rest.
const bulkBudget = 40 * time.Second

// bulk registers the bulk route of a, a task's action, which may change tasks in the
// statuses may. Every call by a known token, allowed or refused, is audited as a
// single action is, under "task.bulk_<verb>"; each task it changes has its own audit
// record, in the change's transaction, as a single action's; a task it does not
// change has none (its refusal is in the answer and counted in the bulk's record).
// A bulk trigger counts each task it takes against the actor's trigger limit; an
// allowed dry run writes no record and counts against no limit.
func (h *Handler) bulk(pattern string, a action, may ...ax.Status) {
	name := "task.bulk_" + strings.TrimPrefix(a.name, "task.")
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		c, ok := h.authorize(w, r)
		if !ok {
			return
		}
		h.writeSummaries(context.WithoutCancel(r.Context()), false)
		rec := ax.AuditRecord{Actor: c.actor, Role: c.role.String(), Action: name, Target: "tasks"}
		var b BulkBody
		q, err := decodeBulk(r, &b)
		rec.Reason, rec.Target = b.Reason, bulkTarget(b)
		if err == nil {
			err = h.admit(c, action{name: name, needsReason: true}, b.Reason)
		}
		var ids []int64
		var more bool
		if err == nil {
			ids, more, err = h.chooseTasks(r.Context(), b, q, a.name, may)
		}
		if err == nil && a.trigger && !b.DryRun {
			err = h.allowTriggers(c, len(ids))
		}
		if err != nil {
			f := h.failure(r, err)
			h.refused(r, recorded(rec, action{}, outcome{}, f))
			writeError(w, f.status, f.code, f.msg)
			return
		}
		res := BulkResult{DryRun: b.DryRun, Selected: len(ids), More: more}
		if b.DryRun {
			res.Changed, err = h.changeable(r.Context(), ids, b.IDs != nil, may)
			if err != nil {
				f := h.failure(r, err)
				writeError(w, f.status, f.code, f.msg)
				return
			}
			writeJSON(w, http.StatusOK, res)
			return
		}
		res.Bulk = newID()
		h.runBulk(r, c, a, b.Reason, ids, &res, &rec)
		saved, aerr := h.s.Audit(context.WithoutCancel(r.Context()), safeRecord(rec))
		if aerr != nil {
			f := h.internal(r, "audit_failed", "the bulk's own audit record could not be written (each changed task's was)", aerr)
			res.AuditFailed = f.msg
		} else {
			entry := entryOf(saved)
			res.Audit = &entry
		}
		writeJSON(w, http.StatusOK, res)
	})
}

// runBulk runs a on each of ids, in the request's time, until bulkBudget has passed
// or a call fails in a way the next would too (a 500: the store, the audit log): it
// fills res with what became of each task taken, and rec's result with the sum.
func (h *Handler) runBulk(r *http.Request, c caller, a action, reason string, ids []int64, res *BulkResult, rec *ax.AuditRecord) {
	a.bulk = res.Bulk // a is this call's copy: its records name this bulk
	start := time.Now()
	refusals := map[string]int{} // by code
	unrecorded := 0
	for _, id := range ids {
		switch {
		case r.Context().Err() != nil:
			res.Stopped = "the request ended"
		case time.Since(start) > h.bulkBudget:
			res.Stopped = fmt.Sprintf("the %v a call may take ran out: call again for the rest", h.bulkBudget)
		}
		if res.Stopped != "" {
			break
		}
		task := BulkTask{ID: id, Result: "ok"}
		trec := ax.AuditRecord{Actor: c.actor, Role: c.role.String(), Action: a.name, Target: "task " + strconv.FormatInt(id, 10), Reason: reason}
		out, saved, err, aerr := h.perform(r, a, func(ctx context.Context, in []ax.ActionOption) (outcome, error) {
			return a.task(ctx, id, ActionBody{Reason: reason, actor: c.actor}, in)
		}, trec)
		if out.after != nil {
			task.Status = string(out.after.Status)
		}
		switch {
		case err != nil:
			f := h.failure(r, err)
			task.Result = f.code + ": " + f.msg
			refusals[f.code]++
			if f.status >= http.StatusInternalServerError {
				res.Stopped = "a task's change failed (" + f.code + "): the next would too"
			}
		case aerr != nil: // a store without transactions: done, unrecorded
			f := h.internal(r, "audit_failed", "done, but its audit record could not be written", aerr)
			task.Result = f.code + ": " + f.msg
			res.Changed++
			unrecorded++
			res.Stopped = "a task's audit record could not be written: the next would not be either"
		default:
			res.Changed++
			task.Audit = saved.ID
		}
		res.Tasks = append(res.Tasks, task)
		if res.Stopped != "" {
			break
		}
	}
	rec.Result = bulkSummary(*res, refusals, unrecorded)
}

// decodeBulk reads r's body into b, at most MaxBody bytes, and checks it: ids or a
// filter, not both; at most MaxBulk ids, each positive and given once; a filter of
// GET /tasks's parameters, which it returns as a query (a page of the most tasks).
func decodeBulk(r *http.Request, b *BulkBody) (ax.TaskQuery, error) {
	var q ax.TaskQuery
	err := readBody(r, b)
	switch {
	case err == io.EOF:
		return q, fail(http.StatusBadRequest, "invalid", "a bulk action needs a body: ids or a filter, and a reason")
	case err != nil:
		return q, err
	case (b.IDs == nil) == (b.Filter == nil):
		return q, fail(http.StatusBadRequest, "invalid", "give the tasks by ids or by filter, one of the two")
	case len(b.IDs) > MaxBulk:
		return q, fail(http.StatusBadRequest, "invalid", "%d ids: at most %d a call", len(b.IDs), MaxBulk)
	}
	seen := make(map[int64]bool, len(b.IDs))
	for _, id := range b.IDs {
		if id <= 0 || seen[id] {
			return q, fail(http.StatusBadRequest, "invalid", "id %d: want positive ids, each once", id)
		}
		seen[id] = true
	}
	if b.Filter == nil {
		return q, nil
	}
	if q, err = parseTaskQuery(*b.Filter); err != nil {
		return q, fail(http.StatusBadRequest, "invalid", "filter: %v", err)
	}
	if q.Order != ax.NewestFirst || q.Limit != 0 || q.Cursor != "" {
		return q, fail(http.StatusBadRequest, "invalid", "filter: order, limit and cursor are not a bulk's to give")
	}
	return q, nil
}

// bulkTarget is what a bulk's audit record names: its ids (the first ones, and how
// many) or its filter.
func bulkTarget(b BulkBody) string {
	switch {
	case b.Filter != nil:
		return "tasks where " + cmp.Or(*b.Filter, "(every task)")
	case len(b.IDs) == 0:
		return "tasks"
	}
	var s strings.Builder
	s.WriteString("tasks ")
	for i, id := range b.IDs {
		if i == 20 {
			fmt.Fprintf(&s, ", … (%d ids)", len(b.IDs))
			break
		}
		if i > 0 {
			s.WriteString(", ")
		}
		s.WriteString(strconv.FormatInt(id, 10))
	}
	return s.String()
}

// chooseTasks returns the ids a bulk of action takes: b's ids, or the newest MaxBulk
// tasks that q selects in a state of may, superseded ones left out (more: there are
// others). A filter's status the action may not change is 400: it would select none.
func (h *Handler) chooseTasks(ctx context.Context, b BulkBody, q ax.TaskQuery, action string, may []ax.Status) (ids []int64, more bool, err error) {
	if b.Filter == nil {
		return b.IDs, false, nil
	}
	for _, st := range q.Statuses {
		if !slices.Contains(may, st) {
			return nil, false, fail(http.StatusBadRequest, "invalid", "filter: %s changes tasks in %v only; status %s selects none", action, may, st)
		}
	}
	if len(q.Statuses) == 0 {
		q.Statuses = may
	}
	q.Limit = ax.MaxPageSize
	for {
		page, err := h.s.Tasks(ctx, q)
		if err != nil {
			return nil, false, err
		}
		for _, t := range page.Tasks {
			if t.Superseded { // a newer task holds its key: it can no longer be retried or triggered
				continue
			}
			if len(ids) == MaxBulk {
				return ids, true, nil
			}
			ids = append(ids, t.ID)
		}
		if page.Next == "" {
			return ids, false, nil
		}
		q.Cursor = page.Next
	}
}

// changeable counts the tasks of ids in a state of may: all of them when they were
// selected so (by filter), else read one by one.
func (h *Handler) changeable(ctx context.Context, ids []int64, given bool, may []ax.Status) (int, error) {
	if !given {
		return len(ids), nil
	}
	n := 0
	for _, id := range ids {
		t, err := h.s.Get(ctx, id)
		switch {
		case errors.Is(err, ax.ErrNotFound):
		case err != nil:
			return 0, err
		case slices.Contains(may, t.Status) && !t.Superseded:
			n++
		}
	}
	return n, nil
}

// bulkSummary is the result in a bulk's own audit record: what it changed (and how
// many of those without their records), what refused, and why it stopped early.
func bulkSummary(res BulkResult, refusals map[string]int, unrecorded int) string {
	var s strings.Builder
	fmt.Fprintf(&s, "changed %d of %d", res.Changed, res.Selected)
	if res.More {
		s.WriteString(" (the filter selects more)")
	}
	if unrecorded > 0 {
		fmt.Fprintf(&s, "; %d changed without their audit records", unrecorded)
	}
	if len(refusals) > 0 {
		codes := make([]string, 0, len(refusals))
		for code := range refusals {
			codes = append(codes, code)
		}
		slices.Sort(codes)
		s.WriteString("; not changed:")
		for _, code := range codes {
			fmt.Fprintf(&s, " %s %d", code, refusals[code])
		}
	}
	if res.Stopped != "" {
		fmt.Fprintf(&s, "; stopped after %d: %s", len(res.Tasks), res.Stopped)
	}
	fmt.Fprintf(&s, " (bulk %s)", res.Bulk)
	return s.String()
}
