//go:build linux

package clustertest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/axsched/ax/internal/clustertest"
	"github.com/axsched/ax/internal/freshdb"
	"github.com/axsched/ax/internal/pgcluster"
	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store"
)

// The database fails over under a drain: three replicas elected by the SQL lease on a
// Patroni cluster (three PostgreSQL 15 nodes, strict synchronous replication, HAProxy
// routing to the primary), reached through HAProxy. Each scenario ends with the whole
// history checked (Verify): every acknowledged submit runs, none early, none after it
// succeeded, no execution runs twice, and every acknowledged result survives.

// dbClusterTurn lets one of these tests at a time have its database cluster, Patroni
// or Galera (galerafailover_test.go): they run beside the package's other parallel
// tests, not beside each other (each is three database servers, HAProxy, etcd for
// Patroni, and three replicas on a 2-core machine).
var dbClusterTurn = make(chan struct{}, 1)

// onPatroni waits for its turn, then starts a Patroni cluster and a cluster of
// replicas on a fresh schema of it.
func onPatroni(t *testing.T) (*cluster, *pgcluster.Cluster) {
	return onPatroniVia(t, (*pgcluster.Cluster).DSN)
}

// onPatroniVia is onPatroni whose replicas reach the cluster at the DSN via gives:
// HAProxy's (DSN), or the three nodes' with target_session_attrs=read-write
// (MultiHostDSN).
func onPatroniVia(t *testing.T, via func(*pgcluster.Cluster) string) (*cluster, *pgcluster.Cluster) {
	t.Helper()
	t.Parallel()
	dbClusterTurn <- struct{}{}
	t.Cleanup(func() { <-dbClusterTurn }) // registered first: runs after the cluster's teardown
	pc := pgcluster.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn, drop, err := freshdb.CreatePostgresSchema(ctx, via(pc), servicetest.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		drop(ctx) // the cluster is torn down anyway
	})
	cfg := timings()
	cfg.SQLLease = true
	cfg.TTL = 3 * time.Second // a failover stalls writes for seconds: longer than the lease would hand it over for nothing
	cfg.OrphanAfter, cfg.DispatchTimeout = 10*time.Second, 10*time.Second
	return newClusterOn(t, cfg, dsn), pc
}

// TestDatabaseSwitchoverMidDrain: a planned Patroni switchover to the synchronous
// standby while three replicas drain 1,500 tasks.
func TestDatabaseSwitchoverMidDrain(t *testing.T) {
	drainThroughFailover(t, "switchover", (*pgcluster.Cluster).DSN, switchover)
}

// TestDatabaseSwitchoverMultiHostDSN: the switchover, the replicas reaching the
// cluster through pgx's multi-host DSN with target_session_attrs=read-write instead of
// HAProxy: the old primary, now a replica, keeps the connections it had.
func TestDatabaseSwitchoverMultiHostDSN(t *testing.T) {
	drainThroughFailover(t, "switchover, multi-host DSN", (*pgcluster.Cluster).MultiHostDSN, switchover)
}

// switchover switches the cluster over to its synchronous standby.
func switchover(ctx context.Context, pc *pgcluster.Cluster, old int) error {
	ms, err := pc.Members(ctx)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.Role == pgcluster.RoleSyncStandby {
			return pc.Switchover(ctx, m.Node)
		}
	}
	return errors.New("no synchronous standby to switch over to")
}

// TestDatabasePrimaryKilledMidDrain: kill -9 of the primary's PostgreSQL (postmaster
// and backends) and its Patroni while three replicas drain 1,500 tasks; Patroni
// promotes the synchronous standby once the leader key expires.
func TestDatabasePrimaryKilledMidDrain(t *testing.T) {
	drainThroughFailover(t, "kill -9 of the primary", (*pgcluster.Cluster).DSN, func(ctx context.Context, pc *pgcluster.Cluster, old int) error {
		_, err := pc.KillPrimary(ctx)
		return err
	})
}

// drainThroughFailover has three replicas drain 1,500 tasks on a Patroni cluster, and
// fail does what makes the database fail over (old: the primary's node) once a
// quarter of them ran. It logs the write stall (from the failure to a write through
// HAProxy committing) and the time to the first task run after it, checks that the
// fence epoch the new primary holds is at least the highest raised before, and ends
// with the whole history checked.
func drainThroughFailover(t *testing.T, what string, via func(*pgcluster.Cluster) string, fail func(ctx context.Context, pc *pgcluster.Cluster, old int) error) {
	if testing.Short() {
		t.Skip("spawns processes and a database cluster")
	}
	c, pc := onPatroniVia(t, via)
	l, n := c.drainUntilAQuarter()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	old, err := pc.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	failAt := time.Now()
	raised := c.highestEpoch() // before the failure: every epoch a replica leads with was raised first
	if err := fail(ctx, pc, old); err != nil {
		t.Fatal(err)
	}
	now, err := pc.WaitPrimary(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	writable := time.Since(failAt)
	waitUntil(t, 60*time.Second, "a task runs after the failover", func() bool { return c.runs(failAt.Add(writable)) > 0 })
	firstRun := c.firstRunAfter(failAt.Add(writable)).Sub(failAt)
	t.Logf("%s, node%d → node%d: writable through HAProxy %v after it, the first task run since then %v after it",
		what, old, now, writable.Round(time.Millisecond), firstRun.Round(time.Millisecond))

	c.checkAfterFailover(ctx, l, n, raised)
}

// checkAfterFailover checks, once a failover is over, that the fence epoch the store
// holds is at least raised, the highest raised before it (issue 37, 3(d)); then waits
// until l's n tasks are settled and checks their whole history, every one SUCCEEDED.
func (c *cluster) checkAfterFailover(ctx context.Context, l *load, n int, raised int64) {
	c.t.Helper()
	lease, err := c.st.Lease(ctx, store.DefaultNamespace)
	if err != nil {
		c.t.Fatal(err)
	}
	if lease.Epoch < raised {
		c.t.Errorf("the fence epoch after the failover is %d, below %d, raised before it", lease.Epoch, raised)
	}
	c.waitSettled(l, 2*time.Minute)
	sum := c.verify(l)
	if got := sum.ByStatus[store.Succeeded]; got != n {
		c.t.Errorf("%d of %d tasks SUCCEEDED, want all", got, n)
	}
}

// drainUntilAQuarter starts three replicas, waits for a leader, inserts 1,500 tasks due
// over the next 20 s and returns once a quarter of them ran: when a failover scenario
// fails the database, with tasks due before, during and after the failure.
func (c *cluster) drainUntilAQuarter() (l *load, n int) {
	c.t.Helper()
	c.start(3)
	leader, epoch := c.waitLeader(30 * time.Second)
	c.t.Logf("%s leads with epoch %d", leader.Node(), epoch)
	n = 1500
	l = insertSpread(c.t, c.st, n, 2*time.Second, 20*time.Second)
	begin := time.Now()
	waitUntil(c.t, 60*time.Second, "a quarter of the tasks ran", func() bool { return c.runs(begin.Add(-time.Minute)) >= n/4 })
	return l, n
}

// insertSpread inserts n tasks at once, due uniformly over [ahead, ahead+over) from
// the store's now, and returns them as a load already written: a drain that goes on
// for over, so that a failure in the middle of it finds tasks due before, during and
// after it.
func insertSpread(t *testing.T, st store.Store, n int, ahead, over time.Duration) *load {
	t.Helper()
	ctx := context.Background()
	now, err := st.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	retries := []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}
	tasks := make([]store.NewTask, n)
	for i := range tasks {
		tasks[i] = store.NewTask{Name: clustertest.TaskName, Key: fmt.Sprintf("task-%04d", i),
			DueAt: now.Add(ahead + time.Duration(i)*over/time.Duration(n)), MaxRetry: len(retries), Backoff: retries}
	}
	l := &load{due: map[int64]time.Time{}, done: make(chan struct{})}
	close(l.done)
	res, err := st.Insert(ctx, tasks)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("insert task %d: %v", i, r.Err)
		}
		l.due[r.Task.ID] = tasks[i].DueAt
	}
	return l
}

// highestEpoch is the highest epoch any child has printed it leads with.
func (c *cluster) highestEpoch() int64 {
	var top int64
	for _, ch := range c.all() {
		for _, l := range ch.Lines() {
			top = max(top, l.Epoch())
		}
	}
	return top
}

// runs counts the handler starts of every child after after.
func (c *cluster) runs(after time.Time) int {
	n := 0
	for _, ch := range c.all() {
		n += len(c.starts(ch, after))
	}
	return n
}

// firstRunAfter is the first handler start of any child after after.
func (c *cluster) firstRunAfter(after time.Time) time.Time {
	var first time.Time
	for _, ch := range c.all() {
		for _, e := range c.starts(ch, after) {
			if first.IsZero() || e.At.Before(first) {
				first = e.At
			}
		}
	}
	return first
}
