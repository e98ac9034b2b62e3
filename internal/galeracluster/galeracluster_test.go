package galeracluster_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/internal/galeracluster"
)

// One cluster through the harness's whole life: a write on one node read on another, a
// fresh database on every node, a node paused and resumed, a node killed and rejoined.
func TestCluster(t *testing.T) {
	c := galeracluster.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	for i := range galeracluster.Nodes {
		st, err := c.Status(ctx, i)
		if err != nil || !st.Synced(galeracluster.Nodes) {
			t.Fatalf("node%d after Start: %+v, %v; want Synced in a primary component of 3", i, st, err)
		}
	}

	name := c.FreshDatabase(t)
	open := func(i int) *sql.DB {
		db, err := sql.Open("mysql", c.DSN(i, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	db0, db2 := open(0), open(2)
	var wsrepOn bool
	if err := db0.QueryRowContext(ctx, `SELECT @@wsrep_on`).Scan(&wsrepOn); err != nil || !wsrepOn {
		t.Fatalf("@@wsrep_on on node0 = %v, %v; want ON", wsrepOn, err)
	}
	if _, err := db0.ExecContext(ctx, `CREATE TABLE t (id INT PRIMARY KEY, at DATETIME(6) NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db0.ExecContext(ctx, `INSERT INTO t VALUES (1, UTC_TIMESTAMP(6))`); err != nil {
		t.Fatal(err)
	}
	// A causal read: node2 answers once it has applied everything committed before.
	var at time.Time
	if err := db2.QueryRowContext(ctx, `SET STATEMENT wsrep_sync_wait = 1 FOR SELECT at FROM t WHERE id = 1`).Scan(&at); err != nil {
		t.Fatalf("node0's row on node2: %v", err)
	}
	if at.Location() != time.UTC || time.Since(at) > time.Minute || time.Since(at) < -time.Minute {
		t.Errorf("the row's time read on node2 = %v, want about now in UTC (parseTime, loc=UTC)", at)
	}

	c.Stop(t, 2)
	c.Cont(t, 2)
	if err := c.WaitSynced(ctx, 3); err != nil {
		t.Fatal(err)
	}

	c.Kill(t, 2)
	if err := c.WaitSynced(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := db0.ExecContext(ctx, `INSERT INTO t VALUES (2, UTC_TIMESTAMP(6))`); err != nil {
		t.Fatalf("a write with node2 dead: %v", err)
	}
	c.Restart(t, 2)
	if err := c.WaitSynced(ctx, 3); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db2.QueryRowContext(ctx, `SET STATEMENT wsrep_sync_wait = 1 FOR SELECT COUNT(*) FROM t`).Scan(&n); err != nil || n != 2 {
		t.Errorf("rows on node2 after it rejoined: %d, %v; want 2 (the write made while it was dead)", n, err)
	}
}
