package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// The node registry lives in ax_nodes (see migrations/0004_namespaces.sql), one row per
// (namespace, name), the view's namespace's. RegisterNode, RemoveNode and ExpireNodes
// are one statement each in an IMMEDIATE transaction on the writer connection; Nodes is
// one query on the read pool, a range of the primary key in name order. Times are
// microseconds of this process's clock, the store's. handlers is a JSON array of the
// sorted names.

const nodeColumns = `name, advertise, handlers, capacity, in_flight, started_at, heartbeat_at, clock_offset`

// nodesSQL lists a namespace's nodes alive since a time, by name.
const nodesSQL = `SELECT ` + nodeColumns + ` FROM ax_nodes
	WHERE namespace = ? AND heartbeat_at > ? ORDER BY name`

// RegisterNode inserts or replaces the node's row in the view's namespace, with
// HeartbeatAt = now, and StartedAt = now unless n.StartedAt is given (see
// store.NodeRegistry).
func (s *Store) RegisterNode(ctx context.Context, n store.NodeInfo) error {
	if err := driverkit.CheckNode(n); err != nil {
		return fmt.Errorf("ax: sqlite: register node: %w", err)
	}
	handlers := slices.Clone(n.Handlers)
	slices.Sort(handlers)
	if handlers == nil {
		handlers = []string{}
	}
	enc, err := json.Marshal(handlers)
	if err != nil {
		return fmt.Errorf("ax: sqlite: register node %q: %w", n.Name, err)
	}
	return s.write(ctx, "register node", func(tx *sql.Tx) error {
		ts := micros(now())
		started := ts
		if !n.StartedAt.IsZero() {
			started = micros(n.StartedAt)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO ax_nodes
			(namespace, name, advertise, handlers, capacity, in_flight, started_at, heartbeat_at, clock_offset)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (namespace, name) DO UPDATE SET
				advertise = excluded.advertise, handlers = excluded.handlers,
				capacity = excluded.capacity, in_flight = excluded.in_flight,
				started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at,
				clock_offset = excluded.clock_offset`,
			s.ns, n.Name, n.Advertise, string(enc), n.Capacity, n.InFlight, started, ts, n.ClockOffset.Microseconds())
		return err
	})
}

// Nodes returns the view's namespace's nodes whose heartbeat is newer than now −
// aliveWithin, by name.
func (s *Store) Nodes(ctx context.Context, aliveWithin time.Duration) ([]store.NodeInfo, error) {
	if aliveWithin <= 0 {
		return nil, fmt.Errorf("ax: sqlite: list nodes: alive within %v: %w", aliveWithin, store.ErrInvalid)
	}
	if s.closed.Load() {
		return nil, fmt.Errorf("ax: sqlite: list nodes: %w", store.ErrClosed)
	}
	rows, err := s.r.QueryContext(ctx, nodesSQL, s.ns, micros(now().Add(-aliveWithin)))
	if err != nil {
		return nil, s.wrap("list nodes", err)
	}
	out, err := collect(rows, scanNode)
	return out, s.wrap("list nodes", err)
}

func scanNode(row scanner) (*store.NodeInfo, error) {
	var (
		n               store.NodeInfo
		handlers        string
		started, beatAt int64
		offset          int64
	)
	if err := row.Scan(&n.Name, &n.Advertise, &handlers, &n.Capacity, &n.InFlight, &started, &beatAt, &offset); err != nil {
		return nil, err
	}
	n.ClockOffset = time.Duration(offset) * time.Microsecond
	if err := json.Unmarshal([]byte(handlers), &n.Handlers); err != nil {
		return nil, fmt.Errorf("node %q: handlers %q: %w", n.Name, handlers, err)
	}
	if len(n.Handlers) == 0 {
		n.Handlers = nil
	}
	n.StartedAt, n.HeartbeatAt = fromMicros(started), fromMicros(beatAt)
	return &n, nil
}

// RemoveNode deletes the node's row in the view's namespace; a missing one is not an
// error.
func (s *Store) RemoveNode(ctx context.Context, name string) error {
	return s.write(ctx, "remove node", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM ax_nodes WHERE namespace = ? AND name = ?`, s.ns, name)
		return err
	})
}

// ExpireNodes deletes the view's namespace's rows whose heartbeat is older than now −
// deadFor, and returns how many.
func (s *Store) ExpireNodes(ctx context.Context, deadFor time.Duration) (int, error) {
	if deadFor <= 0 {
		return 0, fmt.Errorf("ax: sqlite: expire nodes: dead for %v: %w", deadFor, store.ErrInvalid)
	}
	var n int64
	err := s.write(ctx, "expire nodes", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM ax_nodes WHERE namespace = ? AND heartbeat_at < ?`,
			s.ns, micros(now().Add(-deadFor)))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
