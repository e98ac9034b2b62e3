package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/internal/leaderlog"
)

// The leadership history lives in ax_leadership (migrations/0009_leadership.sql), one
// row per change, keyed by (namespace, epoch, kind). RaiseFence appends a term's
// "acquired" row in its IMMEDIATE transaction (recordAcquired); the other methods each
// run one statement, or one write transaction, on the primary key.

// newestChangeSQL reads a namespace's newest change: one step of the primary key's
// backward scan.
const newestChangeSQL = `SELECT epoch, kind, holder, reason FROM ax_leadership
	WHERE namespace = ? ORDER BY epoch DESC, kind DESC LIMIT 1`

// recordAcquired appends, in tx, the "acquired" change of holder's term of epoch at at,
// unless the namespace's history records that epoch, or a later one, already. Its
// reason comes from the newest change before it.
func recordAcquired(ctx context.Context, tx *sql.Tx, namespace, holder string, epoch, at int64) error {
	var newest store.LeadershipChange
	prev := &newest // nil when the history is empty
	err := tx.QueryRowContext(ctx, newestChangeSQL, namespace).Scan(&newest.Epoch, &newest.Kind, &newest.Holder, &newest.Reason)
	if errors.Is(err, sql.ErrNoRows) {
		prev, err = nil, nil
	}
	if err != nil || prev != nil && prev.Epoch >= epoch { // recorded already
		return err
	}
	_, err = tx.ExecContext(ctx, appendChangeSQL, namespace, epoch, store.LeadershipAcquired, holder, at, leaderlog.AcquiredReason(prev))
	return err
}

// appendChangeSQL appends a change, unless its namespace, epoch and kind are
// recorded already.
const appendChangeSQL = `INSERT INTO ax_leadership (namespace, epoch, kind, holder, at, reason)
	VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`

// EndLeadership appends the end of holder's term of epoch. See [store.Fencer].
func (s *Store) EndLeadership(ctx context.Context, namespace, holder string, epoch int64, reason string) error {
	if err := leaderlog.CheckEnd(namespace, holder, epoch, reason); err != nil {
		return fmt.Errorf("ax: sqlite: %w", err)
	}
	return s.write(ctx, "end leadership", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, appendChangeSQL, namespace, epoch, store.LeadershipEnded, holder, micros(now()), reason)
		return err
	})
}

// LeadershipHistory returns the namespace's newest n changes, a backward scan of the
// primary key. See [store.Fencer].
func (s *Store) LeadershipHistory(ctx context.Context, namespace string, n int) ([]store.LeadershipChange, error) {
	if err := leaderlog.CheckHistory(namespace, n); err != nil {
		return nil, fmt.Errorf("ax: sqlite: %w", err)
	}
	rows, err := s.r.QueryContext(ctx, historySQL, namespace, n)
	if err != nil {
		return nil, s.wrap("leadership history", err)
	}
	defer rows.Close()
	out := []store.LeadershipChange{}
	for rows.Next() {
		c := store.LeadershipChange{Namespace: namespace}
		var at int64
		if err := rows.Scan(&c.Epoch, &c.Kind, &c.Holder, &at, &c.Reason); err != nil {
			return nil, s.wrap("leadership history", err)
		}
		c.At = fromMicros(at)
		out = append(out, c)
	}
	return out, s.wrap("leadership history", rows.Err())
}

// historySQL reads a namespace's newest changes (explain_test.go pins its plan).
const historySQL = `SELECT epoch, kind, holder, at, reason FROM ax_leadership
	WHERE namespace = ? ORDER BY epoch DESC, kind DESC LIMIT ?`

// PruneLeadership deletes the namespace's oldest changes, in one write transaction
// of three statements on the primary key: the newest change beyond keepNewest (the
// cut), the oldest change after it recorded at or after before (the first to stay),
// and the DELETE of up to limit changes before that one. See [store.Pruner].
func (s *Store) PruneLeadership(ctx context.Context, namespace string, before time.Time, keepNewest, limit int) (int, error) {
	if err := leaderlog.CheckPrune(namespace, before, keepNewest, limit); err != nil {
		return 0, fmt.Errorf("ax: sqlite: %w", err)
	}
	var n int64
	err := s.write(ctx, "prune leadership", func(tx *sql.Tx) error {
		cutEpoch, cutKind := int64(0), "" // (0, "") sorts below every change: nothing beyond keepNewest
		if keepNewest > 0 {
			err := tx.QueryRowContext(ctx, pruneCutSQL, namespace, keepNewest).Scan(&cutEpoch, &cutKind)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		// A zero before (year 1) is older than every change: no age limit.
		stayEpoch, stayKind := int64(math.MaxInt64), "" // above every change: none stays
		err := tx.QueryRowContext(ctx, pruneStaySQL, namespace, cutEpoch, cutKind, micros(before)).Scan(&stayEpoch, &stayKind)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		res, err := tx.ExecContext(ctx, pruneLeadershipSQL, namespace, namespace, stayEpoch, stayKind, limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// pruneCutSQL reads the newest change beyond the newest keepNewest of a namespace.
const pruneCutSQL = `SELECT epoch, kind FROM ax_leadership WHERE namespace = ?
	ORDER BY epoch DESC, kind DESC LIMIT 1 OFFSET ?`

// pruneStaySQL reads the oldest change of a namespace after a cut recorded at or after
// a time: the first that PruneLeadership keeps.
const pruneStaySQL = `SELECT epoch, kind FROM ax_leadership WHERE namespace = ? AND (epoch, kind) > (?, ?) AND at >= ?
	ORDER BY epoch, kind LIMIT 1`

// pruneLeadershipSQL deletes up to a limit of a namespace's changes before the first
// to stay, oldest first.
const pruneLeadershipSQL = `DELETE FROM ax_leadership WHERE namespace = ? AND (epoch, kind) IN (
	SELECT epoch, kind FROM ax_leadership WHERE namespace = ? AND (epoch, kind) < (?, ?)
	ORDER BY epoch, kind LIMIT ?)`
