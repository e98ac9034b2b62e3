package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/leaderlog"
)

// The leadership history lives in ax_leadership (migrations/0013_leadership.sql), one
// row per change, keyed by (namespace, epoch, kind). RaiseFence appends a term's
// "acquired" row in its own transaction, after the fence lock (raiseFence); the other
// methods run one statement each on the primary key (TestExplain pins their plans).

// newestChangeSQL reads a namespace's newest change: one step of the primary key's
// backward scan.
const newestChangeSQL = `SELECT epoch, kind, holder, reason FROM ax_leadership
	WHERE namespace = $1 ORDER BY epoch DESC, kind DESC LIMIT 1`

// appendChangeSQL appends a change stamped by the database's clock, unless its
// namespace, epoch and kind are recorded already.
const appendChangeSQL = `INSERT INTO ax_leadership (namespace, epoch, kind, holder, at, reason)
	VALUES ($1, $2, $3, $4, clock_timestamp(), $5) ON CONFLICT DO NOTHING`

// historySQL reads a namespace's newest changes.
const historySQL = `SELECT epoch, kind, holder, at, reason FROM ax_leadership
	WHERE namespace = $1 ORDER BY epoch DESC, kind DESC LIMIT $2`

// pruneLeadershipSQL deletes up to $4 of namespace $1's oldest changes (see
// store.Pruner): cut is the newest change beyond the newest $2 (none when $2
// is past the end), stay the oldest change after cut recorded at or after $3, and
// every change before stay goes, oldest first, found by their row addresses (locked
// by the scan, so a concurrent prune waits and then skips what was deleted). Each
// step is a range of the primary key: the row comparisons are its index conditions.
const pruneLeadershipSQL = `WITH cut AS (
	SELECT epoch, kind FROM ax_leadership WHERE namespace = $1
	ORDER BY epoch DESC, kind DESC LIMIT 1 OFFSET $2
), stay AS (
	SELECT epoch, kind FROM ax_leadership WHERE namespace = $1
		AND (epoch, kind) > (SELECT COALESCE(max(epoch), 0), COALESCE(max(kind), '') FROM cut) AND at >= $3
	ORDER BY epoch, kind LIMIT 1
), doomed AS (
	SELECT ctid FROM ax_leadership WHERE namespace = $1
		AND (epoch, kind) < (SELECT COALESCE(max(epoch), 9223372036854775807), COALESCE(max(kind), '') FROM stay)
	ORDER BY epoch, kind LIMIT $4 FOR UPDATE
)
DELETE FROM ax_leadership WHERE ctid = ANY (ARRAY(SELECT ctid FROM doomed))`

// raiseFence runs raiseFenceSQL and appends the term's "acquired" change in one
// transaction of two round trips: the raise takes the namespace's fence lock, so the
// read of the newest change that follows it in the first round sees every raise
// before it (each statement's snapshot at READ COMMITTED is taken after the lock),
// and the second round appends the change with the reason it computed, unless the
// newest change is of this epoch or a later one, and commits.
func (s *Store) raiseFence(ctx context.Context, namespace, holder string, token int64) (int64, error) {
	var epoch int64
	err := s.steps(ctx, "raise fence", func(r round) error {
		epoch = token // the row already records holder at token when none comes back
		var (
			prev  store.LeadershipChange
			found bool
		)
		err := r(false, func(b *pgx.Batch) {
			b.Queue(raiseFenceSQL, namespace, holder, token)
			b.Queue(newestChangeSQL, namespace)
		}, func(br pgx.BatchResults) error {
			if err := br.QueryRow().Scan(&epoch); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			err := br.QueryRow().Scan(&prev.Epoch, &prev.Kind, &prev.Holder, &prev.Reason)
			if found = err == nil; err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			return nil
		})
		if err != nil || found && prev.Epoch >= epoch { // recorded already: commit
			return err
		}
		reason := leaderlog.AcquiredReason(nil)
		if found {
			reason = leaderlog.AcquiredReason(&prev)
		}
		return r(true, func(b *pgx.Batch) {
			b.Queue(appendChangeSQL, namespace, epoch, store.LeadershipAcquired, holder, reason)
		}, func(br pgx.BatchResults) error {
			_, err := br.Exec()
			return err
		})
	})
	return epoch, err
}

// EndLeadership appends the end of holder's term of epoch. See [store.Fencer].
func (s *Store) EndLeadership(ctx context.Context, namespace, holder string, epoch int64, reason string) error {
	if err := leaderlog.CheckEnd(namespace, holder, epoch, reason); err != nil {
		return fmt.Errorf("ax: postgres: %w", err)
	}
	if err := s.check("end leadership"); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, appendChangeSQL, namespace, epoch, store.LeadershipEnded, holder, reason); err != nil {
		return s.wrap("end leadership", err)
	}
	return nil
}

// LeadershipHistory returns the namespace's newest n changes, a backward scan of the
// primary key. See [store.Fencer].
func (s *Store) LeadershipHistory(ctx context.Context, namespace string, n int) ([]store.LeadershipChange, error) {
	if err := leaderlog.CheckHistory(namespace, n); err != nil {
		return nil, fmt.Errorf("ax: postgres: %w", err)
	}
	if err := s.check("leadership history"); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, historySQL, namespace, n)
	if err != nil {
		return nil, s.wrap("leadership history", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.LeadershipChange, error) {
		c := store.LeadershipChange{Namespace: namespace}
		err := row.Scan(&c.Epoch, &c.Kind, &c.Holder, &c.At, &c.Reason)
		c.At = c.At.UTC()
		return c, err
	})
	if err != nil {
		return nil, s.wrap("leadership history", err)
	}
	if out == nil {
		out = []store.LeadershipChange{}
	}
	return out, nil
}

// PruneLeadership deletes the namespace's oldest changes in one statement. See
// [store.Pruner].
func (s *Store) PruneLeadership(ctx context.Context, namespace string, before time.Time, keepNewest, limit int) (int, error) {
	if err := leaderlog.CheckPrune(namespace, before, keepNewest, limit); err != nil {
		return 0, fmt.Errorf("ax: postgres: %w", err)
	}
	if err := s.check("prune leadership"); err != nil {
		return 0, err
	}
	offset := int64(math.MaxInt64) // past the end: no count limit
	if keepNewest > 0 {
		offset = int64(keepNewest)
	}
	// A zero before (year 1) is older than every change: no age limit.
	tag, err := s.pool.Exec(ctx, pruneLeadershipSQL, namespace, offset, before, limit)
	if err != nil {
		return 0, s.wrap("prune leadership", err)
	}
	return int(tag.RowsAffected()), nil
}
