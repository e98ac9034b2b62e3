// Package freshdb creates and drops an empty PostgreSQL schema or MySQL/MariaDB
// database, for a test (through internal/servicetest) or a benchmark run (`ax
// bench`), so that each starts from nothing and leaves nothing behind.
package freshdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
)

// The local servers' DSNs, the defaults of the tests and of `ax bench`.
const (
	DefaultPostgresDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	DefaultMySQLDSN    = "root@tcp(127.0.0.1:3306)/test"
)

// ErrUnreachable is wrapped by the errors of CreatePostgresSchema and
// CreateMySQLDatabase that come from not reaching the server.
var ErrUnreachable = errors.New("unreachable")

// CreatePostgresSchema creates the schema name on the PostgreSQL server of base (a
// URL or keyword/value DSN) and returns a DSN whose search_path is that schema, and
// drop, which drops it. It holds no connection in between. The tests call it through
// servicetest.PostgresDSN; `ax bench` calls it for each run.
func CreatePostgresSchema(ctx context.Context, base, name string) (dsn string, drop func(context.Context) error, err error) {
	exec := func(ctx context.Context, stmt string) error {
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrUnreachable, err)
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, stmt)
		return err
	}
	if err := exec(ctx, "CREATE SCHEMA "+name); err != nil {
		return "", nil, fmt.Errorf("create schema %s: %w", name, err)
	}
	drop = func(ctx context.Context) error {
		if err := exec(ctx, "DROP SCHEMA "+name+" CASCADE"); err != nil {
			return fmt.Errorf("drop schema %s: %w", name, err)
		}
		return nil
	}
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" {
		// A keyword/value DSN.
		return base + " search_path=" + name, drop, nil
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

// CreateMySQLDatabase creates the database name on the MySQL/MariaDB server of base
// and returns a DSN for it (parseTime and UTC set), and drop, which drops it. It
// holds no connection in between. The tests call it through servicetest.MySQLDSN;
// `ax bench` calls it for each run.
func CreateMySQLDatabase(ctx context.Context, base, name string) (dsn string, drop func(context.Context) error, err error) {
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		return "", nil, fmt.Errorf("mysql DSN %q: %w", base, err)
	}
	admin := cfg.Clone()
	admin.DBName = ""
	exec := func(ctx context.Context, stmt string) error {
		db, err := sql.Open("mysql", admin.FormatDSN())
		if err != nil {
			return err
		}
		defer db.Close()
		if err := db.PingContext(ctx); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrUnreachable, cfg.Addr, err)
		}
		_, err = db.ExecContext(ctx, stmt)
		return err
	}
	if err := exec(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	drop = func(ctx context.Context) error {
		if err := exec(ctx, "DROP DATABASE "+name); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	}
	c := cfg.Clone()
	c.DBName = name
	c.ParseTime = true
	c.Loc = time.UTC
	return c.FormatDSN(), drop, nil
}
