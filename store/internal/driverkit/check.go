package driverkit

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/axsched/ax/store"
)

// CheckClaims rejects what the contract calls invalid for Claim: an empty execution
// id. The error wraps ErrInvalid and names the item; drivers add their own limits.
func CheckClaims(claims []store.Claim) error {
	for i, c := range claims {
		if c.ExecutionID == "" {
			return fmt.Errorf("claim %d: empty execution id: %w", i, store.ErrInvalid)
		}
	}
	return nil
}

// CheckStartOn rejects what the contract calls invalid for ClaimStart: handlers with
// no node to start them on.
func CheckStartOn(on store.StartOn) error {
	if on.Node == "" && len(on.Handlers) > 0 {
		return fmt.Errorf("start on no node: %w", store.ErrInvalid)
	}
	return nil
}

// CheckStarts rejects what the contract calls invalid for Start: an execution id
// that is empty, over MaxExecutionIDLen, not UTF-8 or holds a NUL; an empty task name,
// a name that is not UTF-8 or holds a NUL.
func CheckStarts(starts []store.StartParams) error {
	for i, sp := range starts {
		switch {
		case sp.ExecutionID == "" || len(sp.ExecutionID) > store.MaxExecutionIDLen || !store.CleanText(sp.ExecutionID):
			return fmt.Errorf("execution %d: an execution id empty, over %d bytes, not UTF-8 or with a NUL: %w", i, store.MaxExecutionIDLen, store.ErrInvalid)
		case sp.Name == "":
			return fmt.Errorf("execution %d: empty task name: %w", i, store.ErrInvalid)
		case !store.CleanText(sp.Name):
			return fmt.Errorf("execution %d: task name not UTF-8 or with a NUL: %w", i, store.ErrInvalid)
		}
	}
	return nil
}

// CheckFinishes rejects what the contract calls invalid for Finish: a status other
// than Succeeded, Scheduled or Failed, an empty execution id, a retry without DueAt.
func CheckFinishes(results []store.Finish) error {
	for i, f := range results {
		switch {
		case f.Status != store.Succeeded && f.Status != store.Scheduled && f.Status != store.Failed:
			return fmt.Errorf("result %d: status %s: %w", i, f.Status, store.ErrInvalid)
		case f.ExecutionID == "":
			return fmt.Errorf("result %d: empty execution id: %w", i, store.ErrInvalid)
		case f.Status == store.Scheduled && f.DueAt.IsZero():
			return fmt.Errorf("result %d: retry without a due time: %w", i, store.ErrInvalid)
		case f.Snooze && f.Status != store.Scheduled:
			return fmt.Errorf("result %d: snooze with status %s: %w", i, f.Status, store.ErrInvalid)
		}
	}
	return nil
}

// CheckNewTask rejects what the contract calls invalid for Insert whatever the
// database: an empty name or key, a zero due time, an unknown key hold, a bad trace
// (CheckTrace), a task key and overlap policy that do not go together
// (CheckTaskKey). Drivers add their own limits.
func CheckNewTask(nt store.NewTask) error {
	if nt.Name == "" || nt.Key == "" || nt.DueAt.IsZero() {
		return fmt.Errorf("empty name, key or due time: %w", store.ErrInvalid)
	}
	if !nt.KeyHold.Valid() {
		return fmt.Errorf("key hold %q is not %q, %q or %q: %w", nt.KeyHold, store.HoldLive, store.HoldActive, store.HoldForever, store.ErrInvalid)
	}
	if err := CheckTrace(nt.Trace); err != nil {
		return err
	}
	return CheckTaskKey(nt)
}

// CheckTrace rejects a trace context (NewTask.Trace, ScheduleDef.Trace) over
// store.MaxTraceLen bytes, not UTF-8 or holding a NUL.
func CheckTrace(trace string) error {
	if len(trace) > store.MaxTraceLen || !store.CleanText(trace) {
		return fmt.Errorf("trace of %d bytes: longer than %d, not UTF-8 or holding a NUL: %w", len(trace), store.MaxTraceLen, store.ErrInvalid)
	}
	return nil
}

// CheckTaskKey rejects a task key and overlap policy that do not go together: a
// TaskKey needs a valid Overlap, and no TaskKey means no Overlap. Drivers add their
// length limits.
func CheckTaskKey(nt store.NewTask) error {
	switch {
	case nt.TaskKey == "" && nt.Overlap != "":
		return fmt.Errorf("overlap policy %q without a task key: %w", nt.Overlap, store.ErrInvalid)
	case nt.TaskKey != "" && !nt.Overlap.Valid():
		return fmt.Errorf("task key %q: overlap policy %q is not skip, queue or allow: %w", nt.TaskKey, nt.Overlap, store.ErrInvalid)
	}
	return nil
}

// CheckScheduleDefs rejects what the contract calls invalid for RegisterSchedules: an
// empty name, spec or time zone, an unknown policy, a zero NextFireAt, a name given
// twice, a bad trace (CheckTrace).
func CheckScheduleDefs(defs []store.ScheduleDef) error {
	seen := make(map[string]bool, len(defs))
	for i, d := range defs {
		switch {
		case d.Name == "" || d.Spec == "" || d.TimeZone == "":
			return fmt.Errorf("schedule %d: empty name, spec or time zone: %w", i, store.ErrInvalid)
		case !d.Overlap.Valid() || !d.Misfire.Valid():
			return fmt.Errorf("schedule %q: overlap %q or misfire %q policy unknown: %w", d.Name, d.Overlap, d.Misfire, store.ErrInvalid)
		case d.NextFireAt.IsZero():
			return fmt.Errorf("schedule %q: zero next fire time: %w", d.Name, store.ErrInvalid)
		case seen[d.Name]:
			return fmt.Errorf("schedule %q given twice: %w", d.Name, store.ErrInvalid)
		}
		if err := CheckTrace(d.Trace); err != nil {
			return fmt.Errorf("schedule %q: %w", d.Name, err)
		}
		seen[d.Name] = true
	}
	return nil
}

// CheckFire rejects what the contract calls invalid for FireSchedule: an empty name,
// a zero Expect or Next. It does not look at the tasks: drivers check them as their
// Insert does.
func CheckFire(p store.FireParams) error {
	if p.Name == "" || p.Expect.IsZero() || p.Next.IsZero() {
		return fmt.Errorf("fire schedule %q: empty name, or zero expected or next fire time: %w", p.Name, store.ErrInvalid)
	}
	for i, g := range p.Gaps {
		switch {
		case g.Schedule != "" && g.Schedule != p.Name:
			return fmt.Errorf("fire schedule %q: gap %d: schedule %q is another one: %w", p.Name, i, g.Schedule, store.ErrInvalid)
		case g.From.IsZero() || !g.From.Before(g.Until):
			return fmt.Errorf("fire schedule %q: gap %d: empty or zero range [%v, %v): %w", p.Name, i, g.From, g.Until, store.ErrInvalid)
		case g.Why != store.GapMissed && g.Why != store.GapPaused:
			return fmt.Errorf("fire schedule %q: gap %d: unknown reason %q: %w", p.Name, i, g.Why, store.ErrInvalid)
		case len(g.Result) > store.MaxGapText || !store.CleanText(g.Result):
			return fmt.Errorf("fire schedule %q: gap %d: result longer than %d bytes, not UTF-8 or holding a NUL: %w", p.Name, i, store.MaxGapText, store.ErrInvalid)
		}
	}
	return nil
}

// CheckSlotGaps rejects what the contract calls invalid for SlotGaps.
func CheckSlotGaps(from, to time.Time, limit int) error {
	if limit < 1 || limit > store.MaxQueryLimit {
		return fmt.Errorf("slot gaps: limit %d is outside 1..%d: %w", limit, store.MaxQueryLimit, store.ErrInvalid)
	}
	if from.After(to) {
		return fmt.Errorf("slot gaps: from %v is after to %v: %w", from, to, store.ErrInvalid)
	}
	return nil
}

// CheckTasksByKeys rejects what the contract calls invalid for TasksByKeys.
func CheckTasksByKeys(keys []string) error {
	if len(keys) > store.MaxKeys {
		return fmt.Errorf("tasks by keys: %d keys, more than %d: %w", len(keys), store.MaxKeys, store.ErrInvalid)
	}
	for _, k := range keys {
		if !store.CleanText(k) {
			return fmt.Errorf("tasks by keys: key %q is not valid UTF-8 or holds a NUL: %w", k, store.ErrInvalid)
		}
	}
	return nil
}

// CheckTasksByKeyRange rejects what the contract calls invalid for TasksByKeyRange.
func CheckTasksByKeyRange(from, before string, limit int) error {
	switch {
	case limit < 1 || limit > store.MaxQueryLimit:
		return fmt.Errorf("tasks by key range: limit %d is outside 1..%d: %w", limit, store.MaxQueryLimit, store.ErrInvalid)
	case !store.CleanText(from) || !store.CleanText(before):
		return fmt.Errorf("tasks by key range: a bound is not valid UTF-8 or holds a NUL: %w", store.ErrInvalid)
	case from >= before:
		return fmt.Errorf("tasks by key range: empty range [%q, %q): %w", from, before, store.ErrInvalid)
	}
	return nil
}

// CheckPruneSlotGaps rejects what the contract calls invalid for PruneSlotGaps.
func CheckPruneSlotGaps(before time.Time, limit int) error {
	if before.IsZero() || limit < 1 || limit > store.MaxPrune {
		return fmt.Errorf("prune slot gaps: a zero time, or a limit %d outside 1..%d: %w", limit, store.MaxPrune, store.ErrInvalid)
	}
	return nil
}

// CheckPrune rejects what the contract calls invalid for Prune.
func CheckPrune(p store.PruneParams) error {
	switch {
	case !p.Status.Terminal():
		return fmt.Errorf("prune: status %q is not a finished one: %w", p.Status, store.ErrInvalid)
	case p.Limit < 1 || p.Limit > store.MaxPrune:
		return fmt.Errorf("prune: limit %d is outside 1..%d: %w", p.Limit, store.MaxPrune, store.ErrInvalid)
	case p.Before.IsZero() && p.KeepNewest <= 0:
		return fmt.Errorf("prune: neither a time nor a number of tasks to keep: %w", store.ErrInvalid)
	case p.KeepNewest < 0:
		return fmt.Errorf("prune: negative number of tasks to keep %d: %w", p.KeepNewest, store.ErrInvalid)
	}
	return nil
}

// CheckAudit rejects what the contract calls invalid for Audit.
func CheckAudit(rec store.AuditRecord) error {
	if rec.Actor == "" || rec.Action == "" || rec.Result == "" {
		return fmt.Errorf("audit: a record needs an actor, an action and a result: %w", store.ErrInvalid)
	}
	for _, f := range []string{rec.Actor, rec.Role, rec.Action, rec.Target, rec.Result, rec.ExecutionID} {
		if len(f) > store.MaxAuditText || !store.CleanText(f) {
			return fmt.Errorf("audit: a field longer than %d bytes, not UTF-8 or with a NUL: %w", store.MaxAuditText, store.ErrInvalid)
		}
	}
	if len(rec.Reason) > store.MaxAuditReason || !store.CleanText(rec.Reason) {
		return fmt.Errorf("audit: a reason longer than %d bytes, not UTF-8 or with a NUL: %w", store.MaxAuditReason, store.ErrInvalid)
	}
	for _, st := range []store.Status{rec.StatusBefore, rec.StatusAfter} {
		if st != "" && !st.Valid() {
			return fmt.Errorf("audit: unknown status %q: %w", st, store.ErrInvalid)
		}
	}
	return nil
}

// CheckAuditQuery rejects what the contract calls invalid for AuditLog.
func CheckAuditQuery(q store.AuditQuery) error {
	if q.Limit < 1 || q.Limit > store.MaxQueryLimit {
		return fmt.Errorf("audit log: limit %d is outside 1..%d: %w", q.Limit, store.MaxQueryLimit, store.ErrInvalid)
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !AuditBound(q.Since).Before(AuditBound(q.Until)) {
		return fmt.Errorf("audit log: since %v is not before until %v: %w", q.Since, q.Until, store.ErrInvalid)
	}
	return nil
}

// AuditBound is an AuditQuery bound as the stores compare it: UTC, truncated to
// whole microseconds.
func AuditBound(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// CheckPruneAudit rejects what the contract calls invalid for PruneAudit.
func CheckPruneAudit(before time.Time, limit int) error {
	if before.IsZero() || limit < 1 || limit > store.MaxPrune {
		return fmt.Errorf("prune audit: a zero time, or a limit %d outside 1..%d: %w", limit, store.MaxPrune, store.ErrInvalid)
	}
	return nil
}

// CheckCountCap rejects a CountTasks cap below 1.
func CheckCountCap(atMost int64) error {
	if atMost < 1 {
		return fmt.Errorf("count cap %d is below 1: %w", atMost, store.ErrInvalid)
	}
	return nil
}

// CheckLease validates AcquireLease's and RenewLease's arguments (ErrInvalid).
func CheckLease(namespace, holder string, ttl time.Duration) error {
	switch {
	case namespace == "":
		return fmt.Errorf("empty lease namespace: %w", store.ErrInvalid)
	case holder == "":
		return fmt.Errorf("empty lease holder: %w", store.ErrInvalid)
	case ttl < time.Microsecond:
		return fmt.Errorf("lease TTL %v below 1µs: %w", ttl, store.ErrInvalid)
	}
	return nil
}

// CheckCancelledBy rejects what Cancel's by may not be (ErrInvalid): empty, over
// store.MaxCancelledBy bytes, not UTF-8 or holding a NUL.
func CheckCancelledBy(by string) error {
	switch {
	case by == "":
		return fmt.Errorf("empty cancelled by: %w", store.ErrInvalid)
	case len(by) > store.MaxCancelledBy:
		return fmt.Errorf("cancelled by of %d bytes, over %d: %w", len(by), store.MaxCancelledBy, store.ErrInvalid)
	case !store.CleanText(by):
		return fmt.Errorf("cancelled by not UTF-8, or holding a NUL: %w", store.ErrInvalid)
	}
	return nil
}

// CheckNameState rejects what PauseName and ResumeName refuse (ErrInvalid): an empty
// name or one over store.MaxNameLen bytes, an empty by or one over
// store.MaxCancelledBy bytes, text that is not UTF-8 or holds a NUL.
func CheckNameState(name, by string) error {
	switch {
	case name == "" || len(name) > store.MaxNameLen || !store.CleanText(name):
		return fmt.Errorf("name of %d bytes: want 1 to %d bytes of UTF-8 without NUL: %w", len(name), store.MaxNameLen, store.ErrInvalid)
	case by == "" || len(by) > store.MaxCancelledBy || !store.CleanText(by):
		return fmt.Errorf("by of %d bytes: want 1 to %d bytes of UTF-8 without NUL: %w", len(by), store.MaxCancelledBy, store.ErrInvalid)
	}
	return nil
}

// CheckConcurrency rejects what SetConcurrency refuses (ErrInvalid): what
// CheckNameState refuses, and a limit below 0 or above store.MaxConcurrency.
func CheckConcurrency(name string, n int, by string) error {
	if n < 0 || n > store.MaxConcurrency {
		return fmt.Errorf("concurrency %d: want 0 (no limit) to %d: %w", n, store.MaxConcurrency, store.ErrInvalid)
	}
	return CheckNameState(name, by)
}

// CheckRate rejects what SetRate refuses (ErrInvalid): what CheckNameState refuses,
// n below 0 or above store.MaxRate, and, with n above 0, a per outside
// [store.MinRatePer, store.MaxRatePer].
func CheckRate(name string, n int, per time.Duration, by string) error {
	switch {
	case n < 0 || n > store.MaxRate:
		return fmt.Errorf("rate %d: want 0 (no limit) to %d: %w", n, store.MaxRate, store.ErrInvalid)
	case n > 0 && (per < store.MinRatePer || per > store.MaxRatePer):
		return fmt.Errorf("rate period %v: want %v to %v: %w", per, store.MinRatePer, store.MaxRatePer, store.ErrInvalid)
	}
	return CheckNameState(name, by)
}

// CancelAsked reports whether t, as read after a Cancel that changed nothing, is a
// RUNNING task whose cancel was requested before: Cancel answers it, as asked.
func CancelAsked(t *store.Task) bool {
	return t != nil && t.Status == store.Running && !t.CancelRequestedAt.IsZero()
}

// CancelledError is the error a cancelled execution's record, and its task's
// LastError, read (see store.Finish): "cancelled by " and by, then ": " and the
// result's error when it has one.
func CancelledError(by, result string) string {
	if result == "" {
		return "cancelled by " + by
	}
	return "cancelled by " + by + ": " + result
}

// CheckFence rejects a Fence the contract calls invalid: a negative token, or a
// positive one without a namespace (ErrInvalid).
func CheckFence(f store.Fence) error {
	switch {
	case f.Token < 0:
		return fmt.Errorf("fence token %d below 0: %w", f.Token, store.ErrInvalid)
	case f.Token > 0 && f.Namespace == "":
		return fmt.Errorf("fence token %d without a namespace: %w", f.Token, store.ErrInvalid)
	}
	return nil
}

// CheckRaiseFence validates RaiseFence's arguments (ErrInvalid).
func CheckRaiseFence(namespace, holder string, token int64) error {
	switch {
	case namespace == "":
		return fmt.Errorf("empty fence namespace: %w", store.ErrInvalid)
	case holder == "":
		return fmt.Errorf("empty fence holder: %w", store.ErrInvalid)
	case token <= 0:
		return fmt.Errorf("fence token %d not positive: %w", token, store.ErrInvalid)
	}
	return nil
}

// CheckNode rejects a NodeInfo RegisterNode refuses (ErrInvalid).
func CheckNode(n store.NodeInfo) error {
	switch {
	case n.Name == "":
		return fmt.Errorf("node with an empty name: %w", store.ErrInvalid)
	case n.Capacity < 0 || n.InFlight < 0:
		return fmt.Errorf("node %q: negative capacity %d or in flight %d: %w", n.Name, n.Capacity, n.InFlight, store.ErrInvalid)
	case slices.Contains(n.Handlers, ""):
		return fmt.Errorf("node %q: empty handler name: %w", n.Name, store.ErrInvalid)
	case slices.ContainsFunc(n.Handlers, func(h string) bool { return strings.Contains(h, "\n") }):
		// Task names hold no line break (ax checks them); the drivers join handlers with one.
		return fmt.Errorf("node %q: a handler name holds a line break: %w", n.Name, store.ErrInvalid)
	}
	return nil
}
