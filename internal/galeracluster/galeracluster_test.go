package galeracluster_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/internal/galeracluster"
)

// One cluster through the harness's whole life: a write on one node read on another, a
// fresh database on every node, a node paused and resumed, a node killed and rejoined,
// node0 isolated and HAProxy passing to node1 and back.
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

	// HAProxy leads to node0; to node1 while node0, isolated, is without quorum; and
	// back to node0 once it has joined again.
	if i, err := c.Writable(ctx); err != nil || i != 0 {
		t.Fatalf("a write through HAProxy committed on node%d, %v; want node0", i, err)
	}
	if err := c.Isolate(ctx, 0, true); err != nil {
		t.Fatal(err)
	}
	if i, err := c.WaitWritable(ctx, galeracluster.Not(0)); err != nil || i != 1 {
		t.Fatalf("a write through HAProxy with node0 isolated committed on node%d, %v; want node1", i, err)
	}
	if st, err := c.Status(ctx, 0); err != nil || st.Cluster != "non-Primary" {
		t.Errorf("isolated node0: %+v, %v; want non-Primary", st, err)
	}
	_, err := db0.ExecContext(ctx, `INSERT INTO t VALUES (3, UTC_TIMESTAMP(6))`)
	if me := (*mysql.MySQLError)(nil); !errors.As(err, &me) || me.Number != 1047 {
		t.Errorf("a write on isolated node0: %v; want ERROR 1047", err)
	}
	if err := c.Isolate(ctx, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitSynced(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if i, err := c.WaitWritable(ctx, galeracluster.On(0)); err != nil || i != 0 {
		t.Fatalf("a write through HAProxy with node0 joined again committed on node%d, %v; want node0", i, err)
	}
}
