package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax"
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
		open: func(ctx context.Context, dsn string) (ax.Store, error) { return postgres.Open(ctx, dsn) },
		fresh: func(ctx context.Context, dsn string) (ax.Store, func(), error) {
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				return nil, nil, err
			}
			name := freshName()
			if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
				conn.Close(ctx)
				return nil, nil, err
			}
			drop := func() {
				conn.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE")
				conn.Close(context.Background())
			}
			u, err := url.Parse(dsn)
			if err != nil || u.Scheme == "" {
				drop()
				return nil, nil, fmt.Errorf("--dsn: want a postgres:// URL: %v", err)
			}
			q := u.Query()
			q.Set("search_path", name)
			u.RawQuery = q.Encode()
			st, err := postgres.Open(ctx, u.String())
			if err != nil {
				drop()
				return nil, nil, err
			}
			return st, func() { st.Close(); drop() }, nil
		},
		status:     postgres.SchemaStatus,
		dbCPU:      processCPU("postgres"),
		defaultDSN: "postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
	},
	"mysql": {
		open: func(ctx context.Context, dsn string) (ax.Store, error) { return mysql.Open(dsn) },
		fresh: func(ctx context.Context, dsn string) (ax.Store, func(), error) {
			cfg, err := mysqldriver.ParseDSN(dsn)
			if err != nil {
				return nil, nil, fmt.Errorf("--dsn: %w", err)
			}
			admin := cfg.Clone()
			admin.DBName = ""
			db, err := sql.Open("mysql", admin.FormatDSN())
			if err != nil {
				return nil, nil, err
			}
			name := freshName()
			if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
				db.Close()
				return nil, nil, err
			}
			drop := func() { db.ExecContext(context.Background(), "DROP DATABASE "+name); db.Close() }
			cfg.DBName = name
			st, err := mysql.Open(cfg.FormatDSN())
			if err != nil {
				drop()
				return nil, nil, err
			}
			return st, func() { st.Close(); drop() }, nil
		},
		status:     mysql.SchemaStatus,
		dbCPU:      processCPU("mariadbd", "mysqld"),
		defaultDSN: "root@tcp(127.0.0.1:3306)/test",
	},
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

// freshName returns a new schema or database name.
func freshName() string {
	var b [6]byte
	rand.Read(b[:])
	return "ax_bench_" + hex.EncodeToString(b[:])
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
// names (a database server on this machine), from /proc.
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
			if len(fields) < 13 {
				continue
			}
			var utime, stime int64
			fmt.Sscan(fields[11], &utime)
			fmt.Sscan(fields[12], &stime)
			ticks += utime + stime
		}
		return time.Duration(ticks) * (time.Second / 100), nil // USER_HZ is 100 on Linux
	}
}
