package stats_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/internal/stats"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/memory"
)

// writer is the memory store's WriteStats, counted, and failed or held while a test
// says so.
type writer struct {
	st *memory.Store

	mu     sync.Mutex
	calls  int
	fail   error         // returned, after writing when lost is set
	lost   bool          // write, then fail: an unknown outcome
	hold   chan struct{} // when set, each call waits for it to close (or ctx)
	synced int           // calls that reached the store
}

func (w *writer) WriteStats(ctx context.Context, rows []store.MinuteStats) error {
	w.mu.Lock()
	w.calls++
	fail, lost, hold := w.fail, w.lost, w.hold
	w.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail != nil && !lost {
		return fail
	}
	if err := w.st.WriteStats(ctx, rows); err != nil {
		return err
	}
	w.mu.Lock()
	w.synced++
	w.mu.Unlock()
	return fail
}

func (w *writer) set(f func(w *writer)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(w)
}

func (w *writer) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls
}

type env struct {
	t   *testing.T
	w   *writer
	a   *stats.Aggregator
	log *bytes.Buffer
	mu  *sync.Mutex // guards log
}

// lockedBuffer lets the aggregator's goroutine log while the test reads.
type lockedBuffer struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (b lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// setup returns a started aggregator on a memory store, writing every 10 s with a
// one-second timeout; it is stopped at the end of the test.
func setup(t *testing.T) *env {
	t.Helper()
	st := memory.New()
	t.Cleanup(func() { st.Close() })
	e := &env{t: t, w: &writer{st: st}, log: &bytes.Buffer{}, mu: &sync.Mutex{}}
	log := slog.New(slog.NewTextHandler(lockedBuffer{e.mu, e.log}, nil))
	e.a = stats.New(stats.Config{Store: e.w, Node: "node-1", Log: log, Interval: 10 * time.Second, Timeout: time.Second})
	e.a.Start()
	t.Cleanup(func() { e.a.Stop(context.Background()) })
	return e
}

func (e *env) logged() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.log.String()
}

// rows reads the store's statistics since the bubble's start minus an hour.
func (e *env) rows() []store.MinuteStats {
	e.t.Helper()
	got, err := e.w.st.Stats(context.Background(), time.Now().Add(-time.Hour))
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

// task is a task named name, due at due and started late after it.
func task(name string, due time.Time, late time.Duration) *store.Task {
	return &store.Task{Name: name, DueAt: due, DispatchedAt: due.Add(late), StartedAt: due.Add(late)}
}

// The executions of a minute reach the store within an interval, counted by outcome,
// with their lateness in its buckets and the failing names, most first.
func TestRecordAndFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t)
		now := time.Now() // 2000-01-01 00:00:00 UTC: a whole minute
		due := now.Add(-time.Second)
		e.a.Record(now, task("ok", due, 500*time.Microsecond), observe.Succeeded, false)
		e.a.Record(now, task("ok", due, 30*time.Millisecond), observe.Succeeded, false)
		e.a.Record(now, task("charge", due, 2*time.Hour), observe.Failed, true)
		e.a.Record(now, task("charge", due, time.Millisecond), observe.Panicked, false)
		e.a.Record(now, task("boom", due, time.Millisecond), observe.TimedOut, false)
		e.a.Record(now, task("ok", due, time.Millisecond), observe.Released, false)
		e.a.Record(now, task("lost", due, time.Millisecond), observe.Orphaned, true)
		// A trigger: no lateness; an early start: lateness 0, counted.
		trig := task("ok", now.Add(time.Hour), 0)
		trig.DispatchedAt, trig.TriggeredAt, trig.StartedAt = now, now, now
		e.a.Record(now, trig, observe.Succeeded, false)
		e.a.Record(now, task("ok", due, -time.Millisecond), observe.Succeeded, false)

		time.Sleep(9 * time.Second)
		synctest.Wait()
		if got := e.rows(); len(got) != 0 {
			t.Fatalf("rows before the first interval = %+v, want none", got)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		want := store.MinuteStats{Node: "node-1", Minute: now.UTC(), Succeeded: 4, Failed: 1, Panicked: 1, TimedOut: 1,
			Released: 1, Orphaned: 1, Retried: 2, Early: 1, MaxLateness: 2 * time.Hour,
			Failures: []store.NameCount{{Name: "charge", Count: 2}, {Name: "boom", Count: 1}, {Name: "lost", Count: 1}}}
		// Buckets: 0.5ms and -1ms and 4 × 1ms in bucket 0, 30ms in 50ms (5), 2h overflow.
		want.Lateness[0], want.Lateness[5], want.Lateness[store.LatenessBuckets-1] = 6, 1, 1
		if d := cmp.Diff([]store.MinuteStats{want}, e.rows()); d != "" {
			t.Errorf("rows after an interval (-want +got):\n%s", d)
		}
	})
}

// Nothing changed: no store call. A write whose outcome was unknown is written again,
// whole: the stored totals are the minute's, never more.
func TestFlushIsIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t)
		now := time.Now()
		for range 3 {
			e.a.Record(now, task("ok", now, 0), observe.Succeeded, false)
		}
		e.w.set(func(w *writer) { w.fail, w.lost = errors.New("connection reset during commit"), true })
		time.Sleep(10 * time.Second)
		synctest.Wait()
		e.w.set(func(w *writer) { w.fail, w.lost = nil, false })
		e.a.Record(now.Add(time.Second), task("ok", now, 0), observe.Succeeded, false)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := e.rows(); len(got) != 1 || got[0].Succeeded != 4 {
			t.Fatalf("rows after a lost write and a retry = %+v, want one row of 4 succeeded", got)
		}
		calls := e.w.count()
		time.Sleep(60 * time.Second)
		synctest.Wait()
		if n := e.w.count(); n != calls {
			t.Errorf("store calls while nothing changed = %d, want 0", n-calls)
		}
		if err := e.a.Flush(context.Background()); err != nil || e.w.count() != calls {
			t.Errorf("Flush with nothing changed = %v after %d calls, want nil and none", err, e.w.count()-calls)
		}
		if !strings.Contains(e.logged(), "connection reset during commit") {
			t.Errorf("the failed write was not logged:\n%s", e.logged())
		}
	})
}

// Stop writes what changed since the last interval.
func TestStopFlushes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t)
		now := time.Now()
		e.a.Record(now, task("ok", now, 0), observe.Succeeded, false)
		time.Sleep(3 * time.Second)
		if err := e.a.Stop(context.Background()); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if got := e.rows(); len(got) != 1 || got[0].Succeeded != 1 {
			t.Fatalf("rows after Stop = %+v, want one row of 1 succeeded", got)
		}
		if err := e.a.Stop(context.Background()); err != nil {
			t.Errorf("second Stop: %v", err)
		}
	})
}

// A failing store is logged once per interval, at WARN, and Record never waits for
// the store, even while a write hangs.
func TestFailuresLoggedOncePerInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t)
		e.w.set(func(w *writer) { w.fail = errors.New("store down") })
		now := time.Now()
		e.a.Record(now, task("ok", now, 0), observe.Succeeded, false)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if n := strings.Count(e.logged(), "store down"); n != 3 {
			t.Errorf("store failures logged %d times in 3 intervals, want 3:\n%s", n, e.logged())
		}
		if !strings.Contains(e.logged(), "level=WARN") {
			t.Errorf("the failures were not logged at WARN:\n%s", e.logged())
		}
		hold := make(chan struct{})
		e.w.set(func(w *writer) { w.fail, w.hold = nil, hold })
		time.Sleep(10 * time.Second) // a write starts and waits
		synctest.Wait()
		for range 1000 {
			e.a.Record(time.Now(), task("ok", now, 0), observe.Succeeded, false)
		}
		close(hold)
		synctest.Wait()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := e.rows(); len(got) != 1 || got[0].Succeeded != 1001 {
			t.Errorf("rows after a held write = %+v, want one row of 1001 succeeded", got)
		}
	})
}

// Memory is bounded: minutes older than the previous one go once written, a record
// for one is dropped and logged; a minute keeps the top names only.
func TestBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t)
		m0 := time.Now()
		for i := range 25 {
			for range i + 1 {
				e.a.Record(m0, task(fmt.Sprintf("name-%02d", i), m0, 0), observe.Failed, false)
			}
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		got := e.rows()
		if len(got) != 1 || len(got[0].Failures) != store.MaxStatsNames || got[0].Failures[0] != (store.NameCount{Name: "name-24", Count: 25}) {
			t.Fatalf("rows = %+v, want one row with the %d names failing most, name-24 first", got, store.MaxStatsNames)
		}
		m2 := m0.Add(2 * time.Minute)
		e.a.Record(m2, task("ok", m0, 0), observe.Succeeded, false)
		e.a.Record(m0, task("ok", m0, 0), observe.Succeeded, false) // minute 0 is gone
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := e.rows(); len(got) != 2 || got[0].Succeeded != 0 || got[1].Succeeded != 1 {
			t.Errorf("rows = %+v, want minute 0 unchanged and minute 2 with 1 succeeded", got)
		}
		if !strings.Contains(e.logged(), "dropped=1") {
			t.Errorf("the dropped record was not logged:\n%s", e.logged())
		}
	})
}

// A nil aggregator takes every call.
func TestNil(t *testing.T) {
	var a *stats.Aggregator
	a.Start()
	a.Record(time.Now(), &store.Task{Name: "x"}, observe.Succeeded, false)
	if err := a.Flush(context.Background()); err != nil {
		t.Error(err)
	}
	if err := a.Stop(context.Background()); err != nil {
		t.Error(err)
	}
}
