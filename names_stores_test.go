package ax

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"
)

// On every real database: a task of a paused name waits while a task of another name,
// due after it, runs; resumed, it runs.
func TestPauseNameRealStores(t *testing.T) {
	t.Parallel()
	for name, open := range realStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := open(t)
			ctx := context.Background()
			s, err := New(Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RefillInterval: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			s.HandleFunc("report", func(context.Context, *Task) error { return nil })
			s.HandleFunc("mail", func(context.Context, *Task) error { return nil })
			if _, err := s.PauseName(ctx, "report", WithActor("alice")); err != nil {
				t.Fatal(err)
			}
			if err := s.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer s.Stop(ctx)
			report, err := s.Delay(ctx, "report", "r", 0)
			if err != nil {
				t.Fatal(err)
			}
			witness, err := s.Delay(ctx, "mail", "m", 100*time.Millisecond) // due after the report
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, st, witness.ID, Succeeded, 10*time.Second)
			if got, err := s.Get(ctx, report.ID); err != nil || got.Status != Scheduled {
				t.Fatalf("the paused name's task = %+v, %v; want it SCHEDULED after a later task of another name ran", got, err)
			}
			if _, err := s.ResumeName(ctx, "report", WithActor("bob")); err != nil {
				t.Fatal(err)
			}
			got := waitFor(t, st, report.ID, Succeeded, 10*time.Second)
			if late := got.StartedAt.Sub(witness.DueAt); late < 0 {
				t.Errorf("the paused task started %v before the witness was due", -late)
			}
		})
	}
}
