package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/axsched/ax/store"
)

// How a COMMIT ends (see "A COMMIT is not cut" in the package doc).
//
// The batch that carries a COMMIT sends every statement at once, so the server may be
// running the COMMIT — waiting, say, for a synchronous standby to acknowledge it —
// whenever the caller's deadline fires. Cutting the connection then leaves an outcome
// nobody can know, and pgx, which closes a connection it gave up on with a cancel
// request, makes it worse: PostgreSQL ends a synchronous replication wait on a cancel
// request by keeping the commit locally, visible on that server and perhaps never
// replicated. So a batch that commits runs under its caller's values without the
// caller's cancellation, its deadline moved commitGrace later (commit); and a
// connection cut past that sends no cancel request (noCancelConn): the server goes
// on waiting for its standby, and the transaction becomes visible only once
// replicated — or never, if the server is demoted first.

// DefaultCommitGrace is how long past its caller's deadline a transaction whose
// COMMIT is on its way waits for the answer, unless WithCommitGrace says otherwise.
const DefaultCommitGrace = 5 * time.Second

// WithCommitGrace sets how long past its caller's deadline a store call that commits
// waits for the COMMIT's answer (DefaultCommitGrace without this option): past it the
// call returns an error saying the outcome is unknown, and the connection is closed
// without a cancel request, so the server still decides the outcome — a COMMIT
// waiting for its synchronous standby stays invisible until the standby has it. A
// longer grace makes a failover's stalled calls fail later; a shorter one makes more
// of them unknown. grace must be positive.
func WithCommitGrace(grace time.Duration) Option {
	return func(c *config) { c.commitGrace = grace }
}

// PoolConfig parses dsn (a URL or keyword/value string, as pgx accepts) into the
// configuration of a pool for New, whose connections ax closes without a cancel
// request when a COMMIT is cut past its grace (see WithCommitGrace). Open builds its
// pool so. A pool configured otherwise works with New all the same, but pgx then
// sends its cancel request, which has PostgreSQL end a synchronous replication wait
// by keeping the commit locally, perhaps unreplicated. Change any other setting of
// the configuration before creating the pool; keep its DialFunc.
func PoolConfig(dsn string) (*pgxpool.Config, error) { return poolConfig("pool config", dsn) }

// poolConfig is PoolConfig, its errors prefixed with op.
func poolConfig(op, dsn string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("ax: postgres: %s: parse dsn: %v: %w", op, err, store.ErrInvalid)
	}
	cfg.ConnConfig.DialFunc = noCancelDial(cfg.ConnConfig.DialFunc)
	return cfg, nil
}

// commit runs fn, which sends a COMMIT on pc, under committing(ctx), with pc marked as
// committing for as long as it runs: if pgx closes pc meanwhile, it sends no cancel
// request. A connection closed so stays marked (its cancel request is sent after
// fn returns, from a goroutine of pgx's). The caller holds pc until commit returns.
func (s *Store) commit(ctx context.Context, pc *pgconn.PgConn, fn func(ctx context.Context) error) error {
	ctx, cancel := s.committing(ctx)
	defer cancel()
	nc := marked(pc)
	if nc == nil {
		return fn(ctx)
	}
	nc.committing.Store(true)
	err := fn(ctx)
	if !pc.IsClosed() {
		nc.committing.Store(false)
	}
	return err
}

// begin begins a READ COMMITTED transaction, as every write of the store's, on a
// connection it holds until end: a transaction of the pool's hands its connection
// back within Commit, before commit could look at it. end rolls the transaction back
// unless it committed, then releases the connection.
func (s *Store) begin(ctx context.Context) (tx pgx.Tx, end func(), err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	tx, err = conn.BeginTx(ctx, s.pool.txOptions(pgx.TxOptions{IsoLevel: pgx.ReadCommitted}))
	if err != nil {
		conn.Release()
		return nil, nil, err
	}
	return tx, func() {
		tx.Rollback(context.WithoutCancel(ctx)) // a no-op after the commit
		conn.Release()
	}, nil
}

// commitTx commits tx, a transaction of begin's, under commit.
func (s *Store) commitTx(ctx context.Context, tx pgx.Tx) error {
	return s.commit(ctx, tx.Conn().PgConn(), tx.Commit)
}

// committing returns the context a batch that commits runs under: ctx's values, none
// of its cancellation, and its deadline, if it has one, plus the store's grace.
func (s *Store) committing(ctx context.Context) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	ctx = context.WithoutCancel(ctx)
	if !ok {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, d.Add(s.commitGrace))
}

// noCancelNetwork is the network a connection marked as committing names as its
// remote address's: pgx dials the address a connection's RemoteAddr names to send
// its cancel request, and noCancelDial refuses this network.
const noCancelNetwork = "ax-no-cancel"

// errNoCancel is what noCancelDial answers pgx's cancel request for a committing
// connection with; pgx discards it.
var errNoCancel = errors.New("ax: postgres: no cancel request for a connection cut while committing")

// noCancelDial wraps dial: the connections it makes are noCancelConns, and a dial of
// noCancelNetwork — the cancel request of a connection cut while committing — fails.
func noCancelDial(dial pgconn.DialFunc) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if network == noCancelNetwork {
			return nil, errNoCancel
		}
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &noCancelConn{Conn: c}, nil
	}
}

// noCancelConn is a connection made by noCancelDial. While committing is set, its
// RemoteAddr names noCancelNetwork, so that the cancel request pgx sends when it
// closes the connection is never dialled.
type noCancelConn struct {
	net.Conn
	committing atomic.Bool
}

// RemoteAddr is the connection's remote address, under noCancelNetwork while it is
// committing.
func (c *noCancelConn) RemoteAddr() net.Addr {
	a := c.Conn.RemoteAddr()
	if c.committing.Load() {
		return noCancelAddr{a}
	}
	return a
}

// noCancelAddr is a remote address under noCancelNetwork.
type noCancelAddr struct{ net.Addr }

func (noCancelAddr) Network() string { return noCancelNetwork }

// marked returns pc's connection as noCancelDial made it, under TLS or not; nil when
// another dialer made it (a pool of the caller's, for New).
func marked(pc *pgconn.PgConn) *noCancelConn {
	c := pc.Conn()
	for {
		switch nc := c.(type) {
		case *noCancelConn:
			return nc
		case interface{ NetConn() net.Conn }: // *tls.Conn
			c = nc.NetConn()
		default:
			return nil
		}
	}
}
