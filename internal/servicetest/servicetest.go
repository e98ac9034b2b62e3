// Package servicetest gives tests an isolated place on the machine's real services:
// a fresh PostgreSQL schema, a fresh MySQL/MariaDB database, a Redis key prefix.
//
// The services are read from AX_TEST_POSTGRES_DSN, AX_TEST_MYSQL_DSN and
// AX_TEST_REDIS_ADDR (with the local defaults below). A test whose service cannot be
// reached is skipped with a message saying so — unless AX_REQUIRE_SERVICES=1 (CI sets
// it), and then it fails.
package servicetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
)

// Defaults when the environment variables are unset.
const (
	DefaultPostgresDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	DefaultMySQLDSN    = "root@tcp(127.0.0.1:3306)/test"
	DefaultRedisAddr   = "127.0.0.1:6379"
)

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// unavailable skips t, or fails it when services are required.
func unavailable(t testing.TB, service string, err error) {
	t.Helper()
	if os.Getenv("AX_REQUIRE_SERVICES") == "1" {
		t.Fatalf("%s is required (AX_REQUIRE_SERVICES=1) but unreachable: %v", service, err)
	}
	t.Skipf("%s unreachable, skipping (set AX_REQUIRE_SERVICES=1 to fail instead): %v", service, err)
}

// Name returns a fresh identifier for a schema, database or prefix: ax_test_<hex>.
func Name() string {
	var b [6]byte
	rand.Read(b[:])
	return "ax_test_" + hex.EncodeToString(b[:])
}

// PostgresDSN creates a new, empty schema on the test PostgreSQL server, drops it when
// the test ends, and returns a DSN whose search_path is that schema.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	base := env("AX_TEST_POSTGRES_DSN", DefaultPostgresDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		unavailable(t, "PostgreSQL ("+redact(base)+")", err)
	}
	defer conn.Close(ctx)
	schema := Name()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" {
		// A keyword/value DSN.
		return base + " search_path=" + schema
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// MySQLDSN creates a new, empty database on the test MySQL/MariaDB server, drops it
// when the test ends, and returns a DSN for it (parseTime and UTC set).
func MySQLDSN(t testing.TB) string {
	t.Helper()
	base := env("AX_TEST_MYSQL_DSN", DefaultMySQLDSN)
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		t.Fatalf("AX_TEST_MYSQL_DSN %q: %v", base, err)
	}
	admin := cfg.Clone()
	admin.DBName = ""
	db, err := sql.Open("mysql", admin.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		unavailable(t, "MySQL ("+cfg.Addr+")", err)
	}
	name := Name()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("mysql", admin.FormatDSN())
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP DATABASE "+name); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	c := cfg.Clone()
	c.DBName = name
	c.ParseTime = true
	c.Loc = time.UTC
	return c.FormatDSN()
}

// RedisAddr checks that the test Redis answers and returns its address and a fresh
// key prefix ("ax_test_<hex>:") for this test.
func RedisAddr(t testing.TB) (addr, prefix string) {
	t.Helper()
	addr = env("AX_TEST_REDIS_ADDR", DefaultRedisAddr)
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		unavailable(t, "Redis ("+addr+")", err)
	}
	c.Close()
	return addr, Name() + ":"
}

func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxx")
	}
	return strings.TrimSpace(fmt.Sprint(u))
}
