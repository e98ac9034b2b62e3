// Package clustertest runs ax schedulers in child processes — the test binary
// re-executed into a test that calls RunChild — on one PostgreSQL schema and one Redis
// election, so that tests can pause (SIGSTOP), kill (SIGKILL) and stop (SIGTERM) whole
// replicas, have them dispatch to each other's executor endpoints, and reach them or
// the services through proxies they can cut; and it checks the full execution
// history of such a test against the scheduler's guarantees (Verify).
//
// The history has two sides: what the store recorded (the tasks and their execution
// records, read with Collect) and what the handlers did (the run log: one JSON line
// per handler start and per handler end, written by each child with one O_APPEND
// write per line, so that a kill -9 loses nothing already written). All processes run
// on one host: the wall times of the run logs are compared with each other directly,
// and with the store's stamps through the measured offset of the store's clock.
package clustertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

// The rules Verify checks; each violation's message starts with its rule in brackets.
const (
	// RuleNotTerminal: a task is neither terminal nor SCHEDULED with its due time in
	// the future.
	RuleNotTerminal = "not-terminal"
	// RuleStartedTwice: the run log has two starts of one execution id.
	RuleStartedTwice = "started-twice"
	// RuleInconsistent: the run log and the store disagree: a handler ran for an
	// execution the store did not record, or for another task, attempt or node than
	// the record's; an execution recorded SUCCEEDED without a successful run; two
	// successful executions of one task; an execution left RUNNING under a terminal
	// task; a malformed log.
	RuleInconsistent = "inconsistent"
	// RuleOverlap: two runs of one task overlapped in time, and the earlier one's
	// execution was not declared orphaned by recovery; or a task ran again after an
	// execution of it succeeded.
	RuleOverlap = "overlap"
	// RuleLateCompletion: a handler that honours its context completed successfully
	// after its execution was declared orphaned, or after the next run of its task
	// started: its effect happened while another execution had the task.
	RuleLateCompletion = "late-completion"
	// RuleEarly: an execution started, by the store's stamps, before the task's due
	// time as submitted.
	RuleEarly = "early"
)

// OrphanedPrefix starts the error that recovery (internal/recovery) records on an
// execution it declares orphaned: "orphaned: no heartbeat since … (node lost or
// stalled)".
const OrphanedPrefix = "orphaned:"

// Orphaned reports whether recovery declared the execution orphaned.
func Orphaned(e store.Execution) bool {
	return e.Status == store.Failed && strings.HasPrefix(e.Error, OrphanedPrefix)
}

// History is everything a test did, as Verify checks it.
type History struct {
	// Tasks are every task the test submitted, with their execution records.
	Tasks []TaskRecord
	// Log is the run log of every process that ran handlers (ReadRunLog).
	Log []Entry
	// StoreNow is the store's time when the history was read: a SCHEDULED task must
	// be due after it.
	StoreNow time.Time
	// ClockOffset is the store's clock minus the local wall clock: a wall time of the
	// run log plus ClockOffset is a time of the store's.
	ClockOffset time.Duration
	// ClockSlack is the tolerance of a comparison between a wall time of the run log
	// and a stamp of the store's (the measured offset's uncertainty). Default 10ms.
	ClockSlack time.Duration
	// Precision is the store's timestamp precision: a stamp may be this much below the
	// time it rounds. Default 1µs (PostgreSQL, MySQL).
	Precision time.Duration
	// CtxAware says the handlers honour their context: they check it before they
	// report success. A successful completion after the execution was taken from them
	// is then a violation (RuleLateCompletion).
	CtxAware bool
	// Deaths holds, by process id, a wall time by which that process was dead (it was
	// killed): a run of it without an end entry ended then at the latest. A run with no
	// end entry of a process not listed never ended.
	Deaths map[int]time.Time
}

// TaskRecord is one submitted task: as the store holds it at the end, with its
// execution records, and its due time as submitted.
type TaskRecord struct {
	Task       store.Task
	Executions []store.Execution
	Due        time.Time
}

// Summary is what Verify counted.
type Summary struct {
	Tasks      int
	Executions int // execution records
	Runs       int // handler starts in the run log
	Reruns     int // tasks with more than one run
	Orphaned   int // execution records declared orphaned
	ByStatus   map[store.Status]int
	// Lateness is, per task id, its first execution's start (by the store's stamps)
	// minus its due time as submitted; tasks never started are absent.
	Lateness    map[int64]time.Duration
	MaxLateness time.Duration
	Violations  int
}

// String formats the counts for t.Logf.
func (s Summary) String() string {
	var by []string
	for _, st := range store.Statuses() {
		if n := s.ByStatus[st]; n > 0 {
			by = append(by, fmt.Sprintf("%s %d", st, n))
		}
	}
	return fmt.Sprintf("%d tasks (%s), %d executions (%d orphaned), %d runs, %d tasks run more than once, max lateness %v, %d violations",
		s.Tasks, strings.Join(by, ", "), s.Executions, s.Orphaned, s.Runs, s.Reruns, s.MaxLateness.Round(time.Microsecond), s.Violations)
}

// run is one handler call: its start entry and its end entry, if any.
type run struct {
	start Entry
	end   *Entry
}

// maxReports bounds the messages per rule; the rest are counted in one more.
const maxReports = 20

// verifier reports the violations of one Verify call.
type verifier struct {
	t       testing.TB
	h       History
	counts  map[string]int
	summary Summary
}

func (v *verifier) report(rule, format string, args ...any) {
	v.t.Helper()
	v.summary.Violations++
	v.counts[rule]++
	if v.counts[rule] <= maxReports {
		v.t.Errorf("clustertest: [%s] "+format, append([]any{rule}, args...)...)
	}
}

// toStore converts a wall time of the run log to the store's clock.
func (v *verifier) toStore(at time.Time) time.Time { return at.Add(v.h.ClockOffset) }

// ended returns when a run ended at the latest: its end entry, or its process's death;
// ok false: it never ended.
func (v *verifier) ended(r run) (time.Time, bool) {
	if r.end != nil {
		return r.end.At, true
	}
	if d, ok := v.h.Deaths[r.start.PID]; ok {
		return d, true
	}
	return time.Time{}, false
}

// Verify checks the whole history against the scheduler's guarantees and reports every
// violation with t.Errorf (at most 20 messages per rule, and a count of the rest):
//
//   - every task is terminal (SUCCEEDED, FAILED, CANCELLED, SKIPPED) or SCHEDULED with
//     its due time after h.StoreNow (RuleNotTerminal);
//   - no execution id started twice in the run log (RuleStartedTwice), and the run log
//     agrees with the execution records (RuleInconsistent);
//   - no two runs of one task overlap in time, unless the earlier one's execution was
//     declared orphaned by recovery; and no run follows a successful execution
//     (RuleOverlap); with h.CtxAware, no orphaned run completes successfully after its
//     successor started or after it was declared orphaned (RuleLateCompletion);
//   - no execution starts, by the store's stamps, before its task's due time as
//     submitted, within h.Precision (RuleEarly).
//
// It returns what it counted, for t.Logf.
func Verify(t testing.TB, h History) Summary {
	t.Helper()
	if h.Precision <= 0 {
		h.Precision = time.Microsecond
	}
	if h.ClockSlack <= 0 {
		h.ClockSlack = 10 * time.Millisecond
	}
	v := &verifier{t: t, h: h, counts: map[string]int{}, summary: Summary{
		Tasks: len(h.Tasks), ByStatus: map[store.Status]int{}, Lateness: map[int64]time.Duration{},
	}}

	// The execution records, by id.
	type recorded struct {
		exec *store.Execution
		task *TaskRecord
	}
	execs := map[string]recorded{}
	tasks := map[int64]*TaskRecord{}
	for i := range h.Tasks {
		tr := &h.Tasks[i]
		tasks[tr.Task.ID] = tr
		for j := range tr.Executions {
			x := &tr.Executions[j]
			v.summary.Executions++
			if Orphaned(*x) {
				v.summary.Orphaned++
			}
			if prev, dup := execs[x.ID]; dup {
				v.report(RuleInconsistent, "execution id %s is recorded for task %d and for task %d", x.ID, prev.task.Task.ID, tr.Task.ID)
				continue
			}
			if x.TaskID != tr.Task.ID {
				v.report(RuleInconsistent, "task %d lists execution %s of task %d", tr.Task.ID, x.ID, x.TaskID)
			}
			execs[x.ID] = recorded{exec: x, task: tr}
		}
	}

	// The runs: start entries joined with their end entries, by execution id.
	runs := map[string]*run{}
	var order []string // execution ids in log order of their starts
	for _, e := range h.Log {
		switch e.Event {
		case EventStart:
			v.summary.Runs++
			if prev, dup := runs[e.ExecutionID]; dup {
				v.report(RuleStartedTwice, "execution %s of task %d (key %q) started twice: on %s (pid %d) at %s and on %s (pid %d) at %s",
					e.ExecutionID, e.TaskID, e.Key, prev.start.Node, prev.start.PID, stamp(prev.start.At), e.Node, e.PID, stamp(e.At))
				continue
			}
			runs[e.ExecutionID] = &run{start: e}
			order = append(order, e.ExecutionID)
		case EventEnd:
			r, ok := runs[e.ExecutionID]
			switch {
			case !ok:
				v.report(RuleInconsistent, "run log: end of execution %s of task %d on %s (pid %d) at %s without a start before it",
					e.ExecutionID, e.TaskID, e.Node, e.PID, stamp(e.At))
			case r.end != nil:
				v.report(RuleInconsistent, "run log: execution %s of task %d ended twice (%s, %s)", e.ExecutionID, e.TaskID, stamp(r.end.At), stamp(e.At))
			case e.PID != r.start.PID:
				v.report(RuleInconsistent, "run log: execution %s started in pid %d and ended in pid %d", e.ExecutionID, r.start.PID, e.PID)
			default:
				end := e
				r.end = &end
			}
		default:
			v.report(RuleInconsistent, "run log: entry of unknown event %q: %+v", e.Event, e)
		}
	}

	// Each run against its execution record; the runs of each task.
	byTask := map[int64][]*run{}
	for _, id := range order {
		r := runs[id]
		s := r.start
		rec, ok := execs[id]
		switch {
		case !ok:
			v.report(RuleInconsistent, "a handler ran for execution %s of task %d (key %q) on %s (pid %d) at %s, which the store never recorded",
				id, s.TaskID, s.Key, s.Node, s.PID, stamp(s.At))
		case rec.exec.TaskID != s.TaskID || rec.exec.Attempt != s.Attempt || rec.exec.Node != s.Node:
			v.report(RuleInconsistent, "execution %s: the handler ran for task %d attempt %d on %s, the store recorded task %d attempt %d on %s",
				id, s.TaskID, s.Attempt, s.Node, rec.exec.TaskID, rec.exec.Attempt, rec.exec.Node)
		}
		if _, ok := tasks[s.TaskID]; !ok {
			v.report(RuleInconsistent, "a handler ran for task %d (key %q, execution %s), which the test did not submit", s.TaskID, s.Key, id)
			continue
		}
		byTask[s.TaskID] = append(byTask[s.TaskID], r)
	}

	for i := range h.Tasks {
		v.task(&h.Tasks[i], byTask[h.Tasks[i].Task.ID], runs)
	}
	for rule, n := range v.counts {
		if n > maxReports {
			t.Errorf("clustertest: [%s] %d more violations not shown", rule, n-maxReports)
		}
	}
	return v.summary
}

// task checks one task: its status, its execution records, its runs.
func (v *verifier) task(tr *TaskRecord, rs []*run, runs map[string]*run) {
	v.t.Helper()
	t := &tr.Task
	v.summary.ByStatus[t.Status]++
	if len(rs) > 1 {
		v.summary.Reruns++
	}
	if !t.Status.Terminal() && !(t.Status == store.Scheduled && t.DueAt.After(v.h.StoreNow)) {
		v.report(RuleNotTerminal, "task %d (key %q) is %s, due %s, at the end (store time %s); executions: %s",
			t.ID, t.Key, t.Status, stamp(t.DueAt), stamp(v.h.StoreNow), describe(tr.Executions))
	}

	// The execution records.
	var succeeded []string
	first := time.Time{}
	for _, x := range tr.Executions {
		if x.Status == store.Succeeded {
			succeeded = append(succeeded, x.ID)
			if r := runs[x.ID]; r == nil || r.end == nil || r.end.Result != ResultOK {
				v.report(RuleInconsistent, "task %d (key %q): execution %s on %s is recorded SUCCEEDED but the run log has no successful run of it",
					t.ID, t.Key, x.ID, x.Node)
			}
		}
		if x.Status == store.Running && t.Status.Terminal() {
			v.report(RuleInconsistent, "task %d (key %q) is %s but its execution %s on %s is still RUNNING", t.ID, t.Key, t.Status, x.ID, x.Node)
		}
		if !x.StartedAt.IsZero() && x.StartedAt.Before(tr.Due.Add(-v.h.Precision)) {
			v.report(RuleEarly, "task %d (key %q): execution %s on %s started at %s, %v before its due time %s",
				t.ID, t.Key, x.ID, x.Node, stamp(x.StartedAt), tr.Due.Sub(x.StartedAt), stamp(tr.Due))
		}
		if !x.StartedAt.IsZero() && (first.IsZero() || x.StartedAt.Before(first)) {
			first = x.StartedAt
		}
	}
	if len(succeeded) > 1 {
		v.report(RuleInconsistent, "task %d (key %q) has %d SUCCEEDED executions: %s", t.ID, t.Key, len(succeeded), strings.Join(succeeded, ", "))
	}
	if t.Status == store.Succeeded && !slices.Contains(succeeded, t.ExecutionID) {
		v.report(RuleInconsistent, "task %d (key %q) is SUCCEEDED by execution %s, whose record is not SUCCEEDED: %s",
			t.ID, t.Key, t.ExecutionID, describe(tr.Executions))
	}
	if !first.IsZero() {
		late := first.Sub(tr.Due)
		v.summary.Lateness[t.ID] = late
		v.summary.MaxLateness = max(v.summary.MaxLateness, late)
	}

	// The runs, in order of their starts.
	slices.SortStableFunc(rs, func(a, b *run) int { return a.start.At.Compare(b.start.At) })
	record := func(r *run) *store.Execution {
		for i := range tr.Executions {
			if tr.Executions[i].ID == r.start.ExecutionID {
				return &tr.Executions[i]
			}
		}
		return nil
	}
	for i, a := range rs {
		ra := record(a)
		aEnd, aEnded := v.ended(*a)
		orphaned := ra != nil && Orphaned(*ra)
		for _, b := range rs[i+1:] {
			if ra != nil && ra.Status == store.Succeeded {
				v.report(RuleOverlap, "task %d (key %q) ran again (execution %s on %s at %s) after execution %s on %s succeeded",
					t.ID, t.Key, b.start.ExecutionID, b.start.Node, stamp(b.start.At), a.start.ExecutionID, a.start.Node)
				continue
			}
			if aEnded && !b.start.At.Before(aEnd) {
				continue // one after the other
			}
			if !orphaned {
				v.report(RuleOverlap, "task %d (key %q): execution %s on %s (%s – %s) overlaps execution %s on %s (from %s), and the first was not declared orphaned: %s",
					t.ID, t.Key, a.start.ExecutionID, a.start.Node, stamp(a.start.At), endString(aEnd, aEnded), b.start.ExecutionID, b.start.Node, stamp(b.start.At), describe(tr.Executions))
				continue
			}
			if v.h.CtxAware && a.end != nil && a.end.Result == ResultOK {
				v.report(RuleLateCompletion, "task %d (key %q): orphaned execution %s on %s completed OK at %s, after execution %s on %s started at %s",
					t.ID, t.Key, a.start.ExecutionID, a.start.Node, stamp(a.end.At), b.start.ExecutionID, b.start.Node, stamp(b.start.At))
			}
		}
		if v.h.CtxAware && orphaned && a.end != nil && a.end.Result == ResultOK &&
			v.toStore(a.end.At).After(ra.FinishedAt.Add(v.h.ClockSlack)) {
			v.report(RuleLateCompletion, "task %d (key %q): execution %s on %s completed OK at %s (store time %s), after recovery declared it orphaned at %s",
				t.ID, t.Key, a.start.ExecutionID, a.start.Node, stamp(a.end.At), stamp(v.toStore(a.end.At)), stamp(ra.FinishedAt))
		}
	}
}

// describe lists execution records for a message.
func describe(xs []store.Execution) string {
	if len(xs) == 0 {
		return "none"
	}
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("{%s attempt %d on %s %s started %s finished %s %q}",
			x.ID, x.Attempt, x.Node, x.Status, stamp(x.StartedAt), stamp(x.FinishedAt), x.Error)
	}
	return strings.Join(parts, " ")
}

func endString(at time.Time, ok bool) string {
	if !ok {
		return "never ended"
	}
	return stamp(at)
}

// reread runs read until it succeeds, at most rereads times, rereadPause apart, while
// ctx lasts. A history is read right after faults: a pooled connection to a server
// that failed over can fail one read (the driver drops it then), and a read is safe
// to repeat.
func reread[T any](ctx context.Context, read func() (T, error)) (T, error) {
	for i := 1; ; i++ {
		v, err := read()
		if err == nil || i == rereads || ctx.Err() != nil {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(rereadPause):
		}
	}
}

const (
	rereads     = 5
	rereadPause = 200 * time.Millisecond
)

// stamp formats a time for a message; "-" for the zero time.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05.000000")
}

// Collect reads the history of the tasks a test submitted — due holds each task's id
// and its due time as submitted — from st (Get and Executions per task), the run logs
// at logs (ReadRunLog), and the store's clock (StoreNow, ClockOffset, ClockSlack).
// CtxAware and Deaths are left for the caller to set.
func Collect(ctx context.Context, st store.Store, due map[int64]time.Time, logs ...string) (History, error) {
	var (
		h             History
		before, after time.Time
	)
	now, err := reread(ctx, func() (time.Time, error) {
		before = time.Now()
		defer func() { after = time.Now() }()
		return st.Now(ctx)
	})
	if err != nil {
		return h, fmt.Errorf("clustertest: read the store's clock: %w", err)
	}
	h.StoreNow = now
	h.ClockOffset = now.Sub(before.Add(after.Sub(before) / 2))
	h.ClockSlack = max(after.Sub(before), 10*time.Millisecond)
	ids := make([]int64, 0, len(due))
	for id := range due {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		t, err := reread(ctx, func() (*store.Task, error) { return st.Get(ctx, id) })
		if err != nil {
			return h, fmt.Errorf("clustertest: get task %d: %w", id, err)
		}
		xs, err := reread(ctx, func() ([]store.Execution, error) { return st.Executions(ctx, id) })
		if err != nil {
			return h, fmt.Errorf("clustertest: executions of task %d: %w", id, err)
		}
		h.Tasks = append(h.Tasks, TaskRecord{Task: *t, Executions: xs, Due: due[id]})
	}
	if h.Log, err = ReadRunLog(logs...); err != nil {
		return h, err
	}
	return h, nil
}
