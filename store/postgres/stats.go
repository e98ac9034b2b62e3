package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/statsrow"
)

// The statistics (store.StatsKeeper) are ax_stats, one row per (namespace, minute,
// node) (see migrations/0011_stats.sql). WriteStats is one INSERT … ON CONFLICT DO
// UPDATE of at most store.MaxStatsRows rows, passed as arrays; Stats a backward
// range scan of the primary key with a LIMIT; PruneStats a DELETE of the oldest
// rows, found through the primary key.

// WriteStats implements [store.StatsKeeper].
func (s *Store) WriteStats(ctx context.Context, rows []store.MinuteStats) error {
	if err := statsrow.Check(rows); err != nil {
		return fmt.Errorf("ax: postgres: %w", err)
	}
	if err := s.check("write stats"); err != nil {
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	n := len(rows)
	var (
		minutes                                     = make([]time.Time, n)
		nodes, lateness, failures                   = make([]string, n), make([]string, n), make([]string, n)
		succeeded, failed, panicked, timedOut       = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		released, orphaned, retried, early, maxLate = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	)
	for i := range rows {
		r := &rows[i]
		minutes[i], nodes[i] = r.Minute.UTC(), r.Node
		succeeded[i], failed[i], panicked[i], timedOut[i] = r.Succeeded, r.Failed, r.Panicked, r.TimedOut
		released[i], orphaned[i], retried[i], early[i] = r.Released, r.Orphaned, r.Retried, r.Early
		maxLate[i] = r.MaxLateness.Microseconds()
		lateness[i], failures[i] = statsrow.FormatLateness(&r.Lateness), statsrow.FormatFailures(r.Failures)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO ax_stats (namespace, `+statsrow.Columns+`)
		SELECT $1, * FROM unnest($2::timestamptz[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[],
			$8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], $13::text[], $14::text[])
		ON CONFLICT (namespace, minute, node) DO UPDATE SET
			succeeded = excluded.succeeded, failed = excluded.failed, panicked = excluded.panicked,
			timed_out = excluded.timed_out, released = excluded.released, orphaned = excluded.orphaned,
			retried = excluded.retried, early = excluded.early, max_lateness = excluded.max_lateness,
			lateness = excluded.lateness, failures = excluded.failures`,
		s.ns, minutes, nodes, succeeded, failed, panicked, timedOut, released, orphaned, retried, early, maxLate, lateness, failures)
	return s.wrap("write stats", err)
}

// statsSQL reads the newest rows of a namespace from a minute on, newest first.
const statsSQL = `SELECT ` + statsrow.Columns + ` FROM ax_stats
	WHERE namespace = $1 AND minute >= $2 ORDER BY minute DESC, node DESC LIMIT $3`

// pruneStatsSQL deletes up to a limit of a namespace's oldest rows before a minute:
// found through the primary key, deleted by their physical position (a TID scan), so
// that the DELETE never joins with the whole table. Nothing writes rows that old; a
// row changed meanwhile has moved and is left for the next call.
const pruneStatsSQL = `DELETE FROM ax_stats WHERE ctid = ANY(ARRAY(
	SELECT ctid FROM ax_stats WHERE namespace = $1 AND minute < $2 ORDER BY minute, node LIMIT $3))`

// Stats implements [store.StatsKeeper].
func (s *Store) Stats(ctx context.Context, since time.Time) ([]store.MinuteStats, error) {
	if err := statsrow.CheckSince(since); err != nil {
		return nil, fmt.Errorf("ax: postgres: %w", err)
	}
	if err := s.check("stats"); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, statsSQL, s.ns, since, store.MaxStatsRead)
	if err != nil {
		return nil, s.wrap("stats", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.MinuteStats, error) {
		var sc statsrow.Scan
		if err := row.Scan(sc.Dest(sc.MinuteDest())...); err != nil {
			return store.MinuteStats{}, err
		}
		return sc.Decode()
	})
	if err != nil {
		return nil, s.wrap("stats", err)
	}
	if out == nil {
		out = []store.MinuteStats{}
	}
	slices.Reverse(out)
	return out, nil
}

// PruneStats implements [store.StatsKeeper].
func (s *Store) PruneStats(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := statsrow.CheckPrune(before, limit); err != nil {
		return 0, fmt.Errorf("ax: postgres: %w", err)
	}
	if err := s.check("prune stats"); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, pruneStatsSQL, s.ns, before, limit)
	if err != nil {
		return 0, s.wrap("prune stats", err)
	}
	return int(tag.RowsAffected()), nil
}
