package ax_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/axsched/ax"
)

// FuzzSubmit drives Delay and At with arbitrary names, keys, payloads and times. Every
// call either stores exactly what was asked, reports the existing task as a
// duplicate, or fails with ErrInvalid and writes nothing.
func FuzzSubmit(f *testing.F) {
	f.Add("order.close", "42", []byte("p"), int64(time.Minute), false, 3)
	f.Add("", "k", []byte(nil), int64(0), true, 0)
	f.Add("n", "", []byte{}, int64(-1), false, -1)
	f.Add("n\x00", "k\xff", bytes.Repeat([]byte{1}, 2000), int64(1)<<62, true, 1<<20)
	f.Add("日本", "キー", []byte{0, 1, 2}, int64(-1)<<40, true, 5)

	st := openSQLite(f)
	s := newScheduler(f, st, func(c *ax.Config) { c.MaxPayload = 1024 })
	ctx := context.Background()
	base := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)

	f.Fuzz(func(t *testing.T, name, key string, payload []byte, d int64, useAt bool, retries int) {
		before, lookErr := s.Lookup(ctx, name, key)
		opts := []ax.TaskOption{ax.WithPayload(payload), ax.WithMaxRetry(retries)}
		var task *ax.Task
		var err error
		if useAt {
			task, err = s.At(ctx, name, key, base.Add(time.Duration(d)), opts...)
		} else {
			task, err = s.Delay(ctx, name, key, time.Duration(d), opts...)
		}
		switch {
		case errors.Is(err, ax.ErrInvalid):
			after, afterErr := s.Lookup(ctx, name, key)
			if lookErr == nil && (afterErr != nil || after.ID != before.ID || after.UpdatedAt != before.UpdatedAt) {
				t.Fatalf("rejected submit changed the existing task: %+v → %+v (%v)", before, after, afterErr)
			}
			if errors.Is(lookErr, ax.ErrNotFound) && !errors.Is(afterErr, ax.ErrNotFound) && !errors.Is(afterErr, ax.ErrInvalid) {
				t.Fatalf("rejected submit wrote a task: Lookup = %+v, %v", after, afterErr)
			}
		case errors.Is(err, ax.ErrDuplicate):
			if lookErr != nil || task == nil || task.ID != before.ID {
				t.Fatalf("ErrDuplicate with task %+v, but before the call Lookup = %+v, %v", task, before, lookErr)
			}
		case err != nil:
			t.Fatalf("submit(%q, %q, %d bytes, %d): unexpected error %v", name, key, len(payload), d, err)
		default:
			if lookErr == nil {
				t.Fatalf("submit succeeded although %q/%q existed as task %d", name, key, before.ID)
			}
			got, err := s.Get(ctx, task.ID)
			if err != nil {
				t.Fatalf("Get(%d) after submit: %v", task.ID, err)
			}
			if got.Name != name || got.Key != key || !bytes.Equal(got.Payload, payload) || got.MaxRetry != retries ||
				got.Status != ax.Scheduled || !got.DueAt.Equal(task.DueAt) || got.OwnerService != "test" {
				t.Fatalf("stored task %+v differs from the submit (%q, %q, %d bytes, retries %d)", got, name, key, len(payload), retries)
			}
			if useAt && !got.DueAt.Equal(base.Add(time.Duration(d)).Truncate(time.Microsecond)) {
				t.Fatalf("At stored due %v, want %v", got.DueAt, base.Add(time.Duration(d)))
			}
		}
	})
}
