package electtest

import (
	"context"
	"sync"
)

// Freezer is the switch behind a Harness.Freeze: a backend's test wraps an elector's
// connection (a client hook, a store) so that every request first calls Wait, and Freeze
// then stands for a frozen process. The zero Freezer is thawed and ready for use; it is
// safe for concurrent use.
type Freezer struct {
	mu     sync.Mutex
	thawed chan struct{} // nil when not frozen
}

// Freeze makes Wait block until the returned thaw is called; thaw may be called more
// than once.
func (f *Freezer) Freeze() (thaw func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{})
	f.thawed = ch
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			if f.thawed == ch {
				f.thawed = nil
			}
			f.mu.Unlock()
			close(ch)
		})
	}
}

// Wait returns nil at once when f is not frozen; otherwise it blocks until f is thawed
// (nil) or ctx ends (ctx.Err()).
func (f *Freezer) Wait(ctx context.Context) error {
	f.mu.Lock()
	ch := f.thawed
	f.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
