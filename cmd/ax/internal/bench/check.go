package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax/store"
)

// taskRow is one task as the store holds it, with its execution records.
type taskRow struct {
	id              int64
	name, key       string
	idx             int // the key as a number: the index of its due time
	status          string
	dispatchRetries int
	execs           []execRow
}

// execRow is one execution record.
type execRow struct {
	ID, Node, Status, Error string
	Started, Finished       time.Time
}

// firstStart returns the earliest start among the task's executions, or zero.
func (t *taskRow) firstStart() time.Time {
	var first time.Time
	for _, x := range t.execs {
		if first.IsZero() || x.Started.Before(first) {
			first = x.Started
		}
	}
	return first
}

// load reads the tasks of the names given (every task without one) with their
// executions, from ax_tasks and ax_executions. A record still RUNNING whose task
// SUCCEEDED with its id is that success, finished when the task did: the store
// leaves a succeeded execution's record as it was written at its start (see
// finishSQL in store/postgres).
func (r *run) load(ctx context.Context, names ...string) ([]*taskRow, error) {
	q := `SELECT t.id, t.name, t.key, t.status, t.dispatch_retries,
			e.id, e.node, CASE WHEN d.succeeded THEN 'SUCCEEDED' ELSE e.status END,
			e.started_at, CASE WHEN d.succeeded THEN t.finished_at ELSE e.finished_at END, e.error
		FROM ax_tasks t LEFT JOIN ax_executions e ON e.task_id = t.id
		CROSS JOIN LATERAL (SELECT e.status = 'RUNNING' AND t.status = 'SUCCEEDED' AND t.execution_id = e.id AS succeeded) d`
	var args []any
	if len(names) > 0 {
		q += ` WHERE t.name = ANY($1)`
		args = append(args, names)
	}
	q += ` ORDER BY t.id, e.started_at`
	rows, err := r.db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("ax: bench: read the tasks: %w", err)
	}
	defer rows.Close()
	var tasks []*taskRow
	for rows.Next() {
		var t taskRow
		var xid, node, status, msg *string
		var started, finished *time.Time
		if err := rows.Scan(&t.id, &t.name, &t.key, &t.status, &t.dispatchRetries, &xid, &node, &status, &started, &finished, &msg); err != nil {
			return nil, fmt.Errorf("ax: bench: read the tasks: %w", err)
		}
		if n := len(tasks); n == 0 || tasks[n-1].id != t.id {
			t.idx, err = strconv.Atoi(t.key)
			if err != nil {
				t.idx = -1
			}
			tasks = append(tasks, &t)
		}
		if xid == nil {
			continue
		}
		x := execRow{ID: *xid, Node: deref(node), Status: deref(status), Error: deref(msg)}
		if started != nil {
			x.Started = *started
		}
		if finished != nil {
			x.Finished = *finished
		}
		last := tasks[len(tasks)-1]
		last.execs = append(last.execs, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ax: bench: read the tasks: %w", err)
	}
	return tasks, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// The prefixes of the errors the scheduler records on executions it did not finish
// itself: recovery's on an orphan (internal/recovery), Stop's on a release
// (internal/execute).
const (
	orphanedPrefix = "orphaned:"
	releasedPrefix = "released:"
)

// maxExamples bounds the violations the report lists.
const maxExamples = 20

// check reads the whole history — every task, its execution records, the handlers'
// run logs — and checks that every task ran exactly once and none early. A task may
// run again only when its earlier execution was on a node the bench killed and
// recovery declared it orphaned, or a graceful Stop released it: the at-least-once
// cases of the guarantees, counted apart.
func (r *run) check(ctx context.Context) (CheckReport, error) {
	var rep CheckReport
	calls, err := readRunLogs(r.cfg.Dir)
	if err != nil {
		return rep, err
	}
	tasks, err := r.load(ctx)
	if err != nil {
		return rep, err
	}
	killed := map[string]bool{}
	r.p.mu.Lock()
	for _, c := range r.p.children {
		if c.killed {
			killed[c.node] = true
		}
	}
	r.p.mu.Unlock()
	r.mu.Lock()
	dues := r.dues
	r.mu.Unlock()

	violation := func(format string, args ...any) {
		rep.Violations++
		if len(rep.Examples) < maxExamples {
			rep.Examples = append(rep.Examples, fmt.Sprintf(format, args...))
		}
	}
	recorded := map[string]bool{}
	submitted := 0
	for _, d := range dues {
		submitted += len(d)
	}
	seen := map[string]map[int]bool{}
	for _, t := range tasks {
		rep.Tasks++
		ds, ok := dues[t.name]
		if !ok || t.idx < 0 || t.idx >= len(ds) {
			violation("task %d (%s/%s) was not written by the bench", t.id, t.name, t.key)
			continue
		}
		if seen[t.name] == nil {
			seen[t.name] = map[int]bool{}
		}
		seen[t.name][t.idx] = true
		due := ds[t.idx]
		what := fmt.Sprintf("task %d (%s/%s, due %s)", t.id, t.name, t.key, due.Format("15:04:05.000000"))
		if t.status == string(store.Succeeded) {
			rep.Succeeded++
		} else {
			violation("%s is %s at the end; executions: %s", what, t.status, describeExecs(t.execs, calls))
		}
		handled, succeeded, kill, release := 0, 0, false, false
		for _, x := range t.execs {
			rep.Executions++
			recorded[x.ID] = true
			handled += calls[x.ID]
			if calls[x.ID] > 1 {
				violation("%s: the handler ran %d times for execution %s on %s", what, calls[x.ID], x.ID, x.Node)
			}
			if x.Started.Before(due.Add(-time.Microsecond)) {
				rep.Early++
				violation("%s: execution %s on %s started at %s, %v early", what, x.ID, x.Node, x.Started.Format("15:04:05.000000"), due.Sub(x.Started))
			}
			switch {
			case x.Status == string(store.Succeeded):
				succeeded++
				if calls[x.ID] == 0 {
					violation("%s: execution %s on %s is SUCCEEDED but its handler never ran", what, x.ID, x.Node)
				}
			case x.Status == string(store.Failed) && strings.HasPrefix(x.Error, orphanedPrefix) && killed[x.Node]:
				kill = true
			case strings.HasPrefix(x.Error, releasedPrefix):
				release = true
			default:
				violation("%s: execution %s on %s ended %s (%q), not by the kill of its node", what, x.ID, x.Node, x.Status, x.Error)
			}
		}
		if succeeded > 1 {
			violation("%s has %d SUCCEEDED executions: %s", what, succeeded, describeExecs(t.execs, calls))
		}
		switch {
		case len(t.execs) == 1 && handled == 1:
			rep.ExactlyOnce++
		case kill:
			rep.RerunAfterKill++
		case release:
			rep.Released++
		}
	}
	for id, n := range calls {
		rep.HandlerCalls += n
		if !recorded[id] {
			violation("the handler ran (%d times) for execution %s, which the store never recorded", n, id)
		}
	}
	for name, ds := range dues {
		for i := range ds {
			if !seen[name][i] {
				violation("task %s/%d was written but is not in the store", name, i)
			}
		}
	}
	if rep.Tasks != submitted {
		violation("%d tasks in the store, %d written", rep.Tasks, submitted)
	}
	return rep, nil
}

// describeExecs lists a task's executions for a message.
func describeExecs(xs []execRow, calls map[string]int) string {
	if len(xs) == 0 {
		return "none"
	}
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("{%s on %s %s started %s, %d handler calls, %q}", x.ID, x.Node, x.Status, x.Started.Format("15:04:05.000000"), calls[x.ID], x.Error)
	}
	return strings.Join(parts, " ")
}

// readRunLogs counts the handler calls per execution id in the run logs of dir
// (<node>.runlog: "<task id> <execution id> <unix nanos>" per call).
func readRunLogs(dir string) (map[string]int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.runlog"))
	if err != nil {
		return nil, fmt.Errorf("ax: bench: run logs: %w", err)
	}
	calls := map[string]int{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("ax: bench: run log: %w", err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if fs := strings.Fields(sc.Text()); len(fs) == 3 {
				calls[fs[1]]++
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("ax: bench: run log %s: %w", name, err)
		}
	}
	return calls, nil
}
