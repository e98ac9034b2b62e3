package insert

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/memory"
)

// slowStore holds every Insert until release is closed, and records what it wrote.
type slowStore struct {
	store.Store
	release chan struct{}
	mu      sync.Mutex
	written []string
}

func (s *slowStore) Insert(ctx context.Context, ts []store.NewTask) ([]store.Inserted, error) {
	<-s.release
	s.mu.Lock()
	for _, t := range ts {
		s.written = append(s.written, t.Key)
	}
	s.mu.Unlock()
	return s.Store.Insert(ctx, ts)
}

func task(key string) store.NewTask {
	return store.NewTask{Name: "job", Key: key, DueAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), MaxRetry: 1}
}

// A caller whose context ends while its row waits behind a write in flight leaves
// with ctx.Err() at its deadline and its row is never written; the one still
// waiting is written in the next batch.
func TestCancelledWhileQueuedWritesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New()
		defer mem.Close()
		st := &slowStore{Store: mem, release: make(chan struct{})}
		var c Coalescer
		ctx := context.Background()
		results := make(chan error, 3)
		go func() { _, err := c.Insert(ctx, st, task("first")); results <- err }()
		synctest.Wait() // first is writing, held by the store
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		go func() { _, err := c.Insert(short, st, task("gives-up")); results <- err }()
		go func() { _, err := c.Insert(ctx, st, task("waits")); results <- err }()
		synctest.Wait()
		time.Sleep(2 * time.Second) // past the short context
		synctest.Wait()
		select { // it leaves at its deadline, not when the write in flight ends
		case err := <-results:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("the first to return, with a write still in flight: %v, want DeadlineExceeded", err)
			}
		default:
			t.Fatal("the caller whose context ended is still waiting for the write in flight")
		}
		close(st.release)
		for range 2 {
			if err := <-results; err != nil {
				t.Errorf("Insert of a caller that waited: %v", err)
			}
		}
		if _, err := mem.Lookup(ctx, "job", "gives-up"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the row of the caller that gave up: %v, want not written", err)
		}
		st.mu.Lock()
		defer st.mu.Unlock()
		if len(st.written) != 2 || st.written[0] != "first" || st.written[1] != "waits" {
			t.Errorf("written %v, want [first waits]", st.written)
		}
	})
}
