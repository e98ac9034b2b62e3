package execute

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/internal/clock"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/memory"
)

// slowFinishStore takes 2 ms for every Finish and records when each began and the
// task keys it carried.
type slowFinishStore struct {
	store.Store
	t0     time.Time
	mu     sync.Mutex
	writes []finishWrite
	keys   map[int64]string
}

type finishWrite struct {
	at   time.Duration // since t0
	keys []string
}

func (s *slowFinishStore) Finish(ctx context.Context, f store.Fence, r []store.Finish) ([]bool, error) {
	w := finishWrite{at: time.Since(s.t0)}
	s.mu.Lock()
	for _, f := range r {
		w.keys = append(w.keys, s.keys[f.TaskID])
	}
	slices.Sort(w.keys)
	s.writes = append(s.writes, w)
	s.mu.Unlock()
	time.Sleep(2 * time.Millisecond)
	return s.Store.Finish(ctx, f, r)
}

func (s *slowFinishStore) taken() []finishWrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.writes)
}

// TestFinisherLingers: results that were waiting as a write returned are written
// together with those that arrive within the previous write's duration, in one write
// instead of one each; a result that finds the finisher idle is written at once; and
// Stop ends a wait at once.
func TestFinisherLingers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New()
		defer mem.Close()
		st := &slowFinishStore{Store: mem, keys: map[int64]string{}}
		ctx := context.Background()
		// Each handler returns after the delay its task's key names.
		delays := map[string]time.Duration{
			"a": 0, "b": 0, "c": time.Millisecond, "d": 3 * time.Millisecond, "e": 3500 * time.Microsecond,
			"f": 0, "g": 0, "h": time.Millisecond,
		}
		ex := New(Config{
			Store: st, Clock: clock.New(), Log: slog.New(slog.DiscardHandler),
			Node: "test", Concurrency: 10, HeartbeatInterval: time.Second, MaxDispatchRetries: 3,
			Handler: func(string) *Handler {
				return &Handler{Timeout: time.Minute, Run: func(_ context.Context, task *store.Task) error {
					time.Sleep(delays[task.Key])
					return nil
				}}
			},
		})
		ex.Start()
		stopped := false
		defer func() {
			if !stopped {
				ex.Stop(ctx)
			}
		}()
		n := 0
		dispatch := func(keys ...string) {
			t.Helper()
			var nts []store.NewTask
			for _, k := range keys {
				nts = append(nts, store.NewTask{Name: "job", Key: k, DueAt: time.Now()})
			}
			ins, err := st.Insert(ctx, nts)
			if err != nil {
				t.Fatal(err)
			}
			var claims []store.Claim
			st.mu.Lock()
			for i, r := range ins {
				n++
				st.keys[r.Task.ID] = keys[i]
				claims = append(claims, store.Claim{ID: r.Task.ID, ExecutionID: fmt.Sprintf("01900000-0000-7000-8000-%012d", n)})
			}
			st.mu.Unlock()
			res, err := st.Claim(ctx, store.Fence{}, claims)
			if err != nil || len(res.Claimed) != len(keys) {
				t.Fatalf("Claim = %+v, %v", res, err)
			}
			ex.Dispatch(nil, res.Claimed)
		}

		// Under load: a and b return at once, c while their write is in flight, d and
		// e after it returned, within the 2 ms it took.
		st.t0 = time.Now()
		dispatch("a", "b", "c", "d", "e")
		time.Sleep(50 * time.Millisecond)
		w := st.taken()
		if len(w) != 2 || w[1].at != 4*time.Millisecond || !slices.Contains(w[1].keys, "c") ||
			!slices.Contains(w[1].keys, "d") || !slices.Contains(w[1].keys, "e") {
			t.Fatalf("writes %+v; want two: a's (maybe with b) at 0, then the rest at 4ms (2ms after the first returned)", w)
		}

		// Idle: f's result is written as it arrives.
		st.t0 = time.Now()
		dispatch("f")
		time.Sleep(50 * time.Millisecond)
		if w := st.taken()[2:]; len(w) != 1 || w[0].at != 0 || !slices.Equal(w[0].keys, []string{"f"}) {
			t.Fatalf("writes after a lone result %+v; want f's at once", w)
		}

		// Stop: h's result waits for more after the write of g's, until Stop begins
		// 500µs into the wait.
		st.t0 = time.Now()
		dispatch("g", "h")
		time.Sleep(2500 * time.Microsecond)
		stopped = true
		if err := ex.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		w = st.taken()[3:]
		if len(w) != 2 || w[0].at != 0 || w[1].at != 2500*time.Microsecond || !slices.Equal(w[1].keys, []string{"h"}) {
			t.Fatalf("writes around Stop %+v; want g's at 0, h's at 2.5ms, as Stop began", w)
		}
		for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
			got, err := st.Lookup(ctx, "job", k)
			if err != nil || got.Status != store.Succeeded {
				t.Errorf("task %s after Stop: %+v, %v; want SUCCEEDED", k, got, err)
			}
		}
	})
}
