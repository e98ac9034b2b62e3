package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax/admin"
)

// maxForm bounds a form's body: a bulk form names at most admin.MaxBulk ids.
const maxForm = 1 << 20

// readForm parses r's form, at most maxForm bytes; false: answered.
func (c *Console) readForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		c.fail(w, r, http.StatusBadRequest, "invalid", "the form could not be read")
		return false
	}
	return true
}

// taskAction is POST /tasks/{id}/{action}: cancel, retry, trigger or reschedule one
// task, with the form's reason (and, to reschedule, its new due time), through the
// admin API; then back to the task.
func (c *Console) taskAction(w http.ResponseWriter, r *http.Request, v *view) {
	if !c.readForm(w, r) {
		return
	}
	act, id := r.PathValue("action"), r.PathValue("id")
	switch act {
	case "cancel", "retry", "trigger", "reschedule":
	default:
		c.fail(w, r, http.StatusNotFound, "not_found", "no such action")
		return
	}
	body := admin.ActionBody{Reason: r.PostForm.Get("reason")}
	if !reasoned(w, r, c, body.Reason) {
		return
	}
	if act == "reschedule" {
		at, err := parseWhen(r.PostForm.Get("at"))
		if err != nil {
			c.fail(w, r, http.StatusBadRequest, "invalid", "the new due time: want an RFC 3339 time, e.g. 2026-12-06T15:04:05Z")
			return
		}
		body.At = &at
	}
	var res admin.ActionResult
	if !c.send(w, r, "tasks/"+url.PathEscape(id)+"/"+act, body, &res) {
		return
	}
	http.Redirect(w, r, v.Base+"/tasks/"+url.PathEscape(id)+"?done="+act+"&audit="+strconv.FormatInt(res.Audit.ID, 10), http.StatusSeeOther)
}

// reasoned refuses an action of the console's without a reason (400): its forms ask
// one for every action, so that the audit log says why, even where the API would
// take none (a cancel, a retry, a pause, a resume).
func reasoned(w http.ResponseWriter, r *http.Request, c *Console, reason string) bool {
	if strings.TrimSpace(reason) == "" {
		c.fail(w, r, http.StatusBadRequest, "invalid", "give a reason: it is kept in the audit log")
		return false
	}
	return true
}

// parseWhen reads a time given as RFC 3339, or as a browser's datetime-local value
// ("2026-12-06T15:04" or with seconds), which is taken as UTC.
func parseWhen(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Parse(time.RFC3339, s)
}

// scheduleAction is POST /schedules/{name}/{action}: pause, resume or trigger, with
// the form's reason, through the admin API; then back to the schedule.
func (c *Console) scheduleAction(w http.ResponseWriter, r *http.Request, v *view) {
	if !c.readForm(w, r) {
		return
	}
	act, name := r.PathValue("action"), r.PathValue("name")
	switch act {
	case "pause", "resume", "trigger":
	default:
		c.fail(w, r, http.StatusNotFound, "not_found", "no such action")
		return
	}
	if !reasoned(w, r, c, r.PostForm.Get("reason")) {
		return
	}
	var res admin.ActionResult
	if !c.send(w, r, "schedules/"+url.PathEscape(name)+"/"+act, admin.ActionBody{Reason: r.PostForm.Get("reason")}, &res) {
		return
	}
	to := v.Base + "/schedules/" + url.PathEscape(name) + "?audit=" + strconv.FormatInt(res.Audit.ID, 10)
	if act != "trigger" {
		to += "&done=" + act
	} else if res.Task != nil {
		to = v.Base + "/tasks/" + strconv.FormatInt(res.Task.ID, 10) + "?done=trigger&audit=" + strconv.FormatInt(res.Audit.ID, 10)
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// nameAction is POST /names/{name}/{action}, pause or resume, and POST /names with
// the name and the action in the form (a name typed in): the task name paused or
// resumed with the form's reason, or given the limits the form fills in (action
// limits), through the admin API; then back to the names.
func (c *Console) nameAction(w http.ResponseWriter, r *http.Request, v *view) {
	if !c.readForm(w, r) {
		return
	}
	act, name := r.PathValue("action"), r.PathValue("name")
	if act == "" {
		act, name = r.PostForm.Get("action"), strings.TrimSpace(r.PostForm.Get("name"))
	}
	reason := r.PostForm.Get("reason")
	sends := []struct { // the API's actions, in order
		path string
		body admin.ActionBody
	}{{act, admin.ActionBody{Reason: reason}}}
	switch act {
	case "pause", "resume":
	case "limits":
		sends = sends[:0]
		for _, f := range []struct{ field, path, what string }{
			{"concurrency", "concurrency", "the concurrency limit"},
			{"key_concurrency", "key-concurrency", "the tasks per key"},
			{"rate", "rate", "the rate limit"},
			{"key_rate", "key-rate", "the rate per task key"},
		} {
			text := strings.TrimSpace(r.PostForm.Get(f.field))
			if text == "" {
				continue // left as it is
			}
			n, err := strconv.Atoi(text)
			if err != nil || n < 0 {
				c.fail(w, r, http.StatusBadRequest, "invalid", "give "+f.what+" as a whole number, or leave it empty")
				return
			}
			body := admin.ActionBody{Reason: reason}
			switch f.field {
			case "concurrency":
				body.Concurrency = &n
			case "key_concurrency":
				body.KeyConcurrency = &n
			case "rate":
				body.Rate, body.Per = &n, strings.TrimSpace(r.PostForm.Get("per"))
			case "key_rate":
				body.Rate, body.Per = &n, strings.TrimSpace(r.PostForm.Get("key_per"))
			}
			sends = append(sends, struct {
				path string
				body admin.ActionBody
			}{f.path, body})
		}
		if len(sends) == 0 {
			c.fail(w, r, http.StatusBadRequest, "invalid", "give at least one limit")
			return
		}
	default:
		c.fail(w, r, http.StatusNotFound, "not_found", "no such action")
		return
	}
	if name == "" {
		c.fail(w, r, http.StatusBadRequest, "invalid", "give the task name")
		return
	}
	if !reasoned(w, r, c, reason) {
		return
	}
	var res admin.ActionResult
	for _, s := range sends {
		if !c.send(w, r, "names/"+url.PathEscape(name)+"/"+s.path, s.body, &res) {
			return // the ones before it are done, and recorded
		}
	}
	http.Redirect(w, r, v.Base+"/names?done="+act+"&audit="+strconv.FormatInt(res.Audit.ID, 10), http.StatusSeeOther)
}

// bulkData is the bulk pages': the action, the tasks it names (ids, or the filter),
// and what the API answered.
type bulkData struct {
	Action   string
	Scope    string // "selected" or "filter"
	IDs      []int64
	Filter   string
	Reason   string
	Word     string // what the confirmation must type: the action in capitals
	Preview  *admin.BulkResult
	Result   *admin.BulkResult
	Mismatch bool // the confirmation typed was not Word
	Moved    bool // the count moved between the preview and the confirmation
	Was      int  // the count the preview showed
	TasksURL string
}

// bulkForm reads the bulk form: the action, and the ids or the filter.
func (c *Console) bulkForm(w http.ResponseWriter, r *http.Request, v *view) (bulkData, admin.BulkBody, bool) {
	if !c.readForm(w, r) {
		return bulkData{}, admin.BulkBody{}, false
	}
	f := r.PostForm
	d := bulkData{Action: f.Get("action"), Scope: f.Get("scope"), Filter: f.Get("filter"), Reason: f.Get("reason")}
	switch d.Action {
	case "cancel", "retry", "trigger":
	default:
		c.fail(w, r, http.StatusBadRequest, "invalid", "choose cancel, retry or trigger")
		return d, admin.BulkBody{}, false
	}
	d.Word = strings.ToUpper(d.Action)
	var b admin.BulkBody
	switch d.Scope {
	case "filter":
		b.Filter = &d.Filter
	case "selected":
		for _, s := range f["id"] {
			id, err := strconv.ParseInt(s, 10, 64)
			if err != nil || id <= 0 {
				c.fail(w, r, http.StatusBadRequest, "invalid", "a selected task's id is not a positive integer")
				return d, b, false
			}
			d.IDs = append(d.IDs, id)
		}
		if len(d.IDs) == 0 {
			c.fail(w, r, http.StatusBadRequest, "invalid", "select the tasks first, or choose everything matching the filter")
			return d, b, false
		}
		b.IDs = d.IDs
	default:
		c.fail(w, r, http.StatusBadRequest, "invalid", "choose the selected tasks or everything matching the filter")
		return d, b, false
	}
	q, _ := url.ParseQuery(d.Filter)
	d.TasksURL = v.Base + "/tasks" + encodeQuery(canonical(q, taskFilterParams))
	return d, b, true
}

// previewReason is the reason a count preview gives the API, which wants one: a
// dry run writes no record, so it is never kept.
const previewReason = "count preview"

// bulkPreview is POST /bulk: how many tasks the action would change (a dry run,
// capped at admin.MaxBulk), and the form that confirms it with the action typed and
// a reason.
func (c *Console) bulkPreview(w http.ResponseWriter, r *http.Request, v *view) {
	d, b, ok := c.bulkForm(w, r, v)
	if !ok {
		return
	}
	v.Title, v.Nav = "Confirm: "+d.Action, "tasks"
	c.preview(w, r, v, d, b, http.StatusOK)
}

// preview renders the confirmation of the bulk action d (of body b), with status:
// how many tasks it would change, from a dry run (count).
func (c *Console) preview(w http.ResponseWriter, r *http.Request, v *view, d bulkData, b admin.BulkBody, status int) {
	if d.Preview = c.count(w, r, d, b); d.Preview != nil {
		v.Data = d
		c.renderStatus(w, r, status, "bulk", v)
	}
}

// count is a dry run of the bulk action d (of body b): how many tasks it would
// change; nil when the API refused it (answered as a page).
func (c *Console) count(w http.ResponseWriter, r *http.Request, d bulkData, b admin.BulkBody) *admin.BulkResult {
	b.Reason, b.DryRun = previewReason, true
	var res admin.BulkResult
	if !c.send(w, r, "tasks/bulk/"+d.Action, b, &res) {
		return nil
	}
	return &res
}

// bulkConfirm is POST /bulk/confirm: with the action typed as asked, the bulk action
// itself; otherwise the preview again.
func (c *Console) bulkConfirm(w http.ResponseWriter, r *http.Request, v *view) {
	d, b, ok := c.bulkForm(w, r, v)
	if !ok {
		return
	}
	v.Title, v.Nav = "Bulk "+d.Action, "tasks"
	if strings.TrimSpace(r.PostForm.Get("confirm")) != d.Word {
		d.Mismatch = true
		c.preview(w, r, v, d, b, http.StatusBadRequest)
		return
	}
	// What the preview counted must still hold: a filter matches what it matches when
	// the action runs, so count again, and show the new count instead of acting when
	// it moved. (Between this count and the action a task may still change state: the
	// action then refuses it, and says so.)
	if expect, err := strconv.Atoi(r.PostForm.Get("expect")); err == nil {
		if d.Preview = c.count(w, r, d, b); d.Preview == nil {
			return
		}
		if d.Preview.Changed != expect {
			d.Moved, d.Was = true, expect
			v.Data = d
			c.renderStatus(w, r, http.StatusConflict, "bulk", v)
			return
		}
		d.Preview = nil
	}
	b.Reason = d.Reason
	var res admin.BulkResult
	if !c.send(w, r, "tasks/bulk/"+d.Action, b, &res) {
		return
	}
	d.Result = &res
	v.Data = d
	c.render(w, r, "bulk", v)
}
