package held_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/elect"
	"github.com/axsched/ax/elect/internal/held"
)

const ttl = time.Second

// fake is a backend whose renew and release a test sets; it counts the calls.
type fake struct {
	renew            func(ctx context.Context) (bool, error)
	release          func(ctx context.Context) (bool, error)
	renews, releases int
	released         int // calls of Released
}

func (f *fake) backend() held.Backend {
	return held.Backend{
		Renew: func(ctx context.Context) (bool, error) {
			f.renews++
			return f.renew(ctx)
		},
		Release: func(ctx context.Context) (bool, error) {
			f.releases++
			return f.release(ctx)
		},
		Released: func() { f.released++ },
	}
}

func ok(context.Context) (bool, error) { return true, nil }

// hang blocks until ctx ends, like a request to a backend that does not answer.
func hang(ctx context.Context) (bool, error) {
	<-ctx.Done()
	return false, ctx.Err()
}

func start(f *fake) *held.Lease {
	log := slog.New(slog.DiscardHandler)
	return held.Start(context.Background(), "test", log, held.NewTiming(ttl), f.backend(), "a", "id a", 7, time.Now())
}

func TestResignAfterCtxEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{renew: ok, release: hang}
		l := start(f)

		// A ctx already ended: nothing can be released.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := l.Resign(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Resign(cancelled ctx) = %v, want context.Canceled", err)
		}
		if err := context.Cause(l.Context()); !errors.Is(err, elect.ErrResigned) {
			t.Fatalf("context.Cause(lease) after Resign = %v, want ErrResigned", err)
		}

		// A ctx that ends while the release hangs.
		ctx, cancel = context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := l.Resign(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Resign(ctx ending during the release) = %v, want context.DeadlineExceeded", err)
		}
		if f.released != 0 {
			t.Fatalf("Released called %d times before any release succeeded", f.released)
		}

		// The retry releases.
		f.release = ok
		n := f.releases
		if err := l.Resign(context.Background()); err != nil {
			t.Fatalf("Resign() retried = %v, want nil", err)
		}
		if f.releases != n+1 || f.released != 1 {
			t.Fatalf("retried Resign: %d release calls, Released %d times; want 1 and 1", f.releases-n, f.released)
		}
		// Later calls return its result and release nothing more.
		if err := l.Resign(context.Background()); err != nil {
			t.Fatalf("Resign() after a successful one = %v, want nil", err)
		}
		if f.releases != n+1 || f.released != 1 {
			t.Fatalf("Resign after a successful one called the backend: %d releases, Released %d times", f.releases-n, f.released)
		}
		if f.renews != 0 {
			t.Fatalf("%d renewals before the first renew period, want 0", f.renews)
		}
	})
}

func TestResignAfterReleaseError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errDown := errors.New("backend down")
		f := &fake{renew: ok, release: func(context.Context) (bool, error) { return false, errDown }}
		l := start(f)
		err := l.Resign(context.Background())
		if !errors.Is(err, errDown) {
			t.Fatalf("Resign() = %v, want the release error", err)
		}
		if errors.Is(err, elect.ErrLost) {
			t.Fatalf("Resign() = %v: a failed release is not a lost lease", err)
		}
		if err := context.Cause(l.Context()); !errors.Is(err, elect.ErrResigned) {
			t.Fatalf("context.Cause(lease) after a failed release = %v, want ErrResigned (stop leading first)", err)
		}
		if f.released != 0 {
			t.Fatalf("Released called %d times after a failed release", f.released)
		}

		// Meanwhile the lease expired in the backend: the retry finds it no longer held.
		f.release = func(context.Context) (bool, error) { return false, nil }
		if err := l.Resign(context.Background()); !errors.Is(err, elect.ErrLost) {
			t.Fatalf("Resign() retried, lease no longer held = %v, want ErrLost", err)
		}
		if err := l.Resign(context.Background()); !errors.Is(err, elect.ErrLost) {
			t.Fatalf("Resign() again = %v, want the retry's ErrLost", err)
		}
		if f.releases != 2 || f.released != 0 {
			t.Fatalf("%d release calls, Released %d times; want 2 and 0", f.releases, f.released)
		}
	})
}

func TestDeadlineWhileRenewHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{renew: hang, release: ok}
		began := time.Now()
		l := start(f)
		timing := held.NewTiming(ttl)
		<-l.Context().Done()
		if d, want := time.Since(began), timing.TTL-timing.Margin; d != want {
			t.Fatalf("lease lost %v after the acquire began, want exactly TTL - margin = %v", d, want)
		}
		if err := context.Cause(l.Context()); !errors.Is(err, elect.ErrLost) {
			t.Fatalf("context.Cause(lease) = %v, want ErrLost", err)
		}
		if err := l.Resign(context.Background()); !errors.Is(err, elect.ErrLost) {
			t.Fatalf("Resign() of a lost lease = %v, want ErrLost", err)
		}
		if f.renews != 1 { // read after Resign, which waited for the renewer to return
			t.Fatalf("%d renew calls, want the 1 that hangs", f.renews)
		}
		if f.releases != 0 {
			t.Fatalf("Resign of a lost lease called Release %d times, want 0", f.releases)
		}
	})
}

func TestPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bg := context.Background()
		began := time.Now()
		if closed, err := held.Pause[struct{}](bg, time.Second, nil); closed || err != nil || time.Since(began) != time.Second {
			t.Fatalf("Pause(1s, nil wake) = %v, %v after %v; want false, nil after 1s", closed, err, time.Since(began))
		}
		wake := make(chan int, 1)
		wake <- 1
		began = time.Now()
		if closed, err := held.Pause(bg, time.Second, wake); closed || err != nil || time.Since(began) != 0 {
			t.Fatalf("Pause(woken) = %v, %v after %v; want false, nil at once", closed, err, time.Since(began))
		}
		close(wake)
		if closed, err := held.Pause(bg, time.Second, wake); !closed || err != nil || time.Since(began) != 0 {
			t.Fatalf("Pause(closed wake) = %v, %v after %v; want true, nil at once", closed, err, time.Since(began))
		}
		ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
		defer cancel()
		if _, err := held.Pause[int](ctx, time.Second, nil); !errors.Is(err, context.DeadlineExceeded) || time.Since(began) != 100*time.Millisecond {
			t.Fatalf("Pause(ctx ending first) = %v after %v; want DeadlineExceeded after 100ms", err, time.Since(began))
		}
	})
}

// TestErrSeesAPause resumes a lease whose clock jumped past its deadline, as a process
// woken from SIGSTOP finds it: Err reports it lost at the first call, though no timer
// has fired and no renewal has been tried.
func TestErrSeesAPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var jump time.Duration
		timing := held.NewTiming(ttl)
		timing.Now = func() time.Time { return time.Now().Add(jump) }
		f := &fake{renew: ok, release: ok}
		l := held.Start(context.Background(), "test", slog.New(slog.DiscardHandler), timing, f.backend(), "a", "id a", 7, time.Now())
		defer l.Resign(context.Background())
		if err := l.Context().Err(); err != nil {
			t.Fatalf("Err() of a fresh lease = %v", err)
		}
		if l.Holder() != "id a" || l.Token() != 7 {
			t.Fatalf("Holder, Token = %q, %d; want id a, 7", l.Holder(), l.Token())
		}
		jump = ttl - timing.Margin // the deadline, on the jumped clock
		if err := l.Context().Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err() after a pause to the deadline = %v, want context.Canceled", err)
		}
		if err := context.Cause(l.Context()); !errors.Is(err, elect.ErrLost) {
			t.Fatalf("context.Cause after a pause = %v, want ErrLost", err)
		}
		if f.renews != 0 {
			t.Fatalf("%d renewals before the check: the lease ended by the renewer, not by Err", f.renews)
		}
	})
}
