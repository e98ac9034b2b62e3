package postgres

import (
	"context"
	"fmt"

	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/store"
)

// freedPayload is the payload of the notification that a slot of a limited name
// freed (see freedSQL).
const freedPayload = "freed"

// freedSQL notifies channel $1 that slots freed when one of the tasks $3 of namespace
// $2, just finished, has a name with a concurrency limit, and answers whether any name
// of the namespace has one (limitCache). The probe of ax_names does not depend on the
// tasks: a namespace without limits costs one.
const freedSQL = `WITH l AS (SELECT EXISTS (SELECT 1 FROM ax_names WHERE namespace = $2 AND concurrency > 0) AS limited)
	SELECT l.limited, (SELECT pg_notify($1, '` + freedPayload + `')
		WHERE l.limited AND EXISTS (SELECT 1 FROM ax_tasks t JOIN ax_names n ON n.namespace = $2 AND n.name = t.name AND n.concurrency > 0
			WHERE t.id = ANY($3::bigint[]))) IS NOT NULL FROM l`

// limitCache is what a view last learnt of its namespace's concurrency limits, so
// that a Finish in a namespace without any does not run freedSQL: it runs it when a
// limit was seen, or when what it knows is older than limitCheck — a limit set by
// another process is noticed that late, and until then its finishes here signal no
// freed slot (the leader's probe covers them). A limit set through this view is seen
// at once.
type limitCache struct {
	limited atomic.Bool
	checked atomic.Int64 // unix nanos of the last answer; 0: never
}

// limitCheck is how long a view trusts that its namespace has no concurrency limit.
const limitCheck = 2 * time.Second

// needed reports whether a Finish at now should run freedSQL.
func (c *limitCache) needed(now time.Time) bool {
	return c.limited.Load() || now.UnixNano()-c.checked.Load() > int64(limitCheck)
}

// learn records freedSQL's answer at now.
func (c *limitCache) learn(limited bool, now time.Time) {
	c.limited.Store(limited)
	c.checked.Store(now.UnixNano())
}

// Marked returns the view of the store's namespace whose Insert's notification
// carries mark (payload markPrefix + mark), and whose Listen reports such a
// notification, from any view of the mark, as store.SignalMarked (see store.Marker).
// An invalid mark is store.ErrInvalid.
func (s *Store) Marked(mark string) (store.Store, error) {
	if err := store.CheckMark(mark); err != nil {
		return nil, fmt.Errorf("ax: postgres: marked: %w", err)
	}
	return &Store{shared: s.shared, ns: s.ns, limits: s.limits, marked: markPrefix + mark}, nil
}

var _ store.Marker = (*Store)(nil)

// markPrefix begins a marked notification's payload, which freedPayload never does.
const markPrefix = "m:"

// Channel returns the NOTIFY channel of the store's schema: "ax_" + schema (a hash
// when that exceeds PostgreSQL's 63-byte identifiers).
func (s *Store) Channel() string { return s.channel }

// Listen LISTENs on the store's channel and calls f, on Listen's goroutine, once per
// notification until ctx ends (it returns nil then), the store is closed
// (store.ErrClosed) or the connection fails. It listens on a connection of its own:
// one taken out of the pool, or one to WithListenDSN's server, which must hold the
// store's database (another is store.ErrInvalid). Behind a pooler without
// WithListenDSN it listens to nothing: it waits for ctx to end or the store to close,
// and never calls f (the scheduler's periodic refill finds the work then).
//
// Every transaction that inserts tasks or makes them SCHEDULED notifies the
// channel (an empty payload: SignalWork; a mark for a Marked view's Insert:
// SignalMarked to a listening view of that mark, SignalWork to the others), as does a Finish that ended a task of a name with
// a concurrency limit (payload freedPayload: SignalFreed); PostgreSQL delivers the
// notification when it commits, folding repeats within one transaction into one.
// Behind a pooler too: the server session that ran the transaction notifies, and
// every session of the database that LISTENs hears it.
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
	conn, err := s.listenConn(ctx)
	if err != nil || conn == nil {
		return ended(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return ended(fmt.Errorf("listen %s: %w", s.channel, err))
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return ended(err)
		}
		switch {
		case n.Payload == freedPayload:
			f(store.SignalFreed)
		case s.marked != "" && n.Payload == s.marked:
			f(store.SignalMarked)
		default:
			f(store.SignalWork)
		}
	}
}

// listenConn returns the connection Listen listens on, which it closes: WithListenDSN's,
// or one taken out of the pool (LISTEN state must not go back to it). Behind a pooler
// without WithListenDSN, there is none: it waits for ctx to end and returns nil, nil.
func (s *Store) listenConn(ctx context.Context) (*pgx.Conn, error) {
	switch {
	case s.listen != nil:
		conn, err := pgx.ConnectConfig(ctx, s.listen)
		if err != nil {
			return nil, fmt.Errorf("connect to WithListenDSN's server: %w", err)
		}
		var db string
		if err := conn.QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
			conn.Close(context.Background())
			return nil, err
		}
		if db != s.database {
			conn.Close(context.Background())
			return nil, fmt.Errorf("WithListenDSN reaches database %q, the store's is %q: %w", db, s.database, store.ErrInvalid)
		}
		return conn, nil
	case s.pool.setPath != "":
		<-ctx.Done()
		return nil, nil
	}
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return pc.Hijack(), nil
}
