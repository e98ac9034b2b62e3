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
}

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
	writeJSON(w, http.StatusOK, out)
}
