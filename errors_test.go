package ax_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store"
)

// oncePrefixed fails unless err's message has exactly one "ax:" and contains want.
func oncePrefixed(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: nil error", what)
		return
	}
	msg := err.Error()
	if n := strings.Count(msg, "ax:"); n != 1 || !strings.HasPrefix(msg, "ax: ") {
		t.Errorf("%s: %q has %d \"ax:\" prefixes, want one, leading", what, msg, n)
	}
	if !strings.Contains(msg, want) {
		t.Errorf("%s: %q, want it to contain %q", what, msg, want)
	}
}

func TestErrorsReadOnce(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	s := newScheduler(t, st, nil)
	s.HandleFunc("job", func(context.Context, *ax.Task) error { return nil })
	ctx := context.Background()

	_, err := s.Delay(ctx, "job", "k", time.Second, ax.WithMaxRetry(-1))
	if !errors.Is(err, ax.ErrInvalid) {
		t.Errorf("Delay with MaxRetry -1: %v, want ErrInvalid", err)
	}
	oncePrefixed(t, "Delay with MaxRetry -1", err, `ax: delay "job"/"k": MaxRetry is negative (-1): invalid input`)

	err = s.Cron("job", "61 * * * *")
	oncePrefixed(t, "Cron with a bad spec", err, "61")
	err = s.Every("job", -time.Second)
	oncePrefixed(t, "Every with a negative interval", err, "negative")
	_, err = s.Get(ctx, 12345)
	oncePrefixed(t, "Get of a missing task", err, "ax: get task 12345: ")
	if !errors.Is(err, ax.ErrNotFound) {
		t.Errorf("Get of a missing task: %v, want ErrNotFound", err)
	}
	oncePrefixed(t, "Cancel of a missing task", s.Cancel(ctx, "job", "nope"), `ax: cancel "job"/"nope": `)
	oncePrefixed(t, "PauseSchedule of a missing schedule", s.PauseSchedule(ctx, "nope"), `ax: pause schedule "nope": `)
	_, err = ax.New(ax.Config{})
	oncePrefixed(t, "New without a store", err, "Store is required")

	// Driver errors keep their sentinel and gain the operation.
	closed := openSQLite(t)
	sc := newScheduler(t, closed, nil)
	closed.Close()
	for what, err := range map[string]error{
		"Get":    func() error { _, err := sc.Get(ctx, 1); return err }(),
		"Lookup": func() error { _, err := sc.Lookup(ctx, "job", "k"); return err }(),
		"Cancel": sc.Cancel(ctx, "job", "k"),
	} {
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s on a closed store: %v, want ErrClosed", what, err)
		}
		oncePrefixed(t, what+" on a closed store", err, strings.ToLower(what))
	}
}

// errors.As gives the task that refused a call, with its id and status.
func TestTaskStateErrors(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, openSQLite(t), nil)
	release := make(chan struct{})
	s.HandleFunc("job", func(context.Context, *ax.Task) error { <-release; return nil })
	start(t, s)
	defer close(release)
	ctx := context.Background()
	running, err := s.Delay(ctx, "job", "running", 0)
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, running.ID, ax.Running, 10*time.Second)
	oncePrefixed(t, "Trigger of a missing task", s.Trigger(ctx, 999999), "ax: trigger task 999999: not found")
	gone, err := s.Delay(ctx, "job", "gone", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Cancel(ctx, "job", "gone"); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		what     string
		err      error
		sentinel error
		id       int64
		status   ax.Status
		msg      string
	}{
		{"Delay of an existing key", func() error { _, err := s.Delay(ctx, "job", "running", time.Hour); return err }(),
			ax.ErrDuplicate, running.ID, ax.Running, `ax: delay "job"/"running": task ` + strconv.FormatInt(running.ID, 10) + ` exists (RUNNING)`},
		{"Cancel of a cancelled task", s.Cancel(ctx, "job", "gone"),
			ax.ErrNotCancellable, gone.ID, ax.Cancelled, `ax: cancel "job"/"gone": task ` + strconv.FormatInt(gone.ID, 10) + ` is CANCELLED: `},
		{"Trigger of a running task", s.Trigger(ctx, running.ID),
			ax.ErrNotTriggerable, running.ID, ax.Running, `ax: trigger: task ` + strconv.FormatInt(running.ID, 10) + ` is RUNNING: not triggerable`},
	} {
		if !errors.Is(c.err, c.sentinel) {
			t.Errorf("%s: %v, want %v", c.what, c.err, c.sentinel)
		}
		var se *ax.TaskStateError
		if !errors.As(c.err, &se) || se.Task == nil || se.Task.ID != c.id || se.Task.Status != c.status {
			t.Errorf("%s: errors.As = %+v, want the task %d, %s", c.what, se, c.id, c.status)
		}
		oncePrefixed(t, c.what, c.err, c.msg)
	}
}

// A Trigger refused because the task's key is held says which task holds it, once.
func TestTriggerRefusedByAHeldKey(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, openSQLite(t), nil)
	release := make(chan struct{})
	s.HandleFunc("job", func(context.Context, *ax.Task) error { <-release; return nil })
	start(t, s)
	defer close(release)
	ctx := context.Background()
	holder, err := s.Delay(ctx, "job", "holder", 0, ax.WithTaskKey("account-42"))
	if err != nil {
		t.Fatal(err)
	}
	waiting, err := s.Delay(ctx, "job", "waiting", time.Hour, ax.WithTaskKey("account-42"))
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, holder.ID, ax.Running, 10*time.Second)
	err = s.Trigger(ctx, waiting.ID)
	var se *ax.TaskStateError
	if !errors.Is(err, ax.ErrNotTriggerable) || !errors.As(err, &se) || se.Task.ID != waiting.ID {
		t.Fatalf("Trigger with the key held: %v, want a TaskStateError for task %d", err, waiting.ID)
	}
	id := strconv.FormatInt(waiting.ID, 10)
	oncePrefixed(t, "Trigger with the key held", err, `ax: trigger: task `+id+` is SCHEDULED: task key "account-42" held by task `+
		strconv.FormatInt(holder.ID, 10)+`: not triggerable`)
}
