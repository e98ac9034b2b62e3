package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/store"
)

// The refill cursor (see DESIGN.md for the argument). Refill runs three statements in
// this order, each with its own READ COMMITTED snapshot:
//
//  1. seqNowSQL: v0, the last value the sequence handed out;
//  2. inflightSQL: the lower bounds g published by the transactions of this schema
//     that are stamping rows right now (advisory locks, visible before they commit);
//  3. the scans, whose snapshot is taken after both.
//
// The returned cursor is at most min(v0, every g): every stamp at or below it belongs
// to a transaction that had ended before statement 3 began, so its row is visible to
// the scans (or was rolled back, or has changed since).
//
// Namespaces: the sequence and the announcing locks are the schema's, one for all
// namespaces; only the scans filter by the view's namespace. The argument above holds
// for every stamp, whichever namespace its row is in, so it holds for the rows the
// scans may return. The locks are not per namespace because nothing needs them to
// be: a writer of another namespace holds a view's cursor back only while it runs,
// and the rows stamped above the cursor meanwhile are returned again, never skipped.
// A page cut short at Limit continues after its last row: the stamps below it that
// the page left out are of other namespaces' rows, or of rows the scan does not want
// (not SCHEDULED, not due before To), as before.
const (
	seqNowSQL   = `SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM ax_seq`
	inflightSQL = `SELECT objid::bigint FROM pg_locks
		WHERE locktype = 'advisory' AND objsubid = 2 AND classid = $1::bigint::oid
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`
	// refillSQL is both scans of namespace $6 in one statement: one snapshot.
	refillSQL = `(SELECT true, id, due_at, seq FROM ax_tasks
		WHERE namespace = $6 AND status = 'SCHEDULED' AND seq > $1 AND due_at < $2 ORDER BY seq LIMIT $3)
		UNION ALL
		(SELECT false, id, due_at, 0 FROM ax_tasks
		WHERE namespace = $6 AND status = 'SCHEDULED' AND (due_at, id) > ($4, $5) AND due_at < $2 ORDER BY due_at, id LIMIT $3)`
)

// lowBits is the width of the stamp bounds published in advisory lock keys.
const lowBits = 31

// widen returns the value nearest to ref whose low 31 bits are low: the full lower
// bound a transaction published (it lies within 2^30 of the sequence's value).
func widen(low, ref int64) int64 {
	const span = int64(1) << lowBits
	v := ref&^(span-1) | low
	switch {
	case v > ref+span/2:
		v -= span
	case v < ref-span/2:
		v += span
	}
	return v
}

// Refill reads the view's changed and newly windowed SCHEDULED tasks (see
// store.RefillParams).
//
// Changed holds the visible rows stamped after AfterSeq, including rows stamped after
// the returned cursor when a concurrent transaction holds the cursor back: they are
// read again by the next Refill (the timing wheel dedupes), never skipped.
func (s *Store) Refill(ctx context.Context, p store.RefillParams) (*store.RefillResult, error) {
	if p.Limit <= 0 {
		return nil, fmt.Errorf("ax: postgres: refill: limit %d: %w", p.Limit, store.ErrInvalid)
	}
	var (
		res      *store.RefillResult
		v0       int64
		inflight []int64
	)
	after := p.AfterSeq
	if after < 0 {
		after = 1<<63 - 1 // the changed scan finds nothing
	}
	err := s.tx(ctx, "refill", func(b *pgx.Batch) {
		b.Queue(seqNowSQL)
		b.Queue(inflightSQL, s.lockKey)
		b.Queue(refillSQL, after, p.To, p.Limit, p.From, p.FromID, s.ns)
	}, func(br pgx.BatchResults) error {
		res = &store.RefillResult{}
		inflight = inflight[:0]
		if err := br.QueryRow().Scan(&v0); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		for rows.Next() {
			var low int64
			if err := rows.Scan(&low); err != nil {
				rows.Close()
				return err
			}
			inflight = append(inflight, low)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = br.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		var lastSeq int64
		var seqs []int64
		for rows.Next() {
			var (
				changed bool
				d       store.Due
				seq     int64
			)
			if err := rows.Scan(&changed, &d.ID, &d.DueAt, &seq); err != nil {
				return err
			}
			d.DueAt = d.DueAt.UTC()
			if changed {
				res.Changed = append(res.Changed, d)
				seqs = append(seqs, seq)
				lastSeq = max(lastSeq, seq)
			} else {
				res.Entered = append(res.Entered, d)
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if !slices.IsSorted(seqs) { // UNION ALL keeps each branch's order in practice
			byID := make(map[int64]int64, len(seqs))
			for i, d := range res.Changed {
				byID[d.ID] = seqs[i]
			}
			slices.SortFunc(res.Changed, func(a, b store.Due) int { return cmp.Compare(byID[a.ID], byID[b.ID]) })
		}
		// The safe watermark: nothing at or below it can still appear.
		w := v0
		for _, low := range inflight {
			w = min(w, widen(low, v0))
		}
		if p.AfterSeq < 0 {
			res.Seq = max(w, 0)
		} else {
			res.Seq = max(w, p.AfterSeq)
			if len(res.Changed) == p.Limit && lastSeq <= w {
				// Cut short below the watermark: continue after the last row.
				res.Seq, res.More = lastSeq, true
			}
		}
		if len(res.Entered) == p.Limit {
			res.More = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(res.Entered, func(a, b store.Due) int {
		if c := a.DueAt.Compare(b.DueAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return res, nil
}
