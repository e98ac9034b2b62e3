package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/axsched/ax/internal/cputime"
)

// freshSchema creates an empty schema ax_peers_<random> in the database of base and
// returns its name, a DSN whose connections have search_path set to it, and a
// function that drops it.
func freshSchema(ctx context.Context, base string) (schema, dsn string, drop func(), err error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", nil, fmt.Errorf("random schema name: %w", err)
	}
	schema = "ax_peers_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", "", nil, fmt.Errorf("connect to %s: %w", redactDSN(base), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", "", nil, fmt.Errorf("create schema %s: %w", schema, err)
	}
	dsn, err = withSearchPath(base, schema)
	if err != nil {
		return "", "", nil, err
	}
	drop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			fmt.Fprintf(os.Stderr, "peers: drop schema %s: %v\n", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			fmt.Fprintf(os.Stderr, "peers: drop schema %s: %v\n", schema, err)
		}
	}
	return schema, dsn, drop, nil
}

// withSearchPath adds search_path=schema as a runtime parameter to a URL DSN (pgx
// sends unknown URL parameters as run-time parameters at connection start).
func withSearchPath(base, schema string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("-pg %q: want a postgres:// URL", redactDSN(base))
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// redactDSN hides a password in a DSN for messages.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable DSN)"
	}
	return u.Redacted()
}

// openPool opens a pgx pool on dsn and checks that it answers.
func openPool(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("pgx pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgx ping: %w", err)
	}
	return pool, nil
}

// vacuumSchema runs VACUUM ANALYZE on every table of the pool's current schema.
func vacuumSchema(ctx context.Context, pool *pgxpool.Pool) error {
	rows, err := pool.Query(ctx, `SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = current_schema()`)
	if err != nil {
		return fmt.Errorf("list tables: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list tables: %w", err)
	}
	for _, t := range tables {
		if _, err := pool.Exec(ctx, "VACUUM (ANALYZE) "+t); err != nil {
			return fmt.Errorf("vacuum %s: %w", t, err)
		}
	}
	return nil
}

// quiesce asks PostgreSQL for a CHECKPOINT (if the role may) and then waits, up to
// limit, until its server processes use at most 20ms of CPU in a second, so that
// the work following a bulk load (checkpoint writes, autovacuum, dropped schemas)
// is not measured as a scheduler's idle cost. It reports whether it got quiet.
func quiesce(ctx context.Context, base string, limit time.Duration) (bool, error) {
	if conn, err := pgx.Connect(ctx, base); err == nil {
		conn.Exec(ctx, "CHECKPOINT") // needs superuser or pg_checkpoint: best effort
		conn.Close(ctx)
	}
	deadline := time.Now().Add(limit)
	prev, err := cputime.Of("postgres")
	if err != nil {
		return false, err
	}
	for time.Now().Before(deadline) {
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return false, ctx.Err()
		}
		cur, err := cputime.Of("postgres")
		if err != nil {
			return false, err
		}
		if cur-prev <= 20*time.Millisecond {
			return true, nil
		}
		prev = cur
	}
	return false, nil
}
