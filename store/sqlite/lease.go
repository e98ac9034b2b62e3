package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// Leases live in ax_leader, one row per namespace (see migrations/0003_leader.sql). Each
// call is one conditional statement in an IMMEDIATE transaction on the writer
// connection, with this process's clock: for an embedded database, the store's clock.

// leaseSQL reads a namespace's lease: holder, epoch and expires_at in microseconds.
const leaseSQL = `SELECT holder, epoch, expires_at FROM ax_leader WHERE namespace = ?`

// AcquireLease takes the namespace's lease if it is free or expired. See [store.Leaser].
func (s *Store) AcquireLease(ctx context.Context, namespace, holder string, ttl time.Duration) (store.LeaseInfo, bool, error) {
	if err := driverkit.CheckLease(namespace, holder, ttl); err != nil {
		return store.LeaseInfo{}, false, fmt.Errorf("ax: sqlite: acquire lease: %w", err)
	}
	var (
		info store.LeaseInfo
		won  bool
	)
	err := s.write(ctx, "acquire lease", func(tx *sql.Tx) error {
		ts := micros(now())
		err := tx.QueryRowContext(ctx, `INSERT INTO ax_leader (namespace, holder, epoch, expires_at, updated_at)
			VALUES (?, ?, 1, ?, ?)
			ON CONFLICT (namespace) DO UPDATE SET
				holder = excluded.holder, epoch = epoch + 1,
				expires_at = excluded.expires_at, updated_at = excluded.updated_at
			WHERE expires_at <= excluded.updated_at
			RETURNING epoch`, namespace, holder, ts+ttl.Microseconds(), ts).Scan(&info.Epoch)
		if err == nil {
			info.Holder, info.Remaining, won = holder, ttl.Truncate(time.Microsecond), true
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var expires int64
		if err := tx.QueryRowContext(ctx, leaseSQL, namespace).
			Scan(&info.Holder, &info.Epoch, &expires); err != nil {
			return err
		}
		info.Remaining = time.Duration(expires-ts) * time.Microsecond
		return nil
	})
	return info, won, err
}

// RenewLease extends holder's live lease of that epoch to now + ttl. See [store.Leaser].
func (s *Store) RenewLease(ctx context.Context, namespace, holder string, epoch int64, ttl time.Duration) (bool, error) {
	if err := driverkit.CheckLease(namespace, holder, ttl); err != nil {
		return false, fmt.Errorf("ax: sqlite: renew lease: %w", err)
	}
	return s.leaseUpdate(ctx, "renew lease", namespace, holder, epoch, ttl)
}

// ReleaseLease makes holder's live lease of that epoch expire now. See [store.Leaser].
func (s *Store) ReleaseLease(ctx context.Context, namespace, holder string, epoch int64) (bool, error) {
	return s.leaseUpdate(ctx, "release lease", namespace, holder, epoch, 0)
}

// leaseUpdate sets the expiry of holder's live lease of that epoch to now + ttl and
// reports whether there was such a lease.
func (s *Store) leaseUpdate(ctx context.Context, op, namespace, holder string, epoch int64, ttl time.Duration) (bool, error) {
	var n int64
	err := s.write(ctx, op, func(tx *sql.Tx) error {
		ts := micros(now())
		res, err := tx.ExecContext(ctx, `UPDATE ax_leader SET expires_at = ?, updated_at = ?
			WHERE namespace = ? AND holder = ? AND epoch = ? AND expires_at > ?`,
			ts+ttl.Microseconds(), ts, namespace, holder, epoch, ts)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n == 1, err
}

// Lease reads the namespace's lease. See [store.Leaser].
func (s *Store) Lease(ctx context.Context, namespace string) (store.LeaseInfo, error) {
	if s.closed.Load() {
		return store.LeaseInfo{}, fmt.Errorf("ax: sqlite: read lease: %w", store.ErrClosed)
	}
	var (
		info    store.LeaseInfo
		expires int64
	)
	err := s.r.QueryRowContext(ctx, leaseSQL, namespace).
		Scan(&info.Holder, &info.Epoch, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return store.LeaseInfo{}, nil
	}
	if err != nil {
		return store.LeaseInfo{}, s.wrap("read lease", err)
	}
	info.Remaining = time.Duration(expires-micros(now())) * time.Microsecond
	return info, nil
}
