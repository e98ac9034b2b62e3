package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/store"
)

// freedPayload is the payload of the notification that a slot of a limited name
// freed (see freedSQL).
const freedPayload = "freed"

// freedSQL notifies channel $1 that slots freed when one of the tasks $3 of namespace
// $2, just finished, has a name with a concurrency limit. The first EXISTS does not
// depend on the tasks: a namespace without limits costs one probe of ax_names.
const freedSQL = `SELECT pg_notify($1, '` + freedPayload + `')
	WHERE EXISTS (SELECT 1 FROM ax_names WHERE namespace = $2 AND concurrency > 0)
		AND EXISTS (SELECT 1 FROM ax_tasks t JOIN ax_names n ON n.namespace = $2 AND n.name = t.name AND n.concurrency > 0
			WHERE t.id = ANY($3::bigint[]))`

// Channel returns the NOTIFY channel of the store's schema: "ax_" + schema (a hash
// when that exceeds PostgreSQL's 63-byte identifiers).
func (s *Store) Channel() string { return s.channel }

// Listen takes a connection out of the pool for itself, LISTENs on the store's
// channel and calls f, on Listen's goroutine, once per notification until ctx ends
// (it returns nil then), the store is closed (store.ErrClosed) or the connection
// fails. Every transaction that inserts tasks or makes them SCHEDULED notifies the
// channel (an empty payload: SignalWork), as does a Finish that ended a task of a name with
// a concurrency limit (payload freedPayload: SignalFreed); PostgreSQL delivers the
// notification when it commits, folding repeats within one transaction into one.
func (s *Store) Listen(ctx context.Context, f func(store.Signal)) error {
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
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return ended(err)
		}
		if n.Payload == freedPayload {
			f(store.SignalFreed)
		} else {
			f(store.SignalWork)
		}
	}
}
