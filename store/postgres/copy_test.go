package postgres

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store"
)

// TestBulkInsertWithoutTempPrivilege: a role that may not create temporary tables (the
// TEMPORARY privilege revoked from PUBLIC on its database, a common hardening) inserts
// batches above the COPY threshold: the COPY goes straight into ax_tasks. (It went
// through a temporary staging table before, and such a role fell back to the arrays.)
func TestBulkInsertWithoutTempPrivilege(t *testing.T) {
	t.Parallel()
	servicetest.PostgresDSN(t) // skips, or fails under AX_REQUIRE_SERVICES, without the server
	base := os.Getenv("AX_TEST_POSTGRES_DSN")
	if base == "" {
		base = servicetest.DefaultPostgresDSN
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := servicetest.Name()
	admin := func(dsn string, stmts ...string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		for _, stmt := range stmts {
			if _, err := conn.Exec(ctx, stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
	}
	admin(base, "CREATE DATABASE "+name, "REVOKE TEMPORARY ON DATABASE "+name+" FROM PUBLIC", "CREATE ROLE "+name+" LOGIN")
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), base)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(context.Background())
		for _, stmt := range []string{"DROP DATABASE " + name + " WITH (FORCE)", "DROP ROLE " + name} {
			if _, err := conn.Exec(context.Background(), stmt); err != nil {
				t.Errorf("%s: %v", stmt, err)
			}
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("AX_TEST_POSTGRES_DSN is not a URL: %v", err)
	}
	u.Path = "/" + name
	admin(u.String(), "CREATE SCHEMA ax AUTHORIZATION "+name)
	u.User = url.User(name)
	q := u.Query()
	q.Set("search_path", "ax")
	u.RawQuery = q.Encode()

	st, err := Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	bulkRounds(ctx, t, st, false)
}

// bulkRounds inserts 20 new tasks into st twice, above a COPY threshold lowered to
// 10, checks every answer, and that st binds arrays from the first round on exactly
// when arrays is set.
func bulkRounds(ctx context.Context, t *testing.T, st *Store, arrays bool) {
	t.Helper()
	st.copyThreshold = 10
	for round := range 2 {
		var tasks []store.NewTask
		for i := range 20 {
			tasks = append(tasks, store.NewTask{Name: "bulk", Key: fmt.Sprintf("%d-%d", round, i), DueAt: time.Now().Add(time.Hour)})
		}
		res, err := st.Insert(ctx, tasks)
		if err != nil {
			t.Fatalf("round %d: Insert of %d tasks: %v", round, len(tasks), err)
		}
		for i, r := range res {
			if r.Err != nil || r.Task == nil || r.Task.Key != tasks[i].Key {
				t.Fatalf("round %d: result %d = %+v", round, i, r)
			}
		}
		if st.noCopy.Load() != arrays {
			t.Fatalf("round %d: the store binds arrays: %v, want %v", round, st.noCopy.Load(), arrays)
		}
	}
}

// TestBulkInsertWithoutSequencePrivilege: a role granted what ax's statements need on
// the tables and on ax_seq, but not USAGE on the sequence behind ax_tasks' id, which
// an ordinary insert does not need, cannot draw the ids a COPY writes; its bulk
// inserts bind arrays instead, from the first refusal on.
func TestBulkInsertWithoutSequencePrivilege(t *testing.T) {
	t.Parallel()
	dsn := servicetest.PostgresDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	owner, err := Open(ctx, dsn) // migrates the schema as its owner
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	schema, role := u.Query().Get("search_path"), servicetest.Name()
	for _, stmt := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"GRANT USAGE ON SCHEMA " + schema + " TO " + role,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA " + schema + " TO " + role,
		"GRANT USAGE ON SEQUENCE " + schema + ".ax_seq TO " + role,
	} {
		if _, err := owner.pool.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() { // after owner.Close: on a connection of its own
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(context.Background())
		for _, stmt := range []string{"DROP OWNED BY " + role, "DROP ROLE " + role} {
			if _, err := conn.Exec(context.Background(), stmt); err != nil {
				t.Errorf("%s: %v", stmt, err)
			}
		}
	})
	u.User = url.User(role)
	st, err := Open(ctx, u.String()) // a schema up to date: no migration, no CREATE privilege needed
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	bulkRounds(ctx, t, st, true)
}
