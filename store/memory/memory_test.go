package memory_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/memory"
	"github.com/axsched/ax/store/storetest"
	"github.com/google/go-cmp/cmp"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s := memory.New()
		t.Cleanup(func() { s.Close() }) // ErrClosed when the test closed it already
		return s
	})
}

// TestFakeClock checks that the store reads the time of a synctest bubble: Claim
// refuses a task until the fake clock reaches its due time, and stamps that time.
func TestFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		s := memory.New()
		defer s.Close()

		start, err := s.Now(ctx)
		if err != nil {
			t.Fatalf("Now() error: %v", err)
		}
		if want := time.Now().UTC(); !start.Equal(want) || start.Location() != time.UTC {
			t.Fatalf("Now() = %v, want the bubble's clock %v in UTC", start, want)
		}
		due := start.Add(time.Minute)
		res, err := s.Insert(ctx, []store.NewTask{{Name: "order.close", Key: "42", DueAt: due}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("Insert error: %v, %v", err, res)
		}
		id := res[0].Task.ID
		claim := []store.Claim{{ID: id, ExecutionID: "0190a0c4-0000-7000-8000-000000000001"}}

		time.Sleep(time.Minute - time.Nanosecond)
		got, err := s.Claim(ctx, store.Fence{}, claim)
		if err != nil {
			t.Fatalf("Claim error: %v", err)
		}
		if d := cmp.Diff(&store.ClaimResult{NotDue: []store.Due{{ID: id, DueAt: due}}}, got); d != "" {
			t.Errorf("Claim 1ns before due mismatch (-want +got):\n%s", d)
		}

		time.Sleep(time.Nanosecond)
		got, err = s.Claim(ctx, store.Fence{}, claim)
		if err != nil {
			t.Fatalf("Claim error: %v", err)
		}
		if len(got.Claimed) != 1 || !got.Claimed[0].DispatchedAt.Equal(due) {
			t.Errorf("Claim at due time = %+v, want task %d claimed with DispatchedAt %v", got, id, due)
		}
	})
}
