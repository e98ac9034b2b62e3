package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// Fencing (see DESIGN.md, "Fencing", and migrations/0004_fence.sql). A leader-only write
// carrying a store.Fence with a positive token queues fenceSQL first in its
// transaction, right after BEGIN, in the same pipelined batch as the write: ax_fence
// takes the namespace's fence lock (an advisory lock) shared, reads the epoch in
// ax_leader and raises SQLSTATE AXF01 when the epoch is above the token. The error
// aborts the transaction before any write, and the COMMIT queued behind it rolls it
// back; wrap maps AXF01 to store.ErrFenced. RaiseFence and AcquireLease take the
// fence lock exclusively before they touch the row, so they wait for the fenced
// writes in flight, and a fenced write that comes after them reads the epoch they
// committed. The zero Fence queues nothing: the write costs what it did before.

// fenceSQL checks a fence inside the write's transaction (see ax_fence).
const fenceSQL = `SELECT ax_fence($1, $2)`

// fencedCode is the SQLSTATE ax_fence raises for a fence below the recorded epoch.
const fencedCode = "AXF01"

// queueFence queues the fence check of f, if f checks anything.
func queueFence(b *pgx.Batch, f store.Fence) {
	if f.Token > 0 {
		b.Queue(fenceSQL, f.Namespace, f.Token)
	}
}

// readFence reads the result of queueFence's statement, if it queued one.
func readFence(br pgx.BatchResults, f store.Fence) error {
	if f.Token == 0 {
		return nil
	}
	_, err := br.Exec()
	return err
}

// fencedError turns ax_fence's error into driverkit.FencedError, from its DETAIL
// "<epoch> <token> <namespace>".
func fencedError(pe *pgconn.PgError) error {
	parts := strings.SplitN(pe.Detail, " ", 3)
	if len(parts) == 3 {
		recorded, err1 := strconv.ParseInt(parts[0], 10, 64)
		token, err2 := strconv.ParseInt(parts[1], 10, 64)
		if err1 == nil && err2 == nil {
			return driverkit.FencedError(store.Fence{Namespace: parts[2], Token: token}, recorded)
		}
	}
	return fmt.Errorf("%w (%v)", store.ErrFenced, pe)
}

// raiseFenceSQL records a new leader, as driverkit.RaisedEpoch says, in one statement:
// ax_fence_lock first takes the fence lock exclusively (waiting for the fenced writes
// in flight) and reads the clock, then the upsert locks the row, or creates it with
// no live lease (expires_at = now). Concurrent raises queue on the lock, and each
// computes its epoch from the row as the previous one left it. The WHERE leaves a row
// that already records holder at token alone: no row comes back.
const raiseFenceSQL = `WITH ts AS (SELECT ax_fence_lock($1) AS now)
INSERT INTO ax_leader AS l (namespace, holder, epoch, expires_at, updated_at)
SELECT $1, $2, $3, ts.now, ts.now FROM ts
ON CONFLICT (namespace) DO UPDATE SET
	holder = excluded.holder, epoch = GREATEST(excluded.epoch, l.epoch + 1), updated_at = excluded.updated_at
WHERE l.holder <> excluded.holder OR l.epoch <> excluded.epoch
RETURNING l.epoch`

// RaiseFence records holder as the leader of namespace and returns the Fence its
// writes carry. See [store.Store].
func (s *Store) RaiseFence(ctx context.Context, namespace, holder string, token int64) (store.Fence, error) {
	if err := driverkit.CheckRaiseFence(namespace, holder, token); err != nil {
		return store.Fence{}, fmt.Errorf("ax: postgres: raise fence: %w", err)
	}
	if err := s.check("raise fence"); err != nil {
		return store.Fence{}, err
	}
	epoch, err := s.raiseFence(ctx, namespace, holder, token) // and the term's "acquired" change (leadership.go)
	if err != nil {
		return store.Fence{}, err
	}
	return store.Fence{Namespace: namespace, Token: epoch}, nil
}
