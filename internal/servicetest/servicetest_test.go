package servicetest

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
)

func TestPostgresSchemaIsIsolated(t *testing.T) {
	t.Parallel()
	dsn := PostgresDSN(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var schema string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	if len(schema) < len("ax_test_") || schema[:8] != "ax_test_" {
		t.Errorf("current_schema() = %q, want a fresh ax_test_ schema", schema)
	}
}

func TestMySQLDatabaseIsIsolated(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("mysql", MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var name string
	if err := db.QueryRow("SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	if len(name) < 8 || name[:8] != "ax_test_" {
		t.Errorf("DATABASE() = %q, want a fresh ax_test_ database", name)
	}
}

func TestRedisAnswers(t *testing.T) {
	t.Parallel()
	if _, prefix := RedisAddr(t); len(prefix) < 9 {
		t.Errorf("prefix %q too short", prefix)
	}
}

func TestProxyCutAndRestore(t *testing.T) {
	t.Parallel()
	addr, _ := RedisAddr(t)
	p := NewProxy(t, addr)
	ping := func() error {
		c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			return err
		}
		buf := make([]byte, 7)
		if _, err := io.ReadFull(c, buf); err != nil {
			return err
		}
		if string(buf) != "+PONG\r\n" {
			return fmt.Errorf("reply %q", buf)
		}
		return nil
	}
	if err := ping(); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.Cut()
	if err := ping(); err == nil {
		t.Fatalf("ping succeeded through a cut proxy")
	}
	p.Restore()
	if err := ping(); err != nil {
		t.Fatalf("after Restore: %v", err)
	}
}

// Through the harness's PgBouncer, in transaction mode with one server connection,
// two clients share one server session, and a DSN's search_path reaches no server.
func TestPgBouncerPoolsTransactions(t *testing.T) {
	t.Parallel()
	b := StartPgBouncer(t, 1)
	s := b.Schema(t)
	ctx := context.Background()
	connect := func() *pgx.Conn {
		t.Helper()
		cfg, err := pgx.ParseConfig(s.Pooled)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(ctx) })
		return conn
	}
	one, two := connect(), connect()
	var pid1, pid2 int
	var path string
	if err := one.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid1); err != nil {
		t.Fatal(err)
	}
	if err := two.QueryRow(ctx, "SELECT pg_backend_pid(), current_setting('search_path')").Scan(&pid2, &path); err != nil {
		t.Fatal(err)
	}
	if pid1 != pid2 {
		t.Errorf("backend pids %d and %d through a PgBouncer of one server connection, want one", pid1, pid2)
	}
	if strings.Contains(path, s.Name) {
		t.Errorf("search_path through the PgBouncer = %q, want the server's default, not the DSN's %s", path, s.Name)
	}

	admin, err := pgx.Connect(ctx, b.AdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	rows, err := admin.Query(ctx, "SHOW CONFIG")
	if err != nil {
		t.Fatal(err)
	}
	config := map[string]string{}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		config[fmt.Sprint(vals[0])] = fmt.Sprint(vals[1])
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if config["pool_mode"] != "transaction" || config["default_pool_size"] != "1" {
		t.Errorf("SHOW CONFIG: pool_mode %q, default_pool_size %q; want transaction, 1", config["pool_mode"], config["default_pool_size"])
	}
}
