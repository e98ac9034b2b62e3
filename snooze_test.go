package ax_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store/memory"
)

// A handler that snoozes runs again after the snooze, on the fake clock, without
// spending a business retry: with MaxRetry 0 it snoozes three times and then
// succeeds. Each snooze is an execution record SNOOZED, an OutcomeSnoozed event and
// one more Snoozes; no retry is scheduled.
func TestSnoozeRunsAgainWithoutARetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		events := &eventLog{}
		s := newScheduler(t, st, func(c *ax.Config) { c.Observer = events })
		var mu sync.Mutex
		var starts []time.Time
		s.HandleFunc("poll", func(ctx context.Context, task *ax.Task) error {
			mu.Lock()
			defer mu.Unlock()
			starts = append(starts, time.Now())
			if len(starts) <= 3 {
				return fmt.Errorf("remote said Retry-After: %w", ax.Snooze(10*time.Minute))
			}
			return nil
		}, ax.WithMaxRetry(0))
		ctx := context.Background()
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer s.Stop(ctx)
		t0 := time.Now()
		task, err := s.Delay(ctx, "poll", "k", 0)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(31 * time.Minute)
		synctest.Wait()
		got, err := s.Get(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != ax.Succeeded || got.Attempt != 0 || got.Snoozes != 3 {
			t.Errorf("task = %s attempt %d snoozes %d, want SUCCEEDED attempt 0 snoozes 3", got.Status, got.Attempt, got.Snoozes)
		}
		mu.Lock()
		for i, at := range starts {
			want := time.Duration(i) * 10 * time.Minute
			if late := at.Sub(t0) - want; late < 0 || late > ax.DefaultTick+20*time.Millisecond {
				t.Errorf("run %d started at +%v, want +%v (never early, at most a tick late)", i, at.Sub(t0), want)
			}
		}
		if len(starts) != 4 {
			t.Errorf("%d runs, want 4", len(starts))
		}
		mu.Unlock()
		execs, err := s.Executions(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		var statuses []ax.Status
		for _, x := range execs {
			statuses = append(statuses, x.Status)
			if x.Status == ax.Snoozed && x.Error != "remote said Retry-After: snoozed for 10m0s" {
				t.Errorf("snoozed execution's Error = %q", x.Error)
			}
		}
		if fmt.Sprint(statuses) != "[SNOOZED SNOOZED SNOOZED SUCCEEDED]" {
			t.Errorf("executions = %v, want three SNOOZED then SUCCEEDED", statuses)
		}
		if n := events.outcomes(ax.OutcomeSnoozed, "poll"); n != 3 {
			t.Errorf("%d OutcomeSnoozed events, want 3", n)
		}
		if n := events.count(ax.EventRetryScheduled, "poll"); n != 0 {
			t.Errorf("%d EventRetryScheduled, want none: a snooze is not a retry", n)
		}
	})
}

// WithMaxSnoozes caps the snoozes of a task: the snooze after the cap ends it FAILED,
// saying why, and is observed as a failure. SnoozeUntil a past time is due at once.
func TestSnoozeCapFailsTheTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		events := &eventLog{}
		s := newScheduler(t, st, func(c *ax.Config) { c.Observer = events })
		runs := 0
		s.HandleFunc("wait", func(ctx context.Context, task *ax.Task) error {
			runs++
			return ax.SnoozeUntil(time.Now().Add(-time.Hour))
		}, ax.WithMaxSnoozes(2), ax.WithMaxRetry(5))
		ctx := context.Background()
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer s.Stop(ctx)
		task, err := s.Delay(ctx, "wait", "k", 0)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		got, err := s.Get(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != ax.Failed || got.Snoozes != 2 || got.Attempt != 0 || runs != 3 {
			t.Errorf("task = %s snoozes %d attempt %d after %d runs, want FAILED 2 0 after 3", got.Status, got.Snoozes, got.Attempt, runs)
		}
		if !strings.Contains(got.LastError, "snoozed 2 times") || !strings.Contains(got.LastError, "WithMaxSnoozes(2)") {
			t.Errorf("LastError = %q, want it to say the cap was reached", got.LastError)
		}
		if a, b := events.outcomes(ax.OutcomeSnoozed, "wait"), events.outcomes(ax.OutcomeFailed, "wait"); a != 2 || b != 1 {
			t.Errorf("outcomes: %d snoozed, %d failed; want 2, 1", a, b)
		}
	})
}

// A permanent error ends the task FAILED at its first attempt, retries left or not.
func TestPermanentErrorIsNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		s := newScheduler(t, st, nil)
		gone := errors.New("account 42 deleted")
		runs := 0
		s.HandleFunc("charge", func(ctx context.Context, task *ax.Task) error {
			runs++
			return fmt.Errorf("charge: %w", ax.Permanent(gone))
		}, ax.WithMaxRetry(5))
		ctx := context.Background()
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer s.Stop(ctx)
		task, err := s.Delay(ctx, "charge", "k", 0)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		got, err := s.Get(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != ax.Failed || got.Attempt != 0 || runs != 1 {
			t.Errorf("task = %s attempt %d after %d runs, want FAILED at attempt 0 after 1", got.Status, got.Attempt, runs)
		}
		if want := "permanent, not retried: charge: account 42 deleted"; got.LastError != want {
			t.Errorf("LastError = %q, want %q", got.LastError, want)
		}
	})
	if err := ax.Permanent(errTest); !errors.Is(err, errTest) || err.Error() != errTest.Error() {
		t.Errorf("Permanent(err) = %q, errors.Is %v; want err's message and errors.Is true", err, errors.Is(err, errTest))
	}
}

var errTest = errors.New("test error")

func (l *eventLog) outcomes(o ax.Outcome, name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e.Kind == ax.EventFinished && e.Outcome == o && e.Name == name {
			n++
		}
	}
	return n
}
