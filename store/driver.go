package store

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Helpers shared by the SQL drivers, so that they agree on the details the contract
// leaves to them.

// UniqueClaims returns claims with each task id kept once, with its first execution
// id, sorted by ascending id: the order in which drivers lock rows.
func UniqueClaims(claims []Claim) []Claim {
	seen := make(map[int64]bool, len(claims))
	uniq := make([]Claim, 0, len(claims))
	for _, c := range claims {
		if !seen[c.ID] {
			seen[c.ID] = true
			uniq = append(uniq, c)
		}
	}
	slices.SortFunc(uniq, func(a, b Claim) int { return cmp.Compare(a.ID, b.ID) })
	return uniq
}

// FormatBackoff encodes a task's retry delays as comma-separated microseconds, the
// text form the SQL drivers store.
func FormatBackoff(b []time.Duration) string {
	parts := make([]string, len(b))
	for i, d := range b {
		parts[i] = strconv.FormatInt(d.Microseconds(), 10)
	}
	return strings.Join(parts, ",")
}

// ParseBackoff decodes FormatBackoff's text; "" is no delays.
func ParseBackoff(s string) ([]time.Duration, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	b := make([]time.Duration, len(parts))
	for i, p := range parts {
		us, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("backoff %q: %w", s, err)
		}
		b[i] = time.Duration(us) * time.Microsecond
	}
	return b, nil
}

// SortedOrder returns the indexes 0..n-1 ordered by ascending id(i), stable: the
// order in which batched statements touch rows, so that concurrent batches cannot
// deadlock.
func SortedOrder(n int, id func(i int) int64) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(id(a), id(b)) })
	return order
}

// CheckClaims rejects what the contract calls invalid for Claim: an empty execution
// id. The error wraps ErrInvalid and names the item; drivers add their own limits.
func CheckClaims(claims []Claim) error {
	for i, c := range claims {
		if c.ExecutionID == "" {
			return fmt.Errorf("claim %d: empty execution id: %w", i, ErrInvalid)
		}
	}
	return nil
}

// CheckStartOn rejects what the contract calls invalid for ClaimStart: handlers with
// no node to start them on.
func CheckStartOn(on StartOn) error {
	if on.Node == "" && len(on.Handlers) > 0 {
		return fmt.Errorf("start on no node: %w", ErrInvalid)
	}
	return nil
}

// Startable returns the ids of uniq, claims with each task once (UniqueClaims), whose
// Start is set, when on can start them, for a driver to look tasks up in; nil when
// none can start (no handler names, or no claim asks).
func Startable(on StartOn, uniq []Claim) map[int64]bool {
	if on.Node == "" || len(on.Handlers) == 0 {
		return nil
	}
	var m map[int64]bool
	for _, c := range uniq {
		if c.Start {
			if m == nil {
				m = make(map[int64]bool)
			}
			m[c.ID] = true
		}
	}
	return m
}

// CheckStarts rejects what the contract calls invalid for Start: an execution id
// that is empty, over MaxExecutionIDLen, not UTF-8 or holds a NUL; an empty task name,
// a name that is not UTF-8 or holds a NUL.
func CheckStarts(starts []StartParams) error {
	for i, sp := range starts {
		switch {
		case sp.ExecutionID == "" || len(sp.ExecutionID) > MaxExecutionIDLen || !CleanText(sp.ExecutionID):
			return fmt.Errorf("execution %d: an execution id empty, over %d bytes, not UTF-8 or with a NUL: %w", i, MaxExecutionIDLen, ErrInvalid)
		case sp.Name == "":
			return fmt.Errorf("execution %d: empty task name: %w", i, ErrInvalid)
		case !CleanText(sp.Name):
			return fmt.Errorf("execution %d: task name not UTF-8 or with a NUL: %w", i, ErrInvalid)
		}
	}
	return nil
}

// CheckFinishes rejects what the contract calls invalid for Finish: a status other
// than Succeeded, Scheduled or Failed, an empty execution id, a retry without DueAt.
func CheckFinishes(results []Finish) error {
	for i, f := range results {
		switch {
		case f.Status != Succeeded && f.Status != Scheduled && f.Status != Failed:
			return fmt.Errorf("result %d: status %s: %w", i, f.Status, ErrInvalid)
		case f.ExecutionID == "":
			return fmt.Errorf("result %d: empty execution id: %w", i, ErrInvalid)
		case f.Status == Scheduled && f.DueAt.IsZero():
			return fmt.Errorf("result %d: retry without a due time: %w", i, ErrInvalid)
		}
	}
	return nil
}

// Refusal is what Cancel and Trigger return when their transition did not apply:
// the task as it is, or nil when it does not exist, with the sentinel (ErrNotFound,
// ErrNotCancellable, ErrNotTriggerable) wrapped under op.
func Refusal(op string, t *Task, sentinel error) (*Task, error) {
	switch {
	case t == nil:
		return nil, fmt.Errorf("%s: %w", op, sentinel)
	case t.Superseded:
		return t, fmt.Errorf("%s: task is %s and superseded: a newer task holds its key: %w", op, t.Status, sentinel)
	}
	return t, fmt.Errorf("%s: task is %s: %w", op, t.Status, sentinel)
}

// CheckNewTask rejects what the contract calls invalid for Insert whatever the
// database: an empty name or key, a zero due time, a task key and overlap policy
// that do not go together (CheckTaskKey). Drivers add their own limits.
func CheckNewTask(nt NewTask) error {
	if nt.Name == "" || nt.Key == "" || nt.DueAt.IsZero() {
		return fmt.Errorf("empty name, key or due time: %w", ErrInvalid)
	}
	if !nt.KeyHold.Valid() {
		return fmt.Errorf("key hold %q is not %q, %q or %q: %w", nt.KeyHold, HoldLive, HoldActive, HoldForever, ErrInvalid)
	}
	return CheckTaskKey(nt)
}

// CheckTaskKey rejects a task key and overlap policy that do not go together: a
// TaskKey needs a valid Overlap, and no TaskKey means no Overlap. Drivers add their
// length limits.
func CheckTaskKey(nt NewTask) error {
	switch {
	case nt.TaskKey == "" && nt.Overlap != "":
		return fmt.Errorf("overlap policy %q without a task key: %w", nt.Overlap, ErrInvalid)
	case nt.TaskKey != "" && !nt.Overlap.Valid():
		return fmt.Errorf("task key %q: overlap policy %q is not skip, queue or allow: %w", nt.TaskKey, nt.Overlap, ErrInvalid)
	}
	return nil
}

// CheckScheduleDefs rejects what the contract calls invalid for RegisterSchedules: an
// empty name, spec or time zone, an unknown policy, a zero NextFireAt, a name given
// twice.
func CheckScheduleDefs(defs []ScheduleDef) error {
	seen := make(map[string]bool, len(defs))
	for i, d := range defs {
		switch {
		case d.Name == "" || d.Spec == "" || d.TimeZone == "":
			return fmt.Errorf("schedule %d: empty name, spec or time zone: %w", i, ErrInvalid)
		case !d.Overlap.Valid() || !d.Misfire.Valid():
			return fmt.Errorf("schedule %q: overlap %q or misfire %q policy unknown: %w", d.Name, d.Overlap, d.Misfire, ErrInvalid)
		case d.NextFireAt.IsZero():
			return fmt.Errorf("schedule %q: zero next fire time: %w", d.Name, ErrInvalid)
		case seen[d.Name]:
			return fmt.Errorf("schedule %q given twice: %w", d.Name, ErrInvalid)
		}
		seen[d.Name] = true
	}
	return nil
}

// CheckFire rejects what the contract calls invalid for FireSchedule: an empty name,
// a zero Expect or Next. It does not look at the tasks: drivers check them as their
// Insert does.
func CheckFire(p FireParams) error {
	if p.Name == "" || p.Expect.IsZero() || p.Next.IsZero() {
		return fmt.Errorf("fire schedule %q: empty name, or zero expected or next fire time: %w", p.Name, ErrInvalid)
	}
	for i, g := range p.Gaps {
		switch {
		case g.Schedule != "" && g.Schedule != p.Name:
			return fmt.Errorf("fire schedule %q: gap %d: schedule %q is another one: %w", p.Name, i, g.Schedule, ErrInvalid)
		case g.From.IsZero() || !g.From.Before(g.Until):
			return fmt.Errorf("fire schedule %q: gap %d: empty or zero range [%v, %v): %w", p.Name, i, g.From, g.Until, ErrInvalid)
		case g.Why != GapMissed && g.Why != GapPaused:
			return fmt.Errorf("fire schedule %q: gap %d: unknown reason %q: %w", p.Name, i, g.Why, ErrInvalid)
		case len(g.Result) > MaxGapText || !CleanText(g.Result):
			return fmt.Errorf("fire schedule %q: gap %d: result longer than %d bytes, not UTF-8 or holding a NUL: %w", p.Name, i, MaxGapText, ErrInvalid)
		}
	}
	return nil
}

// CheckSlotGaps rejects what the contract calls invalid for SlotGaps.
func CheckSlotGaps(from, to time.Time, limit int) error {
	if limit < 1 || limit > MaxQueryLimit {
		return fmt.Errorf("slot gaps: limit %d is outside 1..%d: %w", limit, MaxQueryLimit, ErrInvalid)
	}
	if from.After(to) {
		return fmt.Errorf("slot gaps: from %v is after to %v: %w", from, to, ErrInvalid)
	}
	return nil
}

// CheckTasksByKeys rejects what the contract calls invalid for TasksByKeys.
func CheckTasksByKeys(keys []string) error {
	if len(keys) > MaxKeys {
		return fmt.Errorf("tasks by keys: %d keys, more than %d: %w", len(keys), MaxKeys, ErrInvalid)
	}
	for _, k := range keys {
		if !CleanText(k) {
			return fmt.Errorf("tasks by keys: key %q is not valid UTF-8 or holds a NUL: %w", k, ErrInvalid)
		}
	}
	return nil
}

// CheckTasksByKeyRange rejects what the contract calls invalid for TasksByKeyRange.
func CheckTasksByKeyRange(from, before string, limit int) error {
	switch {
	case limit < 1 || limit > MaxQueryLimit:
		return fmt.Errorf("tasks by key range: limit %d is outside 1..%d: %w", limit, MaxQueryLimit, ErrInvalid)
	case !CleanText(from) || !CleanText(before):
		return fmt.Errorf("tasks by key range: a bound is not valid UTF-8 or holds a NUL: %w", ErrInvalid)
	case from >= before:
		return fmt.Errorf("tasks by key range: empty range [%q, %q): %w", from, before, ErrInvalid)
	}
	return nil
}

// CheckPruneSlotGaps rejects what the contract calls invalid for PruneSlotGaps.
func CheckPruneSlotGaps(before time.Time, limit int) error {
	if before.IsZero() || limit < 1 || limit > MaxPrune {
		return fmt.Errorf("prune slot gaps: a zero time, or a limit %d outside 1..%d: %w", limit, MaxPrune, ErrInvalid)
	}
	return nil
}

// CheckTaskQuery rejects what the contract calls invalid for Tasks: a Limit outside
// 1..MaxQueryLimit, a key prefix that is not UTF-8 or holds a NUL, an unknown status,
// an empty range (a lower bound not before its upper one), a cursor with no id (or,
// for Soonest, no due time).
func CheckTaskQuery(q TaskQuery) error {
	if q.Limit < 1 || q.Limit > MaxQueryLimit {
		return fmt.Errorf("limit %d is outside 1..%d: %w", q.Limit, MaxQueryLimit, ErrInvalid)
	}
	if !CleanText(q.KeyPrefix) {
		return fmt.Errorf("key prefix is not valid UTF-8 or holds a NUL: %w", ErrInvalid)
	}
	for _, st := range q.Statuses {
		if !st.Valid() {
			return fmt.Errorf("unknown status %q: %w", st, ErrInvalid)
		}
	}
	for _, r := range []struct {
		name     string
		from, to time.Time
	}{{"due", q.DueFrom, q.DueBefore}, {"finished", q.FinishedFrom, q.FinishedBefore}} {
		if !r.from.IsZero() && !r.to.IsZero() && !r.from.Before(r.to) {
			return fmt.Errorf("empty %s range [%v, %v): %w", r.name, r.from, r.to, ErrInvalid)
		}
	}
	if c := q.After; c != nil && (c.ID <= 0 || q.Soonest && c.DueAt.IsZero()) {
		return fmt.Errorf("cursor without a position: %w", ErrInvalid)
	}
	return nil
}

// Selects reports whether q's filters select t (its order and cursor aside): the
// reference the SQL drivers' queries agree with.
func (q TaskQuery) Selects(t *Task) bool {
	in := func(at, from, to time.Time) bool {
		return (from.IsZero() || !at.Before(from)) && (to.IsZero() || at.Before(to))
	}
	switch {
	case len(q.Statuses) > 0 && !slices.Contains(q.Statuses, t.Status),
		q.Name != "" && t.Name != q.Name,
		!strings.HasPrefix(t.Key, q.KeyPrefix),
		q.OwnerService != "" && t.OwnerService != q.OwnerService,
		q.TaskKey != "" && t.TaskKey != q.TaskKey,
		!in(t.DueAt, q.DueFrom, q.DueBefore):
		return false
	case !q.FinishedFrom.IsZero() || !q.FinishedBefore.IsZero():
		return !t.FinishedAt.IsZero() && in(t.FinishedAt, q.FinishedFrom, q.FinishedBefore)
	}
	return true
}

// Follows reports whether t comes after q.After in q's order (no After: every task
// does).
func (q TaskQuery) Follows(t *Task) bool {
	c := q.After
	switch {
	case c == nil:
		return true
	case q.Soonest:
		return t.DueAt.After(c.DueAt) || t.DueAt.Equal(c.DueAt) && t.ID > c.ID
	}
	return t.ID < c.ID
}

// Before reports whether a comes before b in q's order.
func (q TaskQuery) Before(a, b *Task) bool {
	if q.Soonest {
		return a.DueAt.Before(b.DueAt) || a.DueAt.Equal(b.DueAt) && a.ID < b.ID
	}
	return a.ID > b.ID
}

// CheckPrune rejects what the contract calls invalid for Prune.
func CheckPrune(p PruneParams) error {
	switch {
	case !p.Status.Terminal():
		return fmt.Errorf("prune: status %q is not a finished one: %w", p.Status, ErrInvalid)
	case p.Limit < 1 || p.Limit > MaxPrune:
		return fmt.Errorf("prune: limit %d is outside 1..%d: %w", p.Limit, MaxPrune, ErrInvalid)
	case p.Before.IsZero() && p.KeepNewest <= 0:
		return fmt.Errorf("prune: neither a time nor a number of tasks to keep: %w", ErrInvalid)
	case p.KeepNewest < 0:
		return fmt.Errorf("prune: negative number of tasks to keep %d: %w", p.KeepNewest, ErrInvalid)
	}
	return nil
}

// CheckAudit rejects what the contract calls invalid for Audit.
func CheckAudit(rec AuditRecord) error {
	if rec.Actor == "" || rec.Action == "" || rec.Result == "" {
		return fmt.Errorf("audit: a record needs an actor, an action and a result: %w", ErrInvalid)
	}
	for _, f := range []string{rec.Actor, rec.Role, rec.Action, rec.Target, rec.Result, rec.ExecutionID} {
		if len(f) > MaxAuditText || !CleanText(f) {
			return fmt.Errorf("audit: a field longer than %d bytes, not UTF-8 or with a NUL: %w", MaxAuditText, ErrInvalid)
		}
	}
	if len(rec.Reason) > MaxAuditReason || !CleanText(rec.Reason) {
		return fmt.Errorf("audit: a reason longer than %d bytes, not UTF-8 or with a NUL: %w", MaxAuditReason, ErrInvalid)
	}
	for _, st := range []Status{rec.StatusBefore, rec.StatusAfter} {
		if st != "" && !st.Valid() {
			return fmt.Errorf("audit: unknown status %q: %w", st, ErrInvalid)
		}
	}
	return nil
}

// CleanText reports whether s is valid UTF-8 without a NUL byte: text every store
// keeps as it is (PostgreSQL refuses a NUL in text).
func CleanText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// CheckAuditQuery rejects what the contract calls invalid for AuditLog.
func CheckAuditQuery(q AuditQuery) error {
	if q.Limit < 1 || q.Limit > MaxQueryLimit {
		return fmt.Errorf("audit log: limit %d is outside 1..%d: %w", q.Limit, MaxQueryLimit, ErrInvalid)
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !AuditBound(q.Since).Before(AuditBound(q.Until)) {
		return fmt.Errorf("audit log: since %v is not before until %v: %w", q.Since, q.Until, ErrInvalid)
	}
	return nil
}

// AuditBound is an AuditQuery bound as the stores compare it: UTC, truncated to
// whole microseconds.
func AuditBound(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// CheckPruneAudit rejects what the contract calls invalid for PruneAudit.
func CheckPruneAudit(before time.Time, limit int) error {
	if before.IsZero() || limit < 1 || limit > MaxPrune {
		return fmt.Errorf("prune audit: a zero time, or a limit %d outside 1..%d: %w", limit, MaxPrune, ErrInvalid)
	}
	return nil
}

// CheckCountCap rejects a CountTasks cap below 1.
func CheckCountCap(atMost int64) error {
	if atMost < 1 {
		return fmt.Errorf("count cap %d is below 1: %w", atMost, ErrInvalid)
	}
	return nil
}

// NewTaskStats returns the TaskStats of an empty table: every status counted zero, no
// OldestDue. Drivers add their counts to it, so that a status without tasks is
// present as the contract asks.
func NewTaskStats() *TaskStats {
	statuses := Statuses()
	st := &TaskStats{Counts: make(map[Status]int64, len(statuses))}
	for _, s := range statuses {
		st.Counts[s] = 0
	}
	return st
}

// Keyed is a due SCHEDULED task with a task key whose Overlap is skip or queue, as a
// Claim found it.
type Keyed struct {
	ID      int64
	DueAt   time.Time
	TaskKey string
	Overlap OverlapPolicy
	Holder  int64 // set by ResolveKeys on the losers: the task holding the key
}

// ResolveKeys applies the overlap rule to the keyed tasks a Claim asked for, given
// the holders of their keys (key → id of the task DISPATCHING or RUNNING with it,
// read under the key's lock): for each free key the first task in (DueAt, ID) order
// wins; every other task loses to the holder (or the winner) and is skipped or
// blocked by its Overlap. Each list is in id order.
func ResolveKeys(tasks []Keyed, holders map[string]int64) (claim, skip, block []Keyed) {
	sorted := slices.Clone(tasks)
	slices.SortFunc(sorted, func(a, b Keyed) int {
		if c := a.DueAt.Compare(b.DueAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	held := make(map[string]int64, len(holders)+len(sorted))
	for k, id := range holders {
		held[k] = id
	}
	for _, k := range sorted {
		holder, busy := held[k.TaskKey]
		switch {
		case !busy:
			held[k.TaskKey] = k.ID
			claim = append(claim, k)
		case k.Overlap == OverlapSkip:
			k.Holder = holder
			skip = append(skip, k)
		default:
			k.Holder = holder
			block = append(block, k)
		}
	}
	byID := func(a, b Keyed) int { return cmp.Compare(a.ID, b.ID) }
	slices.SortFunc(claim, byID)
	slices.SortFunc(skip, byID)
	slices.SortFunc(block, byID)
	return claim, skip, block
}

// SkipReason is the LastError of a task skipped because its key was held.
func SkipReason(taskKey string, holder int64) string {
	return fmt.Sprintf("skipped: task key %q held by task %d", taskKey, holder)
}

// KeyHeld is the error Trigger returns when the task's key is held by another task:
// a *KeyHeldError under op, wrapping ErrNotTriggerable.
func KeyHeld(op string, t *Task, holder int64) (*Task, error) {
	return t, fmt.Errorf("%s: %w", op, &KeyHeldError{TaskKey: t.TaskKey, Holder: holder})
}

// KeyHeldError says which task holds the key of a task that Trigger refused; it
// wraps ErrNotTriggerable.
type KeyHeldError struct {
	TaskKey string
	Holder  int64 // the task holding the key
}

func (e *KeyHeldError) Error() string {
	return fmt.Sprintf("task key %q held by task %d: %v", e.TaskKey, e.Holder, ErrNotTriggerable)
}

// Unwrap returns ErrNotTriggerable.
func (e *KeyHeldError) Unwrap() error { return ErrNotTriggerable }

// SchedulesInOrder returns stored, the rows a driver read back after
// RegisterSchedules, in the order of defs, as the contract answers. A definition
// without its row is an error: the upsert did not write it.
func SchedulesInOrder(defs []ScheduleDef, stored []Schedule) ([]Schedule, error) {
	byName := make(map[string]Schedule, len(stored))
	for _, sc := range stored {
		byName[sc.Name] = sc
	}
	out := make([]Schedule, len(defs))
	for i, d := range defs {
		sc, ok := byName[d.Name]
		if !ok {
			return nil, fmt.Errorf("schedule %q registered but not read back", d.Name)
		}
		out[i] = sc
	}
	return out, nil
}

// CheckLease validates AcquireLease's and RenewLease's arguments (ErrInvalid).
func CheckLease(namespace, holder string, ttl time.Duration) error {
	switch {
	case namespace == "":
		return fmt.Errorf("empty lease namespace: %w", ErrInvalid)
	case holder == "":
		return fmt.Errorf("empty lease holder: %w", ErrInvalid)
	case ttl < time.Microsecond:
		return fmt.Errorf("lease TTL %v below 1µs: %w", ttl, ErrInvalid)
	}
	return nil
}

// CheckFence rejects a Fence the contract calls invalid: a negative token, or a
// positive one without a namespace (ErrInvalid).
func CheckFence(f Fence) error {
	switch {
	case f.Token < 0:
		return fmt.Errorf("fence token %d below 0: %w", f.Token, ErrInvalid)
	case f.Token > 0 && f.Namespace == "":
		return fmt.Errorf("fence token %d without a namespace: %w", f.Token, ErrInvalid)
	}
	return nil
}

// CheckRaiseFence validates RaiseFence's arguments (ErrInvalid).
func CheckRaiseFence(namespace, holder string, token int64) error {
	switch {
	case namespace == "":
		return fmt.Errorf("empty fence namespace: %w", ErrInvalid)
	case holder == "":
		return fmt.Errorf("empty fence holder: %w", ErrInvalid)
	case token <= 0:
		return fmt.Errorf("fence token %d not positive: %w", token, ErrInvalid)
	}
	return nil
}

// Admits reports whether a write fenced with f may apply when the namespace's recorded
// epoch is recorded (0 when none is): f is the zero Fence, or its token is at least the
// recorded epoch.
func (f Fence) Admits(recorded int64) bool { return f.Token == 0 || f.Token >= recorded }

// RaisedEpoch is the epoch RaiseFence records for holder with token over a row that
// records recordedHolder at recorded (0 and "" when there is no row): recorded itself
// when the row already names holder at token, else max(token, recorded+1).
func RaisedEpoch(recordedHolder string, recorded int64, holder string, token int64) int64 {
	if recordedHolder == holder && recorded == token {
		return recorded
	}
	return max(token, recorded+1)
}

// FencedError is the error a driver returns for a write that fence does not admit:
// it wraps ErrFenced and names both epochs.
func FencedError(f Fence, recorded int64) error {
	return fmt.Errorf("token %d below epoch %d of namespace %q: %w", f.Token, recorded, f.Namespace, ErrFenced)
}

// CheckNamespace rejects a namespace InNamespace refuses (ErrInvalid).
func CheckNamespace(ns string) error {
	switch {
	case ns == "":
		return fmt.Errorf("empty namespace: %w", ErrInvalid)
	case len(ns) > MaxNamespace:
		return fmt.Errorf("namespace of %d bytes, over %d: %w", len(ns), MaxNamespace, ErrInvalid)
	case strings.ContainsFunc(ns, unicode.IsSpace):
		return fmt.Errorf("namespace %q holds white space: %w", ns, ErrInvalid)
	}
	return nil
}

// CheckNode rejects a NodeInfo RegisterNode refuses (ErrInvalid).
func CheckNode(n NodeInfo) error {
	switch {
	case n.Name == "":
		return fmt.Errorf("node with an empty name: %w", ErrInvalid)
	case n.Capacity < 0 || n.InFlight < 0:
		return fmt.Errorf("node %q: negative capacity %d or in flight %d: %w", n.Name, n.Capacity, n.InFlight, ErrInvalid)
	case slices.Contains(n.Handlers, ""):
		return fmt.Errorf("node %q: empty handler name: %w", n.Name, ErrInvalid)
	case slices.ContainsFunc(n.Handlers, func(h string) bool { return strings.Contains(h, "\n") }):
		// Task names hold no line break (ax checks them); the drivers join handlers with one.
		return fmt.Errorf("node %q: a handler name holds a line break: %w", n.Name, ErrInvalid)
	}
	return nil
}

// Stored returns the task a SQL driver wrote for nt, SCHEDULED with id and the stamps
// the database set, as reading the row back would give it — times and durations kept
// to the microsecond, times in UTC, an empty payload non-nil — so that an insert need
// not read back the rows it wrote. Durations are kept to the microsecond as
// FormatBackoff does, towards zero; no delays is a nil Backoff.
func Stored(nt *NewTask, id int64, created, updated time.Time) *Task {
	t := &Task{
		ID: id, Name: nt.Name, Key: nt.Key, Status: Scheduled, DueAt: nt.DueAt.UTC().Truncate(time.Microsecond),
		MaxRetry: nt.MaxRetry, OwnerService: nt.OwnerService, TaskKey: nt.TaskKey, Overlap: nt.Overlap,
		KeyHold: nt.KeyHold, Timeout: nt.Timeout.Truncate(time.Microsecond),
		CreatedAt: created, UpdatedAt: updated,
	}
	if nt.Payload != nil {
		t.Payload = append([]byte{}, nt.Payload...)
	}
	if !nt.KeyUntil.IsZero() {
		t.KeyUntil = nt.KeyUntil.UTC().Truncate(time.Microsecond)
	}
	if len(nt.Backoff) > 0 {
		t.Backoff = make([]time.Duration, len(nt.Backoff))
		for i, d := range nt.Backoff {
			t.Backoff[i] = d.Truncate(time.Microsecond)
		}
	}
	return t
}
