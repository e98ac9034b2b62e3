package driverkit

import (
	"slices"
	"strings"
	"time"

	"github.com/axsched/ax/store"
)

// Selects reports whether q's filters select t (its order and cursor aside): the
// reference the SQL drivers' queries agree with.
func Selects(q store.TaskQuery, t *store.Task) bool {
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
func Follows(q store.TaskQuery, t *store.Task) bool {
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
func Before(q store.TaskQuery, a, b *store.Task) bool {
	if q.Soonest {
		return a.DueAt.Before(b.DueAt) || a.DueAt.Equal(b.DueAt) && a.ID < b.ID
	}
	return a.ID > b.ID
}
