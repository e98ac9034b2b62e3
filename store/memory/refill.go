package memory

import (
	"context"
	"fmt"
	"sort"

	"github.com/axsched/ax/store"
)

// Refill reads the changed and the entered scheduled tasks. See [store.Store.Refill]
// and [store.RefillParams]. A Limit below 1 is ErrInvalid.
func (s *Store) Refill(ctx context.Context, p store.RefillParams) (*store.RefillResult, error) {
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("ax: refill: %w", err)
	}
	defer s.mu.Unlock()
	if p.Limit < 1 {
		return nil, fmt.Errorf("ax: refill: limit %d: %w", p.Limit, store.ErrInvalid)
	}
	to := utc(p.To)
	res := &store.RefillResult{Seq: s.lastSeq}

	if p.AfterSeq >= 0 {
		var last int64 // the sequence number of the last row returned
		i := sort.Search(len(s.changes), func(i int) bool { return s.changes[i].seq > p.AfterSeq })
		for ; i < len(s.changes); i++ {
			c := s.changes[i]
			r := s.rows[c.id]
			if r.ns != s.ns || !r.current(c) || !r.task.DueAt.Before(to) {
				continue
			}
			if len(res.Changed) == p.Limit {
				// Cut short: the caller resumes after the last row returned.
				res.More = true
				res.Seq = last
				break
			}
			res.Changed = append(res.Changed, store.Due{ID: r.task.ID, DueAt: r.task.DueAt})
			last = c.seq
		}
	}

	from := dueKey{utc(p.From), p.FromID}
	i := sort.Search(len(s.window), func(i int) bool { return s.window[i].compare(from) > 0 })
	for ; i < len(s.window) && s.window[i].at.Before(to); i++ {
		if s.rows[s.window[i].id].ns != s.ns {
			continue
		}
		if len(res.Entered) == p.Limit {
			res.More = true
			break
		}
		res.Entered = append(res.Entered, store.Due{ID: s.window[i].id, DueAt: s.window[i].at})
	}
	return res, nil
}
