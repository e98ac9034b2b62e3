package admin

import (
	"net/http"
	"time"

	"github.com/axsched/ax"
)

// Overview is the answer of GET /overview: the figures of the namespace at a
// glance, read from the store (cluster-wide, not one replica's memory).
type Overview struct {
	At     time.Time            `json:"at"`     // when it was read, by this server's clock
	Counts map[string]CountView `json:"counts"` // tasks per status, capped (ax.CountCap)
	// OldestDue is the due time of the oldest SCHEDULED task that is due; QueueLagMS
	// is how long ago that was (0: nothing due waits).
	OldestDue  *time.Time `json:"oldest_due,omitempty"`
	QueueLagMS int64      `json:"queue_lag_ms"`
	Leader     string     `json:"leader,omitempty"`
	Epoch      int64      `json:"epoch"`
	Replicas   int        `json:"replicas"`
	// Minutes are the executions of the last hour, minute by minute, as every
	// scheduler of the namespace wrote them (ax.Scheduler.Stats); a minute without
	// any is absent. Executions sums them; Early counts the starts before their due
	// time over the hour, which must be 0; TopFailing are the names with the most
	// unsuccessful executions over the hour.
	Minutes    []MinuteView    `json:"minutes"`
	Executions ExecutionsView  `json:"executions"`
	Early      int64           `json:"early"`
	TopFailing []NameCountView `json:"top_failing"`
	// StatsTruncated: the hour did not fit one read (more than 60 schedulers), its
	// oldest minutes are missing.
	StatsTruncated bool `json:"stats_truncated,omitempty"`
}

// ExecutionsView counts executions by outcome (ax.ExecutionCounts).
type ExecutionsView struct {
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	Panicked  int64 `json:"panicked"`
	TimedOut  int64 `json:"timed_out"`
	Released  int64 `json:"released"`
	Orphaned  int64 `json:"orphaned"`
	Retried   int64 `json:"retried"` // of the unsuccessful ones, those that run again
}

// MinuteView is one minute of executions (ax.MinuteStats), its lateness in
// milliseconds.
type MinuteView struct {
	Minute        time.Time      `json:"minute"`
	Executions    ExecutionsView `json:"executions"`
	LatenessP50MS float64        `json:"lateness_p50_ms"`
	LatenessP99MS float64        `json:"lateness_p99_ms"`
	LatenessMaxMS float64        `json:"lateness_max_ms"`
	Early         int64          `json:"early"`
}

// NameCountView is a task name and a count.
type NameCountView struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
}

// statsWindow is how far back GET /overview's statistics reach.
const statsWindow = time.Hour

func executionsOf(c ax.ExecutionCounts) ExecutionsView {
	return ExecutionsView{Succeeded: c.Succeeded, Failed: c.Failed, Panicked: c.Panicked, TimedOut: c.TimedOut, Released: c.Released,
		Orphaned: c.Orphaned, Retried: c.Retried}
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// overview is GET /overview.
func (h *Handler) overview(w http.ResponseWriter, r *http.Request, _ caller) {
	ctx := r.Context()
	counts, err := h.countViews(ctx)
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	cs, err := h.s.Cluster(ctx)
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	now := time.Now()
	// The oldest due task: the first of the due window, which the scheduled-due index
	// serves.
	page, err := h.s.Tasks(ctx, ax.TaskQuery{Statuses: []ax.Status{ax.Scheduled}, DueBefore: now, Order: ax.SoonestFirst, Limit: 1})
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	out := Overview{At: now.UTC(), Counts: counts, Leader: cs.Leader, Epoch: cs.Epoch, Replicas: len(cs.Nodes)}
	if len(page.Tasks) > 0 {
		due := page.Tasks[0].DueAt
		out.OldestDue, out.QueueLagMS = &due, max(now.Sub(due), 0).Milliseconds()
	}
	sum, err := h.s.Stats(ctx, now.Add(-statsWindow))
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	out.Minutes, out.TopFailing = []MinuteView{}, []NameCountView{}
	for _, m := range sum.Minutes {
		out.Minutes = append(out.Minutes, MinuteView{Minute: m.Minute, Executions: executionsOf(m.Executions),
			LatenessP50MS: millis(m.LatenessP50), LatenessP99MS: millis(m.LatenessP99), LatenessMaxMS: millis(m.LatenessMax), Early: m.Early})
	}
	for _, f := range sum.TopFailing {
		out.TopFailing = append(out.TopFailing, NameCountView{Name: f.Name, Count: f.Count})
	}
	out.Executions, out.Early, out.StatsTruncated = executionsOf(sum.Executions), sum.Early, sum.Truncated
	writeJSON(w, http.StatusOK, out)
}
