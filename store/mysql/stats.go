package mysql

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/statsrow"
)

// The statistics (store.StatsKeeper) are ax_stats, one row per (namespace, minute,
// node) (see migrations/0006_stats.sql). WriteStats is one INSERT … ON DUPLICATE KEY
// UPDATE of at most store.MaxStatsRows rows; Stats a backward range scan of the
// primary key with a LIMIT; PruneStats a DELETE … ORDER BY … LIMIT in the primary
// key's order (a single-table DELETE takes both, unlike an IN subquery).

// WriteStats implements [store.StatsKeeper].
func (s *Store) WriteStats(ctx context.Context, rows []store.MinuteStats) error {
	if err := statsrow.Check(rows); err != nil {
		return fmt.Errorf("ax: mysql: %w", err)
	}
	if err := s.check("write stats"); err != nil {
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	args := make([]any, 0, 14*len(rows))
	for i := range rows {
		r := &rows[i]
		args = statsrow.AppendValues(append(args, s.ns), r, dt(r.Minute))
	}
	values := strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?),", len(rows)), ",")
	_, err := s.db.ExecContext(ctx, `INSERT INTO ax_stats (namespace, `+statsrow.Columns+`) VALUES `+values+`
		ON DUPLICATE KEY UPDATE succeeded = VALUES(succeeded), failed = VALUES(failed), panicked = VALUES(panicked),
			timed_out = VALUES(timed_out), released = VALUES(released), orphaned = VALUES(orphaned),
			retried = VALUES(retried), early = VALUES(early), max_lateness = VALUES(max_lateness),
			lateness = VALUES(lateness), failures = VALUES(failures)`, args...)
	return s.wrap("write stats", err)
}

// statsSQL reads the newest rows of a namespace from a minute on, newest first.
const statsSQL = `SELECT ` + statsrow.Columns + ` FROM ax_stats
	WHERE namespace = ? AND minute >= ? ORDER BY minute DESC, node DESC LIMIT ?`

// pruneStatsSQL deletes up to a limit of a namespace's oldest rows before a minute.
const pruneStatsSQL = `DELETE FROM ax_stats WHERE namespace = ? AND minute < ? ORDER BY namespace, minute, node LIMIT ?`

// Stats implements [store.StatsKeeper].
func (s *Store) Stats(ctx context.Context, since time.Time) ([]store.MinuteStats, error) {
	if err := statsrow.CheckSince(since); err != nil {
		return nil, fmt.Errorf("ax: mysql: %w", err)
	}
	if err := s.check("stats"); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, statsSQL, s.ns, dt(clamp(since)), store.MaxStatsRead)
	if err != nil {
		return nil, s.wrap("stats", err)
	}
	defer rows.Close()
	out := []store.MinuteStats{}
	for rows.Next() {
		var sc statsrow.Scan
		if err := rows.Scan(sc.Dest(dbTime{sc.MinuteDest()})...); err != nil {
			return nil, s.wrap("stats", err)
		}
		r, err := sc.Decode()
		if err != nil {
			return nil, s.wrap("stats", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("stats", err)
	}
	slices.Reverse(out)
	return out, nil
}

// PruneStats implements [store.StatsKeeper].
func (s *Store) PruneStats(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := statsrow.CheckPrune(before, limit); err != nil {
		return 0, fmt.Errorf("ax: mysql: %w", err)
	}
	if err := s.check("prune stats"); err != nil {
		return 0, err
	}
	res, err := s.db.ExecContext(ctx, pruneStatsSQL, s.ns, dt(clamp(before)), limit)
	if err != nil {
		return 0, s.wrap("prune stats", err)
	}
	n, err := res.RowsAffected()
	return int(n), s.wrap("prune stats", err)
}
