package postgres

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// The node registry lives in ax_nodes, one row per (namespace, name) (see
// migrations/0005_namespaces.sql): each statement is one round trip in the database's
// clock, clock_timestamp(), like the leases. handlers is the sorted task names joined
// with handlerSep.

// handlerSep separates the handler names in ax_nodes.handlers. ax validates task
// names as printable, so none holds it; RegisterNode refuses one that does.
const handlerSep = "\n"

// registerNodeSQL upserts a node's row of namespace $1: every field is replaced,
// heartbeat_at is now, started_at is $7, or now when $7 is NULL, and clock_offset $8
// (microseconds).
const registerNodeSQL = `WITH ts AS (SELECT clock_timestamp() AS now)
INSERT INTO ax_nodes AS n (namespace, name, advertise, handlers, capacity, in_flight, started_at, heartbeat_at, clock_offset)
SELECT $1, $2, $3, $4, $5, $6, COALESCE($7::timestamptz, ts.now), ts.now, $8 FROM ts
ON CONFLICT (namespace, name) DO UPDATE SET
	advertise = excluded.advertise, handlers = excluded.handlers, capacity = excluded.capacity,
	in_flight = excluded.in_flight, started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at,
	clock_offset = excluded.clock_offset`

// RegisterNode writes the node's row in the view's namespace, with HeartbeatAt = now
// and StartedAt = n.StartedAt, or now when it is zero. See [store.NodeRegistry].
// Besides driverkit.CheckNode's rules, a handler name holding a newline, or a capacity or
// in-flight count above 2^31-1, is store.ErrInvalid.
func (s *Store) RegisterNode(ctx context.Context, n store.NodeInfo) error {
	if err := driverkit.CheckNode(n); err != nil {
		return fmt.Errorf("ax: postgres: register node: %w", err)
	}
	if n.Capacity > math.MaxInt32 || n.InFlight > math.MaxInt32 {
		return fmt.Errorf("ax: postgres: register node %q: capacity %d or in flight %d over %d: %w",
			n.Name, n.Capacity, n.InFlight, math.MaxInt32, store.ErrInvalid)
	}
	if err := s.check("register node"); err != nil {
		return err
	}
	var started *time.Time
	if !n.StartedAt.IsZero() {
		started = &n.StartedAt
	}
	handlers := strings.Join(slices.Sorted(slices.Values(n.Handlers)), handlerSep)
	if _, err := s.pool.Exec(ctx, registerNodeSQL, s.ns, n.Name, n.Advertise, handlers, n.Capacity, n.InFlight, started,
		n.ClockOffset.Microseconds()); err != nil {
		return s.wrap("register node", err)
	}
	return nil
}

// Nodes returns the view's nodes whose heartbeat is newer than now − aliveWithin, by
// name in byte order. See [store.NodeRegistry].
func (s *Store) Nodes(ctx context.Context, aliveWithin time.Duration) ([]store.NodeInfo, error) {
	if aliveWithin <= 0 {
		return nil, fmt.Errorf("ax: postgres: list nodes: alive within %v: %w", aliveWithin, store.ErrInvalid)
	}
	if err := s.check("list nodes"); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT name, advertise, handlers, capacity, in_flight, started_at, heartbeat_at, clock_offset
		FROM ax_nodes WHERE namespace = $1 AND heartbeat_at > clock_timestamp() - $2 * interval '1 microsecond'
		ORDER BY name COLLATE "C"`, s.ns, aliveWithin.Microseconds())
	if err != nil {
		return nil, s.wrap("list nodes", err)
	}
	defer rows.Close()
	out := []store.NodeInfo{}
	for rows.Next() {
		var (
			n        store.NodeInfo
			handlers string
			offset   int64
		)
		if err := rows.Scan(&n.Name, &n.Advertise, &handlers, &n.Capacity, &n.InFlight, &n.StartedAt, &n.HeartbeatAt, &offset); err != nil {
			return nil, s.wrap("list nodes", err)
		}
		if handlers != "" {
			n.Handlers = strings.Split(handlers, handlerSep)
		}
		n.StartedAt, n.HeartbeatAt = n.StartedAt.UTC(), n.HeartbeatAt.UTC()
		n.ClockOffset = time.Duration(offset) * time.Microsecond
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("list nodes", err)
	}
	return out, nil
}

// RemoveNode deletes the node's row in the view's namespace; a missing one is not an
// error. See [store.NodeRegistry].
func (s *Store) RemoveNode(ctx context.Context, name string) error {
	if err := s.check("remove node"); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM ax_nodes WHERE namespace = $1 AND name = $2`, s.ns, name); err != nil {
		return s.wrap("remove node", err)
	}
	return nil
}

// ExpireNodes deletes the view's nodes whose heartbeat is older than now − deadFor
// and returns how many. See [store.NodeRegistry].
func (s *Store) ExpireNodes(ctx context.Context, deadFor time.Duration) (int, error) {
	if deadFor <= 0 {
		return 0, fmt.Errorf("ax: postgres: expire nodes: dead for %v: %w", deadFor, store.ErrInvalid)
	}
	if err := s.check("expire nodes"); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM ax_nodes
		WHERE namespace = $1 AND heartbeat_at < clock_timestamp() - $2 * interval '1 microsecond'`, s.ns, deadFor.Microseconds())
	if err != nil {
		return 0, s.wrap("expire nodes", err)
	}
	return int(tag.RowsAffected()), nil
}
