package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/sqlite"
	"github.com/axsched/ax/store/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "ax.db"))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { s.Close() }) // ErrClosed when the test closed it already
		return s
	})
}

func TestMigrations(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ax.db")
	if _, _, err := sqlite.SchemaStatus(path); err == nil {
		t.Errorf("SchemaStatus of a missing file: no error")
	}
	// Several openers at once migrate exactly once.
	errs := make(chan error, 5)
	for range 5 {
		go func() {
			s, err := sqlite.Open(path)
			if err == nil {
				err = s.Close()
			}
			errs <- err
		}()
	}
	for range 5 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent Open: %v", err)
		}
	}
	have, want, err := sqlite.SchemaStatus(path)
	if err != nil || have != want || want != sqlite.SchemaVersion() {
		t.Fatalf("SchemaStatus = %d, %d, %v; want %d, %d", have, want, err, sqlite.SchemaVersion(), sqlite.SchemaVersion())
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows int
	if err := db.QueryRow(`SELECT count(*) FROM ax_schema_migrations`).Scan(&rows); err != nil || rows != want {
		t.Errorf("%d migration rows (%v), want %d: applied once each", rows, err, want)
	}
	// Re-opening is a no-op; a newer schema is refused.
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatalf("re-open: %v", err)
	}
	s.Close()
	if _, err := db.Exec(`INSERT INTO ax_schema_migrations (version, applied_at) VALUES (999, 0)`); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.Open(path); !errors.Is(err, store.ErrSchemaVersion) {
		t.Errorf("Open of a newer schema: %v, want ErrSchemaVersion", err)
	}
}

func TestMigrateFromV1(t *testing.T) {
	t.Parallel()
	if v := sqlite.SchemaVersion(); v != 18 {
		t.Fatalf("SchemaVersion() = %d, want 18", v)
	}
	path := filepath.Join(t.TempDir(), "ax.db")
	if err := sqlite.MigrateTo(path, 1); err != nil {
		t.Fatalf("MigrateTo(1): %v", err)
	}
	if have, _, err := sqlite.SchemaStatus(path); err != nil || have != 1 {
		t.Fatalf("SchemaStatus after MigrateTo(1) = %d, %v; want 1", have, err)
	}
	// Rows as version 1 wrote them: one waiting, one running.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	past := time.Now().Add(-time.Hour).UnixMicro()
	if _, err := db.Exec(`INSERT INTO ax_tasks (name, key, status, due_at, execution_id, created_at, updated_at)
		VALUES ('v1', 'waiting', 'SCHEDULED', ?, NULL, ?, ?), ('v1', 'running', 'RUNNING', ?, 'exec-1', ?, ?)`,
		past, past, past, past, past, past); err != nil {
		t.Fatal(err)
	}

	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatalf("Open of a version 1 file: %v", err)
	}
	defer s.Close()
	if have, want, err := sqlite.SchemaStatus(path); err != nil || have != 18 || want != 18 {
		t.Fatalf("SchemaStatus after Open = %d, %d, %v; want 18, 18", have, want, err)
	}
	for _, name := range []string{"ax_tasks_ns_key_holder", "ax_schedules", "ax_leader", "ax_nodes", "ax_tasks_ns_succeeded", "ax_stats", "ax_slot_gaps_schedule", "ax_leadership"} {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = ?`, name).Scan(&n); err != nil || n != 1 {
			t.Errorf("%s: %d in sqlite_master (%v), want 1", name, n, err)
		}
	}
	ctx := t.Context()
	for _, key := range []string{"waiting", "running"} {
		old, err := s.Lookup(ctx, "v1", key)
		if err != nil {
			t.Fatalf("Lookup(v1, %s): %v", key, err)
		}
		if old.TaskKey != "" || old.Overlap != "" {
			t.Errorf("version 1 task %s: TaskKey, Overlap = %q, %q; want empty", key, old.TaskKey, old.Overlap)
		}
	}
	// Old and new rows work together: the old running task holds no key.
	old, _ := s.Lookup(ctx, "v1", "waiting")
	ins, err := s.Insert(ctx, []store.NewTask{{Name: "v2", Key: "keyed", DueAt: time.Now().Add(-time.Minute),
		TaskKey: "k", Overlap: store.OverlapSkip}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Claim(ctx, store.Fence{}, []store.Claim{{ID: old.ID, ExecutionID: "exec-2"}, {ID: ins[0].Task.ID, ExecutionID: "exec-3"}})
	if err != nil || len(res.Claimed) != 2 {
		t.Fatalf("Claim(v1 task, keyed task) = %+v, %v; want both claimed", res, err)
	}
	if sc, err := s.Schedules(ctx); err != nil || len(sc) != 0 {
		t.Errorf("Schedules after migration = %+v, %v; want none", sc, err)
	}
}

// TestOverlapAcrossStores claims, starts and finishes keyed tasks through two Stores
// opened on one file, as two processes would, while a third connection watches the
// table: the overlap rule rests on the file's write lock, not on anything inside one
// Store, so no snapshot may show two tasks of a key in flight.
func TestOverlapAcrossStores(t *testing.T) {
	t.Parallel()
	const keys, perKey, workers = 3, 20, 6
	path := filepath.Join(t.TempDir(), "ax.db")
	var stores [2]*sqlite.Store
	for i := range stores {
		s, err := sqlite.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var nts []store.NewTask
	for k := range keys {
		for i := range perKey {
			nts = append(nts, store.NewTask{Name: "across", Key: fmt.Sprintf("%d-%d", k, i),
				DueAt: time.Now().Add(-time.Hour), TaskKey: fmt.Sprintf("key-%d", k), Overlap: store.OverlapQueue})
		}
	}
	ins, err := stores[0].Insert(ctx, nts)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(ins))
	for i, in := range ins {
		ids[i] = in.Task.ID
	}

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	watch := make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		defer close(watch)
		for {
			select {
			case <-stop:
				return
			default:
			}
			var key string
			var n int
			err := db.QueryRowContext(ctx, `SELECT task_key, count(*) FROM ax_tasks
				WHERE status IN ('DISPATCHING', 'RUNNING') AND task_key <> '' GROUP BY task_key HAVING count(*) > 1`).Scan(&key, &n)
			if !errors.Is(err, sql.ErrNoRows) {
				watch <- fmt.Errorf("key %q held by %d tasks at once (%v)", key, n, err)
				return
			}
		}
	}()

	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			s := stores[w%2]
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for ctx.Err() == nil && done.Load() < int64(len(ids)) {
				pick := make([]store.Claim, 1+rng.IntN(8))
				for i := range pick {
					pick[i] = store.Claim{ID: ids[rng.IntN(len(ids))], ExecutionID: fmt.Sprintf("w%d-%d", w, rng.Uint64())}
				}
				res, err := s.Claim(ctx, store.Fence{}, pick)
				if err != nil {
					errs <- err
					return
				}
				for _, c := range res.Claimed {
					if _, err := s.Start(ctx, store.Fence{}, []store.StartParams{{TaskID: c.ID, ExecutionID: c.ExecutionID, Name: c.Name}}); err != nil {
						errs <- err
						return
					}
					if ok, err := s.Finish(ctx, store.Fence{}, []store.Finish{{TaskID: c.ID, ExecutionID: c.ExecutionID, Status: store.Succeeded}}); err != nil || !ok[0] {
						errs <- fmt.Errorf("Finish = %v, %v", ok, err)
						return
					}
					done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := <-watch; err != nil {
		t.Fatal(err)
	}
	if n := done.Load(); n != int64(len(ids)) {
		t.Fatalf("%d of %d tasks ran before the deadline", n, len(ids))
	}
}

// TestLimitAcrossStores claims, starts and finishes the tasks of a limited name
// through two Stores opened on one file, as two processes would, while a third
// connection watches the table: the count a claim reads is exact because the claim's
// transaction holds the file's write lock, so no snapshot may show more tasks of the
// name in flight than its limit. Half the workers ask ClaimStart to start them, which
// it must not.
func TestLimitAcrossStores(t *testing.T) {
	t.Parallel()
	const limit, tasks, workers = 2, 60, 6
	path := filepath.Join(t.TempDir(), "ax.db")
	var stores [2]*sqlite.Store
	for i := range stores {
		s, err := sqlite.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := stores[1].SetConcurrency(ctx, "limited", limit, "test"); err != nil {
		t.Fatal(err)
	}
	var nts []store.NewTask
	for i := range tasks {
		nts = append(nts, store.NewTask{Name: "limited", Key: fmt.Sprint(i), DueAt: time.Now().Add(-time.Hour)})
	}
	ins, err := stores[0].Insert(ctx, nts)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(ins))
	for i, in := range ins {
		ids[i] = in.Task.ID
	}

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	watch := make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		defer close(watch)
		for {
			select {
			case <-stop:
				return
			default:
			}
			var n int
			err := db.QueryRowContext(ctx, `SELECT count(*) FROM ax_tasks WHERE name = 'limited' AND status IN ('DISPATCHING', 'RUNNING')`).Scan(&n)
			if err != nil || n > limit {
				watch <- fmt.Errorf("%d tasks of a name limited to %d in flight at once (%v)", n, limit, err)
				return
			}
		}
	}()

	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			s := stores[w%2]
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			for ctx.Err() == nil && done.Load() < int64(len(ids)) {
				pick := make([]store.Claim, 1+rng.IntN(8))
				for i := range pick {
					pick[i] = store.Claim{ID: ids[rng.IntN(len(ids))], ExecutionID: fmt.Sprintf("w%d-%d", w, rng.Uint64()), Start: w%3 == 0}
				}
				res, err := s.ClaimStart(ctx, store.Fence{}, store.StartOn{Node: "n", Handlers: []string{"limited"}}, pick)
				if err != nil {
					errs <- err
					return
				}
				if len(res.Started) != 0 {
					errs <- fmt.Errorf("ClaimStart started %d tasks of a limited name", len(res.Started))
					return
				}
				for _, c := range res.Claimed {
					if _, err := s.Start(ctx, store.Fence{}, []store.StartParams{{TaskID: c.ID, ExecutionID: c.ExecutionID, Name: c.Name}}); err != nil {
						errs <- err
						return
					}
					if ok, err := s.Finish(ctx, store.Fence{}, []store.Finish{{TaskID: c.ID, ExecutionID: c.ExecutionID, Status: store.Succeeded}}); err != nil || !ok[0] {
						errs <- fmt.Errorf("Finish = %v, %v", ok, err)
						return
					}
					done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := <-watch; err != nil {
		t.Fatal(err)
	}
	if n := done.Load(); n != int64(len(ids)) {
		t.Fatalf("%d of %d tasks ran before the deadline", n, len(ids))
	}
}

// Execution records and node rows written before version 10 read with zero due and
// claim times, no lateness, and a zero clock offset.
func TestMigrateFromV9KeepsOldRecords(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ax.db")
	if err := sqlite.MigrateTo(path, 9); err != nil {
		t.Fatalf("MigrateTo(9): %v", err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	past := time.Now().Add(-time.Hour).UnixMicro()
	if _, err := db.Exec(`INSERT INTO ax_tasks (id, name, key, status, due_at, execution_id, created_at, updated_at, started_at)
		VALUES (1, 'v9', 'ran', 'RUNNING', ?, 'exec-9', ?, ?, ?)`, past, past, past, past); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO ax_executions (id, task_id, attempt, node, status, started_at, heartbeat_at)
		VALUES ('exec-9', 1, 0, 'node-9', 'RUNNING', ?, ?)`, past, past); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO ax_nodes (namespace, name, capacity, in_flight, started_at, heartbeat_at)
		VALUES ('default', 'node-9', 1, 0, ?, ?)`, past, time.Now().UnixMicro()); err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatalf("Open of a version 9 file: %v", err)
	}
	defer s.Close()
	execs, err := s.Executions(t.Context(), 1)
	if err != nil || len(execs) != 1 {
		t.Fatalf("Executions(1) = %+v, %v; want the one record", execs, err)
	}
	if x := execs[0]; !x.DueAt.IsZero() || !x.ClaimedAt.IsZero() || x.Lateness() != 0 || x.StartedAt.IsZero() {
		t.Errorf("a version 9 record reads %+v; want zero DueAt and ClaimedAt, no lateness, its StartedAt", x)
	}
	nodes, err := s.Nodes(t.Context(), time.Hour)
	if err != nil || len(nodes) != 1 || nodes[0].ClockOffset != 0 {
		t.Errorf("Nodes = %+v, %v; want node-9 with a zero ClockOffset", nodes, err)
	}
}

// TestRateAcrossStores claims the tasks of a rate-limited name through two Stores
// opened on one file, as two processes would: the claim times a claim reads and
// writes back are exact because its transaction holds the file's write lock, so no
// window of the period holds more claims than the rate, by the claims' own stamps
// as the table keeps them.
func TestRateAcrossStores(t *testing.T) {
	t.Parallel()
	const rate, per, tasks, workers = 3, 200 * time.Millisecond, 18, 6
	path := filepath.Join(t.TempDir(), "ax.db")
	var stores [2]*sqlite.Store
	for i := range stores {
		s, err := sqlite.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := stores[1].SetRate(ctx, "rated", rate, per, "test"); err != nil {
		t.Fatal(err)
	}
	var nts []store.NewTask
	for i := range tasks {
		nts = append(nts, store.NewTask{Name: "rated", Key: fmt.Sprint(i), DueAt: time.Now().Add(-time.Hour)})
	}
	ins, err := stores[0].Insert(ctx, nts)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(ins))
	for i, in := range ins {
		ids[i] = in.Task.ID
	}

	var claimed atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			s := stores[w%2]
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for ctx.Err() == nil && claimed.Load() < tasks {
				pick := make([]store.Claim, 1+rng.IntN(8))
				for i := range pick {
					pick[i] = store.Claim{ID: ids[rng.IntN(len(ids))], ExecutionID: fmt.Sprintf("w%d-%d", w, rng.Uint64())}
				}
				res, err := s.Claim(ctx, store.Fence{}, pick)
				if err != nil {
					errs <- err
					return
				}
				for _, l := range res.Limited {
					if l.Limit != rate || l.RetryAt.IsZero() {
						errs <- fmt.Errorf("Limited %+v, want the rate %d and a RetryAt", l, rate)
						return
					}
				}
				claimed.Add(int64(len(res.Claimed)))
				time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT dispatched_at FROM ax_tasks WHERE name = 'rated' AND status = 'DISPATCHING' ORDER BY dispatched_at`)
	if err != nil {
		t.Fatal(err)
	}
	var at []int64
	for rows.Next() {
		var us int64
		if err := rows.Scan(&us); err != nil {
			t.Fatal(err)
		}
		at = append(at, us)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(at) != tasks {
		t.Fatalf("%d tasks claimed, want %d", len(at), tasks)
	}
	for i := range at {
		j := i
		for j < len(at) && at[j]-at[i] <= per.Microseconds() {
			j++
		}
		if j-i > rate {
			t.Fatalf("%d claims in the window [%d, +%v], over the rate of %d", j-i, at[i], per, rate)
		}
	}
}

// TestRateChanged: the claims recorded under a rate limit count toward the limit it
// is changed to, and removing the limit forgets them.
func TestRateChanged(t *testing.T) {
	t.Parallel()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "ax.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	if st, err := s.SetRate(ctx, "never", 0, time.Second, "test"); err != nil || *st != (store.NameState{Name: "never"}) {
		t.Fatalf("SetRate(0) of a name never stored = %+v, %v; want its zero state", st, err)
	}
	if names, err := s.Names(ctx); err != nil || len(names) != 0 {
		t.Fatalf("Names = %+v, %v; want none stored", names, err)
	}
	setRate := func(n int, per time.Duration) {
		t.Helper()
		if _, err := s.SetRate(ctx, "m", n, per, "test"); err != nil {
			t.Fatal(err)
		}
	}
	var nts []store.NewTask
	for i := range 4 {
		nts = append(nts, store.NewTask{Name: "m", Key: fmt.Sprint(i), DueAt: time.Now().Add(-time.Hour)})
	}
	ins, err := s.Insert(ctx, nts)
	if err != nil {
		t.Fatal(err)
	}
	claim := func(i int) *store.ClaimResult {
		t.Helper()
		res, err := s.Claim(ctx, store.Fence{}, []store.Claim{{ID: ins[i].Task.ID, ExecutionID: fmt.Sprint("e", i)}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	setRate(2, time.Hour)
	claim(0)
	claim(1)
	setRate(3, time.Hour)
	if res := claim(2); len(res.Claimed) != 1 {
		t.Fatalf("third claim under a rate raised to 3 = %+v, want it claimed", res)
	}
	if res := claim(3); len(res.Limited) != 1 || res.Limited[0].Limit != 3 {
		t.Fatalf("fourth claim under a rate of 3 = %+v, want it Limited: the claims before the change count", res)
	}
	setRate(0, 0)
	setRate(1, time.Hour)
	if res := claim(3); len(res.Claimed) != 1 {
		t.Fatalf("claim after the rate was removed and set again = %+v, want it claimed: the old claims forgotten", res)
	}
}

// TestKeyConcurrencyAcrossChunks claims, in one call, more winners than one
// statement takes, two of them sharing a key: the first due, of a name admitting
// one task per key, has the higher id, the other of a name admitting three. The
// winners' writes re-check the key in the order the claim admitted them, so the
// first does not find the key taken by the second, claimed in an earlier statement.
func TestKeyConcurrencyAcrossChunks(t *testing.T) {
	t.Parallel()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "ax.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	for name, n := range map[string]int{"wide": 3, "fill": 2} {
		if _, err := s.SetKeyConcurrency(ctx, name, n, "test"); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	nts := []store.NewTask{{Name: "wide", Key: "w", DueAt: now.Add(-time.Hour), TaskKey: "k", Overlap: store.OverlapQueue}}
	for i := range store.MaxBatch { // restricted too: their name has a key concurrency
		nts = append(nts, store.NewTask{Name: "fill", Key: fmt.Sprint(i), DueAt: now.Add(-time.Hour)})
	}
	nts = append(nts, store.NewTask{Name: "narrow", Key: "n", DueAt: now.Add(-2 * time.Hour), TaskKey: "k", Overlap: store.OverlapQueue})
	ins, err := s.Insert(ctx, nts)
	if err != nil {
		t.Fatal(err)
	}
	claims := make([]store.Claim, len(ins))
	for i, r := range ins {
		claims[i] = store.Claim{ID: r.Task.ID, ExecutionID: fmt.Sprint("e", i)}
	}
	res, err := s.Claim(ctx, store.Fence{}, claims)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if len(res.Claimed) != len(ins) {
		t.Fatalf("claimed %d of %d tasks (blocked %+v), want every one: the key admits the wide task beside the narrow one",
			len(res.Claimed), len(ins), res.Blocked)
	}
}

// TestPruneKeyStarts: PruneKeyStarts deletes the claim times of a key whose last
// claim is more than store.MaxRatePer old (aged here through SQL), and keeps a key's
// claimed now, which a window still reaches.
func TestPruneKeyStarts(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ax.db")
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	if _, err := s.SetKeyRate(ctx, "sync", 5, time.Hour, "test"); err != nil {
		t.Fatal(err)
	}
	var nts []store.NewTask
	for _, key := range []string{"old", "fresh"} {
		nts = append(nts, store.NewTask{Name: "sync", Key: key, DueAt: time.Now().Add(-time.Hour), TaskKey: key, Overlap: store.OverlapQueue})
	}
	ins, err := s.Insert(ctx, nts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Claim(ctx, store.Fence{}, []store.Claim{{ID: ins[0].Task.ID, ExecutionID: "e0"}, {ID: ins[1].Task.ID, ExecutionID: "e1"}})
	if err != nil || len(res.Claimed) != 2 {
		t.Fatalf("Claim = %+v, %v; want both claimed", res, err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	aged := time.Now().Add(-25 * time.Hour).UnixMicro()
	if r, err := db.ExecContext(ctx, `UPDATE ax_key_starts SET last_at = ? WHERE name = 'sync' AND task_key = 'old'`, aged); err != nil {
		t.Fatal(err)
	} else if n, _ := r.RowsAffected(); n != 1 {
		t.Fatalf("aged %d rows of key old, want its one: the claim recorded none", n)
	}
	if n, err := s.PruneKeyStarts(ctx, 10); err != nil || n != 1 {
		t.Fatalf("PruneKeyStarts = %d, %v; want 1: the aged key's", n, err)
	}
	var keys []string
	rows, err := db.QueryContext(ctx, `SELECT task_key FROM ax_key_starts ORDER BY task_key`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != "fresh" {
		t.Fatalf("key starts left = %v, want [fresh]", keys)
	}
	if n, err := s.PruneKeyStarts(ctx, 10); err != nil || n != 0 {
		t.Fatalf("PruneKeyStarts again = %d, %v; want 0", n, err)
	}
}
