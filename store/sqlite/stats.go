package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/statsrow"
)

// The statistics (store.StatsKeeper) are ax_stats, one row per (namespace, minute,
// node) (see migrations/0007_stats.sql). WriteStats is one INSERT … ON CONFLICT DO
// UPDATE of at most store.MaxStatsRows rows on the writer; Stats a backward range scan
// of the primary key with a LIMIT on the readers; PruneStats a DELETE of the oldest
// rows, found through the primary key.

// WriteStats implements [store.StatsKeeper].
func (s *Store) WriteStats(ctx context.Context, rows []store.MinuteStats) error {
	if err := statsrow.Check(rows); err != nil {
		return fmt.Errorf("ax: sqlite: %w", err)
	}
	if len(rows) == 0 {
		return nil
	}
	args := make([]any, 0, 14*len(rows))
	for i := range rows {
		r := &rows[i]
		args = statsrow.AppendValues(append(args, s.ns), r, micros(r.Minute))
	}
	values := strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?),", len(rows)), ",")
	return s.write(ctx, "write stats", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO ax_stats (namespace, `+statsrow.Columns+`) VALUES `+values+`
			ON CONFLICT (namespace, minute, node) DO UPDATE SET
				succeeded = excluded.succeeded, failed = excluded.failed, panicked = excluded.panicked,
				timed_out = excluded.timed_out, released = excluded.released, orphaned = excluded.orphaned,
				retried = excluded.retried, early = excluded.early, max_lateness = excluded.max_lateness,
				lateness = excluded.lateness, failures = excluded.failures`, args...)
		return err
	})
}

// statsSQL reads the newest rows of a namespace from a minute on, newest first.
const statsSQL = `SELECT ` + statsrow.Columns + ` FROM ax_stats
	WHERE namespace = ? AND minute >= ? ORDER BY minute DESC, node DESC LIMIT ?`

// pruneStatsSQL deletes up to a limit of a namespace's oldest rows before a minute.
const pruneStatsSQL = `DELETE FROM ax_stats WHERE (namespace, minute, node) IN (
	SELECT namespace, minute, node FROM ax_stats WHERE namespace = ? AND minute < ? ORDER BY minute, node LIMIT ?)`

// Stats implements [store.StatsKeeper].
func (s *Store) Stats(ctx context.Context, since time.Time) ([]store.MinuteStats, error) {
	if err := statsrow.CheckSince(since); err != nil {
		return nil, fmt.Errorf("ax: sqlite: %w", err)
	}
	rows, err := s.r.QueryContext(ctx, statsSQL, s.ns, micros(since), store.MaxStatsRead)
	if err != nil {
		return nil, s.wrap("stats", err)
	}
	defer rows.Close()
	out := []store.MinuteStats{}
	for rows.Next() {
		var (
			sc     statsrow.Scan
			minute int64
		)
		if err := rows.Scan(sc.Dest(&minute)...); err != nil {
			return nil, s.wrap("stats", err)
		}
		r, err := sc.Decode()
		if err != nil {
			return nil, s.wrap("stats", err)
		}
		r.Minute = fromMicros(minute)
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
		return 0, fmt.Errorf("ax: sqlite: %w", err)
	}
	var n int64
	err := s.write(ctx, "prune stats", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, pruneStatsSQL, s.ns, micros(before), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
