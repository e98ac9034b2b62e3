package console

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/admin"
)

// statuses are the task states, in the order the pages list them.
var statuses = []string{"SCHEDULED", "DISPATCHING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "SKIPPED"}

// overviewData is the overview page's.
type overviewData struct {
	admin.Overview
	Statuses   []string
	Throughput chart // executions per minute, by outcome
	Lateness   chart // lateness p50, p99 and max per minute
	Hour       []admin.MinuteView
}

// overviewCharts draws the last hour of o: one slot per minute up to o.At's.
func overviewCharts(o admin.Overview) (throughput, lateness chart) {
	end := o.At.Truncate(time.Minute)
	by := map[time.Time]admin.MinuteView{}
	for _, m := range o.Minutes {
		by[m.Minute.UTC()] = m
	}
	var minutes []time.Time
	for i := 59; i >= 0; i-- {
		minutes = append(minutes, end.Add(-time.Duration(i)*time.Minute))
	}
	count := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
	throughput = chart{Label: "Executions per minute by outcome, the last hour", Minutes: minutes, Stacked: true, Unit: count}
	lateness = chart{Label: "Lateness per minute (start minus due time): p50, p99 and max, the last hour", Minutes: minutes, Log: true,
		Unit: millisFrac}
	outcomes := []struct {
		name, class string
		of          func(e admin.ExecutionsView) int64
	}{
		{"succeeded", "c-ok", func(e admin.ExecutionsView) int64 { return e.Succeeded }},
		{"failed, retried", "c-retry", func(e admin.ExecutionsView) int64 { return e.Retried }},
		{"failed for good", "c-bad", func(e admin.ExecutionsView) int64 {
			return max(e.Failed+e.Panicked+e.TimedOut+e.Orphaned-e.Retried, 0)
		}},
		{"released at stop", "c-idle", func(e admin.ExecutionsView) int64 { return e.Released }},
	}
	for _, oc := range outcomes {
		sr := series{Name: oc.name, Class: oc.class}
		for _, at := range minutes {
			m, ok := by[at]
			v := 0.0
			if ok {
				v = float64(oc.of(m.Executions))
			}
			sr.Values = append(sr.Values, v)
		}
		throughput.Series = append(throughput.Series, sr)
	}
	for _, q := range []struct {
		name, class string
		of          func(m admin.MinuteView) float64
	}{
		{"p50", "c-p50", func(m admin.MinuteView) float64 { return m.LatenessP50MS }},
		{"p99", "c-p99", func(m admin.MinuteView) float64 { return m.LatenessP99MS }},
		{"max", "c-max", func(m admin.MinuteView) float64 { return m.LatenessMaxMS }},
	} {
		sr := series{Name: q.name, Class: q.class}
		for _, at := range minutes {
			m, ok := by[at]
			if !ok || m.Executions == (admin.ExecutionsView{}) {
				sr.Values = append(sr.Values, math.NaN())
				continue
			}
			sr.Values = append(sr.Values, q.of(m))
		}
		lateness.Series = append(lateness.Series, sr)
	}
	return throughput, lateness
}

// overview is GET /: the namespace at a glance.
func (c *Console) overview(w http.ResponseWriter, r *http.Request, v *view) {
	v.Title, v.Nav = "Overview", "overview"
	live(r, v)
	var o admin.Overview
	if !c.read(w, r, "overview", "", &o) {
		return
	}
	d := overviewData{Overview: o, Statuses: statuses, Hour: o.Minutes}
	d.Throughput, d.Lateness = overviewCharts(o)
	slices.Reverse(d.Hour) // the table: newest first
	v.Data = d
	c.render(w, r, "overview", v)
}

// taskFilterParams are the parameters of GET /tasks the tasks page passes on, in
// the order it writes them: the filter, then the order and the page.
var (
	taskFilterParams = []string{"status", "name", "key_prefix", "owner", "task_key", "due_from", "due_before", "finished_from", "finished_before"}
	taskPageParams   = []string{"order", "limit", "cursor"}
)

// tasksData is the tasks page's.
type tasksData struct {
	Filter   url.Values // the filter as given
	Selected map[string]bool
	Statuses []string
	Filtered string // the filter as a query string (the bulk form's)
	Tasks    []admin.TaskView
	Next     string // the next page's URL; empty on the last
	First    string // the first page's URL, when this is not it
	Bulk     bool   // the caller may act on them
}

// canonical returns the parameters of q named in names, without empty values, in
// names' order: the same filter gives the same query string, and so the same shared
// read.
func canonical(q url.Values, names ...[]string) url.Values {
	out := url.Values{}
	for _, ns := range names {
		for _, n := range ns {
			for _, val := range q[n] {
				if n == "status" {
					for s := range strings.SplitSeq(val, ",") {
						if s = strings.ToUpper(strings.TrimSpace(s)); s != "" && !slices.Contains(out[n], s) {
							out.Add(n, s)
						}
					}
				} else if val = strings.TrimSpace(val); val != "" {
					out.Set(n, val)
				}
			}
		}
	}
	return out
}

// encodeQuery is "?" and q encoded, or "" for an empty q.
func encodeQuery(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// tasks is GET /tasks: the admin query's filters, newest or soonest first, paged by
// cursor, with bulk actions on the rows selected or on the whole filter.
func (c *Console) tasks(w http.ResponseWriter, r *http.Request, v *view) {
	v.Title, v.Nav = "Tasks", "tasks"
	live(r, v)
	q := r.URL.Query()
	filter := canonical(q, taskFilterParams)
	all := canonical(q, taskFilterParams, taskPageParams)
	if all.Get("limit") == "" {
		all.Set("limit", "50")
	}
	var page admin.TaskPage
	if !c.read(w, r, "tasks", all.Encode(), &page) {
		return
	}
	d := tasksData{Filter: canonical(q, taskFilterParams, taskPageParams), Selected: map[string]bool{}, Statuses: statuses,
		Filtered: filter.Encode(), Tasks: page.Tasks, Bulk: v.CanAct}
	for _, s := range filter["status"] {
		d.Selected[s] = true
	}
	if page.Next != "" {
		next := canonical(q, taskFilterParams, taskPageParams)
		next.Set("cursor", page.Next)
		d.Next = v.Base + "/tasks" + encodeQuery(next)
	}
	if q.Get("cursor") != "" {
		first := canonical(q, taskFilterParams, taskPageParams)
		first.Del("cursor")
		d.First = v.Base + "/tasks" + encodeQuery(first)
	}
	v.Data = d
	c.render(w, r, "tasks", v)
}

// taskData is the task page's.
type taskData struct {
	admin.TaskDetail
	Attempts    []attempt
	Payload     payloadView
	Audit       []admin.AuditEntry
	AuditShown  bool
	CanCancel   bool
	CanRetry    bool
	CanTrigger  bool
	CanMove     bool
	LatenessMS  *int64 // the current attempt's: StartedAt − DueAt
	Done        string // what the caller's last action did, from the redirect
	DoneAuditID string
}

// attempt is one execution as the timeline shows it.
type attempt struct {
	admin.ExecutionView
	DurationMS *int64
	Current    bool
}

// payloadView is a payload as the task page shows it.
type payloadView struct {
	Shown     bool
	Bytes     int
	JSON      bool
	Text      string // pretty JSON, the text, or a quoted form of bytes that are not UTF-8
	Truncated bool
}

// maxPayloadShown is the most of a payload the task page shows.
const maxPayloadShown = 64 << 10

// task is GET /tasks/{id}: every field, the payload, each attempt, the audit records
// about it, and the actions its state allows.
func (c *Console) task(w http.ResponseWriter, r *http.Request, v *view) {
	v.Title, v.Nav = "Task "+r.PathValue("id"), "tasks"
	live(r, v)
	var d taskData
	if !c.read(w, r, "tasks/"+url.PathEscape(r.PathValue("id")), "", &d.TaskDetail) {
		return
	}
	t := d.Task
	d.Payload = showPayload(d.TaskDetail)
	for _, e := range d.Executions {
		a := attempt{ExecutionView: e, Current: e.ID == t.ExecutionID}
		if e.FinishedAt != nil {
			ms := e.FinishedAt.Sub(e.StartedAt).Milliseconds()
			a.DurationMS = &ms
		}
		d.Attempts = append(d.Attempts, a)
	}
	if t.StartedAt != nil {
		ms := t.StartedAt.Sub(t.DueAt).Milliseconds()
		d.LatenessMS = &ms
	}
	if v.IsAdmin {
		var log admin.AuditLog
		if e := c.get(r, "audit", url.Values{"target": {"task " + strconv.FormatInt(t.ID, 10)}, "limit": {"50"}}.Encode(), &log); e != nil {
			c.answered(w, r, e)
			return
		}
		d.Audit, d.AuditShown = log.Entries, true
	}
	if v.CanAct {
		live := t.Status == "SCHEDULED" || t.Status == "DISPATCHING" || t.Status == "RUNNING"
		d.CanCancel = live && !t.Superseded && t.CancelRequestedAt == nil
		d.CanRetry = t.Status == "FAILED"
		d.CanTrigger = t.Status == "SCHEDULED" || t.Status == "FAILED"
		d.CanMove = t.Status == "SCHEDULED" && !t.Superseded
	}
	d.Done, d.DoneAuditID = doneText(r.URL.Query().Get("done")), r.URL.Query().Get("audit")
	v.Data = d
	c.render(w, r, "task", v)
}

// showPayload is d's payload as the page shows it: JSON indented, text as it is,
// other bytes quoted; at most maxPayloadShown bytes of it.
func showPayload(d admin.TaskDetail) payloadView {
	p := payloadView{Shown: d.PayloadShown, Bytes: d.Task.PayloadBytes}
	if !p.Shown || len(d.Payload) == 0 {
		return p
	}
	b := d.Payload
	if len(b) > maxPayloadShown {
		b, p.Truncated = b[:maxPayloadShown], true
	}
	var out bytes.Buffer
	switch {
	case !p.Truncated && json.Valid(b) && json.Indent(&out, b, "", "  ") == nil:
		p.JSON, p.Text = true, out.String()
	case utf8.Valid(b):
		p.Text = string(b)
	default:
		p.Text = strconv.QuoteToGraphic(string(b))
	}
	return p
}

// doneText is what the page says after an action that redirected to it: from a
// fixed set, whatever the URL says.
func doneText(done string) string {
	return map[string]string{
		"cancel": "Cancelled.", "retry": "Retried: scheduled to run again.", "trigger": "Triggered.",
		"reschedule": "Rescheduled.", "pause": "Paused.", "resume": "Resumed.",
		"limits": "Limits set.",
	}[done]
}

// schedulesData is the schedules page's.
type schedulesData struct {
	Schedules []admin.ScheduleView
}

// schedules is GET /schedules.
func (c *Console) schedules(w http.ResponseWriter, r *http.Request, v *view) {
	v.Title, v.Nav = "Schedules", "schedules"
	live(r, v)
	var ss admin.Schedules
	if !c.read(w, r, "schedules", "", &ss) {
		return
	}
	v.Data = schedulesData{Schedules: ss.Schedules}
	c.render(w, r, "schedules", v)
}

// scheduleData is the schedule page's.
type scheduleData struct {
	admin.ScheduleDetail
	Done        string
	DoneAuditID string
}

// schedule is GET /schedules/{name}: the spec in words, the next 10 slots with the
// zone's offset changes marked, a strip of the last 50 slots coloured by what became
// of each, and pause, resume and trigger.
func (c *Console) schedule(w http.ResponseWriter, r *http.Request, v *view) {
	name := r.PathValue("name")
	v.Title, v.Nav = "Schedule "+name, "schedules"
	live(r, v)
	var d scheduleData
	if !c.read(w, r, "schedules/"+url.PathEscape(name), "", &d.ScheduleDetail) {
		return
	}
	slices.Reverse(d.Slots) // the strip: oldest on the left
	d.Done, d.DoneAuditID = doneText(r.URL.Query().Get("done")), r.URL.Query().Get("audit")
	v.Data = d
	c.render(w, r, "schedule", v)
}

// namesData is the names page's.
type namesData struct {
	Names       []nameRow
	Done        string
	DoneAuditID string
}

// nameRow is one task name on the names page: its state, and whether a live
// replica has a handler for it.
type nameRow struct {
	admin.NameView
	Handled bool
}

// names is GET /names: the task names the console knows — those a live replica
// handles and those ever paused or limited — with their state, pause and resume, and
// their concurrency limits.
func (c *Console) names(w http.ResponseWriter, r *http.Request, v *view) {
	v.Title, v.Nav = "Names", "names"
	live(r, v)
	var ns admin.Names
	if !c.read(w, r, "names", "", &ns) {
		return
	}
	var cl admin.ClusterView
	if !c.read(w, r, "cluster", "", &cl) {
		return
	}
	byName := map[string]*nameRow{}
	var d namesData
	for _, n := range ns.Names {
		d.Names = append(d.Names, nameRow{NameView: n})
	}
	for i := range d.Names {
		byName[d.Names[i].Name] = &d.Names[i]
	}
	for _, node := range cl.Nodes {
		for _, h := range node.Handlers {
			if row, ok := byName[h]; ok {
				row.Handled = true
				continue
			}
			d.Names = append(d.Names, nameRow{NameView: admin.NameView{Name: h}, Handled: true})
			byName[h] = &d.Names[len(d.Names)-1]
		}
	}
	slices.SortFunc(d.Names, func(a, b nameRow) int { return strings.Compare(a.Name, b.Name) })
	d.Done, d.DoneAuditID = doneText(r.URL.Query().Get("done")), r.URL.Query().Get("audit")
	v.Data = d
	c.render(w, r, "names", v)
}

// clusterData is the cluster page's.
type clusterData struct {
	admin.ClusterView
	LeaseDeadline time.Time
}

// cluster is GET /cluster: the leader, its epoch, the lease, the replicas.
func (c *Console) cluster(w http.ResponseWriter, r *http.Request, v *view) {
	v.Title, v.Nav = "Cluster", "cluster"
	live(r, v)
	var d clusterData
	if !c.read(w, r, "cluster", "", &d.ClusterView) {
		return
	}
	d.LeaseDeadline = d.ReadAt.Add(time.Duration(d.LeaseRemainingMS) * time.Millisecond) // the answer may be a shared one, read earlier
	v.Data = d
	c.render(w, r, "cluster", v)
}

// auditParams are the parameters of GET /audit the audit page passes on.
var auditParams = []string{"actor", "action", "target", "since", "until", "before_id", "limit"}

// auditData is the audit page's.
type auditData struct {
	Filter  url.Values
	Entries []admin.AuditEntry
	Next    string
	First   string
}

// audit is GET /audit: the audit log, newest first, filtered by actor, action,
// target and time, and paged (admins).
func (c *Console) audit(w http.ResponseWriter, r *http.Request, v *view) {
	v.Title, v.Nav = "Audit", "audit"
	live(r, v)
	q := canonical(r.URL.Query(), auditParams)
	if q.Get("limit") == "" {
		q.Set("limit", "50")
	}
	var log admin.AuditLog
	d := auditData{Filter: canonical(r.URL.Query(), auditParams)}
	if e := c.get(r, "audit", q.Encode(), &log); e != nil {
		c.answered(w, r, e)
		return
	}
	d.Entries = log.Entries
	if log.Next != 0 {
		next := canonical(r.URL.Query(), auditParams)
		next.Set("before_id", strconv.FormatInt(log.Next, 10))
		d.Next = v.Base + "/audit" + encodeQuery(next)
	}
	if q.Get("before_id") != "" {
		first := canonical(r.URL.Query(), auditParams)
		first.Del("before_id")
		d.First = v.Base + "/audit" + encodeQuery(first)
	}
	v.Data = d
	c.render(w, r, "audit", v)
}
