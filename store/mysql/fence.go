package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// Fencing (see store.Fence) rests on the ax_leader row's lock. A fenced write — Claim,
// FireSchedule, and Start, Finish or Requeue with a non-zero Fence — begins its transaction
// with
//
//	SELECT epoch FROM ax_leader WHERE namespace = ? LOCK IN SHARE MODE
//
// (MariaDB has no FOR SHARE; MySQL 8 still accepts LOCK IN SHARE MODE), compares the
// epoch with the token (driverkit.Admits; no row counts as 0) and, when refused,
// rolls back having written nothing and answers store.ErrFenced (driverkit.FencedError),
// which run never retries: only deadlocks and lock wait timeouts are. The shared lock
// is held until the write commits, so fenced writes of one leader run side by side,
// while RaiseFence and AcquireLease, which take the row exclusively, wait for those in
// flight; and a fenced write that starts after them reads the raised epoch. So once
// RaiseFence has returned, no write with an older token commits. Locks are taken
// leader row first, then task rows (then task keys), and the raise touches nothing
// but the leader row, so the fence adds no deadlock cycle. The zero Fence adds no
// statement.
//
// At READ COMMITTED InnoDB takes no gap lock, so a namespace without a row is not
// locked: a write fenced there (recorded epoch 0) does not hold off the RaiseFence that
// creates the row. The row is created by the first AcquireLease or RaiseFence and never
// deleted, and a leader raises its fence before its first fenced write, so a write of
// an older leader always finds the row.
//
// RaiseFence is one transaction in the style of AcquireLease: INSERT … ON DUPLICATE
// KEY UPDATE namespace = namespace creates the row (holder, epoch = token, expires_at
// and updated_at the database's now: no live lease) or finds it, locking it
// exclusively either way (this waits for the fenced writes holding the shared lock);
// one affected row means it was created (clientFoundRows is off, see lease.go).
// Otherwise SELECT … FOR UPDATE reads holder and epoch, driverkit.RaisedEpoch decides, and
// unless the row already records holder at token an UPDATE sets holder, epoch and
// updated_at, leaving expires_at alone. Concurrent raises and acquires serialise on
// the row, and each reads the epoch the previous one committed. Last, with the row
// still locked, the raise appends the term's "acquired" change to ax_leadership
// (leadership.go), unless its epoch is recorded there already.

// On Galera (see "Galera" in the package doc) the shared lock does not fence: row locks
// are a node's own, neither replicated nor certified, so a raise committed through
// another node waits for no fenced write here, and a fenced write that read the old
// epoch before that raise reached this node commits after it, since it wrote no row the
// raise wrote and certification has nothing to refuse. There, checkFence records the
// fence, and run ends the transaction, once its work is done and just before COMMIT,
// with galeraFenceSQL (fenceAtCommit): it writes the namespace's ax_leader row
// (fence_writes + 1, a change, so the row event and its key are in the write-set; an
// UPDATE that changed nothing would leave them out), creating the row at epoch 0 when
// the namespace has none, reads the epoch through LAST_INSERT_ID in the same round trip,
// and compares; a refusal rolls the work back. RaiseFence and AcquireLease write the same
// row whenever they change the epoch, so of a fenced write and a raise that overlap on
// two nodes, certification lets the first to be ordered commit and refuses the other:
// the fenced write fails with a deadlock (1213), and run tries it again — after waiting
// for the node to apply every write-set the cluster committed before (see run), so the
// new attempt's fence read sees the raise and answers store.ErrFenced rather than
// failing certification again behind an applier that lags. On one node the write takes
// the row exclusively until the commit: the fenced writes of a namespace commit one at a
// time, and a raise on the node waits for the one committing or is waited for, as with
// the shared lock. The write comes last so that the row is held for the commit alone,
// not for the whole transaction: a fenced write locks its task rows first and the
// leader row last, the raise the leader row alone, so no deadlock cycle forms. That is
// done on Galera only: on a single server the shared lock lets fenced writes commit
// side by side.
const galeraFenceSQL = `INSERT INTO ax_leader (namespace, holder, epoch, expires_at, updated_at, fence_writes)
	VALUES (?, '', 0, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 1)
	ON DUPLICATE KEY UPDATE fence_writes = fence_writes + 1, epoch = LAST_INSERT_ID(epoch)`

// checkFence runs the fence check of a fenced write inside tx: nothing for the zero
// Fence, else the shared lock on the namespace's ax_leader row and the comparison; on
// Galera it only records f, and run checks it as tx ends (fenceAtCommit). A refusal is
// a driverkit.FencedError, which the caller returns so that run rolls back.
func (s *Store) checkFence(ctx context.Context, tx *sql.Tx, f store.Fence) error {
	if f.Token == 0 {
		return nil
	}
	if s.galera {
		s.fenceMu.Lock()
		s.atCommit[tx] = f
		s.fenceMu.Unlock()
		return nil
	}
	var epoch int64
	err := tx.QueryRowContext(ctx, `SELECT epoch FROM ax_leader WHERE namespace = ? LOCK IN SHARE MODE`, f.Namespace).Scan(&epoch)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	return s.admit(f, epoch)
}

// admit returns nil when the epoch epoch recorded for f's namespace admits f, else
// the fenced error; a test's afterFence hook runs once f is admitted.
func (s *Store) admit(f store.Fence, epoch int64) error {
	if !driverkit.Admits(f, epoch) {
		return driverkit.FencedError(f, epoch)
	}
	if s.afterFence != nil {
		s.afterFence(f)
	}
	return nil
}

// fenceAtCommit runs, on Galera, the fence check that checkFence left for the end of
// tx, if it did: galeraFenceSQL and the comparison.
func (s *Store) fenceAtCommit(ctx context.Context, tx *sql.Tx) error {
	s.fenceMu.Lock()
	f, ok := s.atCommit[tx]
	s.fenceMu.Unlock()
	if !ok {
		return nil
	}
	res, err := tx.ExecContext(ctx, galeraFenceSQL, f.Namespace)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	var epoch int64
	if n != 1 { // 1: inserted at epoch 0; else 2, the row changed
		if epoch, err = res.LastInsertId(); err != nil {
			return err
		}
	}
	return s.admit(f, epoch)
}

// forgetFence drops what checkFence recorded for tx, once tx has ended.
func (s *Store) forgetFence(tx *sql.Tx) {
	s.fenceMu.Lock()
	delete(s.atCommit, tx)
	s.fenceMu.Unlock()
}

// RaiseFence records holder as the namespace's leader with an epoch at least token and
// above every earlier one. See [store.Store].
func (s *Store) RaiseFence(ctx context.Context, namespace, holder string, token int64) (store.Fence, error) {
	if err := driverkit.CheckRaiseFence(namespace, holder, token); err != nil {
		return store.Fence{}, fmt.Errorf("ax: mysql: raise fence: %w", err)
	}
	var epoch int64
	err := s.run(ctx, "raise fence", 0, func(tx *sql.Tx, _ int64) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO ax_leader (namespace, holder, epoch, expires_at, updated_at)
			VALUES (?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))
			ON DUPLICATE KEY UPDATE namespace = namespace`, namespace, holder, token)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 1 { // inserted: no epoch was recorded
			epoch = driverkit.RaisedEpoch("", 0, holder, token)
			return recordAcquired(ctx, tx, namespace, holder, epoch)
		}
		var recordedHolder string
		var recorded int64
		if err := tx.QueryRowContext(ctx, `SELECT holder, epoch FROM ax_leader WHERE namespace = ? FOR UPDATE`, namespace).Scan(&recordedHolder, &recorded); err != nil {
			return err
		}
		epoch = driverkit.RaisedEpoch(recordedHolder, recorded, holder, token)
		if recordedHolder != holder || epoch != recorded { // else already recorded: a lease acquired so, or a repeat
			_, err = tx.ExecContext(ctx, `UPDATE ax_leader SET holder = ?, epoch = ?, updated_at = UTC_TIMESTAMP(6)
				WHERE namespace = ?`, holder, epoch, namespace)
			if err != nil {
				return err
			}
		}
		return recordAcquired(ctx, tx, namespace, holder, epoch) // leadership.go
	})
	if err != nil {
		return store.Fence{}, err
	}
	return store.Fence{Namespace: namespace, Token: epoch}, nil
}
