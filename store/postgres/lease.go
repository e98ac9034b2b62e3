package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// Leases live in ax_leader, one row per namespace (see migrations/0003_leader.sql). Every
// write is one conditional statement in the database's clock; two acquires of a free
// lease serialise on the row (ON CONFLICT locks it and re-checks the WHERE), so exactly
// one of them raises the epoch. AcquireLease first takes the namespace's fence lock
// exclusively and reads the clock once it has it (ax_fence_lock, see fence.go), so
// that raising the epoch waits for the fenced writes in flight, like RaiseFence.

var _ store.Leaser = (*Store)(nil)

const acquireLeaseSQL = `WITH ts AS (SELECT ax_fence_lock($1) AS now)
INSERT INTO ax_leader AS l (namespace, holder, epoch, expires_at, updated_at)
SELECT $1, $2, 1, ts.now + $3 * interval '1 microsecond', ts.now FROM ts
ON CONFLICT (namespace) DO UPDATE SET
	holder = excluded.holder, epoch = l.epoch + 1,
	expires_at = excluded.expires_at, updated_at = excluded.updated_at
WHERE l.expires_at <= excluded.updated_at
RETURNING l.epoch`

// remainingSQL is a lease's time left in microseconds by the database's clock.
const remainingSQL = `(extract(epoch FROM expires_at - clock_timestamp()) * 1000000)::bigint`

// AcquireLease takes the namespace's lease if it is free or expired. See [store.Leaser].
func (s *Store) AcquireLease(ctx context.Context, namespace, holder string, ttl time.Duration) (store.LeaseInfo, bool, error) {
	if err := driverkit.CheckLease(namespace, holder, ttl); err != nil {
		return store.LeaseInfo{}, false, fmt.Errorf("ax: postgres: acquire lease: %w", err)
	}
	if err := s.check("acquire lease"); err != nil {
		return store.LeaseInfo{}, false, err
	}
	var epoch int64
	err := s.pool.QueryRow(ctx, acquireLeaseSQL, namespace, holder, ttl.Microseconds()).Scan(&epoch)
	if err == nil {
		return store.LeaseInfo{Holder: holder, Epoch: epoch, Remaining: ttl.Truncate(time.Microsecond)}, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return store.LeaseInfo{}, false, s.wrap("acquire lease", err)
	}
	// A live lease: report it. It may have ended since; the caller then retries at once.
	info, err := s.lease(ctx, "acquire lease", namespace)
	return info, false, err
}

// RenewLease extends holder's live lease of that epoch to now + ttl. See [store.Leaser].
func (s *Store) RenewLease(ctx context.Context, namespace, holder string, epoch int64, ttl time.Duration) (bool, error) {
	if err := driverkit.CheckLease(namespace, holder, ttl); err != nil {
		return false, fmt.Errorf("ax: postgres: renew lease: %w", err)
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
	if err := s.check(op); err != nil {
		return false, err
	}
	tag, err := s.pool.Exec(ctx, `WITH ts AS (SELECT clock_timestamp() AS now)
		UPDATE ax_leader SET expires_at = ts.now + $4 * interval '1 microsecond', updated_at = ts.now
		FROM ts WHERE namespace = $1 AND holder = $2 AND epoch = $3 AND expires_at > ts.now`,
		namespace, holder, epoch, ttl.Microseconds())
	if err != nil {
		return false, s.wrap(op, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Lease reads the namespace's lease. See [store.Leaser].
func (s *Store) Lease(ctx context.Context, namespace string) (store.LeaseInfo, error) {
	if err := s.check("read lease"); err != nil {
		return store.LeaseInfo{}, err
	}
	return s.lease(ctx, "read lease", namespace)
}

func (s *Store) lease(ctx context.Context, op, namespace string) (store.LeaseInfo, error) {
	var (
		info store.LeaseInfo
		us   int64
	)
	err := s.pool.QueryRow(ctx, `SELECT holder, epoch, `+remainingSQL+` FROM ax_leader WHERE namespace = $1`, namespace).
		Scan(&info.Holder, &info.Epoch, &us)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.LeaseInfo{}, nil
	}
	if err != nil {
		return store.LeaseInfo{}, s.wrap(op, err)
	}
	info.Remaining = time.Duration(us) * time.Microsecond
	return info, nil
}
