package sqllease_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/elect"
	"github.com/axsched/ax/elect/electtest"
	"github.com/axsched/ax/elect/sqllease"
	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/memory"
	"github.com/axsched/ax/store/mysql"
	"github.com/axsched/ax/store/postgres"
	"github.com/axsched/ax/store/sqlite"
)

// The conformance suite runs on every SQL store. Each case of the suite gets its own
// database (a temp file, a schema, a database), opened once for all its electors, so that
// they compete for one ax_leader row. The suite's data-loss case does not apply: the
// database is the source of truth, there is no second copy of the epoch to lose, so
// LoseData stays nil and the case is skipped.

func TestConformanceSQLite(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "ax.db"))
		if err != nil {
			t.Fatalf("sqlite.Open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestConformancePostgres(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T) store.Store {
		s, err := postgres.Open(context.Background(), servicetest.PostgresDSN(t))
		if err != nil {
			t.Fatalf("postgres.Open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestConformanceMySQL(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T) store.Store {
		s, err := mysql.Open(servicetest.MySQLDSN(t))
		if err != nil {
			t.Fatalf("mysql.Open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestConformanceMemory(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T) store.Store { return memory.New() })
}

// run runs electtest with one store per case, opened by open on the case's first elector.
func run(t *testing.T, open func(t *testing.T) store.Store) {
	var (
		mu       sync.Mutex
		stores   = map[string]store.Store{}
		freezers = map[elect.Elector]*freezer{}
	)
	electtest.Run(t, electtest.Harness{
		New: func(t *testing.T, ttl time.Duration) elect.Elector {
			mu.Lock()
			s, ok := stores[t.Name()]
			mu.Unlock()
			if !ok {
				s = open(t)
				mu.Lock()
				stores[t.Name()] = s
				mu.Unlock()
			}
			f := &freezer{Store: s, leaser: s}
			e, err := sqllease.New(f, sqllease.WithTTL(ttl))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			mu.Lock()
			freezers[e] = f
			mu.Unlock()
			return e
		},
		Freeze: func(e elect.Elector) func() {
			mu.Lock()
			defer mu.Unlock()
			return freezers[e].Freeze()
		},
	})
}

// freezer is a store whose Leaser calls block while it is frozen: a frozen process, whose
// renewals do not reach the database. A blocked call ends when its context does.
type freezer struct {
	store.Store
	leaser store.Leaser

	electtest.Freezer
}

var _ store.Leaser = (*freezer)(nil)

func (f *freezer) AcquireLease(ctx context.Context, ns, holder string, ttl time.Duration) (store.LeaseInfo, bool, error) {
	if err := f.Wait(ctx); err != nil {
		return store.LeaseInfo{}, false, err
	}
	return f.leaser.AcquireLease(ctx, ns, holder, ttl)
}

func (f *freezer) RenewLease(ctx context.Context, ns, holder string, epoch int64, ttl time.Duration) (bool, error) {
	if err := f.Wait(ctx); err != nil {
		return false, err
	}
	return f.leaser.RenewLease(ctx, ns, holder, epoch, ttl)
}

func (f *freezer) ReleaseLease(ctx context.Context, ns, holder string, epoch int64) (bool, error) {
	if err := f.Wait(ctx); err != nil {
		return false, err
	}
	return f.leaser.ReleaseLease(ctx, ns, holder, epoch)
}

func (f *freezer) Lease(ctx context.Context, ns string) (store.LeaseInfo, error) {
	if err := f.Wait(ctx); err != nil {
		return store.LeaseInfo{}, err
	}
	return f.leaser.Lease(ctx, ns)
}

func TestNewRejects(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		st   store.Store
		opts []sqllease.Option
	}{
		{"short TTL", memory.New(), []sqllease.Option{sqllease.WithTTL(10 * time.Millisecond)}},
		{"empty namespace", memory.New(), []sqllease.Option{sqllease.WithNamespace("")}},
		{"negative poll", memory.New(), []sqllease.Option{sqllease.WithPollInterval(-time.Second)}},
		{"poll of 1ns", memory.New(), []sqllease.Option{sqllease.WithPollInterval(time.Nanosecond)}},
	} {
		if e, err := sqllease.New(c.st, c.opts...); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("New(%s) = %v, %v; want ErrInvalid", c.name, e, err)
		}
	}
}

// TestLeaseRow checks what a held lease looks like in the store: the holder names the
// candidate after a per-campaign id, the epoch is the token, and namespaces are apart.
func TestLeaseRow(t *testing.T) {
	t.Parallel()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "ax.db"))
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	defer s.Close()
	ctx := context.Background()
	orders, err := sqllease.New(s, sqllease.WithNamespace("orders"), sqllease.WithTTL(time.Second))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	other, err := sqllease.New(s, sqllease.WithNamespace("other"), sqllease.WithTTL(time.Second))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	l, err := orders.Campaign(ctx, "node-1")
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	lo, err := other.Campaign(ctx, "node-2") // another namespace: not blocked
	if err != nil {
		t.Fatalf("Campaign(other namespace): %v", err)
	}
	info, err := s.Lease(ctx, "orders")
	if err != nil {
		t.Fatalf("Lease: %v", err)
	}
	if len(info.Holder) != len("0123456789abcdef node-1") || info.Holder[16:] != " node-1" || info.Epoch != l.Token() ||
		info.Remaining <= 0 || info.Remaining > time.Second {
		t.Fatalf("Lease(orders) = %+v, want holder \"<16 chars> node-1\", epoch %d, remaining in (0, 1s]", info, l.Token())
	}
	if st, err := orders.Leader(ctx); err != nil || st.Holder != "node-1" || st.Token != l.Token() {
		t.Fatalf("Leader = %+v, %v; want node-1, token %d", st, err, l.Token())
	}
	for _, x := range []elect.Lease{l, lo} {
		if err := x.Resign(ctx); err != nil {
			t.Fatalf("Resign: %v", err)
		}
	}
	if info, err := s.Lease(ctx, "orders"); err != nil || info.Epoch != l.Token() || info.Remaining > 0 {
		t.Fatalf("Lease after Resign = %+v, %v; want epoch %d kept, remaining <= 0", info, err, l.Token())
	}
	if st, err := orders.Leader(ctx); err != nil || st != (elect.State{}) {
		t.Fatalf("Leader after Resign = %+v, %v; want zero", st, err)
	}
}

// leaserStore is a store with its Leaser methods.
type leaserStore interface {
	store.Store
	store.Leaser
}

// acquireHook is a store whose AcquireLease results pass through after.
type acquireHook struct {
	leaserStore
	after func(info store.LeaseInfo, ok bool, err error) (store.LeaseInfo, bool, error)
}

func (h acquireHook) AcquireLease(ctx context.Context, ns, holder string, ttl time.Duration) (store.LeaseInfo, bool, error) {
	info, ok, err := h.leaserStore.AcquireLease(ctx, ns, holder, ttl)
	return h.after(info, ok, err)
}

// TestCampaignKeepsLeaseWonAsCtxEnds: a lease won by the call during which Campaign's ctx
// ended is returned, not left in the store unrenewed for a TTL (ctx bounds the wait only).
func TestCampaignKeepsLeaseWonAsCtxEnds(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := acquireHook{leaserStore: memory.New(), after: func(info store.LeaseInfo, ok bool, err error) (store.LeaseInfo, bool, error) {
		if err == nil && ok {
			cancel() // ctx ends as the winning answer comes back
		}
		return info, ok, err
	}}
	e, err := sqllease.New(st, sqllease.WithTTL(ttl))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	electtest.CampaignWonAsCtxEnds(t, e, ctx, ttl)
}

// TestResignWakesCampaignOfSameElector: a Resign wakes the waiting campaigns of the same
// Elector (the conformance suite's electors are one per candidate, so it does not see this):
// the standby takes over well before its fallback poll (TTL/2) would have it try again.
func TestResignWakesCampaignOfSameElector(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	e, err := sqllease.New(memory.New(), sqllease.WithTTL(ttl))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	bg := context.Background()
	la, err := e.Campaign(bg, "a")
	if err != nil {
		t.Fatalf("Campaign(a): %v", err)
	}
	ctx, cancel := context.WithTimeout(bg, 5*ttl)
	defer cancel()
	type result struct {
		l   elect.Lease
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		l, err := e.Campaign(ctx, "b")
		done <- result{l, err, time.Now()}
	}()
	// Let b fail its first attempt and wait: its fallback poll is TTL/2 away.
	select {
	case r := <-done:
		t.Fatalf("Campaign(b) returned while a held the lease: %v, %v", r.l, r.err)
	case <-time.After(ttl / 5):
	}
	released := time.Now()
	if err := la.Resign(bg); err != nil {
		t.Fatalf("Resign() = %v, want nil", err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(ttl):
		t.Fatalf("Campaign(b) did not return within %v of the Resign", ttl)
	}
	if r.err != nil {
		t.Fatalf("Campaign(b) = %v", r.err)
	}
	defer r.l.Resign(bg)
	d := r.at.Sub(released)
	t.Logf("woken campaign acquired %v after Resign", d)
	if d >= ttl/10 {
		t.Fatalf("woken campaign acquired %v after Resign, want < %v (its fallback poll is %v)", d, ttl/10, ttl/2)
	}
	if r.l.Token() <= la.Token() {
		t.Fatalf("new holder's Token() = %d, want > %d", r.l.Token(), la.Token())
	}
}

// cancelMidAcquire ends the campaign's context while an acquire request is in flight,
// as a Stop would: the request goes on to the store.
type cancelMidAcquire struct {
	store.Store
	leaser store.Leaser
	cancel context.CancelFunc
}

func (c *cancelMidAcquire) AcquireLease(ctx context.Context, ns, holder string, ttl time.Duration) (store.LeaseInfo, bool, error) {
	c.cancel()
	return c.leaser.AcquireLease(ctx, ns, holder, ttl)
}

func (c *cancelMidAcquire) RenewLease(ctx context.Context, ns, holder string, epoch int64, ttl time.Duration) (bool, error) {
	return c.leaser.RenewLease(ctx, ns, holder, epoch, ttl)
}

func (c *cancelMidAcquire) ReleaseLease(ctx context.Context, ns, holder string, epoch int64) (bool, error) {
	return c.leaser.ReleaseLease(ctx, ns, holder, epoch)
}

func (c *cancelMidAcquire) Lease(ctx context.Context, ns string) (store.LeaseInfo, error) {
	return c.leaser.Lease(ctx, ns)
}

// TestCampaignCancelledMidAcquire: a campaign whose context ends while its acquire
// request is in flight still completes the request, and returns the lease it won
// rather than leave it held, unrenewed, in the store for a TTL.
func TestCampaignCancelledMidAcquire(t *testing.T) {
	t.Parallel()
	mem := memory.New()
	defer mem.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, err := sqllease.New(&cancelMidAcquire{Store: mem, leaser: mem, cancel: cancel}, sqllease.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	l, err := e.Campaign(ctx, "a")
	if err != nil {
		t.Fatalf("Campaign cancelled during its winning acquire: %v, want the lease", err)
	}
	defer l.Resign(context.Background())
	if st, err := e.Leader(context.Background()); err != nil || st.Holder != "a" || st.Token != l.Token() {
		t.Fatalf("Leader = %+v, %v; want a with token %d", st, err, l.Token())
	}
}
