package admin

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/axsched/ax"
)

// SuppressedAction is the action of the audit row that sums up an actor's refused
// calls counted instead of recorded one by one (Config.Refusals). Its result reads
// "suppressed: <n> refused calls from <RFC 3339> to <RFC 3339> (over <N> per <Per>):
// <action> <n>, …".
const SuppressedAction = "audit.suppressed"

// refusalLimiter decides which refused calls of an actor are written one audit row
// each: the first limit.N of its window, a fixed window of limit.Per that starts at
// its first refusal. It counts the others by action; when the window has ended,
// their count becomes a summary, pending until the handler writes it. Actors are the
// configured tokens', so the windows are bounded in number.
type refusalLimiter struct {
	limit   Limit
	mu      sync.Mutex
	by      map[string]*refusalWindow // by actor
	pending []refusalSummary
}

// refusalWindow is an actor's refusals in its current window.
type refusalWindow struct {
	start      time.Time
	n          int
	role       string
	suppressed map[string]int // refusals counted, not written, by action
}

// refusalSummary is an actor's refusals counted in [from, to), by action.
type refusalSummary struct {
	actor, role string
	from, to    time.Time
	byAction    map[string]int
}

func newRefusalLimiter(l Limit) *refusalLimiter {
	return &refusalLimiter{limit: l, by: map[string]*refusalWindow{}}
}

// admit counts a refusal of action by actor, of role, at now. It reports whether the
// refusal is written as its own row, and whether it is the first of its window that
// is not (which the caller logs).
func (l *refusalLimiter) admit(actor, role, action string, now time.Time) (write, first bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	w := l.by[actor]
	if w == nil {
		w = &refusalWindow{start: now, suppressed: map[string]int{}}
		l.by[actor] = w
	}
	w.n++
	w.role = role
	if w.n <= l.limit.N {
		return true, false
	}
	w.suppressed[action]++
	return false, w.n == l.limit.N+1
}

// take returns the pending summaries, the windows ended by now included, and
// forgets them. With all, every window's counts are taken, ended or not, to now.
func (l *refusalLimiter) take(now time.Time, all bool) []refusalSummary {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	if all {
		for actor, w := range l.by {
			if len(w.suppressed) > 0 {
				l.pending = append(l.pending, refusalSummary{actor: actor, role: w.role, from: w.start, to: now, byAction: w.suppressed})
				w.suppressed = map[string]int{}
			}
		}
	}
	out := l.pending
	l.pending = nil
	return out
}

// sweep ends the windows that ended by now, their counts made pending summaries.
func (l *refusalLimiter) sweep(now time.Time) {
	for actor, w := range l.by {
		if end := w.start.Add(l.limit.Per); !now.Before(end) {
			if len(w.suppressed) > 0 {
				l.pending = append(l.pending, refusalSummary{actor: actor, role: w.role, from: w.start, to: end, byAction: w.suppressed})
			}
			delete(l.by, actor)
		}
	}
}

// record is the summary's audit record.
func (s refusalSummary) record(l Limit) ax.AuditRecord {
	total := 0
	var by []string
	for _, action := range slices.Sorted(maps.Keys(s.byAction)) {
		total += s.byAction[action]
		by = append(by, fmt.Sprintf("%s %d", action, s.byAction[action]))
	}
	return ax.AuditRecord{Actor: s.actor, Role: s.role, Action: SuppressedAction, Result: truncate(fmt.Sprintf(
		"suppressed: %d refused calls from %s to %s (over %d per %v): %s", total, s.from.UTC().Format(time.RFC3339),
		s.to.UTC().Format(time.RFC3339), l.N, l.Per, strings.Join(by, ", ")), maxResult)}
}

// refused records rec, the record of a refused call, unless the actor is past
// Config.Refusals: then it is counted for a summary row, and the first refusal
// counted so in a window is logged at WARN.
func (h *Handler) refused(r *http.Request, rec ax.AuditRecord) {
	write, first := h.refusals.admit(rec.Actor, rec.Role, rec.Action, time.Now())
	if first {
		h.log.WarnContext(r.Context(), "ax: admin: refused calls over the limit: counted, and written in one summary row when the window ends",
			"actor", rec.Actor, "limit", h.refusals.limit.N, "per", h.refusals.limit.Per, "summary_action", SuppressedAction)
	}
	if !write {
		return
	}
	if _, err := h.s.Audit(context.WithoutCancel(r.Context()), rec); err != nil {
		h.log.ErrorContext(r.Context(), "ax: admin: an audit record could not be written", "action", rec.Action, "target", rec.Target,
			"actor", rec.Actor, "result", rec.Result, "err", err)
	}
}

// writeSummaries writes the pending summary rows of refusals (every count, with
// all). One that cannot be written is logged at ERROR with its counts.
func (h *Handler) writeSummaries(ctx context.Context, all bool) error {
	var first error
	failed := 0
	for _, s := range h.refusals.take(time.Now(), all) {
		rec := s.record(h.refusals.limit)
		if _, err := h.s.Audit(ctx, rec); err != nil {
			h.log.ErrorContext(ctx, "ax: admin: a summary of refused calls could not be written", "actor", rec.Actor, "result", rec.Result, "err", err)
			first = cmp.Or(first, err)
			failed++
		}
	}
	if first != nil {
		return fmt.Errorf("ax: admin: %d summaries of refused calls not written (logged); the first: %w", failed, unprefixed{first})
	}
	return nil
}

// unprefixed is an error whose message drops the leading "ax: " of the one it wraps,
// so that the message that wraps it has one.
type unprefixed struct{ err error }

func (u unprefixed) Error() string { return strings.TrimPrefix(u.err.Error(), "ax: ") }
func (u unprefixed) Unwrap() error { return u.err }
