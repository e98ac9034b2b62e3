package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Channel returns the NOTIFY channel of the store's schema: "ax_" + schema (a hash
// when that exceeds PostgreSQL's 63-byte identifiers).
func (s *Store) Channel() string { return s.channel }

// Listen takes a connection out of the pool for itself, LISTENs on the store's
// channel and calls f, on Listen's goroutine, once per notification until ctx ends
// (it returns nil then), the store is closed (store.ErrClosed) or the connection
// fails. Every transaction that inserts tasks or makes them SCHEDULED notifies the
// channel, and PostgreSQL delivers the notification when it commits, folding
// repeats within one transaction into one.
func (s *Store) Listen(ctx context.Context, f func()) error {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return s.check("listen")
	}
	s.listeners.Add(1)
	s.mu.Unlock()
	defer s.listeners.Done()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.done, cancel)
	defer stop()

	ended := func(err error) error {
		switch {
		case s.closed.Load():
			return s.check("listen")
		case ctx.Err() != nil:
			return nil
		}
		return s.wrap("listen", err)
	}
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return ended(err)
	}
	conn := pc.Hijack() // LISTEN state must not go back to the pool
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return ended(fmt.Errorf("listen %s: %w", s.channel, err))
	}
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return ended(err)
		}
		f()
	}
}
