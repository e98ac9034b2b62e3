package nodes

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/store"
)

// failingRegistry fails the writes numbered in fail (1 is the first).
type failingRegistry struct {
	mu     sync.Mutex
	writes int
	fail   map[int]bool
}

var errDown = errors.New("the store is failing over")

func (r *failingRegistry) RegisterNode(context.Context, store.NodeInfo) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes++
	if r.fail[r.writes] {
		return errDown
	}
	return nil
}

func (r *failingRegistry) RemoveNode(context.Context, string) error { return nil }

// Refreshed hears each refresh's outcome: the scheduler learns the epoch after a
// success and has its clock measured again after a failure.
func TestKeepTellsEachRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := &failingRegistry{fail: map[int]bool{2: true, 3: true}}
		var mu sync.Mutex
		var got []error
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			Keep(ctx, Config{Registry: reg, Info: func() store.NodeInfo { return store.NodeInfo{Name: "n"} },
				Interval: time.Second, Log: slog.New(slog.DiscardHandler),
				Refreshed: func(_ context.Context, err error) { mu.Lock(); got = append(got, err); mu.Unlock() }})
		}()
		time.Sleep(3500 * time.Millisecond) // writes at 0, 1s, 2s, 3s
		synctest.Wait()
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		want := []error{nil, errDown, errDown, nil}
		if len(got) != len(want) {
			t.Fatalf("Refreshed told %v, want %v", got, want)
		}
		for i := range want {
			if !errors.Is(got[i], want[i]) || (want[i] == nil) != (got[i] == nil) {
				t.Errorf("refresh %d: told %v, want %v", i+1, got[i], want[i])
			}
		}
	})
}
