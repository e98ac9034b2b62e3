package ax_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/internal/storecount"
	"github.com/axsched/ax/store/memory"
)

// A graceful Stop keeps heartbeating the execution it waits for: a handler that runs
// past OrphanAfter while its scheduler stops is not taken for an orphan by another
// scheduler on the store, runs once, and ends SUCCEEDED.
func TestStopNeverCausesARerun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		defer st.Close()
		ctx := context.Background()
		var runs, inFlight, overlapped atomic.Int32
		started := make(chan struct{}, 2)
		handler := func(ctx context.Context, task *ax.Task) error {
			runs.Add(1)
			if inFlight.Add(1) > 1 {
				overlapped.Store(1)
			}
			defer inFlight.Add(-1)
			started <- struct{}{}
			time.Sleep(6 * time.Minute) // longer than the default OrphanAfter (5m)
			return nil
		}
		newSched := func() *ax.Scheduler {
			s := newScheduler(t, st, nil)
			s.HandleFunc("report", handler)
			return s
		}
		a, b := newSched(), newSched()
		if err := a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		task, err := a.Delay(ctx, "report", "nightly", 0)
		if err != nil {
			t.Fatal(err)
		}
		<-started
		if err := b.Start(ctx); err != nil {
			t.Fatal(err)
		}
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		if err := a.Stop(stopCtx); err != nil {
			t.Fatalf("Stop(10m) of the scheduler running a 6m handler: %v, want nil", err)
		}
		// B keeps running long enough to recover an orphan, were there one.
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		got, err := b.Get(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		execs, _ := b.Executions(ctx, task.ID)
		if got.Status != ax.Succeeded || runs.Load() != 1 || overlapped.Load() != 0 || len(execs) != 1 {
			t.Errorf("task %s, handler ran %d times (overlapping: %v), %d executions; want SUCCEEDED, once, 1",
				got.Status, runs.Load(), overlapped.Load() == 1, len(execs))
		}
		stop(t, b)
	})
}

// Stop returns ctx.Err() by its deadline when the store cannot take the results; the
// execution it could not record is recovered as an orphan and run again — not lost.
func TestStopHonoursItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, failFinish := hangingStore(t, "Finish")
		ctx := context.Background()
		s := newScheduler(t, st, nil)
		release := make(chan struct{})
		s.HandleFunc("job", func(ctx context.Context, task *ax.Task) error { <-release; return nil })
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		task, err := s.Delay(ctx, "job", "k", 0)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		failFinish.Store(true)
		close(release) // the handler returns; its result cannot be written
		stopCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		t0 := time.Now()
		err = s.Stop(stopCtx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop with an unreachable store: %v, want DeadlineExceeded", err)
		}
		if took := time.Since(t0); took > 3*time.Second {
			t.Errorf("Stop returned after %v, past its 3s deadline", took)
		}
		if st.Snapshot().Calls["Finish"] == 0 {
			t.Fatal("the result was never offered to the store")
		}
		failFinish.Store(false)

		if got := mustGet(t, s, task.ID); got.Status != ax.Running {
			t.Fatalf("unrecorded execution left %s, want RUNNING for recovery", got.Status)
		}
		s2 := newScheduler(t, st, nil)
		var runs atomic.Int32
		s2.HandleFunc("job", func(ctx context.Context, task *ax.Task) error { runs.Add(1); return nil })
		if err := s2.Start(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(ax.DefaultOrphanAfter + ax.DefaultBackoff(1) + time.Minute)
		synctest.Wait()
		got := mustGet(t, s2, task.ID)
		if got.Status != ax.Succeeded || runs.Load() != 1 || got.Attempt != 1 {
			t.Errorf("after recovery: %s, %d runs, attempt %d; want SUCCEEDED, 1, attempt 1 (the lost result counts as a failed attempt)",
				got.Status, runs.Load(), got.Attempt)
		}
		stop(t, s2)
	})
}

// hangingStore is a memory store whose calls to method hang, as on an unreachable
// database, until their context ends, while the returned flag is set.
func hangingStore(t *testing.T, method string) (*storecount.Store, *atomic.Bool) {
	mem := memory.New()
	t.Cleanup(func() { mem.Close() })
	st := storecount.New(mem)
	var hanging atomic.Bool
	st.Before = func(ctx context.Context, m string) error {
		if m == method && hanging.Load() {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	return st, &hanging
}

// Start does its store I/O without a lock: a slow Start holds up no other method.
func TestStartHoldsNoLock(t *testing.T) {
	t.Parallel()
	// The first Now, Start's, blocks until unblock is closed.
	st := storecount.New(openSQLite(t))
	blocked, unblock := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	st.Before = func(ctx context.Context, method string) error {
		if method == "Now" && first.CompareAndSwap(false, true) {
			close(blocked)
			<-unblock
		}
		return nil
	}
	s := newScheduler(t, st, nil)
	ctx := context.Background()
	started := make(chan error, 1)
	go func() { started <- s.Start(ctx) }()
	select {
	case <-blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("Start never called the store's Now")
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		s.HandleFunc("job", func(ctx context.Context, task *ax.Task) error { return nil })
		if _, err := s.Delay(ctx, "job", "during-start", 0); err != nil {
			t.Errorf("Delay during Start: %v", err)
		}
		if _, err := s.Schedules(ctx); err != nil {
			t.Errorf("Schedules during Start: %v", err)
		}
		if err := s.Stop(ctxWithTimeout(t, 10*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Stop during Start: %v, want to wait for Start until its context ends", err)
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Delay, Handle or Schedules waited for a blocked Start")
	}
	close(unblock)
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Start did not return once its store call was unblocked")
	}
	task, err := s.Lookup(ctx, "job", "during-start")
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, task.ID, ax.Succeeded, 10*time.Second)

	if err := s.Start(ctx); !errors.Is(err, ax.ErrNotRunning) || !strings.Contains(err.Error(), "already started") {
		t.Errorf("Start twice: %v, want ErrNotRunning saying already started", err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := s.Stop(ctxWithTimeout(t, time.Millisecond)); err != nil {
		t.Errorf("second Stop: %v, want nil at once", err)
	}
	if err := s.Start(ctx); !errors.Is(err, ax.ErrNotRunning) || !strings.Contains(err.Error(), "create a new one") {
		t.Errorf("Start after Stop: %v, want ErrNotRunning saying to create a new scheduler", err)
	}
}

func ctxWithTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// logCapture is a slog handler that keeps every record as its level and a line: the
// message and its attributes, key=value.
type logCapture struct {
	mu      sync.Mutex
	levels  []slog.Level
	records []string
}

func (h *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCapture) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logCapture) WithGroup(string) slog.Handler            { return h }
func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	h.mu.Lock()
	h.levels = append(h.levels, r.Level)
	h.records = append(h.records, line)
	h.mu.Unlock()
	return nil
}

// matching returns the records at level or above that contain sub.
func (h *logCapture) matching(level slog.Level, sub string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for i, line := range h.records {
		if h.levels[i] >= level && strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return out
}

// A clean Stop in the middle of a stream of tasks logs nothing at ERROR: what it
// interrupts (claims, refills, recovery) is shutdown, not failure.
func TestCleanStopUnderLoadLogsNoError(t *testing.T) {
	t.Parallel()
	logs := &logCapture{}
	st := openSQLite(t)
	s := newScheduler(t, st, func(c *ax.Config) {
		c.Logger = slog.New(logs)
		c.RefillInterval = 10 * time.Millisecond
		c.HeartbeatInterval = 20 * time.Millisecond
		c.OrphanAfter = time.Minute
	})
	var ran atomic.Int32
	s.HandleFunc("job", func(ctx context.Context, task *ax.Task) error {
		ran.Add(1)
		time.Sleep(time.Duration(task.ID%20) * time.Millisecond)
		return nil
	})
	if err := s.Start(ctx0); err != nil {
		t.Fatal(err)
	}
	specs := make([]ax.TaskSpec, 3000)
	now := time.Now()
	for i := range specs {
		specs[i] = ax.TaskSpec{Name: "job", Key: "k" + strconv.Itoa(i), DueAt: now.Add(time.Duration(i) * time.Millisecond)}
	}
	if _, err := s.SubmitMany(ctx0, specs); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a few hundred tasks to run", func() bool { return ran.Load() >= 300 })
	if err := s.Stop(ctxWithTimeout(t, 30*time.Second)); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if errs := logs.matching(slog.LevelError, ""); len(errs) > 0 {
		t.Errorf("a clean Stop under load logged %d errors, the first: %s", len(errs), errs[0])
	}
}

var ctx0 = context.Background()

// A cancelled or expired context makes the submitting and changing calls return its
// error and write nothing.
func TestCallsWithADoneContextWriteNothing(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, openSQLite(t), nil)
	s.HandleFunc("job", func(ctx context.Context, task *ax.Task) error { return nil })
	start(t, s)
	ctx := context.Background()
	task, err := s.Delay(ctx, "job", "existing", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	expired, cancel2 := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want error
	}{{"cancelled", cancelled, context.Canceled}, {"expired", expired, context.DeadlineExceeded}} {
		if _, err := s.Delay(c.ctx, "job", "delay-"+c.name, 0); !errors.Is(err, c.want) {
			t.Errorf("Delay(%s ctx) = %v, want %v", c.name, err, c.want)
		}
		if _, err := s.At(c.ctx, "job", "at-"+c.name, time.Now()); !errors.Is(err, c.want) {
			t.Errorf("At(%s ctx) = %v, want %v", c.name, err, c.want)
		}
		if _, err := s.SubmitMany(c.ctx, []ax.TaskSpec{{Name: "job", Key: "many-" + c.name, DueAt: time.Now()}}); !errors.Is(err, c.want) {
			t.Errorf("SubmitMany(%s ctx) = %v, want %v", c.name, err, c.want)
		}
		if err := s.Cancel(c.ctx, "job", "existing"); !errors.Is(err, c.want) {
			t.Errorf("Cancel(%s ctx) = %v, want %v", c.name, err, c.want)
		}
		if err := s.Trigger(c.ctx, task.ID); !errors.Is(err, c.want) {
			t.Errorf("Trigger(%s ctx) = %v, want %v", c.name, err, c.want)
		}
		for _, key := range []string{"delay-", "at-", "many-"} {
			if _, err := s.Lookup(ctx, "job", key+c.name); !errors.Is(err, ax.ErrNotFound) {
				t.Errorf("after a %s call, task %q: %v, want ErrNotFound (nothing written)", c.name, key+c.name, err)
			}
		}
	}
	got, err := s.Get(ctx, task.ID)
	if err != nil || got.Status != ax.Scheduled || !got.TriggeredAt.IsZero() {
		t.Errorf("existing task after cancelled Cancel/Trigger: %+v, %v; want SCHEDULED, never triggered", got, err)
	}
}

// Stop keeps to its deadline in the steps around the handlers too: handing back the
// claimed tasks that never started, and the last heartbeat call.
func TestStopHonoursItsContextInEveryStep(t *testing.T) {
	for _, hang := range []string{"Requeue", "Heartbeat"} {
		t.Run(hang, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st, hanging := hangingStore(t, hang)
				ctx := context.Background()
				s := newScheduler(t, st, func(c *ax.Config) { c.Concurrency = 1 })
				run := 100 * time.Millisecond // Requeue: the others wait behind it
				if hang == "Heartbeat" {
					run = 12 * time.Second // past the first heartbeat, at 10s
				}
				s.HandleFunc("job", func(ctx context.Context, task *ax.Task) error { time.Sleep(run); return nil })
				if err := s.Start(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Delay(ctx, "job", "a", 0); err != nil {
					t.Fatal(err)
				}
				synctest.Wait() // a runs
				// Triggered, the others are DISPATCHING, pending behind it: Stop hands
				// them back (a claim would start no more than the one free slot).
				for _, key := range []string{"b", "c", "d"} {
					task, err := s.Delay(ctx, "job", key, time.Hour)
					if err != nil {
						t.Fatal(err)
					}
					if err := s.Trigger(ctx, task.ID); err != nil {
						t.Fatal(err)
					}
				}
				synctest.Wait()
				hanging.Store(true)
				if hang == "Heartbeat" {
					time.Sleep(11 * time.Second) // a heartbeat call is in flight, hanging
				}
				stopCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				t0 := time.Now()
				err := s.Stop(stopCtx)
				if took := time.Since(t0); took > 2*time.Second {
					t.Errorf("Stop returned after %v with %s hanging, past its 2s deadline", took, hang)
				}
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Stop with %s hanging: %v, want DeadlineExceeded", hang, err)
				}
				// The hanging calls end with their own timeouts (the bubble's clock
				// stands still once this function returns, so wait for them here).
				time.Sleep(ax.DefaultStoreTimeout + 5*time.Second)
				synctest.Wait()
			})
		})
	}
}

// Stop on a scheduler that was never started, or is stopped, returns nil even when
// its context has already ended: there is nothing to wait for.
func TestStopWithEndedContextIsNoOp(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, openSQLite(t), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 20 { // a select of a free lifecycle and a done ctx would fail about half
		if err := s.Stop(ctx); err != nil {
			t.Fatalf("Stop of a scheduler never started, ctx done: %v, want nil", err)
		}
	}
	started := newScheduler(t, openSQLite(t), nil)
	if err := started.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := started.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if err := started.Stop(ctx); err != nil {
			t.Fatalf("Stop of a stopped scheduler, ctx done: %v, want nil", err)
		}
	}
}
