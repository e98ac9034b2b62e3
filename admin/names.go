package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/axsched/ax"
)

// NameView is a task name's state as the API shows it (ax.NameState): whether it
// is paused, its concurrency limit (0: none) with its slots in use, its rate limit
// (0: none), its limits per task key, who changed it last, and when.
type NameView struct {
	Name        string `json:"name"`
	Paused      bool   `json:"paused"`
	Concurrency int    `json:"concurrency,omitempty"`
	InFlight    int    `json:"in_flight,omitempty"` // a limited name's tasks DISPATCHING or RUNNING
	Rate        int    `json:"rate,omitempty"`
	Per         string `json:"per,omitempty"` // the rate's period, as a Go duration
	// KeyConcurrency is how many of its tasks sharing a task key may run at once
	// (0: one).
	KeyConcurrency int `json:"key_concurrency,omitempty"`
	// KeyRate and KeyPer are its rate per task key (0: none): at most KeyRate of its
	// tasks sharing a key started in any window of KeyPer, for each key.
	KeyRate   int        `json:"key_rate,omitempty"`
	KeyPer    string     `json:"key_per,omitempty"`
	ChangedBy string     `json:"changed_by,omitempty"`
	ChangedAt *time.Time `json:"changed_at,omitempty"`
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
	v := NameView{Name: n.Name, Paused: n.Paused, Concurrency: n.Concurrency, InFlight: n.InFlight, Rate: n.Rate, KeyConcurrency: n.KeyConcurrency,
		ChangedBy: n.ChangedBy, ChangedAt: optTime(n.ChangedAt)}
	if n.Rate > 0 {
		v.Per = n.Per.String()
	}
	if n.KeyRate > 0 {
		v.KeyRate, v.KeyPer = n.KeyRate, n.KeyPer.String()
	}
	return v
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

// nameRate is the action that sets the path's task name's rate limit to the body's
// (ax.Scheduler.SetRate), or with perKey its rate per task key (SetKeyRate), as the
// caller; the audit record's result says the limit set. Like a pause, it joins no
// transaction.
func (h *Handler) nameRate(perKey bool) action {
	name, set := "name.rate", h.s.SetRate
	if perKey {
		name, set = "name.key_rate", h.s.SetKeyRate
	}
	return action{name: name, target: nameTarget, alone: true,
		run: func(ctx context.Context, r *http.Request, b ActionBody, _ []ax.ActionOption) (outcome, error) {
			if b.Rate == nil {
				return outcome{}, fail(http.StatusBadRequest, "invalid", "rate is required: the name's new rate limit, 0 to remove it")
			}
			var per time.Duration
			if *b.Rate > 0 {
				var err error
				if per, err = time.ParseDuration(b.Per); err != nil {
					return outcome{}, fail(http.StatusBadRequest, "invalid", "per %s: want a duration such as 1s or 1m", quoteShort(b.Per))
				}
			}
			st, err := set(ctx, r.PathValue("name"), *b.Rate, per, ax.WithActor(b.actor))
			return outcome{name: st}, err
		}}
}

// nameKeyLimit is the action that sets the path's task name's key concurrency to the
// body's (ax.Scheduler.SetKeyConcurrency), as the caller, audited with the value set.
func (h *Handler) nameKeyLimit() action {
	return action{name: "name.key_concurrency", target: nameTarget, alone: true,
		run: func(ctx context.Context, r *http.Request, b ActionBody, _ []ax.ActionOption) (outcome, error) {
			if b.KeyConcurrency == nil {
				return outcome{}, fail(http.StatusBadRequest, "invalid", "key_concurrency is required: how many tasks of the name sharing a key may run at once")
			}
			st, err := h.s.SetKeyConcurrency(ctx, r.PathValue("name"), *b.KeyConcurrency, ax.WithActor(b.actor))
			return outcome{name: st}, err
		}}
}
