//go:build linux

package clustertest_test

// This scenario found a defect (issue 37, point 3(c)). In a run on 2026-12-07 the
// replica wired to the zombie claimed task 993 on it at 05:26:59 (the commit waiting
// for a standby that would never acknowledge it); Patroni, resumed, restarted the
// zombie as a replica, ending that session without an answer; the executor's
// ClaimFailed path read the task back — from the zombie, now a read-only replica that
// still held its local, never-replicated commit — found it RUNNING under its own
// execution id and ran the handler at 05:27:07, after the new leader had run the task
// and it had succeeded. Now a task read back after an ambiguous claim or start runs
// only once a heartbeat of its execution, a write, confirms it (execute.confirm).

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/axsched/ax/internal/clustertest"
	"github.com/axsched/ax/store"
)

// TestDatabaseZombiePrimaryMidDrain: the leading replica reaches the primary's
// PostgreSQL straight, not through HAProxy; the primary's Patroni is paused (SIGSTOP)
// while its PostgreSQL keeps serving that replica — a zombie primary. Patroni promotes
// the synchronous standby once the leader key expires; with synchronous_mode_strict
// the zombie commits nothing more, since no standby acknowledges it, so the replica
// wired to it stalls (it loses its lease, its handlers self-fence) while the others
// take over through HAProxy. Then Patroni resumes, and demotes it.
func TestDatabaseZombiePrimaryMidDrain(t *testing.T) {
	zombieMidDrain(t, true)
}

// TestDatabaseZombiePrimaryAsync is the same scenario with synchronous replication
// off, to show what it loses: the zombie goes on committing what the wired replica
// asks, alone, and all of it is rewound away when Patroni demotes it. It reports what
// the history check finds instead of failing on it, and runs only on request
// (AX_ZOMBIE_ASYNC=1): it is a measurement, recorded in the README, not a guarantee.
func TestDatabaseZombiePrimaryAsync(t *testing.T) {
	if os.Getenv("AX_ZOMBIE_ASYNC") != "1" {
		t.Skip("a measurement of asynchronous replication's losses: set AX_ZOMBIE_ASYNC=1 to run it")
	}
	zombieMidDrain(t, false)
}

func zombieMidDrain(t *testing.T, synchronous bool) {
	if testing.Short() {
		t.Skip("spawns processes and a database cluster")
	}
	c, pc := onPatroni(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if !synchronous {
		if err := pc.SetSynchronous(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
	old, err := pc.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	direct := viaProxy(t, c.dsn, fmt.Sprintf("127.0.0.1:%d", pc.PGPorts[old]))
	wired := c.spawnWith(func(cfg *clustertest.ChildConfig) { cfg.PostgresDSN = direct })
	c.ready(wired)
	leader, epoch := c.waitLeader(30 * time.Second)
	if leader != wired {
		t.Fatalf("%s leads, want %s, the first started", leader.Node(), wired.Node())
	}
	c.start(2)
	t.Logf("%s leads with epoch %d, wired straight to node%d, the primary (synchronous replication: %v)", leader.Node(), epoch, old, synchronous)

	const n = 1500
	l := insertSpread(t, c.st, n, 2*time.Second, 20*time.Second)
	begin := time.Now()
	waitUntil(t, 60*time.Second, "a quarter of the tasks ran", func() bool { return c.runs(begin.Add(-time.Minute)) >= n/4 })

	failAt := time.Now()
	raised := c.highestEpoch()
	if err := pc.PausePatroni(old); err != nil {
		t.Fatal(err)
	}
	now, err := pc.WaitPrimary(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	writable := time.Since(failAt)
	next, lead := c.waitNewLeader(wired, epoch, time.Minute)
	waitUntil(t, time.Minute, "a task runs after the failover", func() bool { return c.runs(failAt.Add(writable)) > 0 })
	t.Logf("node%d's Patroni paused: node%d writable through HAProxy %v after, %s leads with epoch %d %v after, the first task run since %v after",
		old, now, writable.Round(time.Millisecond), next.Node(), lead.Epoch(), lead.Stamp().Sub(failAt).Round(time.Millisecond),
		c.firstRunAfter(failAt.Add(writable)).Sub(failAt).Round(time.Millisecond))

	// The zombie, still running, still primary in its own eyes, serving the wired
	// replica: with synchronous replication nothing it was asked since the promotion
	// may have committed anywhere; without, it commits alone.
	waitUntil(t, time.Minute, "half the tasks ran", func() bool { return c.runs(begin.Add(-time.Minute)) >= n/2 })
	// Patroni resumes: it finds another node leading and demotes its PostgreSQL, whose
	// sessions end (the wired replica's commits waiting for a standby end in errors:
	// outcomes unknown). The history is checked whether or not the node has rejoined
	// by then: that takes a rewind, and long on a loaded machine.
	if err := pc.ResumePatroni(old); err != nil {
		t.Fatal(err)
	}
	if synchronous {
		c.checkAfterFailover(ctx, l, n, raised)
		return
	}
	lease, err := c.st.Lease(ctx, store.DefaultNamespace)
	if err != nil {
		t.Fatal(err)
	}
	c.waitSettled(l, 2*time.Minute)
	found := &recorder{TB: t} // reports what Verify finds instead of failing
	sum := clustertest.Verify(found, c.history(l))
	byRule := map[string]int{}
	for _, e := range found.errs {
		t.Log(e)
		if m := ruleRE.FindStringSubmatch(e); m != nil {
			byRule[m[1]]++
		}
	}
	t.Logf("asynchronous replication, the zombie demoted: the fence epoch on the new primary %d (raised before: %d); history: %v; violations by rule (the first %d of each counted): %v",
		lease.Epoch, raised, sum, maxShown, byRule)
}

// maxShown is how many violations of one rule Verify reports one by one.
const maxShown = 20
