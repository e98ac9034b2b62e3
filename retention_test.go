package ax_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/memory"
)

// Retention deletes the finished tasks past their outcome's limits — by age, by
// rows —, with their executions, and reports how many; live tasks and the tasks
// within the limits stay.
func TestRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		events := &eventLog{}
		s := newScheduler(t, st, func(c *ax.Config) {
			c.Observer = events
			c.Retention = ax.Retention{
				Succeeded: ax.Keep{For: time.Hour},
				Failed:    ax.Keep{For: ax.KeepForever, Rows: 1},
				Interval:  time.Minute,
			}
		})
		rec := newRecorder()
		rec.err = func(task *ax.Task) error {
			if task.Name == "charge" {
				return errors.New("declined")
			}
			return nil
		}
		s.Handle("order.close", rec)
		s.Handle("charge", rec, ax.WithMaxRetry(0))
		start(t, s)
		defer s.Stop(context.Background())
		ctx := context.Background()

		done, err := s.Delay(ctx, "order.close", "o-1", 0)
		if err != nil {
			t.Fatal(err)
		}
		failed := make([]*ax.Task, 3)
		for i := range failed {
			if failed[i], err = s.Delay(ctx, "charge", []string{"c-1", "c-2", "c-3"}[i], time.Duration(i)*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		later, err := s.Delay(ctx, "order.close", "o-2", 3*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Minute)
		synctest.Wait()
		if got := mustGet(t, s, done.ID); got.Status != ax.Succeeded {
			t.Fatalf("o-1 is %s after 30 minutes, want SUCCEEDED and kept", got.Status)
		}
		// The two FAILED tasks beyond the newest one are gone already: Rows.
		for i, task := range failed {
			_, err := s.Get(ctx, task.ID)
			if kept := i == 2; kept != (err == nil) {
				t.Errorf("failed task %s: Get error %v; want it kept %t", task.Key, err, kept)
			}
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if _, err := s.Get(ctx, done.ID); !errors.Is(err, ax.ErrNotFound) {
			t.Errorf("o-1 an hour and a half after it finished: %v, want ErrNotFound", err)
		}
		if _, err := s.Executions(ctx, done.ID); !errors.Is(err, ax.ErrNotFound) {
			t.Errorf("o-1's executions: %v, want ErrNotFound", err)
		}
		if got := mustGet(t, s, later.ID); got.Status != ax.Scheduled {
			t.Errorf("the waiting task is %s, want SCHEDULED and kept", got.Status)
		}
		pruned := map[string]int{}
		events.mu.Lock()
		for _, e := range events.events {
			if e.Kind == ax.EventPruned {
				pruned[e.Reason] += e.Count
			}
		}
		events.mu.Unlock()
		if pruned["succeeded"] != 1 || pruned["failed"] != 2 || len(pruned) != 2 {
			t.Errorf("EventPruned counts %v, want succeeded 1, failed 2", pruned)
		}
	})
}

// Retention.Off keeps everything; bad limits are ErrInvalid from New.
func TestRetentionOffAndInvalid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		s := newScheduler(t, st, func(c *ax.Config) { c.Retention = ax.Retention{Off: true, Succeeded: ax.Keep{For: time.Minute}} })
		s.Handle("order.close", newRecorder())
		start(t, s)
		defer s.Stop(context.Background())
		task, err := s.Delay(context.Background(), "order.close", "o-1", 0)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := mustGet(t, s, task.ID); got.Status != ax.Succeeded {
			t.Errorf("with retention off: %s, want SUCCEEDED and kept", got.Status)
		}
	})
	for _, r := range []ax.Retention{
		{Succeeded: ax.Keep{For: -time.Hour}},
		{Failed: ax.Keep{Rows: -1}},
		{Interval: -time.Second},
	} {
		if _, err := ax.New(ax.Config{Store: memory.New(), Retention: r}); !errors.Is(err, ax.ErrInvalid) {
			t.Errorf("New with Retention %+v: %v, want ErrInvalid", r, err)
		}
	}
}

// Audit records go after Retention.Audit, with the finished tasks' rounds.
func TestRetentionOfTheAuditLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		s := newScheduler(t, st, func(c *ax.Config) { c.Retention = ax.Retention{Audit: time.Hour, Interval: time.Minute} })
		start(t, s)
		defer s.Stop(context.Background())
		ctx := context.Background()
		old, err := s.Audit(ctx, ax.AuditRecord{Actor: "alice", Action: "task.cancel", Result: "ok"})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Minute)
		recent, err := s.Audit(ctx, ax.AuditRecord{Actor: "alice", Action: "task.retry", Result: "ok"})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Minute) // old is 70 minutes old, recent 20
		synctest.Wait()
		log, err := s.AuditLog(ctx, ax.AuditQuery{Limit: 10})
		if err != nil || len(log) != 1 || log[0].ID != recent.ID {
			t.Errorf("audit log after 70 minutes = %+v, %v; want only record %d (record %d pruned)", log, err, recent.ID, old.ID)
		}
	})
}

// Per-minute statistics go after Retention.Stats (48 hours by default), with the
// finished tasks' rounds.
func TestRetentionOfTheStatistics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		s := newScheduler(t, st, func(c *ax.Config) { c.Retention = ax.Retention{Interval: time.Minute} })
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Minute)
		if err := st.WriteStats(ctx, []store.MinuteStats{
			{Node: "a", Minute: now.Add(-49 * time.Hour), Succeeded: 1},
			{Node: "a", Minute: now.Add(-47 * time.Hour), Succeeded: 2},
		}); err != nil {
			t.Fatal(err)
		}
		start(t, s)
		defer s.Stop(context.Background())
		time.Sleep(time.Minute)
		synctest.Wait()
		rows, err := st.Stats(ctx, now.Add(-72*time.Hour))
		if err != nil || len(rows) != 1 || rows[0].Succeeded != 2 {
			t.Errorf("statistics after a round = %+v, %v; want only the row of 47 hours ago", rows, err)
		}
	})
}
