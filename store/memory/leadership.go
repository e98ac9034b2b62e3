package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/store"
)

// The leadership history lives in s.leadership, one slice per namespace in the order
// the other stores index it: (epoch, kind) ascending, a term's start before its end.

// changeOrder orders a namespace's changes oldest first.
func changeOrder(a, b store.LeadershipChange) int {
	if c := cmp.Compare(a.Epoch, b.Epoch); c != 0 {
		return c
	}
	return strings.Compare(a.Kind, b.Kind)
}

// appendChange adds c to its namespace's history unless a change of its epoch and
// kind is there already. s.mu must be held.
func (s *Store) appendChange(c store.LeadershipChange) {
	h := s.leadership[c.Namespace]
	i, found := slices.BinarySearchFunc(h, c, changeOrder)
	if !found {
		s.leadership[c.Namespace] = slices.Insert(h, i, c)
	}
}

// recordAcquired appends the "acquired" change of holder's term of epoch, RaiseFence's
// part. s.mu must be held.
func (s *Store) recordAcquired(namespace, holder string, epoch int64) {
	c := store.LeadershipChange{Namespace: namespace, Epoch: epoch, Holder: holder, Kind: store.LeadershipAcquired, At: s.now()}
	h := s.leadership[namespace]
	if _, found := slices.BinarySearchFunc(h, c, changeOrder); found {
		return
	}
	var prev *store.LeadershipChange
	if len(h) > 0 {
		prev = &h[len(h)-1]
	}
	c.Reason = acquiredReason(prev)
	s.appendChange(c)
}

// EndLeadership appends the end of holder's term of epoch. See [store.Fencer].
func (s *Store) EndLeadership(ctx context.Context, namespace, holder string, epoch int64, reason string) error {
	if err := checkLeadership("end leadership", namespace,
		rule{holder == "" || !text(holder, store.MaxLeadershipHolder), "holder empty, too long, not UTF-8 or with a NUL"},
		rule{epoch < 1, "epoch below 1"}, rule{!text(reason, store.MaxLeadershipReason), "reason too long, not UTF-8 or with a NUL"}); err != nil {
		return fmt.Errorf("ax: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return fmt.Errorf("ax: end leadership: %w", err)
	}
	defer s.mu.Unlock()
	s.appendChange(store.LeadershipChange{Namespace: namespace, Epoch: epoch, Holder: holder, Kind: store.LeadershipEnded, At: s.now(), Reason: reason})
	return nil
}

// LeadershipHistory returns the namespace's newest n changes. See [store.Fencer].
func (s *Store) LeadershipHistory(ctx context.Context, namespace string, n int) ([]store.LeadershipChange, error) {
	if err := checkLeadership("leadership history", namespace, rule{outside(n, store.MaxLeadershipHistory), "count out of range"}); err != nil {
		return nil, fmt.Errorf("ax: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: leadership history: %w", err)
	}
	defer s.mu.Unlock()
	h := s.leadership[namespace]
	out := make([]store.LeadershipChange, 0, min(n, len(h)))
	for i := len(h) - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, h[i])
	}
	return out, nil
}

// PruneLeadership deletes the namespace's oldest changes. See [store.Pruner].
func (s *Store) PruneLeadership(ctx context.Context, namespace string, before time.Time, keepNewest, limit int) (int, error) {
	if err := checkLeadership("prune leadership", namespace, rule{outside(limit, store.MaxPrune), "limit out of range"},
		rule{keepNewest < 0, "negative number to keep"}, rule{before.IsZero() && keepNewest == 0, "neither a time nor a number to keep"}); err != nil {
		return 0, fmt.Errorf("ax: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return 0, fmt.Errorf("ax: prune leadership: %w", err)
	}
	defer s.mu.Unlock()
	h := s.leadership[namespace]
	beyond := 0 // how many of the oldest are beyond the newest keepNewest
	if keepNewest > 0 {
		beyond = max(len(h)-keepNewest, 0)
	}
	n := 0
	for n < len(h) && n < limit && (n < beyond || h[n].At.Before(before)) {
		n++
	}
	s.leadership[namespace] = slices.Delete(h, 0, n)
	return n, nil
}

// acquiredReason is the Reason of a new term's "acquired" change: how prev, the
// namespace's newest change before it (nil when none), ended, naming its leader by
// candidate name.
func acquiredReason(prev *store.LeadershipChange) string {
	var why string
	switch {
	case prev == nil:
		return "no earlier leader recorded"
	case prev.Kind == store.LeadershipEnded:
		why = fmt.Sprintf("%s ended its term of epoch %d: %s", candidate(prev.Holder), prev.Epoch, prev.Reason)
	default:
		why = fmt.Sprintf("%s recorded no end of its term of epoch %d: its lease was not released (it crashed, froze or lost its store)", candidate(prev.Holder), prev.Epoch)
	}
	for len(why) > store.MaxLeadershipReason { // cut at a character boundary
		_, n := utf8.DecodeLastRuneInString(why)
		why = why[:len(why)-n]
	}
	return why
}

// candidate is the candidate's name in an elector's holder value, "<id> <name>" or
// "<token> <id> <name>": what follows the id. A value without a space is the name.
func candidate(holder string) string {
	rest := holder
	if n, after, ok := strings.Cut(rest, " "); ok && n != "" && strings.Trim(n, "0123456789") == "" {
		rest = after
	}
	if _, name, ok := strings.Cut(rest, " "); ok {
		return name
	}
	return rest
}
