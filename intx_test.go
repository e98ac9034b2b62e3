package ax_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store/memory"
)

// Every action InTx offers commits or rolls back with the transaction, audit record
// included, on every SQL store; the scheduler that runs the tasks learns of the
// committed ones.
func TestInTxCommitsOrRollsBackTogether(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"sqlite", "postgres/pgx.Tx", "mysql"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, _ := txStores[name](t)
			runner := newScheduler(t, st, func(c *ax.Config) { c.RefillInterval = 200 * time.Millisecond })
			rec := newRecorder()
			var failedOnce atomic.Bool
			rec.err = func(task *ax.Task) error {
				if task.Key == "failed" && !failedOnce.Swap(true) {
					return errors.New("down")
				}
				return nil
			}
			runner.Handle("job", rec, ax.WithMaxRetry(0))
			runner.Handle("report", rec)
			if err := runner.Cron("report", "0 3 * * *"); err != nil {
				t.Fatal(err)
			}
			start(t, runner)
			s := newScheduler(t, st, nil) // an operations node: not started
			ctx := context.Background()
			failed, err := runner.Delay(ctx, "job", "failed", 0)
			if err != nil {
				t.Fatal(err)
			}
			waitStatus(t, runner, failed.ID, ax.Failed, 10*time.Second)
			moved, err := s.Delay(ctx, "job", "moved", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			cancelled, err := s.Delay(ctx, "job", "cancelled", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			at := time.Now().Add(300 * time.Millisecond)
			act := func(ctx context.Context, tx any) error {
				in := ax.WithTx(tx)
				if _, err := s.Reschedule(ctx, "job", "moved", at, in); err != nil {
					return err
				}
				if _, err := s.Retry(ctx, failed.ID, in); err != nil {
					return err
				}
				if err := s.Cancel(ctx, "job", "cancelled", in); err != nil {
					return err
				}
				if err := s.PauseSchedule(ctx, "report", in); err != nil {
					return err
				}
				if _, err := s.Audit(ctx, ax.AuditRecord{Actor: "tester", Action: "test.batch", Result: "ok"}, in); err != nil {
					return err
				}
				if got, err := s.Get(ctx, cancelled.ID, in); err != nil || got.Status != ax.Cancelled {
					t.Errorf("Get in the transaction: %+v, %v; want its own change, CANCELLED", got, err)
				}
				return nil
			}
			boom := errors.New("boom")
			if err := s.InTx(ctx, func(ctx context.Context, tx any) error {
				if err := act(ctx, tx); err != nil {
					return err
				}
				return boom
			}); !errors.Is(err, boom) {
				t.Fatalf("InTx = %v, want fn's error", err)
			}
			check := func(when string, id int64, want ax.Status, due time.Time) {
				t.Helper()
				got, err := s.Get(ctx, id)
				if err != nil || got.Status != want || !due.IsZero() && !got.DueAt.Equal(due.UTC().Truncate(time.Microsecond)) {
					t.Errorf("%s: task %d = %+v, %v; want %s due %v", when, id, got, err, want, due)
				}
			}
			check("rolled back", moved.ID, ax.Scheduled, moved.DueAt)
			check("rolled back", failed.ID, ax.Failed, time.Time{})
			check("rolled back", cancelled.ID, ax.Scheduled, time.Time{})
			if scheds, err := s.Schedules(ctx); err != nil || len(scheds) != 1 || scheds[0].Paused {
				t.Errorf("rolled back: schedules %+v, %v; want report, not paused", scheds, err)
			}
			if log, err := s.AuditLog(ctx, ax.AuditQuery{Limit: 10}); err != nil || len(log) != 0 {
				t.Errorf("rolled back: audit log %+v, %v; want empty", log, err)
			}

			if err := s.InTx(ctx, act); err != nil {
				t.Fatalf("InTx: %v", err)
			}
			check("committed", cancelled.ID, ax.Cancelled, time.Time{})
			if scheds, err := s.Schedules(ctx); err != nil || len(scheds) != 1 || !scheds[0].Paused {
				t.Errorf("committed: schedules %+v, %v; want report, paused", scheds, err)
			}
			if log, err := s.AuditLog(ctx, ax.AuditQuery{Limit: 10}); err != nil || len(log) != 1 || log[0].Action != "test.batch" {
				t.Errorf("committed: audit log %+v, %v; want the one record", log, err)
			}
			waitStatus(t, runner, failed.ID, ax.Succeeded, 10*time.Second)
			waitStatus(t, runner, moved.ID, ax.Succeeded, 10*time.Second)
			if runs := rec.runs("moved"); len(runs) != 1 || runs[0].Before(at) {
				t.Errorf("the rescheduled task ran at %v, want once, at or after %v", runs, at)
			}
			if runs := rec.runs("cancelled"); len(runs) != 0 {
				t.Errorf("the cancelled task ran %d times", len(runs))
			}
		})
	}
}

// Trigger in InTx, on the scheduler that runs the task's handler, claims the task in
// the transaction — its execution id is readable there — and dispatches it after the
// commit; rolled back, nothing runs.
func TestTriggerInTx(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"sqlite", "postgres/pgx.Tx", "mysql"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, _ := txStores[name](t)
			claims := new(manualClaims)
			s := newScheduler(t, st, func(c *ax.Config) { c.Observer = claims })
			rec := newRecorder()
			s.Handle("job", rec)
			start(t, s)
			ctx := context.Background()
			task, err := s.Delay(ctx, "job", "later", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			trigger := func(commit bool) string {
				var execID string
				err := s.InTx(ctx, func(ctx context.Context, tx any) error {
					if err := s.Trigger(ctx, task.ID, ax.WithTx(tx)); err != nil {
						return err
					}
					got, err := s.Get(ctx, task.ID, ax.WithTx(tx))
					if err != nil {
						return err
					}
					if got.Status != ax.Dispatching || got.ExecutionID == "" || got.TriggeredAt.IsZero() {
						t.Errorf("in the transaction the task is %+v, want DISPATCHING with an execution id, triggered", got)
					}
					execID = got.ExecutionID
					if !commit {
						return errRolledBack
					}
					return nil
				})
				if commit && err != nil || !commit && !errors.Is(err, errRolledBack) {
					t.Fatalf("InTx(commit %v) = %v", commit, err)
				}
				return execID
			}
			trigger(false)
			witness, err := s.Delay(ctx, "job", "witness", 0) // past it, the rolled-back trigger would have run
			if err != nil {
				t.Fatal(err)
			}
			waitStatus(t, s, witness.ID, ax.Succeeded, 10*time.Second)
			if got, err := s.Get(ctx, task.ID); err != nil || got.Status != ax.Scheduled || len(rec.runs("later")) != 0 || claims.n.Load() != 0 {
				t.Fatalf("after the rollback: %+v, %v, %d runs, %d manual claims; want SCHEDULED, neither claimed nor run",
					got, err, len(rec.runs("later")), claims.n.Load())
			}
			execID := trigger(true)
			waitStatus(t, s, task.ID, ax.Succeeded, 10*time.Second)
			execs, err := s.Executions(ctx, task.ID)
			if err != nil || len(execs) != 1 || execs[0].ID != execID {
				t.Errorf("executions %+v, %v; want one, %s", execs, err, execID)
			}
			rec.mu.Lock()
			runs := rec.execs[execID]
			rec.mu.Unlock()
			if runs != 1 || claims.n.Load() != 1 {
				t.Errorf("execution %s ran %d times after %d manual claims, want once after one", execID, runs, claims.n.Load())
			}
		})
	}
}

var errRolledBack = errors.New("rolled back on purpose")

// manualClaims counts the claims of a Trigger.
type manualClaims struct{ n atomic.Int64 }

func (m *manualClaims) Observe(e ax.Event) {
	if e.Kind == ax.EventClaimed && e.Manual {
		m.n.Add(1)
	}
}

// A store without transactions cannot run InTx.
func TestInTxUnsupported(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, memory.New(), nil)
	called := false
	err := s.InTx(context.Background(), func(context.Context, any) error { called = true; return nil })
	if !errors.Is(err, ax.ErrUnsupported) || called {
		t.Errorf("InTx on the memory store = %v (fn called: %v), want ErrUnsupported without calling fn", err, called)
	}
}

// A scheduler's call given another scheduler's InTx transaction binds it itself: on
// another database it is refused, and nothing is written to either.
func TestInTxOfAnotherScheduler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s1, s2 := newScheduler(t, openSQLite(t), nil), newScheduler(t, openSQLite(t), nil)
	err := s1.InTx(ctx, func(ctx context.Context, tx any) error {
		_, err := s2.Delay(ctx, "order.close", "o-1", time.Hour, ax.WithTx(tx))
		return err
	})
	if !errors.Is(err, ax.ErrInvalid) {
		t.Fatalf("s2.Delay in s1's InTx on another database = %v, want ErrInvalid", err)
	}
	for i, s := range []*ax.Scheduler{s1, s2} {
		if _, err := s.Lookup(ctx, "order.close", "o-1"); !errors.Is(err, ax.ErrNotFound) {
			t.Errorf("scheduler %d: Lookup = %v, want ErrNotFound: nothing written", i+1, err)
		}
	}
}
