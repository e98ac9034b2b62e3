package execute

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/internal/clock"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/memory"
)

// cutStore answers every Heartbeat with an error while cut is set: a partition between
// the executor and the store.
type cutStore struct {
	store.Store
	cut atomic.Bool
}

func (s *cutStore) Heartbeat(ctx context.Context, refs []store.ExecRef) ([]store.Beat, error) {
	if s.cut.Load() {
		return nil, errors.New("connection refused")
	}
	return s.Store.Heartbeat(ctx, refs)
}

// TestSelfFencing: an executor whose heartbeats stop reaching the store cancels the
// handler's context once its last stamp is SelfFenceAfter old — before recovery could
// declare the execution orphaned — and records the attempt as failed, as recovery
// would, so that it is retried. While heartbeats get through, nothing is cancelled.
func TestSelfFencing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New()
		defer mem.Close()
		st := &cutStore{Store: mem}
		ctx := context.Background()
		ins, err := st.Insert(ctx, []store.NewTask{{Name: "job", Key: "k", DueAt: time.Now(), MaxRetry: 5}})
		if err != nil {
			t.Fatal(err)
		}
		const hb, bound = time.Second, 8 * time.Second // OrphanAfter 10s
		cancelled := make(chan time.Duration, 1)
		ex := New(Config{
			Store: st, Clock: clock.New(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Node: "test", Concurrency: 1, HeartbeatInterval: hb, MaxDispatchRetries: 3, SelfFenceAfter: bound,
			Handler: func(string) *Handler {
				return &Handler{Timeout: time.Hour, Run: func(ctx context.Context, _ *store.Task) error {
					begin := time.Now()
					<-ctx.Done()
					if cause := context.Cause(ctx); !errors.Is(cause, ErrSelfFenced) {
						t.Errorf("context.Cause = %v, want ErrSelfFenced", cause)
					}
					cancelled <- time.Since(begin)
					return ctx.Err()
				}}
			},
		})
		ex.Start()
		defer ex.Stop(ctx)
		claimed, err := st.Claim(ctx, store.Fence{}, []store.Claim{{ID: ins[0].Task.ID, ExecutionID: "01900000-0000-7000-8000-000000000001"}})
		if err != nil || len(claimed.Claimed) != 1 {
			t.Fatalf("Claim = %+v, %v", claimed, err)
		}
		ex.Dispatch(nil, claimed.Claimed)

		time.Sleep(30 * time.Second) // heartbeats get through: no fencing
		synctest.Wait()
		select {
		case d := <-cancelled:
			t.Fatalf("handler cancelled after %v while its heartbeats got through", d)
		default:
		}
		st.cut.Store(true)
		cutAt := time.Now()
		var ran time.Duration
		select {
		case ran = <-cancelled:
		case <-time.After(time.Minute):
			t.Fatal("handler not cancelled a minute into the partition")
		}
		// The last stamp that got through was at most one interval before the cut.
		if since := time.Since(cutAt); since > bound || since < bound-hb {
			t.Fatalf("handler cancelled %v into the partition (after running %v), want within (%v, %v]", since, ran, bound-hb, bound)
		}
		st.cut.Store(false)
		var task *store.Task
		for range 100 {
			time.Sleep(100 * time.Millisecond)
			if task, err = st.Get(ctx, ins[0].Task.ID); err == nil && task.Status == store.Scheduled {
				break
			}
		}
		if task == nil || task.Status != store.Scheduled || task.Attempt != 1 || !strings.HasPrefix(task.LastError, "self-fenced:") {
			t.Fatalf("task after self-fencing = %+v, want SCHEDULED again with attempt 1 and a self-fenced error", task)
		}
	})
}

// TestLateStampDoesNotRevive: a heartbeat whose request started more than the bound
// after the stamp before it fences the execution, though the store answered it alive:
// in between, the execution went unconfirmed past the bound (the process was paused),
// whether or not anything looked then. A stamp within the bound moves the stamp on.
func TestLateStampDoesNotRevive(t *testing.T) {
	const bound = 8 * time.Second
	t0 := time.Now()
	x := &execution{beat: t0}
	if fence := x.beaten(t0.Add(bound-time.Millisecond), bound); fence || !x.beat.Equal(t0.Add(bound-time.Millisecond)) {
		t.Fatalf("a stamp within the bound: fence %v, beat %v; want no fence, the stamp moved on", fence, x.beat)
	}
	last := x.beat
	if fence := x.beaten(last.Add(bound+time.Millisecond), bound); !fence || !x.beat.Equal(last) {
		t.Fatalf("a stamp past the bound: fence %v, beat %v; want a fence, the stamp left where it was", fence, x.beat)
	}
}

// invalidStart refuses every Start as invalid, as a store does a call it cannot take.
type invalidStart struct{ store.Store }

func (invalidStart) Start(context.Context, store.Fence, []store.StartParams) ([]store.StartResult, error) {
	return nil, fmt.Errorf("start: %w", store.ErrInvalid)
}

// TestStartRefusedAsInvalidIsHandedBack: a batch whose Start the store refuses as
// invalid is handed back at once (no retry can pass), and its slot is free again.
// Before, the executor retried it forever, holding the slot.
func TestStartRefusedAsInvalidIsHandedBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New()
		defer mem.Close()
		st := invalidStart{mem}
		ctx := context.Background()
		ins, err := st.Insert(ctx, []store.NewTask{{Name: "job", Key: "k", DueAt: time.Now(), MaxRetry: 5}})
		if err != nil {
			t.Fatal(err)
		}
		ex := New(Config{
			Store: st, Clock: clock.New(), Log: slog.New(slog.DiscardHandler),
			Node: "test", Concurrency: 1, HeartbeatInterval: time.Second, MaxDispatchRetries: 3,
			Handler: func(string) *Handler {
				return &Handler{Timeout: time.Hour, Run: func(context.Context, *store.Task) error { return nil }}
			},
		})
		ex.Start()
		defer ex.Stop(ctx)
		claimed, err := st.Claim(ctx, store.Fence{}, []store.Claim{{ID: ins[0].Task.ID, ExecutionID: "01900000-0000-7000-8000-000000000001"}})
		if err != nil || len(claimed.Claimed) != 1 {
			t.Fatalf("Claim = %+v, %v", claimed, err)
		}
		ex.Dispatch(nil, claimed.Claimed)
		time.Sleep(time.Minute)
		synctest.Wait()
		task, err := st.Get(ctx, ins[0].Task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if task.Status != store.Scheduled || task.DispatchRetries != 1 || !strings.Contains(task.LastError, "start refused") {
			t.Fatalf("task a minute after its Start was refused as invalid: %s, %d dispatch retries, %q; want SCHEDULED, 1, a start refused error",
				task.Status, task.DispatchRetries, task.LastError)
		}
		if _, free := ex.Load(); free != 1 {
			t.Fatalf("free slots after the hand-back: %d, want 1", free)
		}
	})
}
