package ax_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/axsched/ax"
)

// A handler that writes its effect and completes its task in its own transaction on
// every SQL store: the task is SUCCEEDED by the commit, with its execution, and the
// scheduler records nothing more (no result reported discarded). A completion of an
// execution that is not the task's current one is ErrNotCurrent, and the handler
// rolls its effect back.
func TestCompleteTxCommitsTheEffectWithTheTask(t *testing.T) {
	t.Parallel()
	for name, open := range txStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, begin := open(t)
			logs := &logCapture{}
			s := newScheduler(t, st, func(c *ax.Config) { c.Logger = slog.New(logs) })
			completeErrs := make(chan error, 2)
			s.HandleFunc("order.close", func(ctx context.Context, task *ax.Task) error {
				tx := begin(ctx)
				if err := tx.exec(ctx, fmt.Sprintf(`INSERT INTO orders VALUES ('%s', 'closed')`, task.Key)); err != nil {
					tx.rollback()
					return err
				}
				done := *task
				if task.Key == "stale" { // as if recovery had run the task again meanwhile
					done.ExecutionID = "01900000-0000-7000-8000-000000000000"
				}
				err := s.CompleteTx(ctx, tx.handle, &done)
				completeErrs <- err
				if err != nil {
					tx.rollback()
					return err
				}
				return tx.commit()
			}, ax.WithMaxRetry(0))
			start(t, s)
			ctx := context.Background()
			closed, err := s.Delay(ctx, "order.close", "42", 0)
			if err != nil {
				t.Fatal(err)
			}
			got := waitStatus(t, s, closed.ID, ax.Succeeded, 10*time.Second)
			if err := <-completeErrs; err != nil {
				t.Fatalf("CompleteTx: %v", err)
			}
			execs, err := s.Executions(ctx, closed.ID)
			if err != nil || len(execs) != 1 || execs[0].Status != ax.Succeeded || execs[0].ID != got.ExecutionID || execs[0].FinishedAt.IsZero() {
				t.Errorf("executions = %+v, %v; want the one SUCCEEDED", execs, err)
			}
			stale, err := s.Delay(ctx, "order.close", "stale", 0)
			if err != nil {
				t.Fatal(err)
			}
			waitStatus(t, s, stale.ID, ax.Failed, 10*time.Second)
			if err := <-completeErrs; !errors.Is(err, ax.ErrNotCurrent) {
				t.Errorf("CompleteTx of a stale execution = %v, want ErrNotCurrent", err)
			}
			// The stale effect was rolled back: its order's key is free.
			check := begin(ctx)
			if err := check.exec(ctx, `INSERT INTO orders VALUES ('stale', 'check')`); err != nil {
				t.Errorf("the stale execution's effect was committed: %v", err)
			}
			check.rollback()
			if err := s.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			if found := logs.matching(slog.LevelWarn, "result discarded"); len(found) != 0 {
				t.Errorf("the scheduler reported the completed result discarded: %v", found)
			}
		})
	}
}
