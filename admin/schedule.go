package admin

import (
	"net/http"
	"slices"
	"time"

	"github.com/axsched/ax"
)

// ScheduleDetail is the answer of GET /schedules/{name}: the schedule, its spec in
// words, its next slots with the zone's offset changes marked, and what became of
// its last slots (ax.Scheduler.ScheduleSlots).
type ScheduleDetail struct {
	Schedule ScheduleView   `json:"schedule"`
	Words    string         `json:"words"`
	Next     []FireTimeView `json:"next"`
	Slots    []SlotView     `json:"slots"`
}

// FireTimeView is one of a schedule's next slots (ax.FireTime).
type FireTimeView struct {
	At            time.Time `json:"at"`
	Local         string    `json:"local"` // the wall clock of the schedule's zone, e.g. "Sun 2026-03-29 03:30:00 CEST"
	OffsetChanged bool      `json:"offset_changed,omitempty"`
	Offset        string    `json:"offset"` // e.g. "+02:00"
}

// SlotView is one past slot of a schedule (ax.Slot).
type SlotView struct {
	At         time.Time `json:"at"`
	State      string    `json:"state"`
	Manual     bool      `json:"manual,omitempty"`
	TaskID     int64     `json:"task_id,omitempty"`
	Attempt    int       `json:"attempt"`
	LatenessMS float64   `json:"lateness_ms"`
	Result     string    `json:"result,omitempty"`
}

// The counts of GET /schedules/{name}.
const (
	scheduleNext  = 10
	scheduleSlots = 50
)

// schedule is GET /schedules/{name}.
func (h *Handler) schedule(w http.ResponseWriter, r *http.Request, _ caller) {
	ctx, name := r.Context(), r.PathValue("name")
	ss, err := h.s.Schedules(ctx)
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	i := slices.IndexFunc(ss, func(sc ax.Schedule) bool { return sc.Name == name })
	if i < 0 {
		writeError(w, http.StatusNotFound, "not_found", "no schedule of that name: "+quoteShort(name))
		return
	}
	sc := ss[i]
	out := ScheduleDetail{Schedule: scheduleOf(sc), Words: sc.Describe(), Next: []FireTimeView{}, Slots: []SlotView{}}
	loc, err := time.LoadLocation(sc.TimeZone)
	if err != nil {
		loc = time.UTC
	}
	if next, err := ax.FireTimes(sc.Spec, loc, sc.NextFireAt.Add(-time.Nanosecond), scheduleNext); err == nil {
		for _, f := range next {
			out.Next = append(out.Next, FireTimeView{At: f.At, Local: f.Local.Format("Mon 2006-01-02 15:04:05 MST"), OffsetChanged: f.OffsetChanged,
				Offset: f.Local.Format("-07:00")})
		}
	}
	slots, err := h.s.ScheduleSlots(ctx, name, scheduleSlots)
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	for _, sl := range slots {
		out.Slots = append(out.Slots, SlotView{At: sl.At, State: string(sl.State), Manual: sl.Manual, TaskID: sl.TaskID, Attempt: sl.Attempt,
			LatenessMS: float64(sl.Lateness.Microseconds()) / 1000, Result: sl.Result})
	}
	writeJSON(w, http.StatusOK, out)
}
