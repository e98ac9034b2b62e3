//go:build linux

package clustertest_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/axsched/ax/internal/clustertest"
	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/mysql"
	"github.com/axsched/ax/store/postgres"
)

// Every test must leave no goroutine behind: children reaped, store and clients closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestChild is the child side of the harness; it skips unless run by StartChild.
func TestChild(t *testing.T) { clustertest.RunChild(t) }

// redisDB is the Redis database the tests elect in, under a fresh key prefix each
// (the one elect/redis's tests share; none of them flushes it).
const redisDB = 14

// cluster is one test's replicas: child processes on one PostgreSQL schema (or MySQL
// database), elected under one Redis key prefix, and the parent's own store on it.
type cluster struct {
	t      *testing.T
	dir    string
	base   clustertest.ChildConfig
	st     store.Store
	rc     *goredis.Client // the test's own client of the election's Redis, direct
	prefix string          // the election's key prefix
	dsn    string          // the schema's DSN, direct (PostgreSQL only)

	mu       sync.Mutex
	children []*clustertest.Child
}

// newCluster makes a fresh schema and key prefix, opens the parent's store on the
// schema (migrating it before any child opens it) and returns a cluster whose children
// take base's timings.
func newCluster(t *testing.T, base clustertest.ChildConfig) *cluster {
	t.Helper()
	return newClusterOn(t, base, servicetest.PostgresDSN(t))
}

// newClusterOn is newCluster with the children's store at dsn, a fresh schema of
// another PostgreSQL (a failing-over cluster's).
func newClusterOn(t *testing.T, base clustertest.ChildConfig, dsn string) *cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	base.PostgresDSN = dsn
	c := newClusterWith(t, base, st)
	c.dsn = dsn
	return c
}

// newClusterOnMySQL is newCluster with the children's store at dsn, a fresh MySQL
// database (a Galera cluster's).
func newClusterOnMySQL(t *testing.T, base clustertest.ChildConfig, dsn string) *cluster {
	t.Helper()
	st, err := mysql.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	base.MySQLDSN = dsn
	return newClusterWith(t, base, st)
}

// newClusterWith is a cluster whose parent store is st, already open (and migrated)
// on the children's database, under a fresh Redis key prefix.
func newClusterWith(t *testing.T, base clustertest.ChildConfig, st store.Store) *cluster {
	t.Helper()
	addr, prefix := servicetest.RedisAddr(t)
	rc := goredis.NewClient(&goredis.Options{Addr: addr, DB: redisDB})
	t.Cleanup(func() {
		// After the children are killed (cleanups run last-registered first): the
		// lease expires by itself, the epoch key would not.
		if _, err := deletePrefix(context.Background(), rc, prefix); err != nil {
			t.Log(err)
		}
		rc.Close()
	})
	base.RedisAddr, base.RedisDB, base.RedisPrefix = addr, redisDB, prefix
	return &cluster{t: t, dir: logDir(t), base: base, st: st, rc: rc, prefix: prefix}
}

// deletePrefix deletes every key of the election under prefix, and no other: those
// that start with prefix and those that start with "{"+prefix (the epoch counter's
// hash tag). SCAN, then DEL. It returns the keys deleted.
func deletePrefix(ctx context.Context, rc *goredis.Client, prefix string) ([]string, error) {
	var keys []string
	for _, match := range []string{prefix + "*", "{" + prefix + "*"} {
		iter := rc.Scan(ctx, 0, match, 100).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return nil, fmt.Errorf("scan %s: %w", match, err)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	if err := rc.Del(ctx, keys...).Err(); err != nil {
		return nil, fmt.Errorf("delete %v: %w", keys, err)
	}
	return keys, nil
}

// newSecret returns a cluster secret of 32 random bytes, for every child of a test.
func newSecret(t *testing.T) []byte {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// viaProxy returns dsn (a URL) with its host:port replaced by addr, a proxy's.
func viaProxy(t *testing.T, dsn, addr string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse the DSN: %v", err)
	}
	u.Host = addr
	return u.String()
}

// postgresHost is the host:port of the test PostgreSQL, for a proxy in front of it.
func (c *cluster) postgresHost() string {
	c.t.Helper()
	u, err := url.Parse(c.dsn)
	if err != nil {
		c.t.Fatalf("parse the DSN: %v", err)
	}
	return u.Host
}

// logDir is where the children's run logs and stderr go: a directory of the test's
// own, kept after the test under $AX_CLUSTERTEST_LOGS when that is set.
func logDir(t *testing.T) string {
	t.Helper()
	root := os.Getenv("AX_CLUSTERTEST_LOGS")
	if root == "" {
		return t.TempDir()
	}
	dir := filepath.Join(root, fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("children's logs in %s", dir)
	return dir
}

// spawn starts one more child, node-<n>, without waiting for it.
func (c *cluster) spawn() *clustertest.Child { return c.spawnWith(nil) }

// spawnWith starts one more child, node-<n>, with the base config changed by mod
// (when given), without waiting for it.
func (c *cluster) spawnWith(mod func(cfg *clustertest.ChildConfig)) *clustertest.Child {
	c.t.Helper()
	c.mu.Lock()
	n := len(c.children) + 1
	c.mu.Unlock()
	cfg := c.base
	cfg.Node = fmt.Sprintf("node-%d", n)
	cfg.RunLog = filepath.Join(c.dir, cfg.Node+".jsonl")
	if mod != nil {
		mod(&cfg)
	}
	ch := clustertest.StartChild(c.t, cfg)
	c.mu.Lock()
	c.children = append(c.children, ch)
	c.mu.Unlock()
	return ch
}

// start starts n children and waits until each has started its scheduler.
func (c *cluster) start(n int) []*clustertest.Child {
	c.t.Helper()
	var cs []*clustertest.Child
	for range n {
		cs = append(cs, c.spawn())
	}
	for _, ch := range cs {
		c.ready(ch)
	}
	return cs
}

// ready waits until ch has started its scheduler.
func (c *cluster) ready(ch *clustertest.Child) {
	c.t.Helper()
	if _, err := ch.WaitLine("READY", 60*time.Second); err != nil {
		c.t.Fatal(err)
	}
}

// all returns every child started, in order.
func (c *cluster) all() []*clustertest.Child {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.children)
}

// waitLeader waits until exactly one child leads and returns it and its epoch.
func (c *cluster) waitLeader(timeout time.Duration) (*clustertest.Child, int64) {
	c.t.Helper()
	var leader *clustertest.Child
	var err error
	waitUntil(c.t, timeout, "exactly one child leads", func() bool {
		leader, err = clustertest.Leader(c.all())
		return err == nil
	})
	_, epoch := leader.Leading()
	return leader, epoch
}

// waitNewLeader waits until a child other than old prints LEADING with an epoch above
// epoch, and returns it and that line.
func (c *cluster) waitNewLeader(old *clustertest.Child, epoch int64, timeout time.Duration) (*clustertest.Child, clustertest.Line) {
	c.t.Helper()
	var next *clustertest.Child
	var lead clustertest.Line
	waitUntil(c.t, timeout, fmt.Sprintf("a child other than %s leads with an epoch above %d", old.Node(), epoch), func() bool {
		for _, ch := range c.all() {
			if ch == old {
				continue
			}
			for _, l := range ch.Lines() {
				if l.Epoch() > epoch {
					next, lead = ch, l
					return true
				}
			}
		}
		return false
	})
	return next, lead
}

// logs returns the run log paths of every child.
func (c *cluster) logs() []string {
	var paths []string
	for _, ch := range c.all() {
		paths = append(paths, ch.Config.RunLog)
	}
	return paths
}

// deaths returns, by pid, when each child that exited was reaped.
func (c *cluster) deaths() map[int]time.Time {
	d := map[int]time.Time{}
	for _, ch := range c.all() {
		if at, ok := ch.DiedAt(); ok {
			d[ch.PID()] = at
		}
	}
	return d
}

// starts reads ch's run log and returns its handler starts after after.
func (c *cluster) starts(ch *clustertest.Child, after time.Time) []clustertest.Entry {
	c.t.Helper()
	es, err := clustertest.ReadRunLog(ch.Config.RunLog)
	if err != nil {
		c.t.Fatal(err)
	}
	var out []clustertest.Entry
	for _, e := range es {
		if e.Event == clustertest.EventStart && e.At.After(after) {
			out = append(out, e)
		}
	}
	return out
}

// waitSettled waits until every task of l is terminal.
func (c *cluster) waitSettled(l *load, timeout time.Duration) {
	c.t.Helper()
	if err := l.wait(timeout); err != nil {
		c.t.Fatal(err)
	}
	n := len(l.dues())
	var counts map[store.Status]int64
	waitUntil(c.t, timeout, fmt.Sprintf("all %d tasks terminal", n), func() bool {
		now, err := c.st.Now(context.Background())
		if err != nil {
			return false
		}
		s, err := c.st.TaskStats(context.Background(), now)
		if err != nil {
			return false
		}
		counts = s.Counts
		return s.Counts[store.Succeeded]+s.Counts[store.Failed]+s.Counts[store.Cancelled]+s.Counts[store.Skipped] == int64(n)
	}, func() string { return fmt.Sprintf("tasks per status: %v", counts) })
}

// verify reads the whole history of l's tasks and checks it (verifyDues).
func (c *cluster) verify(l *load) clustertest.Summary {
	c.t.Helper()
	return c.verifyDues(l.dues())
}

// history reads the whole history of l's tasks, for Verify (see verifyDues).
func (c *cluster) history(l *load) clustertest.History { return c.historyOf(l.dues()) }

// historyOf reads the whole history of the tasks in dues, with ctx-aware handlers and
// the deaths of the children that exited.
func (c *cluster) historyOf(dues map[int64]time.Time) clustertest.History {
	h := c.collect(dues)
	h.CtxAware = true
	h.Deaths = c.deaths()
	return h
}

// verifyDues reads the whole history of the tasks in dues (id → due time as
// submitted) and checks it (Verify), with ctx-aware handlers and the deaths of the
// children that exited.
func (c *cluster) verifyDues(dues map[int64]time.Time) clustertest.Summary {
	c.t.Helper()
	sum := clustertest.Verify(c.t, c.historyOf(dues))
	c.t.Logf("history: %v", sum)
	if c.t.Failed() {
		for _, ch := range c.all() {
			c.t.Logf("%s (pid %d): logs in %s; printed %s", ch.Node(), ch.PID(), ch.Stderr, printed(ch))
		}
	}
	return sum
}

// printed lists the lines a child printed, for a failure message.
func printed(ch *clustertest.Child) string {
	var texts []string
	for _, l := range ch.Lines() {
		texts = append(texts, fmt.Sprintf("[%s] %s", l.Received.Format("15:04:05.000"), l.Text))
	}
	return strings.Join(texts, "; ")
}

// load is a steady stream of delayed tasks inserted straight into the store.
type load struct {
	mu   sync.Mutex
	due  map[int64]time.Time // task id → due time as submitted
	err  error
	done chan struct{}
}

// startLoad inserts n tasks, batch at a time every interval, each due ahead of the
// store's clock at the time of its insert (the batch's tasks spread over the
// interval), until n are written or the test ends.
func startLoad(t *testing.T, st store.Store, n, batch int, every, ahead time.Duration) *load {
	return startKeyedLoad(t, st, n, batch, every, ahead, 0)
}

// startKeyedLoad is startLoad whose tasks, with keys above 0, have task keys: task i
// key-(i mod keys), with Overlap queue.
func startKeyedLoad(t *testing.T, st store.Store, n, batch int, every, ahead time.Duration, keys int) *load {
	l := &load{due: map[int64]time.Time{}, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); <-l.done })
	go func() {
		defer close(l.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		retries := []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}
		for i := 0; i < n; {
			now, err := st.Now(ctx)
			if err != nil {
				l.fail(err)
				return
			}
			var tasks []store.NewTask
			for j := 0; j < batch && i < n; j, i = j+1, i+1 {
				nt := store.NewTask{
					Name: clustertest.TaskName, Key: fmt.Sprintf("task-%04d", i),
					DueAt:    now.Add(ahead + time.Duration(j)*every/time.Duration(batch)),
					MaxRetry: len(retries), Backoff: retries,
				}
				if keys > 0 {
					nt.TaskKey, nt.Overlap = fmt.Sprintf("key-%d", i%keys), store.OverlapQueue
				}
				tasks = append(tasks, nt)
			}
			res, err := st.Insert(ctx, tasks)
			if err != nil {
				l.fail(err)
				return
			}
			l.mu.Lock()
			for k, r := range res {
				if r.Err != nil {
					l.err = r.Err
				}
				l.due[r.Task.ID] = tasks[k].DueAt
			}
			l.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return l
}

func (l *load) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = err
}

// wait waits until every task is written.
func (l *load) wait(timeout time.Duration) error {
	select {
	case <-l.done:
	case <-time.After(timeout):
		return fmt.Errorf("load: not all tasks written within %v", timeout)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return fmt.Errorf("load: %w", l.err)
	}
	return nil
}

// dues returns the tasks written so far: id → due time as submitted.
func (l *load) dues() map[int64]time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int64]time.Time, len(l.due))
	for id, d := range l.due {
		out[id] = d
	}
	return out
}

// waitUntil polls cond until it is true, and fails t when timeout passes first;
// detail, when given, adds the state seen last to the failure.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool, detail ...func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("%s: not within %v", what, timeout)
			for _, d := range detail {
				msg += "; " + d()
			}
			t.Fatal(msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
