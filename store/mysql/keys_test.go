package mysql_test

import (
	"database/sql"
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

// Two stores on one database (two pools, as two processes would have) claim the
// tasks of one key at once: never two of them DISPATCHING or RUNNING together.
func TestKeyRaceTwoStores(t *testing.T) {
	t.Parallel()
	dsn := servicetest.MySQLDSN(t)
	stores := []*mysql.Store{openDSN(t, dsn), openDSN(t, dsn)}
	ctx := t.Context()
	now, _ := stores[0].Now(ctx)
	const tasks = 40
	var nts []store.NewTask
	for i := range tasks {
		nt := newTask(fmt.Sprintf("race-%d", i), now.Add(-time.Duration(tasks-i)*time.Millisecond))
		nt.TaskKey, nt.Overlap = "one", store.OverlapQueue
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
	var active, violations, done atomic.Int64
	var wg sync.WaitGroup
	for w := range 6 {
		s := stores[w%2]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			for ctx.Err() == nil && done.Load() < tasks && !t.Failed() {
				pick := make([]store.Claim, 1+rng.IntN(6))
				for i := range pick {
					pick[i] = store.Claim{ID: ids[rng.IntN(len(ids))], ExecutionID: fmt.Sprintf("exec-%d-%d", w, rng.Uint64())}
				}
				res, err := s.Claim(ctx, store.Fence{}, pick)
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				for _, c := range res.Claimed {
					if active.Add(1) > 1 {
						violations.Add(1)
					}
					if _, err := s.Start(ctx, store.Fence{}, []store.StartParams{{TaskID: c.ID, ExecutionID: c.ExecutionID, Name: c.Name}}); err != nil {
						t.Errorf("Start: %v", err)
						return
					}
					active.Add(-1)
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
	if n := violations.Load(); n != 0 {
		t.Fatalf("%d claims found the key already held", n)
	}
	if n := done.Load(); n != tasks {
		t.Fatalf("%d of %d tasks ran", n, tasks)
	}
}

// A claim of more than store.MaxBatch tasks, keyed and not, spread over several
// chunks: every plain task is claimed, one task per key, the others skipped or
// blocked; Claimed is in id order.
func TestClaimKeyedManyChunks(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := t.Context()
	now, _ := s.Now(ctx)
	const n, keys = 3*store.MaxBatch + 50, 5
	nts := make([]store.NewTask, n)
	for i := range nts {
		nts[i] = newTask(fmt.Sprintf("chunk-%d", i), now.Add(-time.Second))
		if i%9 == 0 {
			nts[i].TaskKey = fmt.Sprintf("key-%d", i%keys)
			nts[i].Overlap = []store.OverlapPolicy{store.OverlapSkip, store.OverlapQueue}[i%2]
		}
	}
	res, err := s.Insert(ctx, nts)
	if err != nil {
		t.Fatal(err)
	}
	claims := make([]store.Claim, n)
	for i, r := range res {
		claims[n-1-i] = store.Claim{ID: r.Task.ID, ExecutionID: fmt.Sprintf("exec-%d", i)}
	}
	got, err := s.Claim(ctx, store.Fence{}, claims)
	if err != nil {
		t.Fatal(err)
	}
	keyed := 0
	for _, nt := range nts {
		if nt.TaskKey != "" {
			keyed++
		}
	}
	if want := n - keyed + keys; len(got.Claimed) != want {
		t.Errorf("Claimed %d tasks, want %d (every plain one and one per key)", len(got.Claimed), want)
	}
	if len(got.Skipped)+len(got.Blocked) != keyed-keys {
		t.Errorf("Skipped %d + Blocked %d, want %d", len(got.Skipped), len(got.Blocked), keyed-keys)
	}
	if !slices.IsSortedFunc(got.Claimed, func(a, b store.Task) int { return int(a.ID - b.ID) }) {
		t.Errorf("Claimed is not in id order")
	}
	perKey := map[string]int{}
	for _, c := range got.Claimed {
		if c.TaskKey != "" {
			perKey[c.TaskKey]++
		}
	}
	for k, c := range perKey {
		if c != 1 {
			t.Errorf("%d tasks of key %s claimed, want 1", c, k)
		}
	}
}

// statements counts what the server executes on the only connection of db.
func statements(t *testing.T, db *sql.DB) int {
	t.Helper()
	var name string
	var n int
	if err := db.QueryRow(`SHOW SESSION STATUS LIKE 'Questions'`).Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A claim batch without keyed tasks costs what it cost before task keys: BEGIN (with
// its isolation level), the locking SELECT, the UPDATE, the SELECT back, COMMIT.
// Keyed tasks add the key lock, the holder read, their UPDATEs and their read-back.
func TestClaimStatements(t *testing.T) {
	t.Parallel()
	s, db := newWithDB(t, func(cfg *gomysql.Config) { cfg.InterpolateParams = true })
	db.SetMaxOpenConns(1)
	ctx := t.Context()
	now, _ := s.Now(ctx)
	var nts []store.NewTask
	for i := range 6 {
		nt := newTask(fmt.Sprintf("cost-%d", i), now.Add(-time.Second))
		switch i {
		case 3:
			nt.TaskKey, nt.Overlap = "k", store.OverlapAllow // no key rule: the plain path
		case 4, 5:
			nt.TaskKey, nt.Overlap = "k", store.OverlapSkip
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
	if got, n := claim(0, 1, 2, 3); len(got.Claimed) != 4 || n != plain {
		t.Errorf("Claim of 4 tasks without a key rule: %d claimed in %d statements, want 4 in %d", len(got.Claimed), n, plain)
	}
	// Both lose to the allow task holding "k". SET TRANSACTION, START TRANSACTION,
	// SELECT … FOR UPDATE, the key lock, the key's row (its first use), the holders,
	// the SKIPPED update, the SELECT back, COMMIT: no plain update, no winner.
	if got, n := claim(4, 5); len(got.Skipped) != 2 || n != 9 {
		t.Errorf("Claim of 2 skip tasks of a held key: %d skipped in %d statements, want 2 in 9", len(got.Skipped), n)
	}
}
