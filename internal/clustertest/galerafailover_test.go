//go:build linux

package clustertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/axsched/ax/internal/galeracluster"
)

// The writer node of a MariaDB Galera cluster fails under a drain: three replicas
// elected by the SQL lease on the MySQL store, reached through HAProxy, which sends
// every connection to node0 while node0 is Synced in a primary component, else to
// node1 (deploy/galera/README.md). Each scenario ends with the whole history checked
// (Verify), as the Patroni scenarios do (dbfailover_test.go).

// onGalera waits for its turn (one database cluster at a time, Patroni's included),
// then starts a Galera cluster and a cluster of replicas on a fresh database of it,
// reached through HAProxy.
func onGalera(t *testing.T) (*cluster, *galeracluster.Cluster) {
	t.Helper()
	t.Parallel()
	dbClusterTurn <- struct{}{}
	t.Cleanup(func() { <-dbClusterTurn }) // registered first: runs after the cluster's teardown
	gc := galeracluster.Start(t)
	name := gc.FreshDatabase(t)
	cfg := timings()
	cfg.SQLLease = true
	cfg.TTL = 3 * time.Second // a failover stalls writes for seconds: longer than the lease would hand it over for nothing
	cfg.OrphanAfter, cfg.DispatchTimeout = 10*time.Second, 10*time.Second
	return newClusterOnMySQL(t, cfg, gc.ProxyDSN(name)), gc
}

// TestDatabaseGaleraWriterKilledMidDrain: kill -9 of node0's mariadbd, the node HAProxy
// sends every connection to, while three replicas drain 1,500 tasks. node1 and node2,
// a majority, go on as the primary component once they have evicted it; HAProxy,
// whose check of node0 fails, passes to node1.
func TestDatabaseGaleraWriterKilledMidDrain(t *testing.T) {
	drainThroughGaleraFailure(t, "kill -9 of the writer node", func(ctx context.Context, gc *galeracluster.Cluster) error {
		gc.Kill(t, 0)
		return nil
	}, false)
}

// TestDatabaseGaleraWriterLosesQuorumMidDrain: node0, the writer, is cut off the
// others' group communication (gmcast.isolate) while three replicas drain 1,500 tasks.
// Alone it has no quorum: non-Primary, it answers every statement with ERROR 1047,
// which the store takes for "began nothing" (it retries on a new connection and drops
// its idle ones); node1 and node2 go on as the primary component, and HAProxy, whose
// check wants Synced and Primary, marks node0 down, cuts its sessions and passes to
// node1. Once a task ran after that, node0 joins again, and HAProxy passes back to it
// and cuts node1's sessions, still mid-drain.
func TestDatabaseGaleraWriterLosesQuorumMidDrain(t *testing.T) {
	drainThroughGaleraFailure(t, "the writer node isolated", func(ctx context.Context, gc *galeracluster.Cluster) error {
		return gc.Isolate(ctx, 0, true)
	}, true)
}

// drainThroughGaleraFailure has three replicas drain 1,500 tasks on a Galera cluster
// through HAProxy, and fail does what makes node0, the writer, fail once a quarter of
// them ran. It logs the write stall (from the failure to a write through HAProxy
// committing on another node) and the time to the first task run after it; with
// rejoin, it then joins node0 again (gmcast.isolate=0) and logs the same once HAProxy
// is back on node0. It checks that the fence epoch the store holds after is at least
// the highest raised before, and ends with the whole history checked.
func drainThroughGaleraFailure(t *testing.T, what string, fail func(ctx context.Context, gc *galeracluster.Cluster) error, rejoin bool) {
	if testing.Short() {
		t.Skip("spawns processes and a database cluster")
	}
	c, gc := onGalera(t)
	l, n := c.drainUntilAQuarter()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if i, err := gc.Writable(ctx); err != nil || i != 0 {
		t.Fatalf("before the failure a write through HAProxy committed on node%d, %v; want node0", i, err)
	}
	failAt := time.Now()
	raised := c.highestEpoch() // before the failure: every epoch a replica leads with was raised first
	if err := fail(ctx, gc); err != nil {
		t.Fatal(err)
	}
	waitMoved(t, ctx, c, gc, what, galeracluster.Not(0), failAt)

	if rejoin {
		rejoinAt := time.Now()
		if err := gc.Isolate(ctx, 0, false); err != nil {
			t.Fatal(err)
		}
		waitMoved(t, ctx, c, gc, "node0 joined again", galeracluster.On(0), rejoinAt)
	}

	c.checkAfterFailover(ctx, l, n, raised)
}

// waitMoved waits until a write through HAProxy commits on a node want accepts (it
// fails the test when ctx ends first), then until a task runs after that; it logs
// both times since at, when what happened.
func waitMoved(t *testing.T, ctx context.Context, c *cluster, gc *galeracluster.Cluster, what string, want func(int) bool, at time.Time) {
	t.Helper()
	now, err := gc.WaitWritable(ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	writable := time.Since(at)
	waitUntil(t, 60*time.Second, "a task runs after "+what, func() bool { return c.runs(at.Add(writable)) > 0 })
	firstRun := c.firstRunAfter(at.Add(writable)).Sub(at)
	t.Logf("%s: writable through HAProxy on node%d %v after it, the first task run since then %v after it",
		what, now, writable.Round(time.Millisecond), firstRun.Round(time.Millisecond))
}
