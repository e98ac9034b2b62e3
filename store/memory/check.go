package memory

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/store"
)

// This file is the store's reading of what the contract in package store calls
// ErrInvalid: each method's inputs, checked before anything is read or written.
// A check is a list of rules; the first that is broken is the error.

// rule is one way an input can be invalid: bad when it is, why saying how.
type rule struct {
	bad bool
	why string
}

// invalid returns the first broken rule as an ErrInvalid under op, or nil.
func invalid(op string, rules ...rule) error {
	for _, r := range rules {
		if r.bad {
			return fmt.Errorf("%s: %s: %w", op, r.why, store.ErrInvalid)
		}
	}
	return nil
}

// text reports whether s is valid text of at most n bytes: UTF-8, no NUL.
func text(s string, n int) bool { return len(s) <= n && store.CleanText(s) }

// outside reports whether limit is outside [1, most].
func outside(limit, most int) bool { return limit < 1 || limit > most }

func checkClaims(claims []store.Claim, on store.StartOn) error {
	for i, c := range claims {
		if c.ExecutionID == "" {
			return invalid("claim tasks", rule{true, fmt.Sprintf("claim %d: empty execution id", i)})
		}
	}
	return invalid("claim tasks", rule{on.Node == "" && len(on.Handlers) > 0, "handlers to start on no node"})
}

func checkStarts(starts []store.StartParams) error {
	for i, p := range starts {
		err := invalid(fmt.Sprint("start executions: execution ", i),
			rule{p.ExecutionID == "" || !text(p.ExecutionID, store.MaxExecutionIDLen), "execution id empty, too long, not UTF-8 or with a NUL"},
			rule{p.Name == "" || !store.CleanText(p.Name), "task name empty, not UTF-8 or with a NUL"})
		if err != nil {
			return err
		}
	}
	return nil
}

// checkConcurrency is driverkit.CheckConcurrency: what SetConcurrency refuses.
func checkConcurrency(name string, n int, by string) error {
	if n < 0 || n > store.MaxConcurrency {
		return fmt.Errorf("concurrency %d: want 0 (no limit) to %d: %w", n, store.MaxConcurrency, store.ErrInvalid)
	}
	return checkNameState(name, by)
}

// checkRate is driverkit.CheckRate: what SetRate refuses.
func checkRate(name string, n int, per time.Duration, by string) error {
	switch {
	case n < 0 || n > store.MaxRate:
		return fmt.Errorf("rate %d: want 0 (no limit) to %d: %w", n, store.MaxRate, store.ErrInvalid)
	case n > 0 && (per < store.MinRatePer || per > store.MaxRatePer):
		return fmt.Errorf("rate period %v: want %v to %v: %w", per, store.MinRatePer, store.MaxRatePer, store.ErrInvalid)
	}
	return checkNameState(name, by)
}

func checkNameState(name, by string) error {
	return invalid("name",
		rule{name == "" || len(name) > store.MaxNameLen, fmt.Sprintf("%d bytes, want 1 to %d", len(name), store.MaxNameLen)},
		rule{!store.CleanText(name), "not UTF-8, or holds a NUL"},
		rule{by == "" || len(by) > store.MaxCancelledBy, fmt.Sprintf("by of %d bytes, want 1 to %d", len(by), store.MaxCancelledBy)},
		rule{!store.CleanText(by), "by not UTF-8, or holds a NUL"})
}

func checkCancelledBy(by string) error {
	return invalid("cancelled by",
		rule{by == "", "empty"},
		rule{len(by) > store.MaxCancelledBy, fmt.Sprintf("%d bytes, over %d", len(by), store.MaxCancelledBy)},
		rule{!store.CleanText(by), "not UTF-8, or holds a NUL"})
}

func checkFinishes(results []store.Finish) error {
	for i, f := range results {
		err := invalid(fmt.Sprint("finish executions: result ", i),
			rule{f.Status != store.Succeeded && f.Status != store.Scheduled && f.Status != store.Failed, "status " + string(f.Status)},
			rule{f.ExecutionID == "", "empty execution id"},
			rule{f.Status == store.Scheduled && f.DueAt.IsZero(), "retry without a due time"},
			rule{f.Status == store.Scheduled && f.Attempt < 0, "retry with a negative attempt"},
			rule{f.Snooze && f.Status != store.Scheduled, "snooze with status " + string(f.Status)})
		if err != nil {
			return err
		}
	}
	return nil
}

func checkNewTask(nt store.NewTask) error {
	return invalid("new task",
		rule{nt.Name == "" || nt.Key == "" || nt.DueAt.IsZero(), "empty name, key or due time"},
		rule{!nt.KeyHold.Valid(), "unknown key hold " + string(nt.KeyHold)},
		rule{nt.TaskKey == "" && nt.Overlap != "", "overlap policy without a task key"},
		rule{nt.TaskKey != "" && !nt.Overlap.Valid(), "task key without a valid overlap policy"},
		rule{nt.MaxRetry < 0 || nt.Timeout < 0 || slices.ContainsFunc(nt.Backoff, func(d time.Duration) bool { return d < 0 }),
			"negative max retry, timeout or backoff"},
		rule{!text(nt.Trace, store.MaxTraceLen), "trace too long, not UTF-8 or with a NUL"})
}

func checkScheduleDefs(defs []store.ScheduleDef) error {
	seen := make(map[string]bool, len(defs))
	for _, d := range defs {
		err := invalid(fmt.Sprintf("register schedules: schedule %q", d.Name),
			rule{d.Name == "" || d.Spec == "" || d.TimeZone == "", "empty name, spec or time zone"},
			rule{!d.Overlap.Valid() || !d.Misfire.Valid(), "unknown overlap or misfire policy"},
			rule{d.NextFireAt.IsZero(), "zero next fire time"},
			rule{seen[d.Name], "given twice"},
			rule{!text(d.Trace, store.MaxTraceLen), "trace too long, not UTF-8 or with a NUL"})
		if err != nil {
			return err
		}
		seen[d.Name] = true
	}
	return nil
}

func checkFire(p store.FireParams) error {
	op := fmt.Sprintf("fire schedule %q", p.Name)
	if err := invalid(op, rule{p.Name == "" || p.Expect.IsZero() || p.Next.IsZero(), "empty name, or zero expected or next fire time"}); err != nil {
		return err
	}
	for i, g := range p.Gaps {
		err := invalid(fmt.Sprint(op, ": gap ", i),
			rule{g.Schedule != "" && g.Schedule != p.Name, "of another schedule"},
			rule{g.From.IsZero() || !g.From.Before(g.Until), "empty or zero range"},
			rule{g.Why != store.GapMissed && g.Why != store.GapPaused, "unknown reason"},
			rule{!text(g.Result, store.MaxGapText), "result too long, not UTF-8 or with a NUL"})
		if err != nil {
			return err
		}
	}
	for i, nt := range p.Tasks {
		if err := checkNewTask(nt); err != nil {
			return fmt.Errorf("%s: task %d: %w", op, i, err)
		}
	}
	return nil
}

func checkPrune(p store.PruneParams) error {
	return invalid("prune",
		rule{!p.Status.Terminal(), "status not a finished one"},
		rule{outside(p.Limit, store.MaxPrune), "limit out of range"},
		rule{p.KeepNewest < 0, "negative number to keep"},
		rule{p.Before.IsZero() && p.KeepNewest == 0, "neither a time nor a number to keep"})
}

// checkPruneBefore checks the arguments of the Pruner's methods that take a time and
// a limit.
func checkPruneBefore(op string, before time.Time, limit int) error {
	return invalid(op, rule{before.IsZero() || outside(limit, store.MaxPrune), "zero time or limit out of range"})
}

func checkAudit(rec store.AuditRecord) error {
	rules := []rule{
		{rec.Actor == "" || rec.Action == "" || rec.Result == "", "no actor, action or result"},
		{!text(rec.Reason, store.MaxAuditReason), "reason too long, not UTF-8 or with a NUL"},
		{rec.StatusBefore != "" && !rec.StatusBefore.Valid() || rec.StatusAfter != "" && !rec.StatusAfter.Valid(), "unknown status"},
	}
	for _, f := range []string{rec.Actor, rec.Role, rec.Action, rec.Target, rec.Result, rec.ExecutionID} {
		rules = append(rules, rule{!text(f, store.MaxAuditText), "field too long, not UTF-8 or with a NUL"})
	}
	return invalid("audit", rules...)
}

func checkAuditQuery(q store.AuditQuery) error {
	return invalid("audit log",
		rule{outside(q.Limit, store.MaxQueryLimit), "limit out of range"},
		rule{!q.Since.IsZero() && !q.Until.IsZero() && !micro(q.Since).Before(micro(q.Until)), "since not before until"})
}

// micro is a time as the store compares audit times: UTC, to the microsecond, as a
// SQL store's column keeps it.
func micro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func checkLease(op, namespace, holder string, ttl time.Duration) error {
	return invalid(op, rule{namespace == "" || holder == "", "empty namespace or holder"}, rule{ttl < time.Microsecond, "TTL below 1µs"})
}

func checkRaiseFence(namespace, holder string, token int64) error {
	return invalid("raise fence", rule{namespace == "" || holder == "", "empty namespace or holder"}, rule{token <= 0, "token not positive"})
}

func checkFence(f store.Fence) error {
	return invalid("fence", rule{f.Token < 0, "negative token"}, rule{f.Token > 0 && f.Namespace == "", "token without a namespace"})
}

func checkNode(n store.NodeInfo) error {
	return invalid(fmt.Sprintf("register node %q", n.Name),
		rule{n.Name == "", "empty name"},
		rule{n.Capacity < 0 || n.InFlight < 0, "negative capacity or in flight"},
		rule{slices.ContainsFunc(n.Handlers, func(h string) bool { return h == "" || strings.Contains(h, "\n") }), "handler name empty or with a line break"})
}

// checkLeadership checks the namespace of a Fencer's method, then its rules.
func checkLeadership(op, namespace string, rules ...rule) error {
	if err := store.CheckNamespace(namespace); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return invalid(op, rules...)
}

// The bounds of a stats row's minute: what every store's time column holds.
var (
	firstMinute = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	lastMinute  = time.Date(9999, 12, 31, 23, 59, 0, 0, time.UTC)
)

// statsName reports whether s may be a stats row's node or failing name.
func statsName(s string) bool {
	return s != "" && len(s) <= store.MaxNameLen && utf8.ValidString(s) && !strings.ContainsAny(s, "\x00\n")
}

func checkStats(rows []store.MinuteStats) error {
	if err := invalid("write stats", rule{len(rows) > store.MaxStatsRows, "too many rows"}); err != nil {
		return err
	}
	type key struct {
		node   string
		minute int64
	}
	seen := make(map[key]bool, len(rows))
	for i, r := range rows {
		counts := append([]int64{r.Succeeded, r.Failed, r.Panicked, r.TimedOut, r.Released, r.Orphaned, r.Retried, r.Early}, r.Lateness[:]...)
		rules := []rule{
			{!statsName(r.Node), "node empty, too long or not printable"},
			{r.Minute.IsZero() || !r.Minute.Equal(r.Minute.Truncate(time.Minute)) || r.Minute.Before(firstMinute) || r.Minute.After(lastMinute), "minute not a whole one of 1970-9999"},
			{r.MaxLateness < 0 || slices.ContainsFunc(counts, func(n int64) bool { return n < 0 }), "negative count or lateness"},
			{len(r.Failures) > store.MaxStatsNames, "too many failing names"},
			{seen[key{r.Node, r.Minute.Unix()}], "node and minute given twice"},
		}
		for j, f := range r.Failures {
			rules = append(rules, rule{!statsName(f.Name) || f.Count < 1 || slices.ContainsFunc(r.Failures[:j], func(g store.NameCount) bool { return g.Name == f.Name }),
				"failing name empty, too long, not printable, given twice or counted below 1"})
		}
		if err := invalid(fmt.Sprint("write stats: row ", i), rules...); err != nil {
			return err
		}
		seen[key{r.Node, r.Minute.Unix()}] = true
	}
	return nil
}
