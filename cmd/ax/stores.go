package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/axsched/ax"
	"github.com/axsched/ax/cmd/ax/internal/bench"
	"github.com/axsched/ax/internal/cputime"
	"github.com/axsched/ax/internal/freshdb"
	"github.com/axsched/ax/store/mysql"
	"github.com/axsched/ax/store/postgres"
	"github.com/axsched/ax/store/sqlite"
)

// A storeKind opens the stores of one driver for the CLI.
type storeKind struct {
	// open opens (and migrates) the store at dsn.
	open func(ctx context.Context, dsn string) (ax.Store, error)
	// fresh creates an empty place (file, schema, database) from the base dsn and
	// opens a store there for ax bench.
	fresh func(ctx context.Context, dsn string) (benchStore, error)
	// status reports the schema version at dsn and the latest known, changing nothing.
	status func(ctx context.Context, dsn string) (have, want int, err error)
	// dbCPU returns the CPU time the database has used so far.
	dbCPU func() (time.Duration, error)
	// roundTrip, when set, is the server's CPU per trivial query on one connection,
	// over n of them: the unit to read dbCPU's figures against (see roundTripCPU).
	roundTrip func(ctx context.Context, dsn string, n int) (time.Duration, error)
	// defaultDSN is used when --dsn is not given.
	defaultDSN string
}

var storeKinds = map[string]storeKind{
	"sqlite": {
		open: func(ctx context.Context, dsn string) (ax.Store, error) { return sqlite.Open(dsn) },
		fresh: func(ctx context.Context, dsn string) (benchStore, error) {
			dir, err := os.MkdirTemp(dsn, "ax-bench-")
			if err != nil {
				return benchStore{}, err
			}
			st, err := sqlite.Open(filepath.Join(dir, "ax.db"))
			if err != nil {
				os.RemoveAll(dir)
				return benchStore{}, err
			}
			return benchStore{Store: st, dsn: filepath.Join(dir, "ax.db"), drop: func() { st.Close(); os.RemoveAll(dir) }}, nil
		},
		status: func(ctx context.Context, dsn string) (int, int, error) { return sqlite.SchemaStatus(dsn) },
		dbCPU:  cputime.Self, // embedded: the database runs in this process
	},
	"postgres": {
		open: openPostgres,
		fresh: func(ctx context.Context, dsn string) (benchStore, error) {
			return freshStore(ctx, dsn, freshdb.CreatePostgresSchema, openCountedPostgres)
		},
		status:     postgres.SchemaStatus,
		dbCPU:      func() (time.Duration, error) { return cputime.Of("postgres") },
		roundTrip:  postgresRoundTrip,
		defaultDSN: freshdb.DefaultPostgresDSN,
	},
	"mysql": {
		open: openMySQL,
		fresh: func(ctx context.Context, dsn string) (benchStore, error) {
			return freshStore(ctx, dsn, freshdb.CreateMySQLDatabase, openCountedMySQL)
		},
		status:     mysql.SchemaStatus,
		dbCPU:      func() (time.Duration, error) { return cputime.Of("mariadbd", "mysqld") },
		defaultDSN: freshdb.DefaultMySQLDSN,
	},
}

func openPostgres(ctx context.Context, dsn string) (ax.Store, error) { return postgres.Open(ctx, dsn) }

func openMySQL(_ context.Context, dsn string) (ax.Store, error) { return mysql.Open(dsn) }

// postgresRoundTrip is the CPU a PostgreSQL backend on this machine uses per trivial
// query: n times SELECT 1 on one connection, each a round trip in the simple
// protocol, timed by that backend's own scheduler statistics (/proc/PID/schedstat,
// in nanoseconds), so that the server's other processes add nothing.
func postgresRoundTrip(ctx context.Context, dsn string, n int) (time.Duration, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var pid int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		return 0, err
	}
	cpu := func() (time.Duration, error) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
		if err != nil {
			return 0, err
		}
		var ns int64
		_, err = fmt.Sscan(string(b), &ns)
		return time.Duration(ns), err
	}
	cpu0, err := cpu()
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil // a server on another machine: its CPU is not ours to read
	}
	if err != nil {
		return 0, err
	}
	for range n {
		if _, err := conn.Exec(ctx, "SELECT 1"); err != nil { // no arguments: the simple protocol
			return 0, err
		}
	}
	cpu1, err := cpu()
	if err != nil {
		return 0, err
	}
	return (cpu1 - cpu0) / time.Duration(n), nil
}

func storeNames() string {
	names := make([]string, 0, len(storeKinds))
	for n := range storeKinds {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, "|")
}

func lookupStore(name string) (storeKind, error) {
	k, ok := storeKinds[name]
	if !ok {
		return storeKind{}, fmt.Errorf("--store %q: want %s", name, storeNames())
	}
	return k, nil
}

// A benchStore is the store of one ax bench run, in a place of its own.
type benchStore struct {
	ax.Store
	// dsn is the store's place: its file, or its schema's or database's DSN.
	dsn string
	// drop closes the store and removes its place.
	drop func()
	// statements, when set, returns how many statements the database has executed
	// for the store so far (bench.Env.Statements).
	statements func() (int64, error)
}

// freshStore creates a fresh schema or database in the server of base with create,
// and opens a store there; its drop also removes the place.
func freshStore(ctx context.Context, base string,
	create func(ctx context.Context, base, name string) (string, func(context.Context) error, error),
	open func(ctx context.Context, dsn string) (benchStore, error),
) (benchStore, error) {
	var b [6]byte
	rand.Read(b[:])
	dsn, remove, err := create(ctx, base, "ax_bench_"+hex.EncodeToString(b[:]))
	if err != nil {
		return benchStore{}, fmt.Errorf("--dsn: %w", err)
	}
	removeBg := func() { remove(context.WithoutCancel(ctx)) }
	st, err := open(ctx, dsn)
	if err != nil {
		removeBg()
		return benchStore{}, err
	}
	drop := st.drop
	st.drop = func() { drop(); removeBg() }
	st.dsn = dsn
	return st, nil
}

// openCountedPostgres opens a PostgreSQL store on a pool of its own whose
// connections count the statements they send (stmtCounter).
func openCountedPostgres(ctx context.Context, dsn string) (benchStore, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return benchStore{}, err
	}
	c := new(stmtCounter)
	cfg.ConnConfig.Tracer = c
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return benchStore{}, err
	}
	st, err := postgres.New(pool)
	if err != nil {
		pool.Close()
		return benchStore{}, err
	}
	return benchStore{Store: st, drop: func() { st.Close(); pool.Close() },
		statements: func() (int64, error) { return c.n.Load(), nil }}, nil
}

// stmtCounter counts the statements a pgx connection sends: each Exec, Query and
// QueryRow (BEGIN and COMMIT included) and each statement of a batch. It does not see
// the COPY the store runs on the wire connection itself (SubmitMany's, one per call of
// 1,000 tasks or more), nor Prepare, which executes nothing.
type stmtCounter struct{ n atomic.Int64 }

func (c *stmtCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *stmtCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *stmtCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (c *stmtCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.n.Add(1)
}

func (c *stmtCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// openCountedMySQL opens a MySQL store and a connection of its own that reads the
// server's count of statements executed (the global status Questions, which counts
// every statement a client sends, BEGIN and COMMIT included, but not pings or
// prepares). The count is the whole server's: ax bench's runs are alone on it, as for
// the server's CPU. The reads of the count are subtracted.
func openCountedMySQL(ctx context.Context, dsn string) (benchStore, error) {
	st, err := openMySQL(ctx, dsn)
	if err != nil {
		return benchStore{}, err
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		st.Close()
		return benchStore{}, err
	}
	db.SetMaxOpenConns(1)
	var reads atomic.Int64 // each read is one Question
	questions := func() (int64, error) {
		var name string
		var n int64
		if err := db.QueryRowContext(ctx, `SHOW GLOBAL STATUS LIKE 'Questions'`).Scan(&name, &n); err != nil {
			return 0, fmt.Errorf("mysql statements: %w", err)
		}
		return n - reads.Add(1), nil
	}
	if _, err := questions(); err != nil {
		db.Close()
		st.Close()
		return benchStore{}, err
	}
	return benchStore{Store: st, drop: func() { db.Close(); st.Close() }, statements: questions}, nil
}

// openSubmitterStore opens the store of an ax bench run in the pickup workload's
// second process, counted where the run's own count does not see it: a PostgreSQL
// run counts the statements of its own pool, a MariaDB run the server's.
func openSubmitterStore(ctx context.Context, kind, dsn string) (bench.SubmitterStore, error) {
	if kind == "postgres" {
		st, err := openCountedPostgres(ctx, dsn)
		if err != nil {
			return bench.SubmitterStore{}, err
		}
		return bench.SubmitterStore{Store: st.Store, Statements: st.statements, Close: st.drop}, nil
	}
	k, err := lookupStore(kind)
	if err != nil {
		return bench.SubmitterStore{}, err
	}
	st, err := k.open(ctx, dsn)
	if err != nil {
		return bench.SubmitterStore{}, err
	}
	return bench.SubmitterStore{Store: st, Close: func() { st.Close() }}, nil
}
