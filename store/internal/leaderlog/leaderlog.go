// Package leaderlog holds what the drivers share for store.Fencer: the checks
// of its arguments, and the reason an "acquired" change gives, so that every store
// refuses the same input and words the same history.
package leaderlog

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/elect"
	"github.com/axsched/ax/store"
)

// CheckEnd rejects what the contract calls invalid for EndLeadership (ErrInvalid).
func CheckEnd(namespace, holder string, epoch int64, reason string) error {
	if err := store.CheckNamespace(namespace); err != nil {
		return fmt.Errorf("end leadership: %w", err)
	}
	switch {
	case holder == "" || len(holder) > store.MaxLeadershipHolder || !store.CleanText(holder):
		return fmt.Errorf("end leadership: a holder empty, over %d bytes, not UTF-8 or with a NUL: %w", store.MaxLeadershipHolder, store.ErrInvalid)
	case epoch < 1:
		return fmt.Errorf("end leadership: epoch %d below 1: %w", epoch, store.ErrInvalid)
	case len(reason) > store.MaxLeadershipReason || !store.CleanText(reason):
		return fmt.Errorf("end leadership: a reason over %d bytes, not UTF-8 or with a NUL: %w", store.MaxLeadershipReason, store.ErrInvalid)
	}
	return nil
}

// CheckHistory rejects what the contract calls invalid for LeadershipHistory.
func CheckHistory(namespace string, n int) error {
	if err := store.CheckNamespace(namespace); err != nil {
		return fmt.Errorf("leadership history: %w", err)
	}
	if n < 1 || n > store.MaxLeadershipHistory {
		return fmt.Errorf("leadership history: %d changes is outside 1..%d: %w", n, store.MaxLeadershipHistory, store.ErrInvalid)
	}
	return nil
}

// CheckPrune rejects what the contract calls invalid for PruneLeadership.
func CheckPrune(namespace string, before time.Time, keepNewest, limit int) error {
	if err := store.CheckNamespace(namespace); err != nil {
		return fmt.Errorf("prune leadership: %w", err)
	}
	switch {
	case limit < 1 || limit > store.MaxPrune:
		return fmt.Errorf("prune leadership: limit %d is outside 1..%d: %w", limit, store.MaxPrune, store.ErrInvalid)
	case keepNewest < 0:
		return fmt.Errorf("prune leadership: negative number of changes to keep %d: %w", keepNewest, store.ErrInvalid)
	case before.IsZero() && keepNewest == 0:
		return fmt.Errorf("prune leadership: neither a time nor a number of changes to keep: %w", store.ErrInvalid)
	}
	return nil
}

// AcquiredReason is the Reason of the "acquired" change of a new term, from prev, the
// namespace's newest change recorded before it (nil when there is none). It names
// prev's leader by its candidate name (elect.Candidate) and is at most
// store.MaxLeadershipReason bytes.
func AcquiredReason(prev *store.LeadershipChange) string {
	switch {
	case prev == nil:
		return "no earlier leader recorded"
	case prev.Kind == store.LeadershipEnded:
		return Clip(fmt.Sprintf("%s ended its term of epoch %d: %s", elect.Candidate(prev.Holder), prev.Epoch, prev.Reason))
	default:
		return Clip(fmt.Sprintf("%s recorded no end of its term of epoch %d: its lease was not released (it crashed, froze or lost its store)", elect.Candidate(prev.Holder), prev.Epoch))
	}
}

// Clip cuts s to at most store.MaxLeadershipReason bytes, at a character boundary.
func Clip(s string) string {
	if len(s) <= store.MaxLeadershipReason {
		return s
	}
	cut := store.MaxLeadershipReason
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
