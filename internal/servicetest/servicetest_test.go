package servicetest

import (
	"context"
	"database/sql"
	"testing"

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
