package store

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
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

// CheckStarts rejects what the contract calls invalid for Start: an empty execution
// id.
func CheckStarts(starts []StartParams) error {
	for i, sp := range starts {
		if sp.ExecutionID == "" {
			return fmt.Errorf("execution %d: empty execution id: %w", i, ErrInvalid)
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
	if t == nil {
		return nil, fmt.Errorf("%s: %w", op, sentinel)
	}
	return t, fmt.Errorf("%s: task is %s: %w", op, t.Status, sentinel)
}
