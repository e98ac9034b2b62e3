package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// Leases live in ax_leader, one row per namespace (see migrations/0003_leader.sql), in
// the database's clock. AcquireLease is one transaction: it inserts the lease itself at
// epoch 1 (INSERT … ON DUPLICATE KEY UPDATE namespace = namespace, which locks the row
// exclusively whether it inserts it or finds it); one affected row means the namespace
// had none and this call won. Otherwise it reads the locked row with SELECT … FOR
// UPDATE and takes the lease only if it has expired, so concurrent acquires serialise
// on the row and exactly one raises the epoch. Renew and release are single conditional
// UPDATEs. A duplicate that changes nothing counts as 0 rows only without the
// CLIENT_FOUND_ROWS flag: Open turns it off and New refuses a pool that sets it.

// leaseSQL reads a namespace's lease: holder, epoch and the microseconds left by the
// database's clock.
const leaseSQL = `SELECT holder, epoch, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
	FROM ax_leader WHERE namespace = ?`

// AcquireLease takes the namespace's lease if it is free or expired. See [store.Leaser].
func (s *Store) AcquireLease(ctx context.Context, namespace, holder string, ttl time.Duration) (store.LeaseInfo, bool, error) {
	if err := driverkit.CheckLease(namespace, holder, ttl); err != nil {
		return store.LeaseInfo{}, false, fmt.Errorf("ax: mysql: acquire lease: %w", err)
	}
	var (
		info store.LeaseInfo
		won  bool
	)
	err := s.run(ctx, "acquire lease", 0, func(tx *sql.Tx, _ int64) error {
		info, won = store.LeaseInfo{}, false
		res, err := tx.ExecContext(ctx, `INSERT INTO ax_leader (namespace, holder, epoch, expires_at, updated_at)
			VALUES (?, ?, 1, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(6))
			ON DUPLICATE KEY UPDATE namespace = namespace`, namespace, holder, ttl.Microseconds())
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 1 { // inserted: the namespace had no lease
			info = store.LeaseInfo{Holder: holder, Epoch: 1, Remaining: ttl.Truncate(time.Microsecond)}
			won = true
			return nil
		}
		var us int64
		if err := tx.QueryRowContext(ctx, leaseSQL+` FOR UPDATE`, namespace).Scan(&info.Holder, &info.Epoch, &us); err != nil {
			return err
		}
		if us > 0 {
			info.Remaining = time.Duration(us) * time.Microsecond
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE ax_leader SET holder = ?, epoch = epoch + 1,
			expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, updated_at = UTC_TIMESTAMP(6)
			WHERE namespace = ?`, holder, ttl.Microseconds(), namespace); err != nil {
			return err
		}
		info = store.LeaseInfo{Holder: holder, Epoch: info.Epoch + 1, Remaining: ttl.Truncate(time.Microsecond)}
		won = true
		return nil
	})
	if err != nil {
		return store.LeaseInfo{}, false, err
	}
	return info, won, nil
}

// RenewLease extends holder's live lease of that epoch to now + ttl. See [store.Leaser].
func (s *Store) RenewLease(ctx context.Context, namespace, holder string, epoch int64, ttl time.Duration) (bool, error) {
	if err := driverkit.CheckLease(namespace, holder, ttl); err != nil {
		return false, fmt.Errorf("ax: mysql: renew lease: %w", err)
	}
	return s.leaseUpdate(ctx, "renew lease", `UPDATE ax_leader
		SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, updated_at = UTC_TIMESTAMP(6)
		WHERE namespace = ? AND holder = ? AND epoch = ? AND expires_at > UTC_TIMESTAMP(6)`,
		ttl.Microseconds(), namespace, holder, epoch)
}

// ReleaseLease makes holder's live lease of that epoch expire now. See [store.Leaser].
func (s *Store) ReleaseLease(ctx context.Context, namespace, holder string, epoch int64) (bool, error) {
	return s.leaseUpdate(ctx, "release lease", `UPDATE ax_leader
		SET expires_at = UTC_TIMESTAMP(6), updated_at = UTC_TIMESTAMP(6)
		WHERE namespace = ? AND holder = ? AND epoch = ? AND expires_at > UTC_TIMESTAMP(6)`,
		namespace, holder, epoch)
}

func (s *Store) leaseUpdate(ctx context.Context, op, q string, args ...any) (bool, error) {
	if err := s.check(op); err != nil {
		return false, err
	}
	res, err := s.db.ExecContext(ctx, q, args...)
	if err != nil {
		return false, s.wrap(op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, s.wrap(op, err)
	}
	return n == 1, nil
}

// Lease reads the namespace's lease. See [store.Leaser].
func (s *Store) Lease(ctx context.Context, namespace string) (store.LeaseInfo, error) {
	if err := s.check("read lease"); err != nil {
		return store.LeaseInfo{}, err
	}
	var (
		info store.LeaseInfo
		us   int64
	)
	err := s.db.QueryRowContext(ctx, leaseSQL, namespace).Scan(&info.Holder, &info.Epoch, &us)
	if errors.Is(err, sql.ErrNoRows) {
		return store.LeaseInfo{}, nil
	}
	if err != nil {
		return store.LeaseInfo{}, s.wrap("read lease", err)
	}
	info.Remaining = time.Duration(us) * time.Microsecond
	return info, nil
}
