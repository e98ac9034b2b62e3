package mysql_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/mysql"
)

// Two stores on one database (two pools, as two processes would have) claim at once
// the tasks of three limited names, some of them keyed across the names: never more
// tasks of a name DISPATCHING or RUNNING than its limit, no key held twice, and every
// task runs. Each claim mixes names and keys, so claimers take names' and keys' locks
// in many combinations; they queue, in one order, rather than fail.
func TestLimitRaceTwoStores(t *testing.T) {
	t.Parallel()
	dsn := servicetest.MySQLDSN(t)
	stores := []*mysql.Store{openDSN(t, dsn), openDSN(t, dsn)}
	ctx := t.Context()
	names := []string{"limit.a", "limit.b", "limit.c"}
	limits := map[string]int{"limit.a": 1, "limit.b": 2, "limit.c": 3}
	for _, name := range names {
		if _, err := stores[0].SetConcurrency(ctx, name, limits[name], "test"); err != nil {
			t.Fatal(err)
		}
	}
	now, _ := stores[0].Now(ctx)
	const tasks = 60
	var nts []store.NewTask
	for i := range tasks {
		nt := newTask(fmt.Sprintf("race-%d", i), now.Add(-time.Duration(tasks-i)*time.Millisecond))
		nt.Name = names[i%3]
		if i%4 == 0 {
			nt.TaskKey, nt.Overlap = fmt.Sprintf("key-%d", i%3), store.OverlapQueue // a key shared by two names
		}
		nts = append(nts, nt)
	}
	res, err := stores[0].Insert(ctx, nts)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.Task.ID
	}
	var mu sync.Mutex
	active, most := map[string]int{}, map[string]int{}
	keys := map[string]int{}
	var done atomic.Int64
	var wg sync.WaitGroup
	for w := range 6 {
		s := stores[w%2]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for ctx.Err() == nil && done.Load() < tasks && !t.Failed() {
				pick := make([]store.Claim, 1+rng.IntN(8))
				for i := range pick {
					pick[i] = store.Claim{ID: ids[rng.IntN(len(ids))], ExecutionID: fmt.Sprintf("exec-%d-%d", w, rng.Uint64())}
				}
				res, err := s.Claim(ctx, store.Fence{}, pick)
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				for _, l := range res.Limited {
					if l.Limit != limits[l.Name] {
						t.Errorf("Limited %+v, want limit %d", l, limits[l.Name])
					}
				}
				for _, c := range res.Claimed {
					mu.Lock()
					active[c.Name]++
					most[c.Name] = max(most[c.Name], active[c.Name])
					if c.TaskKey != "" {
						if keys[c.TaskKey]++; keys[c.TaskKey] > 1 {
							t.Errorf("task key %s claimed while held", c.TaskKey)
						}
					}
					mu.Unlock()
					if _, err := s.Start(ctx, store.Fence{}, []store.StartParams{{TaskID: c.ID, ExecutionID: c.ExecutionID, Name: c.Name}}); err != nil {
						t.Errorf("Start: %v", err)
						return
					}
					mu.Lock() // out of the count before the write that frees the slot
					active[c.Name]--
					if c.TaskKey != "" {
						keys[c.TaskKey]--
					}
					mu.Unlock()
					if ok, err := s.Finish(ctx, store.Fence{}, []store.Finish{{TaskID: c.ID, ExecutionID: c.ExecutionID, Status: store.Succeeded}}); err != nil || !ok[0] {
						t.Errorf("Finish = %v, %v", ok, err)
						return
					}
					done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	for _, name := range names {
		if most[name] > limits[name] {
			t.Errorf("%d tasks of %s in flight at once, over its limit %d", most[name], name, limits[name])
		}
	}
	if n := done.Load(); n != tasks {
		t.Fatalf("%d of %d tasks ran", n, tasks)
	}
}

// A claim of a limited name's tasks adds two statements — the names' lock and the
// count of their tasks in flight — and no key statement when no key rules; a claim of
// other tasks costs what it did, whether or not some name is limited.
func TestClaimLimitedStatements(t *testing.T) {
	t.Parallel()
	s, db := newWithDB(t, func(cfg *gomysql.Config) { cfg.InterpolateParams = true })
	db.SetMaxOpenConns(1)
	ctx := t.Context()
	if _, err := s.SetConcurrency(ctx, "limited", 2, "test"); err != nil {
		t.Fatal(err)
	}
	now, _ := s.Now(ctx)
	var nts []store.NewTask
	for i := range 6 {
		nt := newTask(fmt.Sprintf("cost-%d", i), now.Add(-time.Duration(6-i)*time.Second))
		if i >= 3 {
			nt.Name = "limited"
		}
		nts = append(nts, nt)
	}
	res, err := s.Insert(ctx, nts)
	if err != nil {
		t.Fatal(err)
	}
	claim := func(idx ...int) (*store.ClaimResult, int) {
		var claims []store.Claim
		for _, i := range idx {
			claims = append(claims, store.Claim{ID: res[i].Task.ID, ExecutionID: fmt.Sprintf("exec-%d", i)})
		}
		before := statements(t, db)
		got, err := s.Claim(ctx, store.Fence{}, claims)
		if err != nil {
			t.Fatal(err)
		}
		return got, statements(t, db) - before - 1 // the second SHOW counts itself
	}
	const plain = 6 // SET TRANSACTION, START TRANSACTION, SELECT … FOR UPDATE, UPDATE, SELECT, COMMIT
	if got, n := claim(0, 1, 2); len(got.Claimed) != 3 || n != plain {
		t.Errorf("Claim of 3 tasks of a name without a limit: %d claimed in %d statements, want 3 in %d", len(got.Claimed), n, plain)
	}
	// SET TRANSACTION, START TRANSACTION, SELECT … FOR UPDATE, the name's lock, its
	// count, the UPDATE, the SELECT back, COMMIT.
	got, n := claim(5, 4, 3)
	if n != plain+2 {
		t.Errorf("Claim of 3 tasks of a name limited to 2: %d statements, want %d", n, plain+2)
	}
	if ids := taskIDs(got.Claimed); !slices.Equal(ids, []int64{res[3].Task.ID, res[4].Task.ID}) {
		t.Errorf("Claimed %v, want the two due first, %d and %d", ids, res[3].Task.ID, res[4].Task.ID)
	}
	if len(got.Limited) != 1 || got.Limited[0].ID != res[5].Task.ID || got.Limited[0].Name != "limited" || got.Limited[0].Limit != 2 {
		t.Errorf("Limited = %+v, want task %d of limited, limit 2", got.Limited, res[5].Task.ID)
	}
}

// taskIDs returns the ids of ts.
func taskIDs(ts []store.Task) []int64 {
	ids := make([]int64, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	return ids
}

// A claim of more limited names than a statement takes (store.MaxBatch) locks and
// counts them chunk by chunk: one task of each claimed, the second limited.
func TestClaimLimitedManyNames(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := t.Context()
	const names = store.MaxBatch + 20
	now, _ := s.Now(ctx)
	var nts []store.NewTask
	for i := range names {
		name := fmt.Sprintf("many.%03d", i)
		if _, err := s.SetConcurrency(ctx, name, 1, "test"); err != nil {
			t.Fatal(err)
		}
		for j := range 2 {
			nt := newTask(fmt.Sprintf("%d-%d", i, j), now.Add(-time.Duration(2-j)*time.Second))
			nt.Name = name
			nts = append(nts, nt)
		}
	}
	res, err := s.Insert(ctx, nts)
	if err != nil {
		t.Fatal(err)
	}
	claims := make([]store.Claim, len(res))
	for i, r := range res {
		claims[i] = store.Claim{ID: r.Task.ID, ExecutionID: fmt.Sprintf("exec-%d", i)}
	}
	got, err := s.Claim(ctx, store.Fence{}, claims)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Claimed) != names || len(got.Limited) != names {
		t.Fatalf("Claim of %d names' tasks: %d claimed, %d limited; want %d each", names, len(got.Claimed), len(got.Limited), names)
	}
	for i, c := range got.Claimed {
		if c.Key != fmt.Sprintf("%d-0", i) {
			t.Errorf("claimed %s/%s, want the one due first of %s", c.Name, c.Key, c.Name)
		}
	}
}

// Trigger of a FAILED task of a limited name makes it due as MakeDue does — SCHEDULED,
// one more attempt, FinishedAt cleared, a fresh sequence number the refill brings —
// in the store's own transaction and in a bound one alike.
func TestTriggerLimitedFailed(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := t.Context()
	if _, err := s.SetConcurrency(ctx, "limited", 1, "test"); err != nil {
		t.Fatal(err)
	}
	now, _ := s.Now(ctx)
	failed := func(key string) store.Task {
		t.Helper()
		nt := newTask(key, now.Add(-time.Second))
		nt.Name, nt.MaxRetry = "limited", 0
		ins, err := s.Insert(ctx, []store.NewTask{nt})
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Claim(ctx, store.Fence{}, []store.Claim{{ID: ins[0].Task.ID, ExecutionID: "exec-" + key}})
		if err != nil || len(res.Claimed) != 1 {
			t.Fatalf("Claim = %+v, %v", res, err)
		}
		if _, err := s.Start(ctx, store.Fence{}, []store.StartParams{{TaskID: ins[0].Task.ID, ExecutionID: "exec-" + key, Name: "limited"}}); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.Finish(ctx, store.Fence{}, []store.Finish{{TaskID: ins[0].Task.ID, ExecutionID: "exec-" + key, Status: store.Failed, Error: "boom"}}); err != nil || !ok[0] {
			t.Fatalf("Finish = %v, %v", ok, err)
		}
		got, err := s.Get(ctx, ins[0].Task.ID)
		if err != nil || got.Status != store.Failed {
			t.Fatalf("Get = %+v, %v; want FAILED", got, err)
		}
		return *got
	}
	check := func(how string, before store.Task, got *store.Task, err error) {
		t.Helper()
		if err != nil || got.Status != store.Scheduled || got.Attempt != before.Attempt+1 || !got.FinishedAt.IsZero() || got.TriggeredAt.IsZero() {
			t.Errorf("%s of a FAILED task of a limited name = %+v, %v; want SCHEDULED, attempt %d, no FinishedAt, TriggeredAt", how, got, err, before.Attempt+1)
		}
	}
	cursor := func() int64 {
		t.Helper()
		r, err := s.Refill(ctx, store.RefillParams{To: now.Add(time.Hour), Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return r.Seq
	}
	a, b := failed("a"), failed("b")
	after := cursor()
	got, err := s.Trigger(ctx, a.ID, "exec-a2")
	check("Trigger", a, got, err)
	err = s.InTx(ctx, func(tx store.Tx) error {
		got, err := tx.Trigger(ctx, b.ID, "exec-b2")
		check("Trigger in a transaction", b, got, err)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Refill(ctx, store.RefillParams{AfterSeq: after, To: now.Add(time.Hour), Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var changed []int64
	for _, d := range r.Changed {
		changed = append(changed, d.ID)
	}
	slices.Sort(changed)
	if !slices.Equal(changed, []int64{a.ID, b.ID}) {
		t.Errorf("Refill after the triggers: changed %v, want %d and %d", changed, a.ID, b.ID)
	}
}

// TestMigrateNameLimitsInstantly: migration 14 adds ax_names.concurrency instantly
// (ALGORITHM = INSTANT, which fails rather than rebuild the table), and a name paused
// before it reads paused, without a limit.
func TestMigrateNameLimitsInstantly(t *testing.T) {
	t.Parallel()
	dsn := servicetest.MySQLDSN(t)
	db := rawDB(t, dsn)
	const limits = 14 // 0014_name_limits.sql
	if err := mysql.MigrateTo(db, limits-1); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO ax_names (namespace, name, paused, changed_by, changed_at)
		VALUES ('default', 'report', TRUE, 'alice', UTC_TIMESTAMP(6))`); err != nil {
		t.Fatal(err)
	}
	stmts := mysql.Statements(mustRead(t, "migrations/0014_name_limits.sql"), collation(t, db))
	for _, q := range stmts {
		if _, err := db.Exec(q + ", ALGORITHM = INSTANT"); err != nil {
			t.Fatalf("%v:\n%s", err, q)
		}
	}
	if _, err := db.Exec(`INSERT INTO ax_schema_migrations (version, step, started_at, applied_at)
		VALUES (?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`, limits, len(stmts)); err != nil {
		t.Fatal(err)
	}
	s := openDSN(t, dsn)
	ctx := t.Context()
	names, err := s.Names(ctx)
	if err != nil || len(names) != 1 || !names[0].Paused || names[0].Concurrency != 0 || names[0].ChangedBy != "alice" {
		t.Fatalf("Names = %+v, %v; want report paused by alice, no limit", names, err)
	}
	st, err := s.SetConcurrency(ctx, "report", 4, "bob")
	if err != nil || !st.Paused || st.Concurrency != 4 || st.ChangedBy != "bob" {
		t.Errorf("SetConcurrency = %+v, %v; want report paused, limited to 4, by bob", st, err)
	}
}

// SetConcurrency of no limit writes no row for a name never stored, and answers its
// zero state; on a limited name it lifts the limit and records who did.
func TestSetConcurrencyZero(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := t.Context()
	st, err := s.SetConcurrency(ctx, "fresh", 0, "alice")
	if err != nil || *st != (store.NameState{Name: "fresh"}) {
		t.Errorf("SetConcurrency(fresh, 0) = %+v, %v; want the zero state of fresh", st, err)
	}
	if names, err := s.Names(ctx); err != nil || len(names) != 0 {
		t.Errorf("Names = %+v, %v; want none", names, err)
	}
	if _, err := s.SetConcurrency(ctx, "report", 3, "alice"); err != nil {
		t.Fatal(err)
	}
	st, err = s.SetConcurrency(ctx, "report", 0, "bob")
	if err != nil || st.Concurrency != 0 || st.ChangedBy != "bob" || st.ChangedAt.IsZero() {
		t.Errorf("SetConcurrency(report, 0) = %+v, %v; want no limit, by bob", st, err)
	}
	if names, err := s.Names(ctx); err != nil || len(names) != 1 || names[0].Concurrency != 0 {
		t.Errorf("Names = %+v, %v; want report, no limit", names, err)
	}
}
