package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/axsched/ax"
)

// NameView is a task name's state as the API shows it (ax.NameState): whether it
// is paused, its concurrency limit (0: none), who changed it last, and when.
type NameView struct {
	Name        string     `json:"name"`
	Paused      bool       `json:"paused"`
	Concurrency int        `json:"concurrency,omitempty"`
	ChangedBy   string     `json:"changed_by,omitempty"`
	ChangedAt   *time.Time `json:"changed_at,omitempty"`
}

// Names is the answer of GET /names: every task name of the namespace ever paused or
// limited, paused now or not, by name.
type Names struct {
	Names []NameView `json:"names"`
}

// names is GET /names.
func (h *Handler) names(w http.ResponseWriter, r *http.Request, _ caller) {
	ns, err := h.s.Names(r.Context())
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	out := Names{Names: make([]NameView, len(ns))}
	for i, n := range ns {
		out.Names[i] = nameOf(n)
	}
	writeJSON(w, http.StatusOK, out)
}

// nameOf is n as the API shows it.
func nameOf(n ax.NameState) NameView {
	return NameView{Name: n.Name, Paused: n.Paused, Concurrency: n.Concurrency, ChangedBy: n.ChangedBy, ChangedAt: optTime(n.ChangedAt)}
}

func nameTarget(r *http.Request) string { return "name " + r.PathValue("name") }

// nameAction is the action that pauses or resumes the path's task name with set
// (ax.Scheduler.PauseName, ResumeName), as the caller. A name's pause joins no
// transaction: it is done, then recorded (see action.alone).
func (h *Handler) nameAction(verb string,
	set func(ctx context.Context, name string, opts ...ax.NameOption) (*ax.NameState, error)) action {
	return action{name: "name." + verb, target: nameTarget, alone: true,
		run: func(ctx context.Context, r *http.Request, b ActionBody, _ []ax.ActionOption) (outcome, error) {
			st, err := set(ctx, r.PathValue("name"), ax.WithActor(b.actor))
			return outcome{name: st}, err
		}}
}

// nameLimit is the action that sets the path's task name's concurrency limit to the
// body's (ax.Scheduler.SetConcurrency), as the caller; the audit record's result says
// the limit set. Like a pause, it joins no transaction.
func (h *Handler) nameLimit() action {
	return action{name: "name.concurrency", target: nameTarget, alone: true,
		run: func(ctx context.Context, r *http.Request, b ActionBody, _ []ax.ActionOption) (outcome, error) {
			if b.Concurrency == nil {
				return outcome{}, fail(http.StatusBadRequest, "invalid", "concurrency is required: the name's new limit, 0 to remove it")
			}
			st, err := h.s.SetConcurrency(ctx, r.PathValue("name"), *b.Concurrency, ax.WithActor(b.actor))
			return outcome{name: st}, err
		}}
}
