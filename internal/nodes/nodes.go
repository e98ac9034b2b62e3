// Package nodes keeps a replica's row in the executor registry (store.NodeRegistry,
// the ax_nodes table): written when the scheduler starts, refreshed every interval
// with its handlers and the executions in flight, and deleted when it stops; the
// leader deletes the rows of replicas that stopped refreshing them.
//
// Its three loops are named for their roles: Keep (every replica's own row), Expire
// and Follow (the leader's). Each blocks until its context ends and starts no
// goroutine.
package nodes

import (
	"context"
	"log/slog"
	"time"

	"github.com/axsched/ax/internal/clock"
	"github.com/axsched/ax/store"
)

// Registry is what Keep asks of the node registry: this replica's row, written and
// removed.
type Registry interface {
	RegisterNode(ctx context.Context, n store.NodeInfo) error
	RemoveNode(ctx context.Context, name string) error
}

// Expirer is what Expire asks of the node registry.
type Expirer interface {
	ExpireNodes(ctx context.Context, deadFor time.Duration) (int, error)
}

// Lister is what Follow asks of the node registry: the live replicas.
type Lister interface {
	Nodes(ctx context.Context, aliveWithin time.Duration) ([]store.NodeInfo, error)
}

// Config is what Keep needs.
type Config struct {
	Registry Registry // each call bounded
	Info     func() store.NodeInfo
	Interval time.Duration // between two refreshes
	Log      *slog.Logger
	// Refreshed, when set, is called after each refresh with its error (the scheduler
	// reads the namespace's fencing epoch then, or, after a failure, has its clock
	// measured again: the store may be failing over to another server).
	Refreshed func(ctx context.Context, err error)
}

// AliveFor is how long a row counts as a live replica after its last refresh: three
// refreshes may fail before the replica drops out of the routing.
func AliveFor(interval time.Duration) time.Duration { return 3 * interval }

// DeadFor is how long after its last refresh the leader deletes a row.
func DeadFor(interval time.Duration) time.Duration { return max(10*interval, time.Minute) }

// removeTimeout bounds the deletion of the row when the replica stops.
const removeTimeout = 5 * time.Second

// Keep writes the replica's row now and every Interval until ctx ends, then deletes it.
func Keep(ctx context.Context, cfg Config) {
	info := cfg.Info()
	write := func() {
		err := cfg.Registry.RegisterNode(ctx, cfg.Info())
		if err != nil && ctx.Err() == nil {
			cfg.Log.LogAttrs(ctx, slog.LevelWarn, "ax: refresh this node's registration", slog.Any("err", err))
		}
		if cfg.Refreshed != nil {
			cfg.Refreshed(ctx, err)
		}
	}
	write()
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
			defer cancel()
			if err := cfg.Registry.RemoveNode(rctx, info.Name); err != nil {
				cfg.Log.LogAttrs(rctx, slog.LevelWarn, "ax: remove this node's registration", slog.Any("err", err))
			}
			return
		case <-t.C:
			write()
		}
	}
}

// Expire deletes, every interval until ctx ends, the rows of replicas that stopped
// refreshing them DeadFor(interval) ago. The leader runs it.
func Expire(ctx context.Context, reg Expirer, interval time.Duration, log *slog.Logger) {
	clock.Every(ctx, interval, func() {
		n, err := reg.ExpireNodes(ctx, DeadFor(interval))
		switch {
		case err != nil && ctx.Err() == nil:
			log.LogAttrs(ctx, slog.LevelWarn, "ax: expire dead nodes", slog.Any("err", err))
		case n > 0:
			log.LogAttrs(ctx, slog.LevelInfo, "ax: expired dead nodes", slog.Int("nodes", n))
		}
	})
}

// Follow reads the live replicas every interval until ctx ends and hands them to set:
// the leader's view for routing.
func Follow(ctx context.Context, reg Lister, interval time.Duration, set func([]store.NodeInfo), log *slog.Logger) {
	clock.Every(ctx, interval, func() {
		ns, err := reg.Nodes(ctx, AliveFor(interval))
		if err != nil {
			if ctx.Err() == nil {
				log.LogAttrs(ctx, slog.LevelWarn, "ax: read the live nodes", slog.Any("err", err))
			}
			return
		}
		set(ns)
	})
}
