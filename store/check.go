package store

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

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

// CleanText reports whether s is valid UTF-8 without a NUL byte: text every store
// keeps as it is (PostgreSQL refuses a NUL in text).
func CleanText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

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

// MaxMark is the longest mark, in bytes (Marker).
const MaxMark = 64

// CheckMark returns ErrInvalid, wrapped, unless mark is a valid mark (Marker).
func CheckMark(mark string) error {
	if mark == "" || len(mark) > MaxMark {
		return fmt.Errorf("mark of %d bytes, want 1 to %d: %w", len(mark), MaxMark, ErrInvalid)
	}
	for i := 0; i < len(mark); i++ {
		if c := mark[i]; c < '!' || c > '~' {
			return fmt.Errorf("mark %q: byte %d is not printable ASCII: %w", mark, i, ErrInvalid)
		}
	}
	return nil
}
