package redis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/axsched/ax/elect"
	"github.com/axsched/ax/elect/electtest"
	"github.com/axsched/ax/elect/redis"
	"github.com/axsched/ax/internal/servicetest"
)

// Databases: the conformance suite, whose data-loss case runs FLUSHDB, owns dbSuite; every
// other test shares dbShared under its own key prefix. No test uses FLUSHALL.
const (
	dbSuite  = 15
	dbShared = 14
)

// newClient returns a client of database db of the test Redis, and a fresh key prefix for
// the test; servicetest.RedisAddr skips the test when Redis is unreachable (failing instead
// when AX_REQUIRE_SERVICES=1).
func newClient(t *testing.T, db int, hooks ...goredis.Hook) (c *goredis.Client, prefix string) {
	t.Helper()
	addr, prefix := servicetest.RedisAddr(t)
	c = goredis.NewClient(&goredis.Options{Addr: addr, DB: db})
	for _, h := range hooks {
		c.AddHook(h)
	}
	t.Cleanup(func() { c.Close() })
	return c, prefix
}

// freezer blocks every command of one client while frozen: a frozen process.
type freezer struct{ electtest.Freezer }

func (f *freezer) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (f *freezer) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if err := f.Wait(ctx); err != nil {
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (f *freezer) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		if err := f.Wait(ctx); err != nil {
			return err
		}
		return next(ctx, cmds)
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	admin, _ := newClient(t, dbSuite)
	var (
		mu       sync.Mutex
		freezers = map[elect.Elector]*freezer{}
		prefixes = map[string]string{} // per case: its electors share one key
	)
	electtest.Run(t, electtest.Harness{
		New: func(t *testing.T, ttl time.Duration) elect.Elector {
			f := &freezer{}
			c, prefix := newClient(t, dbSuite, f)
			mu.Lock()
			if p, ok := prefixes[t.Name()]; ok {
				prefix = p
			} else {
				prefixes[t.Name()] = prefix
			}
			mu.Unlock()
			ns := strings.ReplaceAll(t.Name(), "/", ":")
			e := redis.New(c, redis.WithKeyPrefix(prefix), redis.WithNamespace(ns), redis.WithTTL(ttl))
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
		WakesOnRelease: true,
		LoseData: func(t *testing.T) {
			if err := admin.FlushDB(context.Background()).Err(); err != nil {
				t.Fatalf("FLUSHDB: %v", err)
			}
		},
	})
}

func TestKeys(t *testing.T) {
	t.Parallel()
	c, prefix := newClient(t, dbShared)
	e := redis.New(c, redis.WithKeyPrefix(prefix), redis.WithNamespace("orders"), redis.WithTTL(time.Second))
	ctx := context.Background()
	l, err := e.Campaign(ctx, "node-1")
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	defer l.Resign(ctx)
	key := prefix + "leader:orders"
	v, err := c.Get(ctx, key).Result()
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	if want := "1 "; !strings.HasPrefix(v, want) || !strings.HasSuffix(v, " node-1") {
		t.Fatalf("GET %s = %q, want \"1 <id> node-1\"", key, v)
	}
	pttl, err := c.PTTL(ctx, key).Result()
	if err != nil || pttl <= 0 || pttl > time.Second {
		t.Fatalf("PTTL %s = %v, %v, want in (0, 1s]", key, pttl, err)
	}
	epoch, err := c.Get(ctx, "{"+key+"}:epoch").Int64()
	if err != nil || epoch != l.Token() {
		t.Fatalf("GET epoch = %d, %v, want %d", epoch, err, l.Token())
	}
}

func TestNewRejectsShortTTL(t *testing.T) {
	t.Parallel()
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("New(WithTTL(10ms)) did not panic")
		}
	}()
	c := goredis.NewClient(&goredis.Options{Addr: servicetest.DefaultRedisAddr}) // never dialled
	defer c.Close()
	redis.New(c, redis.WithTTL(10*time.Millisecond))
}

// acquireHook lets a test act on the replies to one client's acquire script (the only
// script the Elector runs on two keys): after sees each reply and may replace its error.
type acquireHook struct {
	after func(ctx context.Context, cmd goredis.Cmder, err error) error
}

func (h acquireHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h acquireHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		if a := cmd.Args(); len(a) > 2 && (cmd.Name() == "evalsha" || cmd.Name() == "eval") && fmt.Sprint(a[2]) == "2" {
			err = h.after(ctx, cmd, err)
		}
		return err
	}
}

func (h acquireHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// acquired reports whether cmd is a successful acquire: a reply {1, token, value}.
func acquired(cmd goredis.Cmder, err error) bool {
	if err != nil {
		return false
	}
	c, ok := cmd.(*goredis.Cmd)
	if !ok {
		return false
	}
	res, err := c.Slice()
	return err == nil && len(res) == 3 && res[0] == int64(1)
}

// TestCampaignKeepsLeaseWonAsCtxEnds: a lease won by the request during which Campaign's ctx
// ended is returned, not left in Redis unrenewed for a TTL (ctx bounds the wait only).
func TestCampaignKeepsLeaseWonAsCtxEnds(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, prefix := newClient(t, dbShared, acquireHook{after: func(_ context.Context, cmd goredis.Cmder, err error) error {
		if acquired(cmd, err) {
			cancel() // ctx ends as the winning reply comes back
		}
		return err
	}})
	e := redis.New(c, redis.WithKeyPrefix(prefix), redis.WithTTL(ttl))
	electtest.CampaignWonAsCtxEnds(t, e, ctx, ttl)
}

// TestCampaignLostAcquireReply: when the reply to a successful acquire is lost, the next
// attempt recognises the campaign's own lease and takes it, with its token, instead of
// waiting it out as another holder's.
func TestCampaignLostAcquireReply(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Second
	errLost := errors.New("reply lost")
	var dropped atomic.Bool
	var later atomic.Int32 // replies to the acquires after the lost one
	c, prefix := newClient(t, dbShared, acquireHook{after: func(_ context.Context, cmd goredis.Cmder, err error) error {
		if dropped.Load() && err == nil {
			later.Add(1)
		}
		if acquired(cmd, err) && dropped.CompareAndSwap(false, true) {
			cmd.SetErr(errLost) // the script ran, but its reply never arrives
			return errLost
		}
		return err
	}})
	e := redis.New(c, redis.WithKeyPrefix(prefix), redis.WithTTL(ttl))
	// ctx only keeps a broken campaign from hanging: the attempts are counted below.
	ctx, cancel := context.WithTimeout(context.Background(), 10*ttl)
	defer cancel()
	l, err := e.Campaign(ctx, "a")
	if err != nil {
		t.Fatalf("Campaign = %v", err)
	}
	defer l.Resign(context.Background())
	if !dropped.Load() {
		t.Fatal("the hook dropped no acquire reply")
	}
	// After the failed attempt it waits the fallback poll (TTL/2) once, and the very next
	// attempt takes the lease: an attempt that saw its own lease as another holder's would
	// be answered "held" and wait again, for the lease's remaining TTL.
	if n := later.Load(); n != 1 {
		t.Fatalf("Campaign made %d acquire attempts after its first reply was lost, want 1 (one fallback poll)", n)
	}
	if l.Token() != 1 {
		t.Fatalf("Token() = %d, want 1: the lease the lost reply had won", l.Token())
	}
	s, err := e.Leader(context.Background())
	if err != nil || s.Holder != "a" || s.Token != l.Token() || s.Remaining <= ttl-ttl/10 {
		t.Fatalf("Leader() = %+v, %v; want a, token %d, remaining near the TTL (re-expired)", s, err, l.Token())
	}
}
