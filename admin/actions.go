package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/internal/strictjson"
	"github.com/axsched/ax/store"
)

// MaxBody is the largest request body the API reads: a larger one is 413.
const MaxBody = 1 << 20

// ActionBody is the JSON body of a mutating request: an object with these fields and
// no others. An empty body is an empty object.
type ActionBody struct {
	// Reason is why the operator acts; required to trigger and to reschedule, at
	// most 2,000 bytes, recorded in the audit log.
	Reason string `json:"reason,omitempty"`
	// At is the new due time of a reschedule (RFC 3339).
	At *time.Time `json:"at,omitempty"`
	// Concurrency is a task name's new concurrency limit (POST
	// /names/{name}/concurrency; required there): 0 removes it.
	Concurrency *int `json:"concurrency,omitempty"`
	// Rate and Per are a task name's new rate limit (POST /names/{name}/rate), or
	// its new rate per task key (POST /names/{name}/key-rate); Rate required there:
	// at most Rate starts in any window of Per, a Go duration such as "1s" or "1m",
	// for the name or for each key. A Rate of 0 removes it.
	Rate *int   `json:"rate,omitempty"`
	Per  string `json:"per,omitempty"`
	// KeyConcurrency is a task name's new key concurrency (POST
	// /names/{name}/key-concurrency; required there): how many of its tasks sharing a
	// task key may run at once; 0 or 1 restores the rule of one.
	KeyConcurrency *int `json:"key_concurrency,omitempty"`

	actor string // the caller's, recorded by a cancel as who asked
}

// ActionResult is the answer of a mutating request that succeeded: the task as it is
// after it (none for a schedule or a name), the name's state after a pause or resume
// of a task name, and the audit record written for it.
type ActionResult struct {
	Task  *TaskView  `json:"task,omitempty"`
	Name  *NameView  `json:"name,omitempty"`
	Audit AuditEntry `json:"audit"`
}

// AuditEntry is an audit record as the API shows it.
type AuditEntry struct {
	ID           int64     `json:"id"`
	At           time.Time `json:"at"`
	Actor        string    `json:"actor"`
	Role         string    `json:"role"`
	Action       string    `json:"action"`
	Target       string    `json:"target"`
	Reason       string    `json:"reason,omitempty"`
	Result       string    `json:"result"`
	StatusBefore string    `json:"status_before,omitempty"`
	StatusAfter  string    `json:"status_after,omitempty"`
	ExecutionID  string    `json:"execution_id,omitempty"`
}

func entryOf(r *ax.AuditRecord) AuditEntry {
	return AuditEntry{ID: r.ID, At: r.At, Actor: r.Actor, Role: r.Role, Action: r.Action, Target: r.Target, Reason: r.Reason,
		Result: r.Result, StatusBefore: string(r.StatusBefore), StatusAfter: string(r.StatusAfter), ExecutionID: r.ExecutionID}
}

// AuditLog is the answer of GET /audit.
type AuditLog struct {
	Entries []AuditEntry `json:"entries"`
	Next    int64        `json:"next,omitempty"` // before_id of the next page; 0 on the last
}

// apiFailure is a refusal of the API's own, with its status and stable code.
type apiFailure struct {
	status int
	code   string
	msg    string
}

func (f *apiFailure) Error() string { return f.code + ": " + f.msg }

func fail(status int, code, format string, args ...any) *apiFailure {
	return &apiFailure{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

// decodeBody reads r's body into b: readBody's object, or nothing.
func decodeBody(r *http.Request, b *ActionBody) error {
	if err := readBody(r, b); err != io.EOF {
		return err
	}
	return nil
}

// readBody reads r's body, at most MaxBody bytes, into v: one JSON object of v's
// fields (strictjson: no unknown, duplicate or miscased member, nothing after it).
// An empty body is io.EOF.
func readBody(r *http.Request, v any) error {
	err := strictjson.Decode(r.Body, MaxBody, v)
	switch {
	case err == nil, err == io.EOF:
		return err
	case errors.Is(err, strictjson.ErrTooLarge):
		return fail(http.StatusRequestEntityTooLarge, "too_large", "the body is over %d bytes", MaxBody)
	case errors.Is(err, strictjson.ErrInvalid):
		return fail(http.StatusBadRequest, "invalid", "the body is not one JSON object of the action's fields: %v", err)
	}
	return fail(http.StatusBadRequest, "invalid", "the body could not be read")
}

// outcome is what an action did: the task before and after it (nil for a schedule
// or a name), or a task name's state after it.
type outcome struct {
	before, after *ax.Task
	name          *ax.NameState
}

// action is one mutating route.
type action struct {
	name        string // the audit log's action, e.g. "task.cancel"
	needsReason bool
	trigger     bool                         // counted by the actor's TriggerLimit
	alone       bool                         // the change joins no transaction (a task name's pause): done, then recorded
	target      func(r *http.Request) string // what the audit record names, from the path alone
	// run does the action; in is the transaction it joins (nil: none), its audit
	// record's too. A task's action sets task instead: run on the route's task.
	run  func(ctx context.Context, r *http.Request, b ActionBody, in []ax.ActionOption) (outcome, error)
	task taskOp
	bulk string // the id of the bulk action it is a part of, named in its record's result
}

// taskOp does an action on the task id, in the transaction in (nil: none).
type taskOp func(ctx context.Context, id int64, b ActionBody, in []ax.ActionOption) (outcome, error)

// admit returns the first refusal of a mutating call by c with reason, in the order
// the API refuses them, or nil.
func (h *Handler) admit(c caller, a action, reason string) error {
	switch {
	case c.role < Operator:
		return fail(http.StatusForbidden, "forbidden", "%s's role, %s, does not allow this; it needs %s", c.actor, c.role, Operator)
	case h.readOnly:
		return fail(http.StatusForbidden, "read_only", "the API is read-only (admin.Config.ReadOnly)")
	case a.needsReason && strings.TrimSpace(reason) == "":
		return fail(http.StatusBadRequest, "invalid", "%s needs a reason", a.name)
	case len(reason) > maxReason || !store.CleanText(reason):
		return fail(http.StatusBadRequest, "invalid", "the reason is over %d bytes or holds a NUL", maxReason)
	case a.trigger:
		return h.allowTriggers(c, 1)
	}
	return nil
}

// allowTriggers counts n triggers of c against its limit (Config.Triggers), or refuses
// them all.
func (h *Handler) allowTriggers(c caller, n int) error {
	if !h.triggers.allow(c.actor, n, time.Now()) {
		return fail(http.StatusTooManyRequests, "rate_limited", "%s may trigger %d times per %v", c.actor, h.triggers.n, h.triggers.per)
	}
	return nil
}

// act registers a mutating route for operators: every call by a known token,
// allowed or refused, is one audit record (an unauthenticated one is refused without:
// it has no actor, and would let anyone fill the log), but refusals past
// Config.Refusals, which are counted in a summary record. On a store that writes in
// transactions the record of a change is written in the change's transaction, so
// that one is never kept without the other (see perform).
func (h *Handler) act(pattern string, a action) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		c, ok := h.authorize(w, r)
		if !ok {
			return
		}
		h.writeSummaries(context.WithoutCancel(r.Context()), false)
		rec := ax.AuditRecord{Actor: c.actor, Role: c.role.String(), Action: a.name, Target: a.target(r)}
		var b ActionBody
		err := decodeBody(r, &b)
		rec.Reason, b.actor = b.Reason, c.actor
		if err == nil {
			err = h.admit(c, a, b.Reason)
		}
		do := func(ctx context.Context, in []ax.ActionOption) (outcome, error) { return a.run(ctx, r, b, in) }
		if err == nil && a.task != nil {
			var id int64
			if id, err = taskID(r); err == nil { // read before a transaction is begun for it
				do = func(ctx context.Context, in []ax.ActionOption) (outcome, error) { return a.task(ctx, id, b, in) }
			}
		}
		var out outcome
		var saved *ax.AuditRecord
		var aerr error
		if err == nil {
			out, saved, err, aerr = h.perform(r, a, do, rec)
		}
		switch {
		case err != nil:
			f := h.failure(r, err)
			h.refused(r, recorded(rec, a, out, f))
			writeError(w, f.status, f.code, f.msg)
		case aerr != nil:
			f := h.internal(r, "audit_failed", "done, but its audit record could not be written", aerr)
			writeError(w, f.status, f.code, f.msg)
		default:
			res := ActionResult{Audit: entryOf(saved)}
			if out.after != nil {
				v := taskOf(out.after)
				res.Task = &v
			}
			if out.name != nil {
				v := nameOf(*out.name)
				res.Name = &v
			}
			writeJSON(w, http.StatusOK, res)
		}
	})
}

// perform runs an allowed action and writes its audit record if it is done. In a
// transaction of the store's (ax.Scheduler.InTx) the change and its record commit
// together: a record that cannot be written undoes the change (audit_failed, nothing
// done); a refused or failed action is rolled back — a refusal wrote nothing anyway
// — and its error returned, for the caller to record. A store without transactions
// (the memory store) does the change, then writes the record: aerr is then an error
// after the change. So does an action alone (a task name's pause), on every store.
func (h *Handler) perform(r *http.Request, a action, do func(ctx context.Context, in []ax.ActionOption) (outcome, error),
	rec ax.AuditRecord) (out outcome, saved *ax.AuditRecord, err, aerr error) {
	ctx := r.Context()
	joined := false
	txErr := ax.ErrUnsupported
	if !a.alone {
		txErr = h.s.InTx(ctx, func(ctx context.Context, tx any) error {
			joined, saved, aerr = true, nil, nil
			in := []ax.ActionOption{ax.WithTx(tx)}
			if out, err = do(ctx, in); err != nil {
				return err
			}
			saved, aerr = h.s.Audit(ctx, recorded(rec, a, out, nil), in...)
			return aerr
		})
	}
	switch {
	case !joined && errors.Is(txErr, ax.ErrUnsupported):
		if out, err = do(ctx, nil); err != nil {
			return out, nil, err, nil
		}
		h.shared.forget() // a change: the shared reads from before are stale
		saved, aerr = h.s.Audit(context.WithoutCancel(ctx), recorded(rec, a, out, nil))
		return out, saved, nil, aerr
	case txErr == nil:
		h.shared.forget()
		return out, saved, nil, nil
	case err == nil && aerr != nil: // rolled back with the change
		out.after = out.before
		return out, nil, h.internal(r, "audit_failed", "not done: its audit record could not be written", aerr), nil
	case err == nil: // the transaction could not begin or commit: whether the change holds is not known
		h.shared.forget()
		out.after = nil
		return out, nil, txErr, nil
	}
	return out, nil, err, nil
}

// recorded is rec completed with what the action did: the task's status before and
// after it, the execution a trigger claimed, and the result — "ok", or the
// failure's code and message — made safe to keep (safeRecord).
func recorded(rec ax.AuditRecord, a action, out outcome, f *apiFailure) ax.AuditRecord {
	if out.before != nil {
		rec.StatusBefore = out.before.Status
	}
	if out.after != nil {
		rec.StatusAfter = out.after.Status
		if a.trigger && out.after.ExecutionID != "" && (out.before == nil || out.after.ExecutionID != out.before.ExecutionID) {
			rec.ExecutionID = out.after.ExecutionID
		}
	}
	rec.Result = "ok"
	switch {
	case a.name == "name.concurrency" && out.name != nil:
		rec.Result = fmt.Sprintf("ok: concurrency %d", out.name.Concurrency) // what it was set to
	case a.name == "name.rate" && out.name != nil:
		rec.Result = fmt.Sprintf("ok: rate %d per %v", out.name.Rate, out.name.Per)
	case a.name == "name.key_rate" && out.name != nil:
		rec.Result = fmt.Sprintf("ok: key rate %d per %v", out.name.KeyRate, out.name.KeyPer)
	case a.name == "name.key_concurrency" && out.name != nil:
		rec.Result = fmt.Sprintf("ok: key concurrency %d", max(out.name.KeyConcurrency, 1))
	}
	if f != nil {
		rec.Result = f.code + ": " + f.msg
	}
	if a.bulk != "" {
		rec.Result += " (bulk " + a.bulk + ")"
	}
	return safeRecord(rec)
}

// taskID reads the {id} of a route.
func taskID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, fail(http.StatusBadRequest, "invalid", "task id %s: want a positive integer", quoteShort(r.PathValue("id")))
	}
	return id, nil
}

func taskTarget(r *http.Request) string { return "task " + r.PathValue("id") }

func scheduleTarget(r *http.Request) string { return "schedule " + r.PathValue("name") }

// onTask runs do on a task, in the transaction in (if any), reading the task before
// and after in it; check, when given, judges the two reads.
func (h *Handler) onTask(do func(ctx context.Context, t *ax.Task, b ActionBody, in []ax.ActionOption) error,
	check func(before, after *ax.Task) error) taskOp {
	return func(ctx context.Context, id int64, b ActionBody, in []ax.ActionOption) (outcome, error) {
		before, err := h.s.Get(ctx, id, in...)
		if err != nil {
			return outcome{}, err
		}
		err = do(ctx, before, b, in)
		after, gerr := h.s.Get(ctx, id, in...)
		if gerr != nil {
			after = nil
		}
		if err == nil && after != nil && check != nil {
			err = check(before, after)
		}
		return outcome{before: before, after: after}, err
	}
}

// byKey refuses a reschedule, an action by business key (ax.Reschedule), of a task
// that is not SCHEDULED: the key may be held by a newer task (Superseded, or finished
// and submitted again), which the action would reach instead. It acts only on
// SCHEDULED tasks anyway. Between this read and the action the task could still
// finish and its key be submitted again: the action then reached the newer task, which
// the caller finds out from the task it moved, and refuses — in a transaction, rolling
// it back. A cancel, by key too, refuses a finished or Superseded task for the same
// reason.
func byKey(t *ax.Task) error {
	if t.Status != ax.Scheduled || t.Superseded {
		return fail(http.StatusConflict, "conflict", "task %d is %s: only a SCHEDULED task can be rescheduled", t.ID, t.Status)
	}
	return nil
}

// reachedOther is the refusal of an action by key that reached another task than t.
func reachedOther(t *ax.Task, other string) error {
	return fail(http.StatusConflict, "conflict", "task %d gave its key up meanwhile: the action reached %s instead", t.ID, other)
}

// routeActions registers the mutating routes and the audit log.
func (h *Handler) routeActions() {
	cancel := action{name: "task.cancel", target: taskTarget,
		task: h.onTask(func(ctx context.Context, t *ax.Task, b ActionBody, in []ax.ActionOption) error {
			if t.Status.Terminal() || t.Superseded {
				return fail(http.StatusConflict, "conflict", "task %d is %s: only a SCHEDULED, DISPATCHING or RUNNING task can be cancelled", t.ID, t.Status)
			}
			opts := []ax.CancelOption{ax.WithActor(b.actor)}
			for _, o := range in {
				if co, ok := o.(ax.CancelOption); ok { // WithTx, the one ActionOption there is
					opts = append(opts, co)
				}
			}
			return h.s.Cancel(ctx, t.Name, t.Key, opts...)
		}, func(before, after *ax.Task) error {
			if after.Status != ax.Cancelled && after.CancelRequestedAt.IsZero() { // the cancel reached the key's newer task
				return reachedOther(before, "the newer task of its key")
			}
			return nil
		})}
	retry := action{name: "task.retry", target: taskTarget,
		task: h.onTask(func(ctx context.Context, t *ax.Task, _ ActionBody, in []ax.ActionOption) error {
			_, err := h.s.Retry(ctx, t.ID, in...)
			return err
		}, nil)}
	trigger := action{name: "task.trigger", needsReason: true, trigger: true, target: taskTarget,
		task: h.onTask(func(ctx context.Context, t *ax.Task, _ ActionBody, in []ax.ActionOption) error {
			return h.s.Trigger(ctx, t.ID, in...)
		}, nil)}
	h.act("POST /tasks/{id}/cancel", cancel)
	h.act("POST /tasks/{id}/retry", retry)
	h.act("POST /tasks/{id}/trigger", trigger)
	h.bulk("POST /tasks/bulk/cancel", cancel, ax.Scheduled)
	h.bulk("POST /tasks/bulk/retry", retry, ax.Failed)
	h.bulk("POST /tasks/bulk/trigger", trigger, ax.Scheduled, ax.Failed)
	h.act("POST /tasks/{id}/reschedule", action{name: "task.reschedule", needsReason: true, target: taskTarget,
		task: h.onTask(func(ctx context.Context, t *ax.Task, b ActionBody, in []ax.ActionOption) error {
			if b.At == nil {
				return fail(http.StatusBadRequest, "invalid", "a reschedule needs \"at\", the new due time")
			}
			if err := byKey(t); err != nil {
				return err
			}
			moved, err := h.s.Reschedule(ctx, t.Name, t.Key, *b.At, in...)
			if err == nil && moved.ID != t.ID {
				return reachedOther(t, fmt.Sprintf("task %d", moved.ID))
			}
			return err
		}, nil)})
	h.act("POST /schedules/{name}/pause", action{name: "schedule.pause", target: scheduleTarget,
		run: func(ctx context.Context, r *http.Request, _ ActionBody, in []ax.ActionOption) (outcome, error) {
			return outcome{}, h.s.PauseSchedule(ctx, r.PathValue("name"), in...)
		}})
	h.act("POST /schedules/{name}/resume", action{name: "schedule.resume", target: scheduleTarget,
		run: func(ctx context.Context, r *http.Request, _ ActionBody, in []ax.ActionOption) (outcome, error) {
			return outcome{}, h.s.ResumeSchedule(ctx, r.PathValue("name"), in...)
		}})
	h.act("POST /names/{name}/pause", h.nameAction("pause", h.s.PauseName))
	h.act("POST /names/{name}/resume", h.nameAction("resume", h.s.ResumeName))
	h.act("POST /names/{name}/concurrency", h.nameLimit())
	h.act("POST /names/{name}/rate", h.nameRate(false))
	h.act("POST /names/{name}/key-rate", h.nameRate(true))
	h.act("POST /names/{name}/key-concurrency", h.nameKeyLimit())
	h.act("POST /schedules/{name}/trigger", action{name: "schedule.trigger", needsReason: true, trigger: true, target: scheduleTarget,
		run: func(ctx context.Context, r *http.Request, _ ActionBody, in []ax.ActionOption) (outcome, error) {
			t, err := h.s.TriggerSchedule(ctx, r.PathValue("name"), in...)
			return outcome{after: t}, err
		}})
	h.read("GET /audit", Admin, h.auditLog)
}

// auditParams are the parameters GET /audit takes.
var auditParams = map[string]bool{"actor": true, "action": true, "target": true, "since": true, "until": true, "before_id": true, "limit": true}

// auditLog is GET /audit: actor, action, target (exact), since and until (RFC 3339:
// since <= at < until, since before until), before_id, limit (1 to 1,000; default
// 100). Pending summaries of refused calls are written first, so that the page shows
// them.
func (h *Handler) auditLog(w http.ResponseWriter, r *http.Request, _ caller) {
	v, err := readQuery(r.URL.RawQuery, auditParams, "")
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	q := ax.AuditQuery{Actor: v.Get("actor"), Action: v.Get("action"), Target: v.Get("target"), Limit: 100}
	for _, b := range []struct {
		name string
		into *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if s := v.Get(b.name); s != "" {
			if *b.into, err = time.Parse(time.RFC3339Nano, s); err != nil {
				writeError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("%s %s: want an RFC 3339 time", b.name, quoteShort(s)))
				return
			}
		}
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		writeError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("since %s is not before until %s",
			q.Since.Format(time.RFC3339Nano), q.Until.Format(time.RFC3339Nano)))
		return
	}
	if s := v.Get("before_id"); s != "" {
		if q.BeforeID, err = strconv.ParseInt(s, 10, 64); err != nil {
			writeError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("before_id %s: want an audit record's id", quoteShort(s)))
			return
		}
	}
	if s := v.Get("limit"); s != "" {
		if q.Limit, err = strconv.Atoi(s); err != nil || q.Limit < 1 || q.Limit > 1000 {
			writeError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("limit %s: want 1 to 1000", quoteShort(s)))
			return
		}
	}
	h.writeSummaries(context.WithoutCancel(r.Context()), false)
	want := q.Limit
	q.Limit++ // one more: is there a next page?
	recs, err := h.s.AuditLog(r.Context(), q)
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	out := AuditLog{Entries: []AuditEntry{}}
	for i := range recs {
		if i == want {
			out.Next = recs[i-1].ID
			break
		}
		out.Entries = append(out.Entries, entryOf(&recs[i]))
	}
	writeJSON(w, http.StatusOK, out)
}

// rateLimiter counts each actor's triggers over a sliding window.
type rateLimiter struct {
	n   int
	per time.Duration
	mu  sync.Mutex
	at  map[string][]counted
}

// counted is n triggers at one time.
type counted struct {
	at time.Time
	n  int
}

func newRateLimiter(l Limit) *rateLimiter {
	return &rateLimiter{n: l.N, per: l.Per, at: map[string][]counted{}}
}

// allow records n triggers of actor at now and reports whether they are within the
// limit; refused ones are not counted.
func (l *rateLimiter) allow(actor string, n int, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	recent, total := l.at[actor][:0], 0
	for _, c := range l.at[actor] {
		if now.Sub(c.at) < l.per {
			recent, total = append(recent, c), total+c.n
		}
	}
	if total+n > l.n {
		l.at[actor] = recent
		return false
	}
	l.at[actor] = append(recent, counted{at: now, n: n})
	return true
}
