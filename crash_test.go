package ax

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/internal/childproc"
	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/mysql"
	"github.com/axsched/ax/store/postgres"
	"github.com/axsched/ax/store/sqlite"
)

// The crash tests run a scheduler in a child process (this test binary, re-executed
// into TestCrashChild), kill -9 it at a chosen point, and start a new scheduler on the
// same database — a SQLite file, a fresh PostgreSQL schema, a fresh MariaDB database:
// nothing may be lost, nothing completed may run again.

const (
	crashModeEnv  = "AX_CRASH_CHILD"
	crashStoreEnv = "AX_CRASH_STORE"
	crashDBEnv    = "AX_CRASH_DB"
)

// openCrashStore opens the store of kind (sqlite, postgres, mysql) at dsn.
func openCrashStore(kind, dsn string) (Store, error) {
	switch kind {
	case "postgres":
		return postgres.Open(context.Background(), dsn)
	case "mysql":
		return mysql.Open(dsn)
	default:
		return sqlite.Open(dsn)
	}
}

// crashDatabases are where the crash tests run, by store kind: a fresh one per test.
var crashDatabases = map[string]func(t testing.TB) string{
	"sqlite":   func(t testing.TB) string { return filepath.Join(t.TempDir(), "ax.db") },
	"postgres": servicetest.PostgresDSN,
	"mysql":    servicetest.MySQLDSN,
}

// TestCrashChild is the child side; it does nothing unless run by TestCrashRecovery.
func TestCrashChild(t *testing.T) {
	mode := os.Getenv(crashModeEnv)
	if mode == "" {
		t.Skip("child process of TestCrashRecovery only")
	}
	out := childproc.NewWriter(os.Stdout)
	fail := func(err error) {
		out.Error(err)
		os.Exit(1)
	}
	st, err := openCrashStore(os.Getenv(crashStoreEnv), os.Getenv(crashDBEnv))
	if err != nil {
		fail(err)
	}
	s, err := New(Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), HeartbeatInterval: 100 * time.Millisecond, OrphanAfter: time.Minute})
	if err != nil {
		fail(err)
	}
	block := make(chan struct{})
	ctx := context.Background()
	s.HandleFunc("done", func(ctx context.Context, t *Task) error { return nil })
	s.HandleFunc("work", func(ctx context.Context, t *Task) error {
		out.Printf("RUNNING %d", t.ID)
		<-block // until killed
		return nil
	})
	// Killed right after the claim committed, before anything else: "claimed" with the
	// task started by the claim (RUNNING, its execution recorded), "dispatched" with it
	// claimed DISPATCHING (a task with a queued key is never started by the claim).
	hold := func(ts []store.Task) {
		for _, t := range ts {
			if t.Name == "work" {
				out.Printf("CLAIMED %d", t.ID)
				<-block
			}
		}
	}
	switch mode {
	case "claimed":
		s.hooks.afterClaim = func(_, started []store.Task) { hold(started) }
	case "dispatched":
		s.hooks.afterClaim = func(claimed, _ []store.Task) { hold(claimed) }
	}
	if err := s.Start(ctx); err != nil {
		fail(err)
	}
	mustDelay := func(name, key string, d time.Duration, opts ...TaskOption) {
		if _, err := s.Delay(ctx, name, key, d, opts...); err != nil {
			fail(err)
		}
	}
	// A task that completes before the crash: it must never run again.
	mustDelay("done", "finished-before-crash", 0)
	for {
		if t, err := s.Lookup(ctx, "done", "finished-before-crash"); err == nil && t.Status == Succeeded {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	switch mode {
	case "pending":
		// Due after the kill: some while no process runs, some after the restart. One
		// SubmitMany, timed from one instant: 50 Delays one after the other took over a
		// second on a loaded machine, and the first tasks fell due (and were claimed
		// and started) before the kill.
		base := time.Now().Add(500 * time.Millisecond)
		specs := make([]TaskSpec, 50)
		for i := range specs {
			specs[i] = TaskSpec{Name: "work", Key: fmt.Sprintf("pending-%d", i), DueAt: base.Add(time.Duration(i) * 40 * time.Millisecond)}
		}
		if _, err := s.SubmitMany(ctx, specs); err != nil {
			fail(err)
		}
		if late := time.Since(base); late > 0 {
			fail(fmt.Errorf("the pending tasks were written %v after the first fell due", late))
		}
		out.Printf("READY")
	case "running", "claimed":
		mustDelay("work", "crash", 0)
	case "dispatched":
		mustDelay("work", "crash", 0, WithTaskKey("crash"), WithOverlap(OverlapQueue))
	}
	<-block
}

func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for kind, database := range crashDatabases {
		for _, mode := range []string{"pending", "running", "claimed", "dispatched"} {
			t.Run(kind+"/"+mode, func(t *testing.T) {
				t.Parallel()
				crashRecovery(t, kind, database(t), mode)
			})
		}
	}
}

// crashRecovery kills a scheduler on the database (kind, dsn) at the point mode names
// and checks what a new one makes of it.
func crashRecovery(t *testing.T, kind, dsn, mode string) {
	marker := map[string]string{"pending": "READY", "running": "RUNNING", "claimed": "CLAIMED", "dispatched": "CLAIMED"}[mode]
	runChildUntil(t, mode, kind, dsn, marker)
	if mode == "pending" {
		time.Sleep(time.Second) // downtime: the first tasks fall due with no process running
	}

	st, err := openCrashStore(kind, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	s, err := New(Config{
		Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		HeartbeatInterval: 100 * time.Millisecond, OrphanAfter: time.Second, DispatchTimeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	runs := map[string][]time.Time{}
	record := func(ctx context.Context, t *Task) error {
		mu.Lock()
		runs[t.Key] = append(runs[t.Key], time.Now())
		mu.Unlock()
		return nil
	}
	s.HandleFunc("done", record)
	// An orphan's retry at once: the test waits for it.
	s.HandleFunc("work", record, WithBackoff(func(int) time.Duration { return 10 * time.Millisecond }))
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)

	keys := []string{"crash"}
	if mode == "pending" {
		keys = keys[:0]
		for i := range 50 {
			keys = append(keys, fmt.Sprintf("pending-%d", i))
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, key := range keys {
		for {
			task, err := s.Lookup(ctx, "work", key)
			if err != nil {
				t.Fatalf("Lookup(work, %s): %v", key, err)
			}
			if task.Status == Succeeded {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %s is %s after restart, want SUCCEEDED", key, task.Status)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if n := len(runs["finished-before-crash"]); n != 0 {
		t.Errorf("a task completed before the crash ran %d more times", n)
	}
	for _, key := range keys {
		task, _ := s.Lookup(ctx, "work", key)
		if n := len(runs[key]); n != 1 {
			t.Errorf("task %s ran %d times after restart, want 1", key, n)
		} else if runs[key][0].Before(task.DueAt) {
			t.Errorf("task %s ran %v before its due time", key, task.DueAt.Sub(runs[key][0]))
		}
		execs, err := s.Executions(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		switch mode {
		case "pending":
			if task.Attempt != 0 || len(execs) != 1 {
				t.Errorf("task %s: attempt %d, executions %+v; want 0, one", key, task.Attempt, execs)
			}
		case "running", "claimed":
			// The execution killed mid-handler, or after the claim recorded it
			// and before its handler ran (which no one can tell apart), is
			// orphaned and retried.
			if task.Attempt != 1 || len(execs) != 2 || execs[0].Status != Failed ||
				!strings.Contains(execs[0].Error, "orphaned") || execs[1].Status != Succeeded {
				t.Errorf("orphaned task: attempt %d, executions %+v; want attempt 1, an orphaned FAILED execution then a SUCCEEDED one", task.Attempt, execs)
			}
		case "dispatched":
			// The claim that never started is handed back as a dispatch failure.
			if task.Attempt != 0 || task.DispatchRetries != 1 || len(execs) != 1 || execs[0].Status != Succeeded {
				t.Errorf("stuck claim: attempt %d, dispatch retries %d, executions %+v; want 0, 1, one SUCCEEDED", task.Attempt, task.DispatchRetries, execs)
			}
		}
	}
}

// runChildUntil starts TestCrashChild in mode on the database (kind, dsn), waits until
// it prints marker, and kills it with SIGKILL.
func runChildUntil(t *testing.T, mode, kind, dsn, marker string) {
	t.Helper()
	child, err := childproc.Start(childproc.TestCommand("TestCrashChild"), childproc.Options{
		Name: "child " + mode, Env: []string{crashModeEnv + "=" + mode, crashStoreEnv + "=" + kind, crashDBEnv + "=" + dsn},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, waitErr := child.WaitLine(30*time.Second, marker)
	if _, err := child.Kill(); err != nil { // SIGKILL: no deferred code, no cleanup
		t.Fatal(err)
	}
	<-child.Done()
	if waitErr != nil {
		t.Fatalf("%v; its stderr:\n%s", waitErr, child.Stderr())
	}
}
