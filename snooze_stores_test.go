package ax

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// On every real database, a snoozed task runs again after its snooze with its
// Attempt unchanged and the snooze recorded, and a permanent error fails its task at
// the first attempt with retries left.
func TestSnoozeAndPermanentRealStores(t *testing.T) {
	t.Parallel()
	for name, open := range realStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := open(t)
			ctx := context.Background()
			s, err := New(Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			const snooze = 300 * time.Millisecond
			var polls atomic.Int32
			s.HandleFunc("poll", func(context.Context, *Task) error {
				if polls.Add(1) == 1 {
					return Snooze(snooze)
				}
				return nil
			}, WithMaxRetry(0))
			s.HandleFunc("charge", func(context.Context, *Task) error {
				return Permanent(errors.New("account deleted"))
			}, WithMaxRetry(5))
			if err := s.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer s.Stop(ctx)
			poll, err := s.Delay(ctx, "poll", "p", 0)
			if err != nil {
				t.Fatal(err)
			}
			charge, err := s.Delay(ctx, "charge", "c", 0)
			if err != nil {
				t.Fatal(err)
			}
			got := waitFor(t, st, poll.ID, Succeeded, 10*time.Second)
			if got.Attempt != 0 || got.Snoozes != 1 {
				t.Errorf("poll: attempt %d snoozes %d, want 0 and 1", got.Attempt, got.Snoozes)
			}
			execs, err := s.Executions(ctx, poll.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(execs) != 2 || execs[0].Status != Snoozed || execs[1].Status != Succeeded {
				t.Fatalf("poll executions = %+v, want SNOOZED then SUCCEEDED", execs)
			}
			// The snooze counts from the handler's return, after the first run
			// started (both by the store's clock, up to the scheduler's measurement of
			// it), and the second run started no earlier than that.
			if gap := execs[1].DueAt.Sub(execs[0].StartedAt); gap < snooze-10*time.Millisecond {
				t.Errorf("snoozed to %v after the first run started, want at least %v", gap, snooze)
			}
			if early := execs[1].DueAt.Sub(execs[1].StartedAt); early > 0 {
				t.Errorf("second run started %v before its due time", early)
			}
			failed := waitFor(t, st, charge.ID, Failed, 10*time.Second)
			if failed.Attempt != 0 || failed.LastError != "permanent, not retried: account deleted" {
				t.Errorf("charge: attempt %d last error %q, want 0 and the permanent error", failed.Attempt, failed.LastError)
			}
			if execs, err := s.Executions(ctx, charge.ID); err != nil || len(execs) != 1 {
				t.Errorf("charge executions = %d, %v; want one", len(execs), err)
			}
		})
	}
}
