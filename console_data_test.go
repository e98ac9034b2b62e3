package ax_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store/memory"
)

// Each attempt keeps its task's due time and its claim: Lateness is StartedAt −
// DueAt, and a business retry's attempt has the retry's due time.
func TestExecutionsKeepDueAndClaimTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		s := newScheduler(t, st, nil)
		runs := 0
		s.HandleFunc("job", func(ctx context.Context, task *ax.Task) error {
			runs++
			if runs == 1 {
				return errors.New("once more")
			}
			return nil
		}, ax.WithBackoff(func(int) time.Duration { return time.Minute }))
		start(t, s)
		defer s.Stop(context.Background())
		ctx := context.Background()
		task, err := s.Delay(ctx, "job", "k", 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(15 * time.Minute)
		synctest.Wait()
		execs, err := s.Executions(ctx, task.ID)
		if err != nil || len(execs) != 2 {
			t.Fatalf("Executions = %+v, %v; want two attempts", execs, err)
		}
		if !execs[0].DueAt.Equal(task.DueAt) {
			t.Errorf("first attempt: DueAt = %v, want the task's %v", execs[0].DueAt, task.DueAt)
		}
		if retryDue := execs[0].FinishedAt.Add(time.Minute); execs[1].DueAt.Sub(retryDue).Abs() > time.Second {
			t.Errorf("retry: DueAt = %v, want a minute after the first attempt failed (%v)", execs[1].DueAt, retryDue)
		}
		for i, x := range execs {
			if x.ClaimedAt.IsZero() || x.ClaimedAt.After(x.StartedAt) || x.ClaimedAt.Before(x.DueAt) {
				t.Errorf("attempt %d: ClaimedAt %v, want between DueAt %v and StartedAt %v", i, x.ClaimedAt, x.DueAt, x.StartedAt)
			}
			if got, want := x.Lateness(), x.StartedAt.Sub(x.DueAt); got != want || got < 0 {
				t.Errorf("attempt %d: Lateness() = %v, want StartedAt − DueAt = %v, not negative", i, got, want)
			}
		}
	})
	if l := (ax.Execution{StartedAt: time.Now()}).Lateness(); l != 0 {
		t.Errorf("Lateness of an attempt without a DueAt = %v, want 0", l)
	}
}

// Cluster shows each replica's offset to the store's clock: the store's minus the
// replica's, positive when the store is ahead.
func TestClusterShowsClockOffsets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New(memory.WithClockSkew(30 * time.Second))
		defer st.Close()
		s := newScheduler(t, st, func(c *ax.Config) { c.Node = "node-a" })
		start(t, s)
		defer s.Stop(context.Background())
		synctest.Wait()
		cs, err := s.Cluster(context.Background())
		if err != nil || len(cs.Nodes) != 1 {
			t.Fatalf("Cluster = %+v, %v; want this node", cs, err)
		}
		if got := cs.Nodes[0].ClockOffset; got != 30*time.Second {
			t.Errorf("ClockOffset = %v, want 30s (the store's clock is 30s ahead)", got)
		}
	})
}

// AuditLog filters by time, Since <= At < Until, and refuses bounds out of order.
func TestAuditLogByTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		s := newScheduler(t, st, nil)
		ctx := context.Background()
		var recs []*ax.AuditRecord
		for range 3 {
			r, err := s.Audit(ctx, ax.AuditRecord{Actor: "alice", Action: "task.cancel", Result: "ok"})
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, r)
			time.Sleep(10 * time.Minute)
		}
		log, err := s.AuditLog(ctx, ax.AuditQuery{Since: recs[1].At, Until: recs[2].At, Limit: 10})
		if err != nil || len(log) != 1 || log[0].ID != recs[1].ID {
			t.Errorf("AuditLog(since the second, until the third) = %+v, %v; want the second", log, err)
		}
		log, err = s.AuditLog(ctx, ax.AuditQuery{Since: recs[1].At, Limit: 10})
		if err != nil || len(log) != 2 || log[0].ID != recs[2].ID || log[1].ID != recs[1].ID {
			t.Errorf("AuditLog(since the second) = %+v, %v; want the third and the second, newest first", log, err)
		}
		if _, err := s.AuditLog(ctx, ax.AuditQuery{Since: recs[2].At, Until: recs[1].At, Limit: 10}); !errors.Is(err, ax.ErrInvalid) {
			t.Errorf("AuditLog(since after until) error = %v, want ErrInvalid", err)
		}
	})
}
