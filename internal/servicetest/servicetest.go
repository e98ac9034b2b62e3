// Package servicetest gives tests an isolated place on the machine's real services:
// a fresh PostgreSQL schema, a fresh MySQL/MariaDB database, a Redis key prefix; and a
// PgBouncer of the test's own in front of the PostgreSQL server (pgbouncer.go).
//
// The services are read from AX_TEST_POSTGRES_DSN, AX_TEST_MYSQL_DSN and
// AX_TEST_REDIS_ADDR (with the local defaults below). A test whose service cannot be
// reached is skipped with a message saying so — unless AX_REQUIRE_SERVICES=1 (CI sets
// it), and then it fails.
//
// The schemas and databases are made by package internal/freshdb, which `ax bench`
// uses too.
package servicetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/internal/freshdb"
)

// Defaults when the environment variables are unset.
const (
	DefaultPostgresDSN = freshdb.DefaultPostgresDSN
	DefaultMySQLDSN    = freshdb.DefaultMySQLDSN
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
	dsn, drop, err := freshdb.CreatePostgresSchema(ctx, base, Name())
	if err != nil {
		fail(t, "PostgreSQL ("+redact(base)+")", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := drop(ctx); err != nil {
			t.Error(err)
		}
	})
	return dsn
}

// MySQLDSN creates a new, empty database on the test MySQL/MariaDB server, drops it
// when the test ends, and returns a DSN for it (parseTime and UTC set).
func MySQLDSN(t testing.TB) string {
	t.Helper()
	base := env("AX_TEST_MYSQL_DSN", DefaultMySQLDSN)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dsn, drop, err := freshdb.CreateMySQLDatabase(ctx, base, Name())
	if err != nil {
		fail(t, "MySQL", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := drop(ctx); err != nil {
			t.Error(err)
		}
	})
	return dsn
}

// fail skips or fails t (see unavailable) when err says the service is unreachable,
// and fails it otherwise.
func fail(t testing.TB, service string, err error) {
	t.Helper()
	if errors.Is(err, freshdb.ErrUnreachable) {
		unavailable(t, service, err)
	}
	t.Fatal(err)
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
