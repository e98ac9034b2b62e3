package ax_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax"
)

func TestDuplicateReturnsExistingTask(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, openSQLite(t), nil)
	ctx := context.Background()
	first, err := s.Delay(ctx, "order.close.timeout", "42", time.Hour, ax.WithPayload([]byte("a")))
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Delay(ctx, "order.close.timeout", "42", time.Minute, ax.WithPayload([]byte("b")))
	if !errors.Is(err, ax.ErrDuplicate) {
		t.Fatalf("second Delay error = %v, want ErrDuplicate", err)
	}
	if again == nil || again.ID != first.ID || string(again.Payload) != "a" || !again.DueAt.Equal(first.DueAt) {
		t.Errorf("second Delay = %+v, want the existing task %+v unchanged", again, first)
	}
	if _, err := s.At(ctx, "order.close.timeout", "42", time.Now()); !errors.Is(err, ax.ErrDuplicate) {
		t.Errorf("At on an existing key: error = %v, want ErrDuplicate", err)
	}
	got, err := s.Lookup(ctx, "order.close.timeout", "42")
	if err != nil || got.ID != first.ID {
		t.Errorf("Lookup = %v, %v; want task %d", got, err, first.ID)
	}
}

func TestCancelledTaskNeverFires(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, openSQLite(t), nil)
	rec := newRecorder()
	s.Handle("job", rec)
	start(t, s)
	ctx := context.Background()
	// Due in a second: the Cancel below must come first, also on a machine loaded
	// with other tests under the race detector (at 100 ms it once came after the run).
	cancelled, err := s.Delay(ctx, "job", "cancelled", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	witness, err := s.Delay(ctx, "job", "witness", 1200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Cancel(ctx, "job", "cancelled"); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	waitStatus(t, s, witness.ID, ax.Succeeded, 10*time.Second) // due after the cancelled one
	if runs := rec.runs("cancelled"); len(runs) != 0 {
		t.Errorf("cancelled task ran %d times", len(runs))
	}
	got, _ := s.Get(ctx, cancelled.ID)
	if got.Status != ax.Cancelled || got.FinishedAt.IsZero() {
		t.Errorf("cancelled task = %s, finished %v; want CANCELLED with FinishedAt", got.Status, got.FinishedAt)
	}
	if err := s.Cancel(ctx, "job", "cancelled"); !errors.Is(err, ax.ErrNotCancellable) {
		t.Errorf("Cancel twice: %v, want ErrNotCancellable", err)
	}
	if err := s.Cancel(ctx, "job", "witness"); !errors.Is(err, ax.ErrNotCancellable) {
		t.Errorf("Cancel of a SUCCEEDED task: %v, want ErrNotCancellable", err)
	}
	if err := s.Cancel(ctx, "job", "missing"); !errors.Is(err, ax.ErrNotFound) {
		t.Errorf("Cancel of a missing task: %v, want ErrNotFound", err)
	}
}

func TestTrigger(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, openSQLite(t), nil)
	ctx := context.Background()
	rec := newRecorder()
	block := make(chan struct{})
	rec.err = func(task *ax.Task) error {
		switch task.Key {
		case "fails":
			if task.Attempt == 0 {
				return errors.New("first attempt fails")
			}
		case "blocks":
			<-block
		}
		return nil
	}
	s.Handle("job", rec, ax.WithMaxRetry(0))

	later, err := s.Delay(ctx, "job", "later", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Before Start the scheduler hands the task over: due now, for whichever
	// scheduler runs it — this one, once started.
	if err := s.Trigger(ctx, later.ID); err != nil {
		t.Fatalf("Trigger before Start: %v, want it handed over", err)
	}
	if got := mustGet(t, s, later.ID); got.Status != ax.Scheduled || got.TriggeredAt.IsZero() || got.DueAt.After(time.Now()) {
		t.Fatalf("handed over: %+v; want SCHEDULED, due now, TriggeredAt set", got)
	}
	start(t, s)
	got := waitStatus(t, s, later.ID, ax.Succeeded, 10*time.Second)
	if len(rec.runs("later")) != 1 {
		t.Fatalf("the handed-over task ran %d times, want once", len(rec.runs("later")))
	}

	// SCHEDULED → runs now, bypassing its due time.
	later, err = s.Delay(ctx, "job", "later-2", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Trigger(ctx, later.ID); err != nil {
		t.Fatalf("Trigger(SCHEDULED): %v", err)
	}
	got = waitStatus(t, s, later.ID, ax.Succeeded, 10*time.Second)
	if got.TriggeredAt.IsZero() || got.Attempt != 0 || len(rec.runs("later-2")) != 1 {
		t.Errorf("triggered task = %+v, runs %d; want TriggeredAt set, attempt 0, one run", got, len(rec.runs("later-2")))
	}

	// FAILED → one more attempt.
	failing, _ := s.Delay(ctx, "job", "fails", 0)
	waitStatus(t, s, failing.ID, ax.Failed, 10*time.Second)
	if err := s.Trigger(ctx, failing.ID); err != nil {
		t.Fatalf("Trigger(FAILED): %v", err)
	}
	got = waitStatus(t, s, failing.ID, ax.Succeeded, 10*time.Second)
	if got.Attempt != 1 || got.TriggeredAt.IsZero() {
		t.Errorf("re-run of a failed task: attempt %d, triggered %v; want 1 and set", got.Attempt, got.TriggeredAt)
	}

	// RUNNING and SUCCEEDED are refused.
	blocking, _ := s.Delay(ctx, "job", "blocks", 0)
	waitStatus(t, s, blocking.ID, ax.Running, 10*time.Second)
	if err := s.Trigger(ctx, blocking.ID); !errors.Is(err, ax.ErrNotTriggerable) {
		t.Errorf("Trigger(RUNNING): %v, want ErrNotTriggerable", err)
	}
	close(block)
	waitStatus(t, s, blocking.ID, ax.Succeeded, 10*time.Second)
	if err := s.Trigger(ctx, blocking.ID); !errors.Is(err, ax.ErrNotTriggerable) {
		t.Errorf("Trigger(SUCCEEDED): %v, want ErrNotTriggerable", err)
	}
	if n := len(rec.runs("blocks")); n != 1 {
		t.Errorf("refused triggers ran the task: %d runs, want 1", n)
	}
	if err := s.Trigger(ctx, 1<<40); !errors.Is(err, ax.ErrNotFound) {
		t.Errorf("Trigger(missing): %v, want ErrNotFound", err)
	}
}

func TestBadInputIsInvalidAndNamesTheField(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, openSQLite(t), func(c *ax.Config) { c.MaxPayload = 16 })
	ctx := context.Background()
	long := strings.Repeat("x", 1000)
	cases := []struct {
		name  string
		call  func() error
		field string
	}{
		{"empty name", func() error { _, err := s.Delay(ctx, "", "k", 0); return err }, "Name"},
		{"empty key", func() error { _, err := s.Delay(ctx, "n", "", 0); return err }, "Key"},
		{"long key", func() error { _, err := s.Delay(ctx, "n", long, 0); return err }, "Key"},
		{"bad utf-8", func() error { _, err := s.Delay(ctx, "n\xff", "k", 0); return err }, "Name"},
		{"NUL", func() error { _, err := s.Delay(ctx, "n", "k\x00", 0); return err }, "Key"},
		{"negative delay", func() error { _, err := s.Delay(ctx, "n", "k", -time.Second); return err }, "delay"},
		{"zero time", func() error { _, err := s.At(ctx, "n", "k", time.Time{}); return err }, "time"},
		{"far future", func() error { _, err := s.At(ctx, "n", "k", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)); return err }, "time"},
		{"payload", func() error { _, err := s.Delay(ctx, "n", "k", 0, ax.WithPayload(make([]byte, 17))); return err }, "Payload"},
		{"retries", func() error { _, err := s.Delay(ctx, "n", "k", 0, ax.WithMaxRetry(-1)); return err }, "MaxRetry"},
		{"timeout", func() error { _, err := s.Delay(ctx, "n", "k", 0, ax.WithTimeout(0)); return err }, "Timeout"},
		{"backoff", func() error { _, err := s.Delay(ctx, "n", "k", 0, ax.WithBackoff(nil)); return err }, "Backoff"},
		{"get id", func() error { _, err := s.Get(ctx, 0); return err }, "id"},
		{"executions id", func() error { _, err := s.Executions(ctx, -1); return err }, "id"},
		{"trigger id", func() error { return s.Trigger(ctx, 0) }, "id"},
		{"cancel name", func() error { return s.Cancel(ctx, "", "k") }, "Name"},
		{"lookup key", func() error { _, err := s.Lookup(ctx, "n", ""); return err }, "Key"},
	}
	for _, c := range cases {
		err := c.call()
		if !errors.Is(err, ax.ErrInvalid) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: error = %v, want ErrInvalid naming %s", c.name, err, c.field)
		}
	}
	if _, err := s.Lookup(ctx, "n", "k"); !errors.Is(err, ax.ErrNotFound) {
		t.Errorf("a rejected submit wrote a task: Lookup error = %v, want ErrNotFound", err)
	}

	bad := []struct {
		name  string
		cfg   ax.Config
		field string
	}{
		{"no store", ax.Config{}, "Store"},
		{"tick", ax.Config{Store: s0(t), Tick: time.Microsecond}, "Tick"},
		{"window", ax.Config{Store: s0(t), Window: -time.Second}, "Window"},
		{"orphan", ax.Config{Store: s0(t), HeartbeatInterval: time.Minute, OrphanAfter: time.Second}, "OrphanAfter"},
		{"concurrency", ax.Config{Store: s0(t), Concurrency: -1}, "Concurrency"},
	}
	for _, c := range bad {
		if _, err := ax.New(c.cfg); !errors.Is(err, ax.ErrInvalid) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("New(%s): error = %v, want ErrInvalid naming %s", c.name, err, c.field)
		}
	}
}

func s0(t *testing.T) ax.Store { return openSQLite(t) }

func TestHandleRejectsProgrammingErrors(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, openSQLite(t), nil)
	for name, f := range map[string]func(){
		"empty name":  func() { s.HandleFunc("", func(context.Context, *ax.Task) error { return nil }) },
		"nil handler": func() { s.Handle("x", nil) },
		"bad retry":   func() { s.HandleFunc("x", func(context.Context, *ax.Task) error { return nil }, ax.WithMaxRetry(-2)) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Handle did not panic", name)
				}
			}()
			f()
		}()
	}
}
