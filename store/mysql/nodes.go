package mysql

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
)

// The node registry (store.NodeRegistry) is ax_nodes, one row per (namespace, name)
// (see migrations/0004_namespaces.sql), in the database's clock like the leases. Each
// call is one statement on the view's namespace: RegisterNode an INSERT … ON DUPLICATE
// KEY UPDATE of a single row (the multi-row race of MariaDB, see "The execution path"
// in DESIGN.md, does not concern it), stamping heartbeat_at (and started_at,
// unless given) with UTC_TIMESTAMP(6); Nodes a SELECT and ExpireNodes a DELETE that
// compare TIMESTAMPDIFF(MICROSECOND, heartbeat_at, UTC_TIMESTAMP(6)) with the
// duration, so that no duration, however long, takes a DATETIME out of its range.
// Handlers are stored sorted, joined with handlerSep.

// handlerSep joins a node's handler names in ax_nodes.handlers. ax validates task names
// as printable without control characters; RegisterNode refuses a name holding it.
const handlerSep = "\n"

// maxAdvertise is the longest advertised URL, in bytes.
const maxAdvertise = 2000

// RegisterNode writes the node's row in the view's namespace, inserting it or replacing
// every field, with HeartbeatAt = now and StartedAt = now unless n.StartedAt is set
// (see store.NodeRegistry). A name over 200 bytes, an advertised URL over 2000, text
// that is not UTF-8, a handler name holding '\n', a count over 2^31-1 or a start
// outside years 1000-9999 is store.ErrInvalid too.
func (s *Store) RegisterNode(ctx context.Context, n store.NodeInfo) error {
	if err := s.check("register node"); err != nil {
		return err
	}
	if err := driverkit.CheckNode(n); err != nil {
		return fmt.Errorf("ax: mysql: register node: %w", err)
	}
	switch {
	case !validText(n.Name, maxNode) || !validText(n.Advertise, maxAdvertise):
		return fmt.Errorf("ax: mysql: register node %q: name (≤ %d bytes) or advertised URL (≤ %d) too long or not UTF-8: %w",
			n.Name, maxNode, maxAdvertise, store.ErrInvalid)
	case n.Capacity > math.MaxInt32 || n.InFlight > math.MaxInt32:
		return fmt.Errorf("ax: mysql: register node %q: capacity %d or in flight %d out of range: %w", n.Name, n.Capacity, n.InFlight, store.ErrInvalid)
	case !n.StartedAt.IsZero() && !inRange(n.StartedAt):
		return fmt.Errorf("ax: mysql: register node %q: start %v outside years 1000-9999: %w", n.Name, n.StartedAt, store.ErrInvalid)
	}
	for _, h := range n.Handlers {
		if !utf8.ValidString(h) {
			return fmt.Errorf("ax: mysql: register node %q: handler name %q is not UTF-8: %w", n.Name, h, store.ErrInvalid)
		}
	}
	handlers := strings.Join(slices.Sorted(slices.Values(n.Handlers)), handlerSep)
	var started any // NULL: now
	if !n.StartedAt.IsZero() {
		started = dt(n.StartedAt)
	}
	offset := n.ClockOffset.Microseconds()
	_, err := s.db.ExecContext(ctx, `INSERT INTO ax_nodes (namespace, name, advertise, handlers, capacity, in_flight, started_at, heartbeat_at,
			clock_offset)
		VALUES (?, ?, ?, ?, ?, ?, COALESCE(?, UTC_TIMESTAMP(6)), UTC_TIMESTAMP(6), ?)
		ON DUPLICATE KEY UPDATE advertise = ?, handlers = ?, capacity = ?, in_flight = ?,
			started_at = COALESCE(?, UTC_TIMESTAMP(6)), heartbeat_at = UTC_TIMESTAMP(6), clock_offset = ?`,
		s.ns, n.Name, n.Advertise, handlers, n.Capacity, n.InFlight, started, offset,
		n.Advertise, handlers, n.Capacity, n.InFlight, started, offset)
	return s.wrap("register node", err)
}

// Nodes returns the nodes of the view's namespace whose heartbeat is newer than now −
// aliveWithin, by name (see store.NodeRegistry).
func (s *Store) Nodes(ctx context.Context, aliveWithin time.Duration) ([]store.NodeInfo, error) {
	if err := s.check("list nodes"); err != nil {
		return nil, err
	}
	if aliveWithin <= 0 {
		return nil, fmt.Errorf("ax: mysql: list nodes: alive within %v: %w", aliveWithin, store.ErrInvalid)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT name, advertise, handlers, capacity, in_flight, started_at, heartbeat_at, clock_offset
		FROM ax_nodes WHERE namespace = ? AND TIMESTAMPDIFF(MICROSECOND, heartbeat_at, UTC_TIMESTAMP(6)) < ?
		ORDER BY name`, s.ns, aliveWithin.Microseconds())
	if err != nil {
		return nil, s.wrap("list nodes", err)
	}
	defer rows.Close()
	var out []store.NodeInfo
	for rows.Next() {
		var n store.NodeInfo
		var handlers string
		var offset int64
		if err := rows.Scan(&n.Name, &n.Advertise, &handlers, &n.Capacity, &n.InFlight, dbTime{&n.StartedAt}, dbTime{&n.HeartbeatAt},
			&offset); err != nil {
			return nil, s.wrap("list nodes", err)
		}
		n.ClockOffset = time.Duration(offset) * time.Microsecond
		if handlers != "" {
			n.Handlers = strings.Split(handlers, handlerSep)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("list nodes", err)
	}
	return out, nil
}

// RemoveNode deletes the node's row in the view's namespace; a missing one is not an
// error.
func (s *Store) RemoveNode(ctx context.Context, name string) error {
	if err := s.check("remove node"); err != nil {
		return err
	}
	_, err := s.db.ExecContext(ctx, `DELETE FROM ax_nodes WHERE namespace = ? AND name = ?`, s.ns, name)
	return s.wrap("remove node", err)
}

// ExpireNodes deletes the rows of the view's namespace whose heartbeat is older than
// now − deadFor and returns how many (see store.NodeRegistry).
func (s *Store) ExpireNodes(ctx context.Context, deadFor time.Duration) (int, error) {
	if err := s.check("expire nodes"); err != nil {
		return 0, err
	}
	if deadFor <= 0 {
		return 0, fmt.Errorf("ax: mysql: expire nodes: dead for %v: %w", deadFor, store.ErrInvalid)
	}
	res, err := s.db.ExecContext(ctx, `DELETE FROM ax_nodes
		WHERE namespace = ? AND TIMESTAMPDIFF(MICROSECOND, heartbeat_at, UTC_TIMESTAMP(6)) > ?`, s.ns, deadFor.Microseconds())
	if err != nil {
		return 0, s.wrap("expire nodes", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, s.wrap("expire nodes", err)
	}
	return int(n), nil
}
