package mysql

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

// The leadership history lives in ax_leadership (migrations/0008_leadership.sql), one
// row per change, keyed by (namespace, epoch, kind). RaiseFence appends a term's
// "acquired" row in its transaction, with the namespace's ax_leader row locked
// exclusively, so concurrent raises append in turn (recordAcquired); the other
// methods are short transactions on the primary key.

// newestChangeSQL reads a namespace's newest change: one step of the primary key's
// backward scan.
const newestChangeSQL = `SELECT epoch, kind, holder, reason FROM ax_leadership
	WHERE namespace = ? ORDER BY epoch DESC, kind DESC LIMIT 1`

// appendChangeSQL appends a change stamped by the database's clock, unless its
// namespace, epoch and kind are recorded already.
const appendChangeSQL = `INSERT INTO ax_leadership (namespace, epoch, kind, holder, at, reason)
	VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6), ?) ON DUPLICATE KEY UPDATE namespace = namespace`

// recordAcquired appends, in tx, the "acquired" change of holder's term of epoch,
// unless the namespace's history records that epoch, or a later one, already. Its
// reason comes from the newest change before it.
func recordAcquired(ctx context.Context, tx *sql.Tx, namespace, holder string, epoch int64) error {
	var newest store.LeadershipChange
	prev := &newest // nil when the history is empty
	err := tx.QueryRowContext(ctx, newestChangeSQL, namespace).Scan(&newest.Epoch, &newest.Kind, &newest.Holder, &newest.Reason)
	if errors.Is(err, sql.ErrNoRows) {
		prev, err = nil, nil
	}
	if err != nil || prev != nil && prev.Epoch >= epoch { // recorded already
		return err
	}
	_, err = tx.ExecContext(ctx, appendChangeSQL, namespace, epoch, store.LeadershipAcquired, holder, leaderlog.AcquiredReason(prev))
	return err
}

// EndLeadership appends the end of holder's term of epoch. See [store.Fencer].
func (s *Store) EndLeadership(ctx context.Context, namespace, holder string, epoch int64, reason string) error {
	if err := leaderlog.CheckEnd(namespace, holder, epoch, reason); err != nil {
		return fmt.Errorf("ax: mysql: %w", err)
	}
	return s.run(ctx, "end leadership", 0, func(tx *sql.Tx, _ int64) error {
		_, err := tx.ExecContext(ctx, appendChangeSQL, namespace, epoch, store.LeadershipEnded, holder, reason)
		return err
	})
}

// historySQL reads a namespace's newest changes: a backward range of the primary key.
const historySQL = `SELECT epoch, kind, holder, at, reason FROM ax_leadership
	WHERE namespace = ? ORDER BY epoch DESC, kind DESC LIMIT ?`

// LeadershipHistory returns the namespace's newest n changes. See [store.Fencer].
func (s *Store) LeadershipHistory(ctx context.Context, namespace string, n int) ([]store.LeadershipChange, error) {
	if err := leaderlog.CheckHistory(namespace, n); err != nil {
		return nil, fmt.Errorf("ax: mysql: %w", err)
	}
	if err := s.check("leadership history"); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, historySQL, namespace, n)
	if err != nil {
		return nil, s.wrap("leadership history", err)
	}
	defer rows.Close()
	out := []store.LeadershipChange{}
	for rows.Next() {
		c := store.LeadershipChange{Namespace: namespace}
		if err := rows.Scan(&c.Epoch, &c.Kind, &c.Holder, dbTime{&c.At}, &c.Reason); err != nil {
			return nil, s.wrap("leadership history", err)
		}
		out = append(out, c)
	}
	return out, s.wrap("leadership history", rows.Err())
}

// The statements of PruneLeadership, each a range of the primary key.
const (
	// pruneCutSQL reads the newest change beyond the newest keepNewest of a namespace.
	pruneCutSQL = `SELECT epoch, kind FROM ax_leadership WHERE namespace = ?
		ORDER BY epoch DESC, kind DESC LIMIT 1 OFFSET ?`
	// pruneStaySQL reads the oldest change after a cut recorded at or after a time:
	// the first that PruneLeadership keeps.
	pruneStaySQL = `SELECT epoch, kind FROM ax_leadership
		WHERE namespace = ? AND (epoch > ? OR epoch = ? AND kind > ?) AND at >= ?
		ORDER BY epoch, kind LIMIT 1`
	// pruneLeadershipSQL deletes up to a limit of the changes before the first to stay,
	// oldest first.
	pruneLeadershipSQL = `DELETE FROM ax_leadership
		WHERE namespace = ? AND (epoch < ? OR epoch = ? AND kind < ?)
		ORDER BY epoch, kind LIMIT ?`
)

// PruneLeadership deletes the namespace's oldest changes, in one transaction: the
// newest change beyond keepNewest (the cut), the oldest after it recorded at or after
// before (the first to stay), and the DELETE of up to limit changes before that one.
// See [store.Pruner].
func (s *Store) PruneLeadership(ctx context.Context, namespace string, before time.Time, keepNewest, limit int) (int, error) {
	if err := leaderlog.CheckPrune(namespace, before, keepNewest, limit); err != nil {
		return 0, fmt.Errorf("ax: mysql: %w", err)
	}
	if before.IsZero() {
		before = minTime // older than every change: no age limit
	}
	var n int
	err := s.run(ctx, "prune leadership", 0, func(tx *sql.Tx, _ int64) error {
		n = 0
		cutEpoch, cutKind := int64(0), "" // (0, "") sorts below every change: nothing beyond keepNewest
		if keepNewest > 0 {
			err := tx.QueryRowContext(ctx, pruneCutSQL, namespace, keepNewest).Scan(&cutEpoch, &cutKind)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		stayEpoch, stayKind := int64(math.MaxInt64), "" // above every change: none stays
		err := tx.QueryRowContext(ctx, pruneStaySQL, namespace, cutEpoch, cutEpoch, cutKind, dt(before)).Scan(&stayEpoch, &stayKind)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		res, err := tx.ExecContext(ctx, pruneLeadershipSQL, namespace, stayEpoch, stayEpoch, stayKind, limit)
		if err != nil {
			return err
		}
		deleted, err := res.RowsAffected()
		n = int(deleted)
		return err
	})
	return n, err
}
