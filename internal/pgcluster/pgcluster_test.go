package pgcluster

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestCluster starts the cluster, checks its shape, writes through HAProxy, switches
// over to the synchronous standby, and checks that the write survived and that new
// writes reach the new primary through HAProxy and through a multi-host DSN.
func TestCluster(t *testing.T) {
	c := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	ms, err := c.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old, sync := -1, -1
	roles := map[string]int{}
	for _, m := range ms {
		roles[m.Role]++
		switch m.Role {
		case RoleLeader:
			old = m.Node
		case RoleSyncStandby:
			sync = m.Node
		}
	}
	if len(ms) != Nodes || roles[RoleLeader] != 1 || roles[RoleSyncStandby] != 1 || roles[RoleReplica] != 1 {
		t.Fatalf("members = %+v, want a leader, a sync_standby and a replica", ms)
	}
	if p, err := c.Primary(ctx); err != nil || p != old {
		t.Fatalf("Primary() = %d, %v; want %d", p, err, old)
	}

	conn := connect(ctx, t, c.DSN())
	if got := serverPort(ctx, t, conn); got != c.PGPorts[old] {
		t.Fatalf("HAProxy leads to port %d, want the leader node%d's %d", got, old, c.PGPorts[old])
	}
	mustExec(ctx, t, conn, "CREATE TABLE smoke (id int PRIMARY KEY, note text NOT NULL)")
	mustExec(ctx, t, conn, "INSERT INTO smoke VALUES (1, 'before the switchover')")

	if err := c.Switchover(ctx, sync); err != nil {
		t.Fatal(err)
	}
	now, err := c.WaitPrimary(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if now != sync {
		t.Fatalf("after the switchover node%d leads, want node%d", now, sync)
	}
	// The old primary was restarted as a replica: the connection to it is gone, or at
	// least can write no more.
	if _, err := conn.Exec(ctx, "INSERT INTO smoke VALUES (100, 'the old connection')"); err == nil {
		t.Error("a write on the old primary's connection succeeded after the switchover")
	}

	conn = connect(ctx, t, c.DSN())
	if got := serverPort(ctx, t, conn); got != c.PGPorts[now] {
		t.Fatalf("HAProxy leads to port %d, want the new leader node%d's %d", got, now, c.PGPorts[now])
	}
	var note string
	if err := conn.QueryRow(ctx, "SELECT note FROM smoke WHERE id = 1").Scan(&note); err != nil {
		t.Fatalf("the row written before the switchover: %v", err)
	}
	mustExec(ctx, t, conn, "INSERT INTO smoke VALUES (2, 'after, through HAProxy')")

	multi := connect(ctx, t, c.MultiHostDSN())
	if got := serverPort(ctx, t, multi); got != c.PGPorts[now] {
		t.Fatalf("the multi-host DSN led to port %d, want the new leader node%d's %d", got, now, c.PGPorts[now])
	}
	mustExec(ctx, t, multi, "INSERT INTO smoke VALUES (3, 'after, through the multi-host DSN')")

	direct := connect(ctx, t, c.NodeDSN(now))
	var n int
	if err := direct.QueryRow(ctx, "SELECT count(*) FROM smoke").Scan(&n); err != nil || n != 3 {
		t.Fatalf("rows on node%d = %d, %v; want 3", now, n, err)
	}

	// The old primary rejoins as a replica.
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}

	// Synchronous replication off and on again: the members' roles follow.
	for _, on := range []bool{false, true} {
		if err := c.SetSynchronous(ctx, on); err != nil {
			t.Fatal(err)
		}
		waitRoles(ctx, t, c, on)
	}
}

// waitRoles waits until the members show a sync_standby (sync) or none.
func waitRoles(ctx context.Context, t *testing.T, c *Cluster, sync bool) {
	t.Helper()
	for {
		ms, err := c.Members(ctx)
		syncs := 0
		for _, m := range ms {
			if m.Role == RoleSyncStandby {
				syncs++
			}
		}
		if err == nil && (syncs == 1) == sync {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("synchronous %v: members %+v (%v)", sync, ms, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func connect(ctx context.Context, t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func serverPort(ctx context.Context, t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var port int
	if err := conn.QueryRow(ctx, "SELECT inet_server_port()").Scan(&port); err != nil {
		t.Fatal(err)
	}
	return port
}

func mustExec(ctx context.Context, t *testing.T, conn *pgx.Conn, sql string) {
	t.Helper()
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
