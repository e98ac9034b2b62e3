package mysql_test

import (
	"errors"
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

// Two stores on one database claim at once the tasks of three keys, shared by a name
// admitting three tasks a key, a name admitting two that also has a concurrency
// limit, and a name with the rule of one: never more than three tasks of a key
// DISPATCHING or RUNNING, never more of the limited name than its limit, and every
// task runs. Claims mix the names, so claimers take names' and keys' locks in many
// combinations; they queue, in one order, rather than fail.
func TestKeyConcurrencyRaceTwoStores(t *testing.T) {
	t.Parallel()
	dsn := servicetest.MySQLDSN(t)
	stores := []*mysql.Store{openDSN(t, dsn), openDSN(t, dsn)}
	ctx := t.Context()
	if _, err := stores[0].SetKeyConcurrency(ctx, "wide", 3, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[0].SetKeyConcurrency(ctx, "capped", 2, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[0].SetConcurrency(ctx, "capped", 2, "test"); err != nil {
		t.Fatal(err)
	}
	names := []string{"wide", "wide", "capped", "narrow"}
	now, _ := stores[0].Now(ctx)
	const tasks, keys = 72, 3
	var nts []store.NewTask
	for i := range tasks {
		nt := newTask(fmt.Sprintf("race-%d", i), now.Add(-time.Duration(tasks-i)*time.Millisecond))
		nt.Name = names[i%len(names)]
		nt.TaskKey, nt.Overlap = fmt.Sprintf("key-%d", i%keys), store.OverlapQueue
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
	perKey, most := map[string]int{}, map[string]int{}
	capped, mostCapped := 0, 0
	var done atomic.Int64
	var wg sync.WaitGroup
	for w := range 6 {
		s := stores[w%2]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 5))
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
				for _, c := range res.Claimed {
					mu.Lock()
					perKey[c.TaskKey]++
					most[c.TaskKey] = max(most[c.TaskKey], perKey[c.TaskKey])
					if c.Name == "capped" {
						capped++
						mostCapped = max(mostCapped, capped)
					}
					mu.Unlock()
					if _, err := s.Start(ctx, store.Fence{}, []store.StartParams{{TaskID: c.ID, ExecutionID: c.ExecutionID, Name: c.Name}}); err != nil {
						t.Errorf("Start: %v", err)
						return
					}
					mu.Lock() // out of the count before the write that frees the key
					perKey[c.TaskKey]--
					if c.Name == "capped" {
						capped--
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
	for k, n := range most {
		if n > 3 {
			t.Errorf("%d tasks of key %s in flight at once, over the widest key concurrency, 3", n, k)
		}
	}
	if mostCapped > 2 {
		t.Errorf("%d tasks of capped in flight at once, over its limit 2", mostCapped)
	}
	if n := done.Load(); n != tasks {
		t.Fatalf("%d of %d tasks ran", n, tasks)
	}
}

// A claim of the tasks of a name with a key concurrency takes the name's lock, which
// a key's rule alone does not, and counts the key's holders in the statement that
// reads them: one statement more than a keyed claim. A claim that wins none writes
// nothing.
func TestClaimKeyConcurrencyStatements(t *testing.T) {
	t.Parallel()
	s, db := newWithDB(t, func(cfg *gomysql.Config) { cfg.InterpolateParams = true })
	db.SetMaxOpenConns(1)
	ctx := t.Context()
	if _, err := s.SetKeyConcurrency(ctx, "multi", 2, "test"); err != nil {
		t.Fatal(err)
	}
	now, _ := s.Now(ctx)
	var nts []store.NewTask
	for i := range 3 {
		nt := newTask(fmt.Sprintf("cost-%d", i), now.Add(-time.Duration(3-i)*time.Second))
		nt.Name, nt.TaskKey, nt.Overlap = "multi", "k", store.OverlapQueue
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
	// SET TRANSACTION, START TRANSACTION, SELECT … FOR UPDATE, the name's lock, the key
	// lock, the key's row (its first use), the holders counted, the UPDATE, the SELECT
	// back, COMMIT.
	got, n := claim(2, 1, 0)
	if n != 10 {
		t.Errorf("Claim of 3 tasks of one key, 2 admitted: %d statements, want 10", n)
	}
	if ids := taskIDs(got.Claimed); !slices.Equal(ids, []int64{res[0].Task.ID, res[1].Task.ID}) {
		t.Errorf("Claimed %v, want the two due first, %d and %d", ids, res[0].Task.ID, res[1].Task.ID)
	}
	if len(got.Blocked) != 1 || got.Blocked[0].ID != res[2].Task.ID || got.Blocked[0].TaskKey != "k" {
		t.Errorf("Blocked = %+v, want task %d of key k", got.Blocked, res[2].Task.ID)
	}
	// SET TRANSACTION, START TRANSACTION, SELECT … FOR UPDATE, the name's lock, the key
	// lock, the holders counted, COMMIT.
	if got, n := claim(2); len(got.Blocked) != 1 || n != 7 {
		t.Errorf("Claim of a task of a key held by 2, 2 admitted = %+v in %d statements, want it Blocked in 7", got, n)
	}
}

// A claim of one key's tasks of two names, the first due admitting one holder and
// the next two, wins both: the UPDATE of the winner admitting one runs first, and the
// other's finds one holder, fewer than it admits. The other way round, the second
// finds the key held and is blocked.
func TestClaimKeyConcurrencyMixed(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := t.Context()
	if _, err := s.SetKeyConcurrency(ctx, "multi", 2, "test"); err != nil {
		t.Fatal(err)
	}
	now, _ := s.Now(ctx)
	task := func(name, key string, due time.Duration) store.NewTask {
		nt := newTask(fmt.Sprintf("%s-%s", name, key), now.Add(due))
		nt.Name, nt.TaskKey, nt.Overlap = name, key, store.OverlapQueue
		return nt
	}
	res, err := s.Insert(ctx, []store.NewTask{
		task("multi", "a", -time.Second), task("single", "a", -2*time.Second), // the one admitting one first
		task("multi", "b", -2*time.Second), task("single", "b", -time.Second), // the one admitting two first
	})
	if err != nil {
		t.Fatal(err)
	}
	var claims []store.Claim
	for i, r := range res {
		claims = append(claims, store.Claim{ID: r.Task.ID, ExecutionID: fmt.Sprintf("exec-%d", i)})
	}
	got, err := s.Claim(ctx, store.Fence{}, claims)
	if err != nil {
		t.Fatal(err)
	}
	if ids, want := taskIDs(got.Claimed), []int64{res[0].Task.ID, res[1].Task.ID, res[2].Task.ID}; !slices.Equal(ids, slices.Sorted(slices.Values(want))) {
		t.Errorf("Claimed %v, want both of key a and multi's of key b: %d, %d, %d", ids, res[0].Task.ID, res[1].Task.ID, res[2].Task.ID)
	}
	if len(got.Blocked) != 1 || got.Blocked[0].ID != res[3].Task.ID {
		t.Errorf("Blocked = %+v, want single's task of key b, %d", got.Blocked, res[3].Task.ID)
	}
}

// A name admitting more tasks a key than a statement claims (store.MaxBatch): the
// claim's UPDATEs, chunk by chunk, count the winners of the chunks before among the
// key's holders and still leave room for every winner.
func TestClaimKeyConcurrencyManyChunks(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := t.Context()
	const n, admits = 2*store.MaxBatch + 50, 2*store.MaxBatch + 10
	if _, err := s.SetKeyConcurrency(ctx, "multi", admits, "test"); err != nil {
		t.Fatal(err)
	}
	now, _ := s.Now(ctx)
	nts := make([]store.NewTask, n)
	for i := range nts {
		nts[i] = newTask(fmt.Sprintf("chunk-%d", i), now.Add(-time.Duration(n-i)*time.Millisecond))
		nts[i].Name, nts[i].TaskKey, nts[i].Overlap = "multi", "k", store.OverlapSkip
	}
	res, err := s.Insert(ctx, nts)
	if err != nil {
		t.Fatal(err)
	}
	claims := make([]store.Claim, n)
	for i, r := range res {
		claims[i] = store.Claim{ID: r.Task.ID, ExecutionID: fmt.Sprintf("exec-%d", i)}
	}
	got, err := s.Claim(ctx, store.Fence{}, claims)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Claimed) != admits || len(got.Skipped) != n-admits || len(got.Blocked) != 0 {
		t.Fatalf("Claim of %d tasks of one key, %d admitted: %d claimed, %d skipped, %d blocked; want %d, %d, 0",
			n, admits, len(got.Claimed), len(got.Skipped), len(got.Blocked), admits, n-admits)
	}
	for _, sk := range got.Skipped {
		if want := fmt.Sprintf("skipped: task key %q held by task %d", "k", res[0].Task.ID); sk.LastError != want {
			t.Fatalf("skipped task %d: LastError %q, want %q", sk.ID, sk.LastError, want)
		}
	}
}

// Trigger of a task whose name has a key concurrency makes it due, its key held by as
// many tasks as the name admits or not, and with no key at all, in the store's own
// transaction and in a bound one alike; with the rule of one restored, the held key
// refuses it again.
func TestTriggerKeyConcurrency(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := t.Context()
	if _, err := s.SetKeyConcurrency(ctx, "multi", 2, "test"); err != nil {
		t.Fatal(err)
	}
	now, _ := s.Now(ctx)
	task := func(key, taskKey string, due time.Time) store.NewTask {
		nt := newTask(key, due)
		nt.Name = "multi"
		if taskKey != "" {
			nt.TaskKey, nt.Overlap = taskKey, store.OverlapQueue
		}
		return nt
	}
	res, err := s.Insert(ctx, []store.NewTask{
		task("held-1", "k", now.Add(-time.Second)), task("held-2", "k", now.Add(-time.Second)),
		task("later", "k", now.Add(time.Hour)), task("later-tx", "k", now.Add(time.Hour)), task("plain", "", now.Add(time.Hour)),
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, store.Fence{}, []store.Claim{{ID: res[0].Task.ID, ExecutionID: "exec-0"}, {ID: res[1].Task.ID, ExecutionID: "exec-1"}})
	if err != nil || len(got.Claimed) != 2 {
		t.Fatalf("Claim = %+v, %v; want both claimed, key k held twice", got, err)
	}
	due := func(how string, got *store.Task, err error) {
		t.Helper()
		if err != nil || got.Status != store.Scheduled || got.TriggeredAt.IsZero() || got.DueAt.After(now.Add(time.Minute)) {
			t.Errorf("%s = %+v, %v; want it SCHEDULED, made due", how, got, err)
		}
	}
	tr, err := s.Trigger(ctx, res[2].Task.ID, "exec-2")
	due("Trigger of a task whose key is held by as many as its name admits", tr, err)
	err = s.InTx(ctx, func(tx store.Tx) error {
		got, err := tx.Trigger(ctx, res[3].Task.ID, "exec-3")
		due("Trigger in a transaction", got, err)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	tr, err = s.Trigger(ctx, res[4].Task.ID, "exec-4")
	due("Trigger of a task without a key", tr, err)
	if _, err := s.SetKeyConcurrency(ctx, "multi", 1, "test"); err != nil {
		t.Fatal(err)
	}
	var held *store.KeyHeldError
	if _, err := s.Trigger(ctx, res[2].Task.ID, "exec-2b"); !errors.As(err, &held) || held.Holder != res[0].Task.ID {
		t.Errorf("Trigger with the rule of one restored: error %v, want the key held by %d", err, res[0].Task.ID)
	}
}

// SetKeyConcurrency of 0 or 1 writes no row for a name never stored and answers its
// zero state; above 1 it stores the name, and 1 then restores the rule of one, stored
// as 0, recording who did; Names lists it beside the other limits.
func TestSetKeyConcurrencyStates(t *testing.T) {
	t.Parallel()
	s, db := openWithDB(t)
	ctx := t.Context()
	for _, n := range []int{0, 1} {
		st, err := s.SetKeyConcurrency(ctx, "fresh", n, "alice")
		if err != nil || *st != (store.NameState{Name: "fresh"}) {
			t.Errorf("SetKeyConcurrency(fresh, %d) = %+v, %v; want the zero state of fresh", n, st, err)
		}
	}
	if names, err := s.Names(ctx); err != nil || len(names) != 0 {
		t.Errorf("Names = %+v, %v; want none", names, err)
	}
	if _, err := s.SetConcurrency(ctx, "report", 4, "alice"); err != nil {
		t.Fatal(err)
	}
	st, err := s.SetKeyConcurrency(ctx, "report", 3, "bob")
	if err != nil || st.KeyConcurrency != 3 || st.Concurrency != 4 || st.ChangedBy != "bob" {
		t.Errorf("SetKeyConcurrency(report, 3) = %+v, %v; want 3, limited to 4, by bob", st, err)
	}
	again, err := s.SetKeyConcurrency(ctx, "report", 3, "carol")
	if err != nil || again.ChangedBy != "bob" || !again.ChangedAt.Equal(st.ChangedAt) {
		t.Errorf("SetKeyConcurrency(report, 3) again = %+v, %v; want it unchanged, by bob", again, err)
	}
	if names, err := s.Names(ctx); err != nil || len(names) != 1 || names[0].KeyConcurrency != 3 || names[0].Concurrency != 4 {
		t.Errorf("Names = %+v, %v; want report, key concurrency 3, limited to 4", names, err)
	}
	st, err = s.SetKeyConcurrency(ctx, "report", 1, "dave")
	if err != nil || st.KeyConcurrency != 0 || st.ChangedBy != "dave" {
		t.Errorf("SetKeyConcurrency(report, 1) = %+v, %v; want the rule of one, by dave", st, err)
	}
	var stored int
	if err := db.QueryRow(`SELECT key_concurrency FROM ax_names WHERE name = 'report'`).Scan(&stored); err != nil || stored != 0 {
		t.Errorf("stored key_concurrency = %d, %v; want 0", stored, err)
	}
	if _, err := s.SetKeyConcurrency(ctx, "report", store.MaxConcurrency+1, "dave"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("SetKeyConcurrency above MaxConcurrency: error %v, want ErrInvalid", err)
	}
}

// TestMigrateKeyConcurrencyInstantly: migration 16 adds ax_names.key_concurrency
// instantly (ALGORITHM = INSTANT, which fails rather than rebuild the table); a name
// limited before it keeps the rule of one, and a key concurrency set after applies.
func TestMigrateKeyConcurrencyInstantly(t *testing.T) {
	t.Parallel()
	dsn := servicetest.MySQLDSN(t)
	db := rawDB(t, dsn)
	const keys = 16 // 0016_key_concurrency.sql
	if err := mysql.MigrateTo(db, keys-1); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO ax_names (namespace, name, concurrency, changed_by, changed_at)
		VALUES ('default', 'report', 5, 'alice', UTC_TIMESTAMP(6))`); err != nil {
		t.Fatal(err)
	}
	stmts := mysql.Statements(mustRead(t, "migrations/0016_key_concurrency.sql"), collation(t, db))
	for _, q := range stmts {
		if _, err := db.Exec(q + ", ALGORITHM = INSTANT"); err != nil {
			t.Fatalf("%v:\n%s", err, q)
		}
	}
	if _, err := db.Exec(`INSERT INTO ax_schema_migrations (version, step, started_at, applied_at)
		VALUES (?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`, keys, len(stmts)); err != nil {
		t.Fatal(err)
	}
	s := openDSN(t, dsn)
	ctx := t.Context()
	names, err := s.Names(ctx)
	if err != nil || len(names) != 1 || names[0].Concurrency != 5 || names[0].KeyConcurrency != 0 || names[0].ChangedBy != "alice" {
		t.Fatalf("Names = %+v, %v; want report limited to 5 by alice, the rule of one", names, err)
	}
	now, _ := s.Now(ctx)
	var nts []store.NewTask
	for i := range 3 {
		nt := newTask(fmt.Sprintf("k-%d", i), now.Add(-time.Duration(3-i)*time.Second))
		nt.Name, nt.TaskKey, nt.Overlap = "report", "k", store.OverlapQueue
		nts = append(nts, nt)
	}
	res, err := s.Insert(ctx, nts)
	if err != nil {
		t.Fatal(err)
	}
	claimAll := func() *store.ClaimResult {
		t.Helper()
		var claims []store.Claim
		for i, r := range res {
			claims = append(claims, store.Claim{ID: r.Task.ID, ExecutionID: fmt.Sprintf("exec-%d-%d", i, rand.Uint64())})
		}
		got, err := s.Claim(ctx, store.Fence{}, claims)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := claimAll(); len(got.Claimed) != 1 || len(got.Blocked) != 2 {
		t.Errorf("Claim under the rule of one = %+v; want one claimed, two blocked", got)
	}
	if _, err := s.SetKeyConcurrency(ctx, "report", 2, "bob"); err != nil {
		t.Fatal(err)
	}
	if got := claimAll(); len(got.Claimed) != 1 || len(got.Blocked) != 1 {
		t.Errorf("Claim with 2 admitted and one holder = %+v; want one more claimed, one blocked", got)
	}
}
