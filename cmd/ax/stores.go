package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax"
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
	// opens a store there; drop removes it.
	fresh func(ctx context.Context, dsn string) (st ax.Store, drop func(), err error)
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
		fresh: func(ctx context.Context, dsn string) (ax.Store, func(), error) {
			dir, err := os.MkdirTemp(dsn, "ax-bench-")
			if err != nil {
				return nil, nil, err
			}
			st, err := sqlite.Open(filepath.Join(dir, "ax.db"))
			if err != nil {
				os.RemoveAll(dir)
				return nil, nil, err
			}
			return st, func() { st.Close(); os.RemoveAll(dir) }, nil
		},
		status: func(ctx context.Context, dsn string) (int, int, error) { return sqlite.SchemaStatus(dsn) },
		dbCPU:  selfCPU, // embedded: the database runs in this process
	},
	"postgres": {
		open: openPostgres,
		fresh: func(ctx context.Context, dsn string) (ax.Store, func(), error) {
			return freshStore(ctx, dsn, freshdb.CreatePostgresSchema, openPostgres)
		},
		status:     postgres.SchemaStatus,
		dbCPU:      processCPU("postgres"),
		roundTrip:  postgresRoundTrip,
		defaultDSN: freshdb.DefaultPostgresDSN,
	},
	"mysql": {
		open: openMySQL,
		fresh: func(ctx context.Context, dsn string) (ax.Store, func(), error) {
			return freshStore(ctx, dsn, freshdb.CreateMySQLDatabase, openMySQL)
		},
		status:     mysql.SchemaStatus,
		dbCPU:      processCPU("mariadbd", "mysqld"),
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

// freshStore creates a fresh schema or database in the server of base with create,
// and opens a store there; drop closes the store and removes the place.
func freshStore(ctx context.Context, base string,
	create func(ctx context.Context, base, name string) (string, func(context.Context) error, error),
	open func(ctx context.Context, dsn string) (ax.Store, error),
) (st ax.Store, drop func(), err error) {
	var b [6]byte
	rand.Read(b[:])
	dsn, remove, err := create(ctx, base, "ax_bench_"+hex.EncodeToString(b[:]))
	if err != nil {
		return nil, nil, fmt.Errorf("--dsn: %w", err)
	}
	removeBg := func() { remove(context.WithoutCancel(ctx)) }
	if st, err = open(ctx, dsn); err != nil {
		removeBg()
		return nil, nil, err
	}
	return st, func() { st.Close(); removeBg() }, nil
}

// selfCPU is this process's CPU time, user and system.
func selfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// processCPU sums the CPU time of the local processes whose command name is one of
// names (a database server on this machine), from /proc: user and system time, plus
// that of their exited, reaped children, so that a PostgreSQL backend whose
// connection closed stays counted (in the postmaster's) and the sum never decreases.
func processCPU(names ...string) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		dirs, err := filepath.Glob("/proc/[0-9]*/stat")
		if err != nil {
			return 0, err
		}
		var ticks int64
		for _, f := range dirs {
			b, err := os.ReadFile(f)
			if err != nil {
				continue // exited
			}
			s := string(b)
			open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
			if open < 0 || close < open {
				continue
			}
			comm := s[open+1 : close]
			match := false
			for _, n := range names {
				match = match || strings.HasPrefix(comm, n)
			}
			if !match {
				continue
			}
			fields := strings.Fields(s[close+2:])
			if len(fields) < 15 {
				continue
			}
			for _, f := range fields[11:15] { // utime stime cutime cstime
				var t int64
				fmt.Sscan(f, &t)
				ticks += t
			}
		}
		return time.Duration(ticks) * (time.Second / 100), nil // USER_HZ is 100 on Linux
	}
}
