package admin

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store"
)

// TaskView is a task as the API shows it (what a client decodes).
type TaskView struct {
	ID              int64      `json:"id"`
	Name            string     `json:"name"`
	Key             string     `json:"key"`
	Status          string     `json:"status"`
	DueAt           time.Time  `json:"due_at"`
	Attempt         int        `json:"attempt"`
	MaxRetry        int        `json:"max_retry"`
	DispatchRetries int        `json:"dispatch_retries"`
	Snoozes         int        `json:"snoozes"`
	ExecutionID     string     `json:"execution_id,omitempty"`
	OwnerService    string     `json:"owner_service,omitempty"`
	LastError       string     `json:"last_error,omitempty"`
	TaskKey         string     `json:"task_key,omitempty"`
	Overlap         string     `json:"overlap,omitempty"`
	PayloadBytes    int        `json:"payload_bytes"`
	KeyHold         string     `json:"key_hold,omitempty"`  // "" (live), "active" or "forever": see ax.Unique
	KeyUntil        *time.Time `json:"key_until,omitempty"` // the end of a ax.UniqueFor window
	Superseded      bool       `json:"superseded,omitempty"`
	// CancelledBy and CancelRequestedAt: who asked to cancel the task, and when. On
	// a RUNNING task, its handler is being stopped.
	CancelledBy       string     `json:"cancelled_by,omitempty"`
	CancelRequestedAt *time.Time `json:"cancel_requested_at,omitempty"`
	CreatedAt         time.Time  `json:"created_at"`
	UpdatedAt         time.Time  `json:"updated_at"`
	DispatchedAt      *time.Time `json:"dispatched_at,omitempty"`
	StartedAt         *time.Time `json:"started_at,omitempty"`
	HeartbeatAt       *time.Time `json:"heartbeat_at,omitempty"`
	FinishedAt        *time.Time `json:"finished_at,omitempty"`
	TriggeredAt       *time.Time `json:"triggered_at,omitempty"`
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func taskOf(t *ax.Task) TaskView {
	return TaskView{
		ID: t.ID, Name: t.Name, Key: t.Key, Status: string(t.Status), DueAt: t.DueAt, Attempt: t.Attempt, MaxRetry: t.MaxRetry,
		DispatchRetries: t.DispatchRetries, Snoozes: t.Snoozes, ExecutionID: t.ExecutionID, OwnerService: t.OwnerService, LastError: t.LastError,
		TaskKey: t.TaskKey, Overlap: string(t.Overlap), PayloadBytes: len(t.Payload),
		KeyHold: string(t.KeyHold), KeyUntil: optTime(t.KeyUntil), Superseded: t.Superseded,
		CancelledBy: t.CancelledBy, CancelRequestedAt: optTime(t.CancelRequestedAt), CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
		DispatchedAt: optTime(t.DispatchedAt), StartedAt: optTime(t.StartedAt), HeartbeatAt: optTime(t.HeartbeatAt),
		FinishedAt: optTime(t.FinishedAt), TriggeredAt: optTime(t.TriggeredAt),
	}
}

// ExecutionView is an execution as the API shows it. DueAt and ClaimedAt are the
// task's due time and claim (or trigger) as the attempt started, and LatenessMS is
// StartedAt − DueAt in milliseconds; the three are absent on attempts recorded before
// the store kept them.
type ExecutionView struct {
	ID          string     `json:"id"`
	Attempt     int        `json:"attempt"`
	Node        string     `json:"node,omitempty"`
	Status      string     `json:"status"`
	DueAt       *time.Time `json:"due_at,omitempty"`
	ClaimedAt   *time.Time `json:"claimed_at,omitempty"`
	LatenessMS  *int64     `json:"lateness_ms,omitempty"`
	StartedAt   time.Time  `json:"started_at"`
	HeartbeatAt *time.Time `json:"heartbeat_at,omitempty"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	Error       string     `json:"error,omitempty"`
}

// TaskPage is the answer of GET /tasks.
type TaskPage struct {
	Tasks []TaskView `json:"tasks"`
	Next  string     `json:"next,omitempty"` // the cursor of the next page; empty on the last
}

// TaskDetail is the answer of GET /tasks/{id}. Payload is the task's payload, for
// operators and admins unless Config.HidePayloads (PayloadShown says which).
type TaskDetail struct {
	Task         TaskView        `json:"task"`
	Executions   []ExecutionView `json:"executions"`
	PayloadShown bool            `json:"payload_shown"`
	Payload      []byte          `json:"payload,omitempty"`
}

// listTasks is GET /tasks.
func (h *Handler) listTasks(w http.ResponseWriter, r *http.Request, _ caller) {
	q, err := parseTaskQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	page, err := h.s.Tasks(r.Context(), q)
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	out := TaskPage{Tasks: make([]TaskView, len(page.Tasks)), Next: page.Next}
	for i, t := range page.Tasks {
		out.Tasks[i] = taskOf(t)
	}
	writeJSON(w, http.StatusOK, out)
}

// queryParams are the parameters GET /tasks takes.
var queryParams = map[string]bool{"status": true, "name": true, "key_prefix": true, "owner": true, "task_key": true,
	"due_from": true, "due_before": true, "finished_from": true, "finished_before": true, "order": true, "limit": true, "cursor": true}

// parseTaskQuery reads an ax.TaskQuery from GET /tasks's query string raw (see
// readQuery for its bounds). Statuses are read without repeats: more than there are
// is an error; so is a status unknown, and a malformed value. The scheduler checks
// the rest (the page size, the cursor).
func parseTaskQuery(raw string) (ax.TaskQuery, error) {
	var q ax.TaskQuery
	v, err := readQuery(raw, queryParams, "status")
	if err != nil {
		return q, err
	}
	seen := map[ax.Status]bool{}
	for _, s := range v["status"] {
		for st := range strings.SplitSeq(s, ",") {
			st := ax.Status(strings.ToUpper(strings.TrimSpace(st)))
			if seen[st] {
				continue
			}
			if len(seen) == len(store.Statuses()) {
				return q, fmt.Errorf("status: more than %d distinct values, the number of statuses", len(store.Statuses()))
			}
			seen[st] = true
			q.Statuses = append(q.Statuses, st)
		}
	}
	for _, st := range q.Statuses {
		if !st.Valid() {
			return q, fmt.Errorf("status %s: want one of %v", quoteShort(string(st)), store.Statuses())
		}
	}
	q.Name, q.KeyPrefix, q.OwnerService, q.TaskKey, q.Cursor = v.Get("name"), v.Get("key_prefix"), v.Get("owner"), v.Get("task_key"), v.Get("cursor")
	for _, t := range []struct {
		name string
		into *time.Time
	}{{"due_from", &q.DueFrom}, {"due_before", &q.DueBefore}, {"finished_from", &q.FinishedFrom}, {"finished_before", &q.FinishedBefore}} {
		if s := v.Get(t.name); s != "" {
			at, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return q, fmt.Errorf("%s %s: want an RFC 3339 time", t.name, quoteShort(s))
			}
			*t.into = at
		}
	}
	switch o := v.Get("order"); o {
	case "", "newest":
	case "soonest":
		q.Order = ax.SoonestFirst
	default:
		return q, fmt.Errorf("order %s: want newest or soonest", quoteShort(o))
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return q, fmt.Errorf("limit %s: want 1 to %d", quoteShort(s), ax.MaxPageSize)
		}
		q.Limit = n
	}
	return q, nil
}

// CountView is a number of tasks as the API shows it.
type CountView struct {
	N      int64  `json:"n"`
	Capped bool   `json:"capped,omitempty"`
	Text   string `json:"text"` // "100,000+" when capped
}

// countViews reads the tasks per status.
func (h *Handler) countViews(ctx context.Context) (map[string]CountView, error) {
	counts, err := h.s.Counts(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]CountView{}
	for st, c := range counts {
		out[string(st)] = CountView{N: c.N, Capped: c.Capped, Text: c.String()}
	}
	return out, nil
}

// counts is GET /tasks/counts.
func (h *Handler) counts(w http.ResponseWriter, r *http.Request, _ caller) {
	out, err := h.countViews(r.Context())
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"counts": out})
}

// task is GET /tasks/{id}.
func (h *Handler) task(w http.ResponseWriter, r *http.Request, c caller) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		writeError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("task id %s: want a positive integer", quoteShort(r.PathValue("id"))))
		return
	}
	t, err := h.s.Get(r.Context(), id)
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	es, err := h.s.Executions(r.Context(), id)
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	out := TaskDetail{Task: taskOf(t), Executions: make([]ExecutionView, len(es)), PayloadShown: h.showPayloads(c)}
	if out.PayloadShown {
		out.Payload = t.Payload
	}
	for i, e := range es {
		out.Executions[i] = ExecutionView{ID: e.ID, Attempt: e.Attempt, Node: e.Node, Status: string(e.Status), StartedAt: e.StartedAt,
			DueAt: optTime(e.DueAt), ClaimedAt: optTime(e.ClaimedAt),
			HeartbeatAt: optTime(e.HeartbeatAt), FinishedAt: optTime(e.FinishedAt), Error: e.Error}
		if !e.DueAt.IsZero() {
			ms := e.Lateness().Milliseconds()
			out.Executions[i].LatenessMS = &ms
		}
	}
	writeJSON(w, http.StatusOK, out)
}
