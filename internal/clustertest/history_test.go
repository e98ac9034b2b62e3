//go:build linux

package clustertest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/internal/clustertest"
	"github.com/axsched/ax/store"
)

// recorder is a testing.TB that keeps the errors reported to it.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Helper() {}

var ruleRE = regexp.MustCompile(`^clustertest: \[([a-z-]+)\]`)

// rules returns the rules the recorded errors name, sorted, without repeats.
func (r *recorder) rules() []string {
	var rules []string
	for _, e := range r.errs {
		if m := ruleRE.FindStringSubmatch(e); m != nil && !slices.Contains(rules, m[1]) {
			rules = append(rules, m[1])
		}
	}
	slices.Sort(rules)
	return rules
}

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// ms is t0 plus n milliseconds.
func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// exec is an execution record of task id.
func exec(id string, task int64, node string, status store.Status, started, finished int, errText string) store.Execution {
	return store.Execution{ID: id, TaskID: task, Node: node, Status: status, StartedAt: ms(started), HeartbeatAt: ms(started), FinishedAt: ms(finished), Error: errText}
}

// ran is the run log of one handler call; end < 0: no end entry.
func ran(x store.Execution, pid, start, end int, result string) []clustertest.Entry {
	s := clustertest.Entry{Event: clustertest.EventStart, Node: x.Node, PID: pid, TaskID: x.TaskID, Key: fmt.Sprint("key-", x.TaskID), ExecutionID: x.ID, Attempt: x.Attempt, At: ms(start)}
	if end < 0 {
		return []clustertest.Entry{s}
	}
	e := s
	e.Event, e.At, e.Result = clustertest.EventEnd, ms(end), result
	return []clustertest.Entry{s, e}
}

const orphanedText = "orphaned: no heartbeat since 2030-01-01T12:00:00.05Z (node lost or stalled)"

// base is a valid history: two tasks, each run once and succeeded.
func base() clustertest.History {
	e1 := exec("e1", 1, "node-1", store.Succeeded, 5, 60, "")
	e2 := exec("e2", 2, "node-2", store.Succeeded, 105, 160, "")
	return clustertest.History{
		Tasks: []clustertest.TaskRecord{
			{Task: store.Task{ID: 1, Key: "key-1", Status: store.Succeeded, DueAt: ms(0), ExecutionID: "e1"}, Executions: []store.Execution{e1}, Due: ms(0)},
			{Task: store.Task{ID: 2, Key: "key-2", Status: store.Succeeded, DueAt: ms(100), ExecutionID: "e2"}, Executions: []store.Execution{e2}, Due: ms(100)},
		},
		Log:      append(ran(e1, 1, 6, 56, clustertest.ResultOK), ran(e2, 2, 106, 156, clustertest.ResultOK)...),
		StoreNow: ms(10_000),
		CtxAware: true,
	}
}

// rerun makes task 1 run twice: first (e1) as first is given, then e1b from 3200ms to
// 3250ms, succeeded. It returns e1b's run log.
func rerun(h *clustertest.History, first store.Execution, firstLog []clustertest.Entry) {
	tr := &h.Tasks[0]
	e1b := exec("e1b", 1, "node-2", store.Succeeded, 3200, 3260, "")
	e1b.Attempt = 1
	tr.Task.ExecutionID, tr.Task.Attempt = "e1b", 1
	tr.Executions = []store.Execution{first, e1b}
	h.Log = append(append(firstLog, ran(e1b, 2, 3201, 3251, clustertest.ResultOK)...), ran(h.Tasks[1].Executions[0], 2, 106, 156, clustertest.ResultOK)...)
}

func TestVerify(t *testing.T) {
	t.Parallel()
	orphaned := exec("e1", 1, "node-1", store.Failed, 5, 3100, orphanedText)
	cases := []struct {
		name   string
		mutate func(h *clustertest.History)
		want   []string // the rules violated; none: valid
	}{
		{"valid", func(h *clustertest.History) {}, nil},
		{"running at the end", func(h *clustertest.History) {
			h.Tasks[0].Task.Status = store.Running
			h.Tasks[0].Executions[0].Status = store.Running
			h.Log = h.Log[:1:1]
			h.Log = append(h.Log, ran(h.Tasks[1].Executions[0], 2, 106, 156, clustertest.ResultOK)...)
		}, []string{clustertest.RuleNotTerminal}},
		{"scheduled and overdue", func(h *clustertest.History) {
			h.Tasks = append(h.Tasks, clustertest.TaskRecord{Task: store.Task{ID: 3, Status: store.Scheduled, DueAt: ms(500)}, Due: ms(500)})
		}, []string{clustertest.RuleNotTerminal}},
		{"scheduled in the future", func(h *clustertest.History) {
			h.Tasks = append(h.Tasks, clustertest.TaskRecord{Task: store.Task{ID: 3, Status: store.Scheduled, DueAt: ms(20_000)}, Due: ms(20_000)})
		}, nil},
		{"started twice", func(h *clustertest.History) {
			again := ran(h.Tasks[0].Executions[0], 3, 7, 57, clustertest.ResultOK)
			again[0].Node, again[1].Node = "node-3", "node-3"
			h.Log = append(h.Log, again...)
		}, []string{clustertest.RuleStartedTwice, clustertest.RuleInconsistent}}, // and an end of the second start without its start
		{"a run the store never recorded", func(h *clustertest.History) {
			for i := range h.Log {
				if h.Log[i].ExecutionID == "e2" {
					h.Log[i].ExecutionID = "e9"
				}
			}
		}, []string{clustertest.RuleInconsistent}},
		{"a run on another node than recorded", func(h *clustertest.History) {
			h.Log[0].Node = "node-9"
		}, []string{clustertest.RuleInconsistent}},
		{"a success without a run", func(h *clustertest.History) {
			h.Log = h.Log[2:]
		}, []string{clustertest.RuleInconsistent}},
		{"an end without a start", func(h *clustertest.History) {
			h.Log = h.Log[1:]
		}, []string{clustertest.RuleInconsistent}},
		{"a terminal task with a RUNNING execution", func(h *clustertest.History) {
			h.Tasks[0].Task.Status = store.Failed
			h.Tasks[0].Executions[0].Status = store.Running
			h.Log = append(h.Log[:1:1], ran(h.Tasks[1].Executions[0], 2, 106, 156, clustertest.ResultOK)...)
			h.Deaths = map[int]time.Time{1: ms(50)}
		}, []string{clustertest.RuleInconsistent}},
		{"two successes", func(h *clustertest.History) {
			rerun(h, h.Tasks[0].Executions[0], ran(h.Tasks[0].Executions[0], 1, 6, 56, clustertest.ResultOK))
		}, []string{clustertest.RuleInconsistent, clustertest.RuleOverlap}},
		{"a run after a success", func(h *clustertest.History) {
			rerun(h, h.Tasks[0].Executions[0], ran(h.Tasks[0].Executions[0], 1, 6, 56, clustertest.ResultOK))
			h.Tasks[0].Executions[1].Status, h.Tasks[0].Executions[1].Error = store.Failed, "boom"
			h.Tasks[0].Task.ExecutionID = "e1"
			h.Log[3].Result = clustertest.ResultErr
		}, []string{clustertest.RuleOverlap}},
		{"a retry after a failure", func(h *clustertest.History) {
			failed := exec("e1", 1, "node-1", store.Failed, 5, 60, "boom")
			rerun(h, failed, ran(failed, 1, 6, 56, clustertest.ResultErr))
		}, nil},
		{"overlap", func(h *clustertest.History) {
			failed := exec("e1", 1, "node-1", store.Failed, 5, 3300, "boom")
			rerun(h, failed, ran(failed, 1, 6, 3300, clustertest.ResultErr))
		}, []string{clustertest.RuleOverlap}},
		{"overlap with a run that never ended", func(h *clustertest.History) {
			failed := exec("e1", 1, "node-1", store.Failed, 5, 3100, "released: scheduler stopped during the execution")
			rerun(h, failed, ran(failed, 1, 6, -1, ""))
		}, []string{clustertest.RuleOverlap}},
		{"a run that ended with its process", func(h *clustertest.History) {
			failed := exec("e1", 1, "node-1", store.Failed, 5, 3100, "released: scheduler stopped during the execution")
			rerun(h, failed, ran(failed, 1, 6, -1, ""))
			h.Deaths = map[int]time.Time{1: ms(50)}
		}, nil},
		{"overlap after the first was orphaned", func(h *clustertest.History) {
			rerun(h, orphaned, ran(orphaned, 1, 6, 3300, clustertest.ResultCancelled))
		}, nil},
		{"an orphan killed before it ended", func(h *clustertest.History) {
			rerun(h, orphaned, ran(orphaned, 1, 6, -1, ""))
		}, nil},
		{"late completion after the successor started", func(h *clustertest.History) {
			rerun(h, orphaned, ran(orphaned, 1, 6, 3300, clustertest.ResultOK))
		}, []string{clustertest.RuleLateCompletion}},
		{"late completion by a handler that ignores its context", func(h *clustertest.History) {
			rerun(h, orphaned, ran(orphaned, 1, 6, 3300, clustertest.ResultOK))
			h.CtxAware = false
		}, nil},
		{"late completion after the orphaning", func(h *clustertest.History) {
			rerun(h, orphaned, ran(orphaned, 1, 6, 3150, clustertest.ResultOK))
		}, []string{clustertest.RuleLateCompletion}},
		{"completion before the orphaning", func(h *clustertest.History) {
			rerun(h, orphaned, ran(orphaned, 1, 6, 3050, clustertest.ResultOK))
		}, nil},
		{"early", func(h *clustertest.History) {
			h.Tasks[1].Executions[0].StartedAt = ms(99)
		}, []string{clustertest.RuleEarly}},
		{"within the store's precision", func(h *clustertest.History) {
			h.Tasks[1].Executions[0].StartedAt = ms(100).Add(-500 * time.Nanosecond)
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := base()
			tc.mutate(&h)
			r := &recorder{TB: t}
			sum := clustertest.Verify(r, h)
			want := slices.Sorted(slices.Values(tc.want))
			if got := r.rules(); !slices.Equal(got, want) {
				t.Errorf("rules violated = %q, want %q; errors:\n%s", got, want, strings.Join(r.errs, "\n"))
			}
			if (sum.Violations == 0) != (len(tc.want) == 0) {
				t.Errorf("Summary.Violations = %d with errors %q", sum.Violations, r.errs)
			}
		})
	}
}

func TestVerifySummary(t *testing.T) {
	t.Parallel()
	h := base()
	orphaned := exec("e1", 1, "node-1", store.Failed, 5, 3100, orphanedText)
	rerun(&h, orphaned, ran(orphaned, 1, 6, -1, ""))
	sum := clustertest.Verify(t, h)
	want := clustertest.Summary{Tasks: 2, Executions: 3, Runs: 3, Reruns: 1, Orphaned: 1, MaxLateness: 5 * time.Millisecond}
	if sum.Tasks != want.Tasks || sum.Executions != want.Executions || sum.Runs != want.Runs || sum.Reruns != want.Reruns ||
		sum.Orphaned != want.Orphaned || sum.MaxLateness != want.MaxLateness || sum.ByStatus[store.Succeeded] != 2 {
		t.Errorf("Verify = %v, want %v", sum, want)
	}
	if got := sum.Lateness[1]; got != 5*time.Millisecond {
		t.Errorf("Lateness[1] = %v, want the first execution's 5ms", got)
	}
}

// TestVerifyManyViolations: past 20 messages per rule, one more counts the rest.
func TestVerifyManyViolations(t *testing.T) {
	t.Parallel()
	var h clustertest.History
	for i := range 30 {
		h.Tasks = append(h.Tasks, clustertest.TaskRecord{Task: store.Task{ID: int64(i + 1), Status: store.Running}})
	}
	r := &recorder{TB: t}
	sum := clustertest.Verify(r, h)
	if sum.Violations != 30 || len(r.errs) != 21 || !strings.Contains(r.errs[20], "10 more") {
		t.Errorf("Violations %d, %d messages (last %q); want 30, 21, \"10 more\"", sum.Violations, len(r.errs), r.errs[len(r.errs)-1])
	}
}

func TestRunLogRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	for i, p := range []string{a, b} {
		l, err := clustertest.OpenRunLog(p)
		if err != nil {
			t.Fatal(err)
		}
		for j := range 3 {
			if err := l.Write(clustertest.Entry{Event: clustertest.EventStart, Node: p, TaskID: int64(j), At: ms(2*j + i)}); err != nil {
				t.Fatal(err)
			}
		}
		l.Close()
	}
	es, err := clustertest.ReadRunLog(a, b, filepath.Join(dir, "missing.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 6 {
		t.Fatalf("read %d entries, want 6", len(es))
	}
	for i, e := range es {
		if !e.At.Equal(ms(i)) {
			t.Errorf("entry %d at %v, want %v (in time order)", i, e.At, ms(i))
		}
	}
}

// A last line without its newline is a write still under way, as a reader running
// beside the process sees it, and is left out; a whole line that does not parse is an
// error.
func TestRunLogPartialLine(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "a.jsonl")
	l, err := clustertest.OpenRunLog(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Write(clustertest.Entry{Event: clustertest.EventStart, Node: "a", TaskID: 1, At: ms(1)}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(`{"event":"end","node":"`); err != nil {
		t.Fatal(err)
	}
	if es, err := clustertest.ReadRunLog(p); err != nil || len(es) != 1 {
		t.Fatalf("ReadRunLog with a partial last line = %d entries, %v; want the 1 whole one", len(es), err)
	}
	if _, err := f.WriteString("\n"); err != nil { // the same line, now whole: corrupt
		t.Fatal(err)
	}
	if _, err := clustertest.ReadRunLog(p); err == nil {
		t.Error("ReadRunLog with a whole line that does not parse: no error")
	}
}
