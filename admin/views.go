package admin

import (
	"net/http"
	"time"

	"github.com/axsched/ax"
)

// ScheduleView is a schedule as the API shows it.
type ScheduleView struct {
	Name       string     `json:"name"`
	Spec       string     `json:"spec"`
	Words      string     `json:"words"` // the spec in words, with its zone (ax.Schedule.Describe)
	TimeZone   string     `json:"time_zone"`
	Overlap    string     `json:"overlap"`
	Misfire    string     `json:"misfire"`
	Paused     bool       `json:"paused"`
	Dormant    bool       `json:"dormant"` // stored, but not registered in the scheduler serving the API
	NextFireAt time.Time  `json:"next_fire_at"`
	LastFireAt *time.Time `json:"last_fire_at,omitempty"`
}

// Schedules is the answer of GET /schedules.
type Schedules struct {
	Schedules []ScheduleView `json:"schedules"`
}

// schedules is GET /schedules.
func (h *Handler) schedules(w http.ResponseWriter, r *http.Request, _ caller) {
	ss, err := h.s.Schedules(r.Context())
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	out := make([]ScheduleView, len(ss))
	for i, sc := range ss {
		out[i] = scheduleOf(sc)
	}
	writeJSON(w, http.StatusOK, Schedules{Schedules: out})
}

// scheduleOf is sc as the API shows it.
func scheduleOf(sc ax.Schedule) ScheduleView {
	return ScheduleView{Name: sc.Name, Spec: sc.Spec, Words: sc.Describe(), TimeZone: sc.TimeZone, Overlap: string(sc.Overlap),
		Misfire: string(sc.Misfire), Paused: sc.Paused, Dormant: sc.Dormant, NextFireAt: sc.NextFireAt, LastFireAt: optTime(sc.LastFireAt)}
}

// NodeView is a replica as the API shows it. ClockOffsetUS is the store's clock
// minus the replica's, in microseconds, as the replica last measured it (positive:
// the replica's clock is behind).
type NodeView struct {
	Node          string    `json:"node"`
	Advertise     string    `json:"advertise,omitempty"`
	Handlers      []string  `json:"handlers"`
	Capacity      int       `json:"capacity"`
	InFlight      int       `json:"in_flight"`
	StartedAt     time.Time `json:"started_at"`
	HeartbeatAt   time.Time `json:"heartbeat_at"`
	ClockOffsetUS int64     `json:"clock_offset_us"`
}

// ClusterView is the answer of GET /cluster.
type ClusterView struct {
	ReadAt           time.Time  `json:"read_at"` // when it was read, by this server's clock: LeaseRemainingMS counts from it
	Namespace        string     `json:"namespace"`
	Leader           string     `json:"leader,omitempty"`
	ServedByLeader   bool       `json:"served_by_leader"`
	Epoch            int64      `json:"epoch"`
	LeaseRemainingMS int64      `json:"lease_remaining_ms"`
	Nodes            []NodeView `json:"nodes"`
	// History is the last 20 leadership changes, newest first
	// (ax.Scheduler.LeadershipHistory).
	History []LeadershipView `json:"history"`
}

// LeadershipView is one change of leadership (ax.LeadershipChange): a term acquired
// or ended, by whom, under which epoch, when and why.
type LeadershipView struct {
	Epoch  int64     `json:"epoch"`
	Node   string    `json:"node"`
	Kind   string    `json:"kind"` // "acquired" or "ended"
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

// clusterHistory is how many leadership changes GET /cluster shows.
const clusterHistory = 20

// cluster is GET /cluster: the leader, its epoch and lease, the live replicas.
func (h *Handler) cluster(w http.ResponseWriter, r *http.Request, _ caller) {
	cs, err := h.s.Cluster(r.Context())
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	out := ClusterView{ReadAt: time.Now().UTC(), Namespace: cs.Namespace, Leader: cs.Leader, ServedByLeader: cs.IsLeader, Epoch: cs.Epoch,
		LeaseRemainingMS: cs.LeaseRemaining.Milliseconds(), Nodes: make([]NodeView, len(cs.Nodes))}
	for i, n := range cs.Nodes {
		handlers := n.Handlers
		if handlers == nil {
			handlers = []string{}
		}
		out.Nodes[i] = NodeView{Node: n.Node, Advertise: n.Advertise, Handlers: handlers, Capacity: n.Capacity, InFlight: n.InFlight,
			StartedAt: n.StartedAt, HeartbeatAt: n.HeartbeatAt, ClockOffsetUS: n.ClockOffset.Microseconds()}
	}
	hist, err := h.s.LeadershipHistory(r.Context(), clusterHistory)
	if err != nil {
		h.writeErr(w, r, err)
		return
	}
	out.History = make([]LeadershipView, len(hist))
	for i, c := range hist {
		out.History[i] = LeadershipView{Epoch: c.Epoch, Node: c.Node, Kind: c.Kind, At: c.At, Reason: c.Reason}
	}
	writeJSON(w, http.StatusOK, out)
}

// Whoami is the answer of GET /whoami: who the caller is, and what the handler lets
// it do, for a page to hide what would be refused (the handler still refuses it).
type Whoami struct {
	Actor    string `json:"actor"`
	Role     string `json:"role"`
	ReadOnly bool   `json:"read_only"` // every mutating route is refused (Config.ReadOnly)
	Payloads bool   `json:"payloads"`  // GET /tasks/{id} shows payloads
	// RefreshMS is Config.Refresh, the interval of shared reads, in milliseconds.
	RefreshMS int64 `json:"refresh_ms"`
}

// whoami is GET /whoami.
func (h *Handler) whoami(w http.ResponseWriter, r *http.Request, c caller) {
	writeJSON(w, http.StatusOK, Whoami{Actor: c.actor, Role: c.role.String(), ReadOnly: h.ReadOnly(), Payloads: h.showPayloads(c),
		RefreshMS: h.shared.every.Milliseconds()})
}
