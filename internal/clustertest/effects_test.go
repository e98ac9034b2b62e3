//go:build linux

package clustertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/internal/clustertest"
	"github.com/axsched/ax/store"
)

// TestEffectsCommitWithTheirTask: handlers write their effect, a row of
// clustertest.EffectsTable, and complete their task in one transaction on the
// store's database (Scheduler.CompleteTx), with half of their work after their last
// check of their context — the window no context can close. Three replicas under a
// stream of tasks; the leader, which runs them, is paused (SIGSTOP) past OrphanAfter
// twice, so that its executions are recovered and run again elsewhere while its
// handlers sit in that window, then thawed. Every task succeeds, and the effects
// table holds exactly one effect per task: its succeeded execution's, never one of an
// execution that was run again. The whole history passes Verify.
func TestEffectsCommitWithTheirTask(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	cfg := timings()
	cfg.HandlerDuration, cfg.EffectTx, cfg.CompleteTx = 300*time.Millisecond, true, true
	cfg.Concurrency = 8 // and 10 connections of each replica's own pool
	c := newCluster(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := clustertest.CreateEffects(ctx, c.st.(store.Transactor)); err != nil {
		t.Fatal(err)
	}
	c.start(3)
	leader, epoch := c.waitLeader(20 * time.Second)
	l := startLoad(t, c.st, 400, 2, 100*time.Millisecond, 300*time.Millisecond)
	for range 2 {
		waitUntil(t, 20*time.Second, leader.Node()+" runs 4 tasks at once", func() bool { return len(c.inFlight(leader)) >= 4 })
		stoppedAt, err := leader.Stop()
		if err != nil {
			t.Fatal(err)
		}
		next, lead := c.waitNewLeader(leader, epoch, 10*time.Second)
		// Past OrphanAfter, so that the paused leader's executions are recovered and
		// run again by the new one.
		sleepUntil(stoppedAt.Add(cfg.OrphanAfter + 1500*time.Millisecond))
		contAt, err := leader.Cont()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s paused %v while running; %s leads with epoch %d", leader.Node(), contAt.Sub(stoppedAt).Round(time.Millisecond), next.Node(), lead.Epoch())
		leader, epoch = next, lead.Epoch()
	}
	c.waitSettled(l, 60*time.Second)
	sum := c.verify(l)
	allSucceeded(t, sum)

	// The effects: one per task, its succeeded execution's.
	h := c.collect(l.dues())
	effects := map[int64][]string{} // task id → execution ids with an effect
	err := c.st.(store.Transactor).InTx(ctx, func(tx store.Tx) error {
		rows, err := rawTx(tx).Query(ctx, `SELECT task_id, execution_id FROM `+clustertest.EffectsTable)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var eid string
			if err := rows.Scan(&id, &eid); err != nil {
				return err
			}
			effects[id] = append(effects[id], eid)
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	rerun := 0
	for _, tr := range h.Tasks {
		if len(tr.Executions) > 1 {
			rerun++
		}
		got := effects[tr.Task.ID]
		if len(got) != 1 || got[0] != tr.Task.ExecutionID {
			t.Errorf("task %d (%s with execution %s, %d executions): effects of %v, want exactly its succeeded execution's",
				tr.Task.ID, tr.Task.Status, tr.Task.ExecutionID, len(tr.Executions), got)
		}
	}
	t.Logf("%d tasks, %d run more than once (%d orphaned executions): one effect each", len(h.Tasks), rerun, sum.Orphaned)
	if sum.Orphaned == 0 {
		t.Errorf("no execution was orphaned: the pauses tested nothing")
	}
}

// rawTx is the pgx transaction a PostgreSQL store's view is bound to.
func rawTx(tx store.Tx) pgx.Tx { return tx.Raw().(pgx.Tx) }
