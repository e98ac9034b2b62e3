package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/axsched/ax/internal/pgcluster"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/postgres"
)

// TestClusterCommitWaitingOnStandby: on the Patroni cluster in strict synchronous
// mode, a COMMIT that waits for its standby — both standbys' WAL receivers are
// stopped — is cut by its deadline. A plain pgx pool closes
// the connection with a cancel request, and PostgreSQL ends the wait by keeping the
// commit on the primary alone: visible there, on no standby. The store closes its
// connection, the grace past the deadline, without one: its commit stays invisible
// until a standby has it, and then is everywhere.
func TestClusterCommitWaitingOnStandby(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a database cluster")
	}
	c := pgcluster.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := c.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	admin := connect(t, ctx, c.NodeDSN(p))
	const schema = "ax_commit_wait"
	for _, q := range []string{`CREATE SCHEMA ` + schema, `CREATE TABLE ` + schema + `.plain (k text)`} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	dsn := c.NodeDSN(p) + "&search_path=" + schema
	st, err := postgres.Open(ctx, dsn, postgres.WithCommitGrace(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	plain, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()

	var standbys []*pgx.Conn
	for i := range pgcluster.Nodes {
		if i == p {
			continue
		}
		standbys = append(standbys, connect(t, ctx, c.NodeDSN(i)))
		if err := c.PauseReceiving(i); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := c.ResumeReceiving(i); err != nil {
				t.Error(err)
			}
		})
	}
	count := func(conn *pgx.Conn, q string) int {
		var n int
		if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	plainRows := `SELECT count(*) FROM ` + schema + `.plain`
	taskRows := `SELECT count(*) FROM ` + schema + `.ax_tasks WHERE key = 'waits'`

	// pgx's cancel request makes the plain pool's commit visible on the primary alone.
	cut, cancelCut := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = plain.Exec(cut, `INSERT INTO `+schema+`.plain VALUES ('cancelled')`)
	cancelCut()
	if err == nil {
		t.Fatal("a commit waiting for a standby that receives nothing was answered")
	}
	waitFor(t, ctx, "the plain pool's commit, cut with a cancel request, visible on the primary", func() bool {
		return count(admin, plainRows) == 1
	})
	for _, s := range standbys {
		if n := count(s, plainRows); n != 0 {
			t.Fatalf("the plain pool's commit is on a standby that receives nothing: %d rows", n)
		}
	}

	// The store's commit, cut the same way, stays invisible while the server waits.
	cut, cancelCut = context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = st.Insert(cut, []store.NewTask{{Name: "job", Key: "waits", DueAt: time.Now().Add(time.Hour)}})
	cancelCut()
	if err == nil || !strings.Contains(err.Error(), "outcome unknown") {
		t.Fatalf("Insert whose commit waits for a standby: %v; want an error saying the outcome is unknown", err)
	}
	waiting, cancelWaiting := context.WithTimeout(ctx, 10*time.Second)
	defer cancelWaiting()
	waitFor(t, waiting, "the store's cut commit waiting for its standby (SyncRep)", func() bool {
		return count(admin, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`) > 0
	})
	// The cancel request would have been sent at once, when pgx closed the connection:
	// watch for a while that the commit does not show.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if n := count(admin, taskRows); n != 0 {
			t.Fatal("the store's commit, cut past its grace, is visible on the primary while no standby has it")
		}
	}

	for i := range pgcluster.Nodes {
		if i != p {
			if err := c.ResumeReceiving(i); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(t, ctx, "the store's commit visible on every node once the standbys receive again", func() bool {
		n := count(admin, taskRows)
		for _, s := range standbys {
			n += count(s, taskRows)
		}
		return n == pgcluster.Nodes
	})
}

// connect opens a connection to dsn, closed when the test ends.
func connect(t *testing.T, ctx context.Context, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// waitFor polls ok until it holds, failing the test when ctx ends first.
func waitFor(t *testing.T, ctx context.Context, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
