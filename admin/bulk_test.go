package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/admin"
	"github.com/axsched/ax/store/memory"
)

// bulkCall posts body to a bulk route and decodes the answer.
func bulkCall(t *testing.T, h *admin.Handler, verb, secret, body string) (int, admin.BulkResult, map[string]any) {
	t.Helper()
	status, out := post(t, h, "/tasks/bulk/"+verb, secret, body)
	var res admin.BulkResult
	b, _ := json.Marshal(out)
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return status, res, out
}

// failedTasks runs a scheduler on s until n tasks of each name have failed (no
// retry; their keys free once they fail), and returns them by name.
func failedTasks(t *testing.T, s *ax.Scheduler, n map[string]int) map[string][]*ax.Task {
	t.Helper()
	ctx := context.Background()
	out := map[string][]*ax.Task{}
	for name, k := range n {
		// UniqueActive: a FAILED task gives its key up to a newer one, and is superseded.
		s.HandleFunc(name, func(context.Context, *ax.Task) error { return errors.New("boom") }, ax.WithMaxRetry(0), ax.WithUnique(ax.UniqueActive))
		for i := range k {
			task, err := s.Delay(ctx, name, fmt.Sprint("f", i), 0)
			if err != nil {
				t.Fatal(err)
			}
			out[name] = append(out[name], task)
		}
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	for name, k := range n {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			page, err := s.Tasks(ctx, ax.TaskQuery{Name: name, Statuses: []ax.Status{ax.Failed}, Limit: ax.MaxPageSize})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Tasks) == k {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d tasks %s FAILED after 30s", len(page.Tasks), k, name)
			}
		}
	}
	return out
}

// TestBulkActions, on every SQL store: a bulk retry by filter counts first (a dry run
// changes nothing and writes no audit record), then retries exactly the FAILED tasks
// the filter selects, each with its own audit record tied to the bulk's; a bulk cancel
// by ids changes what its state allows and reports the rest.
func TestBulkActions(t *testing.T) {
	t.Parallel()
	for name, c := range sqlStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, _, s, _ := newStoreAPI(t, c)
			ctx := context.Background()
			tasks := failedTasks(t, s, map[string]int{"invoice.send": 12, "other": 3})
			failed := tasks["invoice.send"]
			scheduled, err := s.Delay(ctx, "invoice.send", "later", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			// A FAILED task whose key a newer task took is superseded: no retry can reach it.
			if _, err := s.Delay(ctx, "other", "f0", time.Hour); err != nil {
				t.Fatal(err)
			}
			status, res, out := bulkCall(t, h, "retry", "ops-secret", `{"filter":"name=other","reason":"r","dry_run":true}`)
			if status != 200 || res.Selected != 2 || res.Changed != 2 {
				t.Fatalf("dry run over a superseded task: %d %v; want 2 of the 3 FAILED", status, out)
			}
			before := len(auditLog(t, s))

			filter := `{"filter":"name=invoice.send","reason":"upstream fixed","dry_run":true}`
			status, res, out = bulkCall(t, h, "retry", "ops-secret", filter)
			if status != 200 || res.Selected != 12 || res.Changed != 12 || res.More || res.Bulk != "" || len(res.Tasks) != 0 {
				t.Fatalf("dry run: %d %v", status, out)
			}
			if n := len(auditLog(t, s)); n != before {
				t.Fatalf("a dry run wrote %d audit records", n-before)
			}

			status, res, out = bulkCall(t, h, "retry", "ops-secret", strings.Replace(filter, `,"dry_run":true`, "", 1))
			if status != 200 || res.Selected != 12 || res.Changed != 12 || len(res.Tasks) != 12 || res.Audit == nil {
				t.Fatalf("bulk retry: %d %v", status, out)
			}
			for _, f := range failed {
				got, err := s.Get(ctx, f.ID)
				if err != nil || got.Status != ax.Scheduled {
					t.Errorf("task %d after the bulk retry: %v, %v; want SCHEDULED", f.ID, got, err)
				}
			}
			others, err := s.Tasks(ctx, ax.TaskQuery{Name: "other", Statuses: []ax.Status{ax.Failed}})
			if err != nil || len(others.Tasks) != 3 {
				t.Errorf("tasks of another name, FAILED: %d, %v; want 3, untouched", len(others.Tasks), err)
			}
			recs := auditLog(t, s)[:len(auditLog(t, s))-before]
			tag := "(bulk " + res.Bulk + ")"
			perTask := 0
			for _, r := range recs {
				switch r.Action {
				case "task.retry":
					if r.Result != "ok "+tag || r.Reason != "upstream fixed" || r.StatusBefore != ax.Failed || r.StatusAfter != ax.Scheduled {
						t.Errorf("a task's record: %+v", r)
					}
					perTask++
				case "task.bulk_retry":
					if r.Result != "changed 12 of 12 "+tag || r.Target != "tasks where name=invoice.send" || r.ID != res.Audit.ID {
						t.Errorf("the bulk's record: %+v", r)
					}
				default:
					t.Errorf("an unexpected record: %+v", r)
				}
			}
			if perTask != 12 || len(recs) != 13 {
				t.Errorf("%d records, %d of tasks; want 13, 12", len(recs), perTask)
			}

			// By ids: one cancellable, one FAILED (not cancellable), one missing.
			body := fmt.Sprintf(`{"ids":[%d,%d,999999],"reason":"clean up"}`, scheduled.ID, tasks["other"][0].ID)
			status, res, out = bulkCall(t, h, "cancel", "ops-secret", body)
			if status != 200 || res.Selected != 3 || res.Changed != 1 || len(res.Tasks) != 3 {
				t.Fatalf("bulk cancel by ids: %d %v", status, out)
			}
			if r := res.Tasks[0]; r.Result != "ok" || r.Status != "CANCELLED" || r.Audit == 0 {
				t.Errorf("the SCHEDULED task: %+v", r)
			}
			if r := res.Tasks[1]; !strings.HasPrefix(r.Result, "conflict: ") || r.Status != "FAILED" || r.Audit != 0 {
				t.Errorf("the FAILED task: %+v", r)
			}
			if r := res.Tasks[2]; !strings.HasPrefix(r.Result, "not_found: ") {
				t.Errorf("the missing task: %+v", r)
			}
			if !regexp.MustCompile(`^changed 1 of 3; not changed: conflict 1 not_found 1 \(bulk [0-9a-f]{16}\)$`).MatchString(res.Audit.Result) {
				t.Errorf("the bulk's record: %q", res.Audit.Result)
			}
		})
	}
}

// TestBulkRefusals: what a bulk call must hold, and the refusals audited as a single
// action's are.
func TestBulkRefusals(t *testing.T) {
	t.Parallel()
	viewer := admin.Token{Actor: "vic", Role: admin.Viewer, Hash: admin.HashToken("viewer-secret")}
	ops := admin.Token{Actor: "ops", Role: admin.Operator, Hash: admin.HashToken("ops-secret")}
	h, s := newAPI(t, viewer, ops)
	ids := make([]string, admin.MaxBulk+1)
	for i := range ids {
		ids[i] = fmt.Sprint(i + 1)
	}
	for _, c := range []struct {
		name, verb, secret, body string
		status                   int
		code                     string
	}{
		{"a viewer", "cancel", "viewer-secret", `{"ids":[1],"reason":"x"}`, 403, "forbidden"},
		{"no reason", "cancel", "ops-secret", `{"ids":[1]}`, 400, "invalid"},
		{"ids and filter", "cancel", "ops-secret", `{"ids":[1],"filter":"","reason":"x"}`, 400, "invalid"},
		{"neither", "cancel", "ops-secret", `{"reason":"x"}`, 400, "invalid"},
		{"an id twice", "retry", "ops-secret", `{"ids":[1,1],"reason":"x"}`, 400, "invalid"},
		{"an id not positive", "retry", "ops-secret", `{"ids":[0],"reason":"x"}`, 400, "invalid"},
		{"too many ids", "retry", "ops-secret", `{"ids":[` + strings.Join(ids, ",") + `],"reason":"x"}`, 400, "invalid"},
		{"a filter with a cursor", "retry", "ops-secret", `{"filter":"cursor=abc","reason":"x"}`, 400, "invalid"},
		{"a filter's unknown parameter", "retry", "ops-secret", `{"filter":"colour=red","reason":"x"}`, 400, "invalid"},
		{"a member twice", "retry", "ops-secret", `{"ids":[1],"reason":"x","reason":"y"}`, 400, "invalid"},
		{"no body", "trigger", "ops-secret", ``, 400, "invalid"},
		{"a status the action does not change", "retry", "ops-secret", `{"filter":"status=RUNNING","reason":"x"}`, 400, "invalid"},
		{"an unknown status", "cancel", "ops-secret", `{"filter":"status=bogus","reason":"x"}`, 400, "invalid"},
	} {
		before := len(auditLog(t, s))
		status, out := post(t, h, "/tasks/bulk/"+c.verb, c.secret, c.body)
		e, _ := out["error"].(map[string]any)
		if status != c.status || e["code"] != c.code {
			t.Errorf("%s: %d %v, want %d %s", c.name, status, out, c.status, c.code)
		}
		recs := auditLog(t, s)
		if len(recs) != before+1 {
			t.Errorf("%s: %d new audit records, want 1", c.name, len(recs)-before)
		} else if recs[0].Action != "task.bulk_"+c.verb || !strings.HasPrefix(recs[0].Result, c.code+": ") {
			t.Errorf("%s: the refusal's record: %+v", c.name, recs[0])
		}
	}
}

// TestBulkFilterCap: a filter that selects more than MaxBulk tasks takes the newest
// MaxBulk (More set), and a dry run says so without changing any.
func TestBulkFilterCap(t *testing.T) {
	t.Parallel()
	st := memory.New()
	t.Cleanup(func() { st.Close() })
	s, err := ax.New(ax.Config{Store: st, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	h, err := admin.NewHandler(s, admin.Config{Tokens: []admin.Token{{Actor: "ops", Role: admin.Operator, Hash: admin.HashToken("ops-secret")}}})
	if err != nil {
		t.Fatal(err)
	}
	specs := make([]ax.TaskSpec, admin.MaxBulk+5)
	for i := range specs {
		specs[i] = ax.TaskSpec{Name: "job", Key: fmt.Sprint(i), DueAt: time.Now().Add(time.Hour)}
	}
	if _, err := s.SubmitMany(context.Background(), specs); err != nil {
		t.Fatal(err)
	}
	status, res, out := bulkCall(t, h, "cancel", "ops-secret", `{"filter":"","reason":"x","dry_run":true}`)
	if status != 200 || res.Selected != admin.MaxBulk || !res.More || res.Changed != admin.MaxBulk {
		t.Fatalf("dry run over the cap: %d %v", status, out)
	}
	status, res, out = bulkCall(t, h, "cancel", "ops-secret", `{"filter":"name=job","reason":"x"}`)
	if status != 200 || res.Changed != admin.MaxBulk || !res.More || len(res.Tasks) != admin.MaxBulk {
		t.Fatalf("bulk cancel over the cap: %d %+v", status, res.Audit)
	}
	page, err := s.Tasks(context.Background(), ax.TaskQuery{Statuses: []ax.Status{ax.Scheduled}})
	if err != nil || len(page.Tasks) != 5 || page.Tasks[0].Key != "4" {
		t.Fatalf("left SCHEDULED: %d, %v; want the 5 oldest", len(page.Tasks), err)
	}
}

// newBulkAPI returns the admin API, with operator "ops", of a scheduler (not started)
// on the memory store, with n SCHEDULED tasks named job, and their ids.
func newBulkAPI(t *testing.T, cfg admin.Config, n int) (*admin.Handler, *ax.Scheduler, []string) {
	t.Helper()
	st := memory.New()
	t.Cleanup(func() { st.Close() })
	s, err := ax.New(ax.Config{Store: st, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tokens = []admin.Token{{Actor: "ops", Role: admin.Operator, Hash: admin.HashToken("ops-secret")}}
	h, err := admin.NewHandler(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range n {
		task, err := s.Delay(context.Background(), "job", fmt.Sprint(i), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, itoa(task.ID))
	}
	return h, s, ids
}

// TestConcurrentBulksTagTheirOwnRecords: two bulk calls at once each tie the records
// of the tasks it changed to itself, never to the other. (They shared one action
// value, and 136 of 400 records once named the other bulk.)
func TestConcurrentBulksTagTheirOwnRecords(t *testing.T) {
	t.Parallel()
	h, s, ids := newBulkAPI(t, admin.Config{}, 400)
	results := make([]admin.BulkResult, 2)
	var wg sync.WaitGroup
	for k := range results {
		wg.Go(func() {
			body := fmt.Sprintf(`{"ids":[%s],"reason":"r"}`, strings.Join(ids[k*200:(k+1)*200], ","))
			_, results[k], _ = bulkCall(t, h, "cancel", "ops-secret", body)
		})
	}
	wg.Wait()
	byID := map[int64]ax.AuditRecord{}
	for _, r := range auditLog(t, s) {
		byID[r.ID] = r
	}
	for _, res := range results {
		if res.Changed != 200 {
			t.Fatalf("a bulk changed %d of 200", res.Changed)
		}
		for _, task := range res.Tasks {
			if r := byID[task.Audit]; !strings.HasSuffix(r.Result, "(bulk "+res.Bulk+")") {
				t.Fatalf("task %d's record %q names another bulk than %s", task.ID, r.Result, res.Bulk)
			}
		}
	}
}

// TestBulkTriggersCountEach: a bulk trigger counts each task it takes against the
// actor's trigger limit, so that bulk calls cannot trigger past it; a dry run counts
// none.
func TestBulkTriggersCountEach(t *testing.T) {
	t.Parallel()
	h, _, ids := newBulkAPI(t, admin.Config{Triggers: admin.Limit{N: 3, Per: time.Hour}}, 5)
	all := fmt.Sprintf(`{"ids":[%s],"reason":"r"}`, strings.Join(ids, ","))
	if status, res, out := bulkCall(t, h, "trigger", "ops-secret", strings.Replace(all, `}`, `,"dry_run":true}`, 1)); status != 200 || res.Changed != 5 {
		t.Fatalf("a dry run of 5 triggers: %d %v", status, out)
	}
	if status, _, out := bulkCall(t, h, "trigger", "ops-secret", all); status != 429 {
		t.Fatalf("5 triggers past a limit of 3: %d %v, want 429", status, out)
	}
	// Allowed: each is then refused by the scheduler, which is not running.
	if status, res, out := bulkCall(t, h, "trigger", "ops-secret", fmt.Sprintf(`{"ids":[%s],"reason":"r"}`, strings.Join(ids[:3], ","))); status != 200 || res.Selected != 3 {
		t.Fatalf("3 triggers within a limit of 3: %d %v", status, out)
	}
	if status, _, out := bulkCall(t, h, "trigger", "ops-secret", fmt.Sprintf(`{"ids":[%s],"reason":"r"}`, ids[3])); status != 429 {
		t.Fatalf("a 4th trigger: %d %v, want 429", status, out)
	}
}

// TestBulkStopsWhenItsTimeRunsOut: a bulk call stops taking tasks once its time is
// spent, says so in its answer and its audit record, and a second call takes the rest.
func TestBulkStopsWhenItsTimeRunsOut(t *testing.T) {
	t.Parallel()
	h, _, ids := newBulkAPI(t, admin.Config{}, 3)
	admin.SetBulkBudget(h, 0)
	body := fmt.Sprintf(`{"ids":[%s],"reason":"r"}`, strings.Join(ids, ","))
	status, res, out := bulkCall(t, h, "cancel", "ops-secret", body)
	if status != 200 || res.Changed != 0 || res.Stopped == "" || res.Audit == nil || !strings.Contains(res.Audit.Result, "stopped after 0: ") {
		t.Fatalf("a bulk out of time: %d %v", status, out)
	}
	admin.SetBulkBudget(h, time.Hour)
	if status, res, out = bulkCall(t, h, "cancel", "ops-secret", body); status != 200 || res.Changed != 3 || res.Stopped != "" {
		t.Fatalf("the second call: %d %v", status, out)
	}
}
