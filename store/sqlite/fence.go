package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// Fencing (see store.Fence) needs no lock of its own: every write runs on the writer
// connection in a BEGIN IMMEDIATE transaction, which holds the database's one write lock
// from BEGIN to COMMIT, across every process that opens the file. A fenced write reads
// the namespace's epoch,
//
//	SELECT epoch FROM ax_leader WHERE namespace = ?
//
// as the first statement of its own transaction and rolls back with store.ErrFenced
// before writing anything when the token is below it. RaiseFence and AcquireLease change
// the epoch only in a transaction of their own, which cannot start until the fenced
// write has committed or rolled back, and every fenced write that starts after they
// commit reads the new epoch. The zero Fence skips the read: no statement is added.

// fenceSQL reads a namespace's recorded epoch (the primary key of ax_leader).
const fenceSQL = `SELECT epoch FROM ax_leader WHERE namespace = ?`

// checkFence refuses, with an error wrapping store.ErrFenced, a write of tx that f does
// not admit. It must run in the write's own transaction, before any write. The zero
// Fence checks nothing and runs no statement.
func checkFence(ctx context.Context, tx *sql.Tx, f store.Fence) error {
	if f.Token == 0 {
		return nil
	}
	var recorded int64 // no row counts as epoch 0
	if err := tx.QueryRowContext(ctx, fenceSQL, f.Namespace).Scan(&recorded); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if !driverkit.Admits(f, recorded) {
		return driverkit.FencedError(f, recorded)
	}
	return nil
}

// RaiseFence records holder as the leader of namespace with an epoch of at least token
// and strictly above the one it replaces, unless the row already records holder at
// token (see store.Store). It reads the row and writes it in one IMMEDIATE transaction,
// which waits for the fenced writes in flight and serialises with every AcquireLease and
// RaiseFence, and appends the term's "acquired" change in it (leadership.go). A row it
// creates expires at once: it holds no live lease.
func (s *Store) RaiseFence(ctx context.Context, namespace, holder string, token int64) (store.Fence, error) {
	if err := driverkit.CheckRaiseFence(namespace, holder, token); err != nil {
		return store.Fence{}, fmt.Errorf("ax: sqlite: raise fence: %w", err)
	}
	var epoch int64
	err := s.write(ctx, "raise fence", func(tx *sql.Tx) error {
		var (
			recordedHolder string
			recorded       int64
			expires        int64
		)
		err := tx.QueryRowContext(ctx, leaseSQL, namespace).Scan(&recordedHolder, &recorded, &expires)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		found := err == nil
		epoch = driverkit.RaisedEpoch(recordedHolder, recorded, holder, token)
		ts := micros(now())
		if !found || recordedHolder != holder || recorded != epoch { // else recorded already: leave the row alone
			_, err = tx.ExecContext(ctx, `INSERT INTO ax_leader (namespace, holder, epoch, expires_at, updated_at)
				VALUES (?, ?, ?, ?, ?)
				ON CONFLICT (namespace) DO UPDATE SET
					holder = excluded.holder, epoch = excluded.epoch, updated_at = excluded.updated_at`,
				namespace, holder, epoch, ts, ts)
			if err != nil {
				return err
			}
		}
		return recordAcquired(ctx, tx, namespace, holder, epoch, ts)
	})
	if err != nil {
		return store.Fence{}, err
	}
	return store.Fence{Namespace: namespace, Token: epoch}, nil
}
