package servicetest

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
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
