package redis_test

import (
	"context"
	"strings"
	"sync"
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
