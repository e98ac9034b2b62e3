package postgres

import (
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/axsched/ax/store"
)

// Option configures Open and New. Without any, the store reaches PostgreSQL
// directly, as it always has: see "Behind a connection pooler" in the package doc for
// what WithPooler and WithListenDSN change, and WithCommitGrace for how long a COMMIT
// is waited for.
type Option func(*config)

type config struct {
	pooler    bool
	schema    string // WithPooler's
	listenDSN string
	listen    *pgx.ConnConfig // listenDSN, parsed
	// commitGrace is WithCommitGrace's; DefaultCommitGrace without it.
	commitGrace time.Duration
}

// WithPooler opens the store for a connection pooler in transaction mode, such as
// PgBouncer with pool_mode = transaction, where consecutive transactions of one
// connection may run on different server sessions and no session state survives a
// transaction. The store then lives in schema, which must exist: every transaction
// it runs, and every statement it runs outside one, first sets search_path to schema
// for that transaction only (set_config(…, true)), in the same round trip; a
// search_path in the DSN is not used. Open runs statements without named prepared
// statements (pgx's QueryExecModeExec, unless the DSN chose simple_protocol); New
// refuses a pool that would prepare or describe them first (see poolerSafe).
// Listen needs WithListenDSN to wake up on NOTIFY; without it, it signals nothing
// (see Listen).
func WithPooler(schema string) Option {
	return func(c *config) { c.pooler, c.schema = true, schema }
}

// WithListenDSN has Listen open its own connection to dsn (a URL or keyword/value
// string, as pgx accepts) for LISTEN, instead of taking one of the pool's. Behind a
// pooler in transaction mode dsn must reach PostgreSQL directly, not through the
// pooler: LISTEN is a session's state, which the pooler does not keep. It must reach
// the store's database; its search_path does not matter.
func WithListenDSN(dsn string) Option {
	return func(c *config) { c.listenDSN = dsn }
}

// maxIdentifier is PostgreSQL's longest identifier, in bytes (NAMEDATALEN - 1).
const maxIdentifier = 63

// configure applies opts, checks them, and checks that pool, when it is not nil
// (New's), runs statements as WithPooler needs. op prefixes the errors.
func configure(op string, pool *pgxpool.Pool, opts []Option) (*config, error) {
	c := &config{commitGrace: DefaultCommitGrace}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("ax: postgres: %s: nil Option: %w", op, store.ErrInvalid)
		}
		o(c)
	}
	if c.pooler {
		if c.schema == "" || len(c.schema) > maxIdentifier || strings.ContainsAny(c.schema, "\x00\\") {
			return nil, fmt.Errorf("ax: postgres: %s: WithPooler: schema %q is not a schema name of 1 to %d bytes without NUL or backslash: %w",
				op, c.schema, maxIdentifier, store.ErrInvalid)
		}
		if pool != nil {
			if m := pool.Config().ConnConfig.DefaultQueryExecMode; !poolerSafe(m) {
				return nil, fmt.Errorf("ax: postgres: %s: WithPooler: the pool's default_query_exec_mode is %q; behind a pooler in transaction mode it must be %q or %q: %w",
					op, m, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol, store.ErrInvalid)
			}
		}
	}
	if c.commitGrace <= 0 {
		return nil, fmt.Errorf("ax: postgres: %s: WithCommitGrace: %v is not a positive duration: %w", op, c.commitGrace, store.ErrInvalid)
	}
	if c.listenDSN != "" {
		lc, err := pgx.ParseConfig(c.listenDSN)
		if err != nil {
			return nil, fmt.Errorf("ax: postgres: %s: WithListenDSN: %v: %w", op, err, store.ErrInvalid)
		}
		c.listen = lc
	}
	return c, nil
}

// poolerSafe reports whether statements run in mode work behind a pooler in
// transaction mode, each transaction setting its own search_path. Cache statement
// prepares named statements, which live in one server session. Cache describe and
// describe exec prepare no named statement, but describe each new statement in a
// round trip of its own, before the transaction that sets search_path: the server
// session it reaches may not find the store's tables, or find another schema's.
func poolerSafe(m pgx.QueryExecMode) bool {
	return m == pgx.QueryExecModeExec || m == pgx.QueryExecModeSimpleProtocol
}
