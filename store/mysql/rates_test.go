package mysql_test

import (
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/mysql"
)

// storedStarts reads the claim times recorded with name in the default namespace, as
// the store encodes them (8 bytes each, Unix microseconds, big-endian); NULL reads as
// none.
func storedStarts(t *testing.T, db *sql.DB, name string) []time.Time {
	t.Helper()
	var b []byte
	if err := db.QueryRow(`SELECT rate_starts FROM ax_names WHERE namespace = 'default' AND name = ?`, name).Scan(&b); err != nil {
		t.Fatal(err)
	}
	if len(b)%8 != 0 {
		t.Fatalf("rate_starts of %s: %d bytes, not a multiple of 8", name, len(b))
	}
	var out []time.Time
	for i := 0; i < len(b); i += 8 {
		out = append(out, time.UnixMicro(int64(binary.BigEndian.Uint64(b[i:]))).UTC())
	}
	return out
}

// Two stores on one database (two pools, as two processes would have) claim at once
// the tasks of a rate-limited name: in no window of the period do more claims start
// than the rate, by their DispatchedAt and by their execution records' ClaimedAt
// alike; the claim times the name records are exactly the last claims' DispatchedAt,
// ascending; and every task runs once.
func TestRateRaceTwoStores(t *testing.T) {
	t.Parallel()
	dsn := servicetest.MySQLDSN(t)
	stores := []*mysql.Store{openDSN(t, dsn), openDSN(t, dsn)}
	db := rawDB(t, dsn)
	ctx := t.Context()
	const rate, per, tasks = 3, 150 * time.Millisecond, 30
	if _, err := stores[0].SetRate(ctx, "rated", rate, per, "test"); err != nil {
		t.Fatal(err)
	}
	now, _ := stores[0].Now(ctx)
	var nts []store.NewTask
	for i := range tasks {
		nt := newTask(fmt.Sprintf("rate-%d", i), now.Add(-time.Duration(tasks-i)*time.Millisecond))
		nt.Name = "rated"
		if i%5 == 0 {
			nt.TaskKey, nt.Overlap = fmt.Sprintf("key-%d", i%2), store.OverlapQueue // keys and rate at once
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
	claimed := map[int64]time.Time{}
	var wg sync.WaitGroup
	for w := range 6 {
		s := stores[w%2]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 5))
			for ctx.Err() == nil && !t.Failed() {
				mu.Lock()
				n := len(claimed)
				mu.Unlock()
				if n == tasks {
					return
				}
				pick := make([]store.Claim, 1+rng.IntN(6))
				for i := range pick {
					pick[i] = store.Claim{ID: ids[rng.IntN(len(ids))], ExecutionID: fmt.Sprintf("exec-%d-%d", w, rng.Uint64())}
				}
				res, err := s.Claim(ctx, store.Fence{}, pick)
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				for _, l := range res.Limited {
					if l.Limit != rate || l.RetryAt.IsZero() {
						t.Errorf("Limited %+v, want limit %d and a RetryAt", l, rate)
					}
				}
				for _, c := range res.Claimed {
					mu.Lock()
					if _, again := claimed[c.ID]; again {
						t.Errorf("task %d claimed twice", c.ID)
					}
					claimed[c.ID] = c.DispatchedAt
					mu.Unlock()
					if _, err := s.Start(ctx, store.Fence{}, []store.StartParams{{TaskID: c.ID, ExecutionID: c.ExecutionID, Name: c.Name}}); err != nil {
						t.Errorf("Start: %v", err)
						return
					}
					if ok, err := s.Finish(ctx, store.Fence{}, []store.Finish{{TaskID: c.ID, ExecutionID: c.ExecutionID, Status: store.Succeeded}}); err != nil || !ok[0] {
						t.Errorf("Finish = %v, %v", ok, err)
						return
					}
				}
				time.Sleep(time.Duration(rng.IntN(4)) * time.Millisecond)
			}
		})
	}
	wg.Wait()
	if len(claimed) != tasks {
		t.Fatalf("%d of %d tasks claimed", len(claimed), tasks)
	}
	var starts []time.Time
	for id, at := range claimed {
		execs, err := stores[0].Executions(ctx, id)
		if err != nil || len(execs) != 1 || !execs[0].ClaimedAt.Equal(at) {
			t.Errorf("Executions(%d) = %+v, %v; want one, claimed at its DispatchedAt %v", id, execs, err, at)
		}
		starts = append(starts, at)
	}
	slices.SortFunc(starts, time.Time.Compare)
	for i := range starts {
		j := i
		for j < len(starts) && !starts[j].After(starts[i].Add(per)) {
			j++
		}
		if j-i > rate {
			t.Fatalf("%d claims in the window [%v, +%v], over the rate of %d", j-i, starts[i], per, rate)
		}
	}
	if got, want := storedStarts(t, db, "rated"), starts[len(starts)-rate:]; !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("the name's recorded claim times = %v, want the last %d claims' DispatchedAt %v", got, rate, want)
	}
}

// A claim of a rate-limited name's tasks adds the name's lock, one read of the store's
// time and the write of its claim times; with a concurrency limit as well, the count
// of its tasks in flight; a claim that wins none writes no times.
func TestClaimRatedStatements(t *testing.T) {
	t.Parallel()
	s, db := newWithDB(t, func(cfg *gomysql.Config) { cfg.InterpolateParams = true })
	db.SetMaxOpenConns(1)
	ctx := t.Context()
	if _, err := s.SetRate(ctx, "rated", 2, time.Hour, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetRate(ctx, "both", 5, time.Hour, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetConcurrency(ctx, "both", 1, "test"); err != nil {
		t.Fatal(err)
	}
	now, _ := s.Now(ctx)
	var nts []store.NewTask
	for i := range 5 {
		nt := newTask(fmt.Sprintf("cost-%d", i), now.Add(-time.Duration(5-i)*time.Second))
		nt.Name = "rated"
		if i >= 3 {
			nt.Name = "both"
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
			claims = append(claims, store.Claim{ID: res[i].Task.ID, ExecutionID: fmt.Sprintf("exec-%d-%d", i, rand.Uint64())})
		}
		before := statements(t, db)
		got, err := s.Claim(ctx, store.Fence{}, claims)
		if err != nil {
			t.Fatal(err)
		}
		return got, statements(t, db) - before - 1 // the second SHOW counts itself
	}
	const plain = 6 // SET TRANSACTION, START TRANSACTION, SELECT … FOR UPDATE, UPDATE, SELECT, COMMIT
	// SET TRANSACTION, START TRANSACTION, SELECT … FOR UPDATE, the name's lock, the
	// store's time, the UPDATE, the claim times' UPDATE, the SELECT back, COMMIT.
	got, n := claim(2, 1, 0)
	if n != plain+3 {
		t.Errorf("Claim of 3 tasks of a name limited to 2 an hour: %d statements, want %d", n, plain+3)
	}
	if ids := taskIDs(got.Claimed); !slices.Equal(ids, []int64{res[0].Task.ID, res[1].Task.ID}) {
		t.Fatalf("Claimed %v, want the two due first, %d and %d", ids, res[0].Task.ID, res[1].Task.ID)
	}
	at := got.Claimed[0].DispatchedAt
	if !got.Claimed[1].DispatchedAt.Equal(at) || at.Nanosecond()%1000 != 0 {
		t.Errorf("DispatchedAt = %v, %v; want one time, in microseconds", at, got.Claimed[1].DispatchedAt)
	}
	if got, want := storedStarts(t, db, "rated"), []time.Time{at, at}; !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("recorded claim times = %v, want %v", got, want)
	}
	if len(got.Limited) != 1 || got.Limited[0].ID != res[2].Task.ID || got.Limited[0].Limit != 2 ||
		!got.Limited[0].RetryAt.Equal(at.Add(time.Hour+time.Microsecond)) {
		t.Errorf("Limited = %+v, want task %d, limit 2, RetryAt an hour and a microsecond after %v", got.Limited, res[2].Task.ID, at)
	}
	// Nothing won: the name's lock and the store's time, no write.
	if got, n := claim(2); len(got.Limited) != 1 || n != plain {
		t.Errorf("Claim of a task its rate holds back = %+v in %d statements, want it Limited in %d", got, n, plain)
	}
	// Both limits: the count of the tasks in flight too.
	if got, n := claim(4, 3); len(got.Claimed) != 1 || len(got.Limited) != 1 || got.Limited[0].Limit != 1 || n != plain+4 {
		t.Errorf("Claim of 2 tasks of a name limited to 1 in flight and 5 an hour = %+v in %d statements, want 1 claimed, 1 Limited (1), in %d",
			got, n, plain+4)
	}
}

// SetRate of no limit writes no row for a name never stored and answers its zero
// state; a changed rate keeps the claim times recorded, which count toward it; removing
// it forgets them; Names lists the rate beside the concurrency limit, with no slots in
// use for a name without one.
func TestSetRateTimes(t *testing.T) {
	t.Parallel()
	s, db := openWithDB(t)
	ctx := t.Context()
	st, err := s.SetRate(ctx, "fresh", 0, time.Second, "alice")
	if err != nil || *st != (store.NameState{Name: "fresh"}) {
		t.Errorf("SetRate(fresh, 0) = %+v, %v; want the zero state of fresh", st, err)
	}
	if names, err := s.Names(ctx); err != nil || len(names) != 0 {
		t.Errorf("Names = %+v, %v; want none", names, err)
	}
	if _, err := s.SetRate(ctx, "rated", 3, time.Hour, "alice"); err != nil {
		t.Fatal(err)
	}
	now, _ := s.Now(ctx)
	var nts []store.NewTask
	for i := range 4 {
		nt := newTask(fmt.Sprintf("times-%d", i), now.Add(-time.Duration(4-i)*time.Second))
		nt.Name = "rated"
		nts = append(nts, nt)
	}
	res, err := s.Insert(ctx, nts)
	if err != nil {
		t.Fatal(err)
	}
	claim := func(i int) *store.ClaimResult {
		t.Helper()
		got, err := s.Claim(ctx, store.Fence{}, []store.Claim{{ID: res[i].Task.ID, ExecutionID: fmt.Sprintf("exec-%d-%d", i, rand.Uint64())}})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	first := claim(0)
	if len(first.Claimed) != 1 {
		t.Fatalf("Claim = %+v, want it claimed", first)
	}
	second := claim(1)
	if len(second.Claimed) != 1 {
		t.Fatalf("Claim = %+v, want it claimed", second)
	}
	// Lowered to 2 an hour: the two claims recorded fill it.
	st, err = s.SetRate(ctx, "rated", 2, time.Hour, "bob")
	if err != nil || st.Rate != 2 || st.Per != time.Hour || st.ChangedBy != "bob" {
		t.Fatalf("SetRate(rated, 2, 1h) = %+v, %v", st, err)
	}
	if got := len(storedStarts(t, db, "rated")); got != 2 {
		t.Errorf("%d claim times recorded after the rate changed, want the 2 kept", got)
	}
	got := claim(2)
	if len(got.Limited) != 1 || !got.Limited[0].RetryAt.Equal(first.Claimed[0].DispatchedAt.Add(time.Hour+time.Microsecond)) {
		t.Errorf("Claim at the lowered rate = %+v, want it Limited until an hour after the first claim, %v", got, first.Claimed[0].DispatchedAt)
	}
	if _, err := s.SetConcurrency(ctx, "rated", 4, "carol"); err != nil {
		t.Fatal(err)
	}
	names, err := s.Names(ctx)
	if err != nil || len(names) != 1 || names[0].Rate != 2 || names[0].Per != time.Hour || names[0].Concurrency != 4 || names[0].InFlight != 2 {
		t.Errorf("Names = %+v, %v; want rated, 2 an hour, concurrency 4 with 2 in flight", names, err)
	}
	if _, err := s.SetConcurrency(ctx, "rated", 0, "carol"); err != nil {
		t.Fatal(err)
	}
	if names, err := s.Names(ctx); err != nil || len(names) != 1 || names[0].InFlight != 0 {
		t.Errorf("Names = %+v, %v; want no slots in use without a concurrency limit", names, err)
	}
	// Removed: the times are forgotten, and a claim is not held back.
	st, err = s.SetRate(ctx, "rated", 0, time.Hour, "dave")
	if err != nil || st.Rate != 0 || st.Per != 0 || st.ChangedBy != "dave" {
		t.Fatalf("SetRate(rated, 0) = %+v, %v; want no rate, by dave", st, err)
	}
	if got := storedStarts(t, db, "rated"); len(got) != 0 {
		t.Errorf("claim times recorded after the rate was removed: %v, want none", got)
	}
	if got := claim(2); len(got.Claimed) != 1 {
		t.Errorf("Claim with the rate removed = %+v, want it claimed", got)
	}
	// Set again: only the claims from now on count.
	if _, err := s.SetRate(ctx, "rated", 1, time.Hour, "erin"); err != nil {
		t.Fatal(err)
	}
	if got := claim(3); len(got.Claimed) != 1 {
		t.Errorf("Claim under a fresh rate = %+v, want it claimed: none recorded before", got)
	}
}

// TestMigrateNameRatesInstantly: migration 15 adds ax_names' rate columns instantly
// (ALGORITHM = INSTANT, which fails rather than rebuild the table); a name limited
// before it reads without a rate, and a rate set after counts from no claim.
func TestMigrateNameRatesInstantly(t *testing.T) {
	t.Parallel()
	dsn := servicetest.MySQLDSN(t)
	db := rawDB(t, dsn)
	const rates = 15 // 0015_name_rates.sql
	if err := mysql.MigrateTo(db, rates-1); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO ax_names (namespace, name, concurrency, changed_by, changed_at)
		VALUES ('default', 'report', 2, 'alice', UTC_TIMESTAMP(6))`); err != nil {
		t.Fatal(err)
	}
	stmts := mysql.Statements(mustRead(t, "migrations/0015_name_rates.sql"), collation(t, db))
	for _, q := range stmts {
		if _, err := db.Exec(q + ", ALGORITHM = INSTANT"); err != nil {
			t.Fatalf("%v:\n%s", err, q)
		}
	}
	if _, err := db.Exec(`INSERT INTO ax_schema_migrations (version, step, started_at, applied_at)
		VALUES (?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`, rates, len(stmts)); err != nil {
		t.Fatal(err)
	}
	s := openDSN(t, dsn)
	ctx := t.Context()
	names, err := s.Names(ctx)
	if err != nil || len(names) != 1 || names[0].Concurrency != 2 || names[0].Rate != 0 || names[0].Per != 0 || names[0].ChangedBy != "alice" {
		t.Fatalf("Names = %+v, %v; want report limited to 2 by alice, no rate", names, err)
	}
	st, err := s.SetRate(ctx, "report", 1, time.Minute, "bob")
	if err != nil || st.Concurrency != 2 || st.Rate != 1 || st.Per != time.Minute || st.ChangedBy != "bob" {
		t.Errorf("SetRate = %+v, %v; want report limited to 2, and 1 a minute, by bob", st, err)
	}
	now, _ := s.Now(ctx)
	res, err := s.Insert(ctx, []store.NewTask{{Name: "report", Key: "a", DueAt: now, MaxRetry: 1}, {Name: "report", Key: "b", DueAt: now, MaxRetry: 1}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, store.Fence{}, []store.Claim{{ID: res[0].Task.ID, ExecutionID: "exec-a"}, {ID: res[1].Task.ID, ExecutionID: "exec-b"}})
	if err != nil || len(got.Claimed) != 1 || len(got.Limited) != 1 || got.Limited[0].Limit != 1 || got.Limited[0].RetryAt.IsZero() {
		t.Errorf("Claim = %+v, %v; want one claimed, one Limited by the rate", got, err)
	}
}

// storedKeyStarts reads the claim times recorded with (name, key) in namespace ns and
// their last_at, as storedStarts does; no row reads as none.
func storedKeyStarts(t *testing.T, db *sql.DB, ns, name, key string) ([]time.Time, time.Time) {
	t.Helper()
	var b []byte
	var last time.Time
	err := db.QueryRow(`SELECT starts, last_at FROM ax_key_starts WHERE namespace = ? AND name = ? AND task_key = ?`, ns, name, key).Scan(&b, &last)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, time.Time{}
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(b)%8 != 0 {
		t.Fatalf("starts of (%s, %s): %d bytes, not a multiple of 8", name, key, len(b))
	}
	var out []time.Time
	for i := 0; i < len(b); i += 8 {
		out = append(out, time.UnixMicro(int64(binary.BigEndian.Uint64(b[i:]))).UTC())
	}
	return out, last.UTC()
}

// A claim of the keyed tasks of a name with only a rate per key takes the name's lock,
// reads the key's claim times under the key's lock and the store's time, and writes the
// times back: one statement each beside a keyed claim's. The recorded times, and the
// row's last_at, are the winners' DispatchedAt. A task of the name without a key
// costs the name's lock only: no times to read, no time to read.
func TestClaimKeyRatedStatements(t *testing.T) {
	t.Parallel()
	s, db := newWithDB(t, func(cfg *gomysql.Config) { cfg.InterpolateParams = true })
	db.SetMaxOpenConns(1)
	ctx := t.Context()
	if _, err := s.SetKeyRate(ctx, "sync", 2, time.Hour, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetKeyConcurrency(ctx, "sync", 5, "test"); err != nil {
		t.Fatal(err)
	}
	now, _ := s.Now(ctx)
	var nts []store.NewTask
	for i := range 4 {
		nt := newTask(fmt.Sprintf("cost-%d", i), now.Add(-time.Duration(4-i)*time.Second))
		nt.Name, nt.TaskKey, nt.Overlap = "sync", "k", store.OverlapQueue
		if i == 3 {
			nt.TaskKey, nt.Overlap = "", ""
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
			claims = append(claims, store.Claim{ID: res[i].Task.ID, ExecutionID: fmt.Sprintf("exec-%d-%d", i, rand.Uint64())})
		}
		before := statements(t, db)
		got, err := s.Claim(ctx, store.Fence{}, claims)
		if err != nil {
			t.Fatal(err)
		}
		return got, statements(t, db) - before - 1 // the second SHOW counts itself
	}
	// SET TRANSACTION, START TRANSACTION, SELECT … FOR UPDATE, the name's lock, the key
	// lock, the key's row (its first use), the holders counted, the key's claim times,
	// the store's time, the UPDATE, the key's times' upsert, the SELECT back, COMMIT.
	got, n := claim(2, 1, 0)
	if n != 13 {
		t.Errorf("Claim of 3 tasks of a key limited to 2 an hour: %d statements, want 13", n)
	}
	if ids := taskIDs(got.Claimed); !slices.Equal(ids, []int64{res[0].Task.ID, res[1].Task.ID}) {
		t.Fatalf("Claimed %v, want the two due first, %d and %d", ids, res[0].Task.ID, res[1].Task.ID)
	}
	at := got.Claimed[0].DispatchedAt
	if !got.Claimed[1].DispatchedAt.Equal(at) || at.Nanosecond()%1000 != 0 {
		t.Errorf("DispatchedAt = %v, %v; want one time, in microseconds", at, got.Claimed[1].DispatchedAt)
	}
	starts, last := storedKeyStarts(t, db, "default", "sync", "k")
	if want := []time.Time{at, at}; !slices.EqualFunc(starts, want, time.Time.Equal) || !last.Equal(at) {
		t.Errorf("recorded claim times of key k = %v, last at %v; want %v, last at %v", starts, last, want, at)
	}
	if len(got.Limited) != 1 || got.Limited[0].ID != res[2].Task.ID || got.Limited[0].Limit != 2 || got.Limited[0].TaskKey != "k" ||
		!got.Limited[0].RetryAt.Equal(at.Add(time.Hour+time.Microsecond)) {
		t.Errorf("Limited = %+v, want task %d of key k, limit 2, RetryAt an hour and a microsecond after %v", got.Limited, res[2].Task.ID, at)
	}
	// Nothing won: the name's lock, the key's lock, its holders, its times and the
	// store's time; no write.
	if got, n := claim(2); len(got.Limited) != 1 || n != 9 {
		t.Errorf("Claim of a task its key's rate holds back = %+v in %d statements, want it Limited in 9", got, n)
	}
	// No key: SET TRANSACTION, START TRANSACTION, SELECT … FOR UPDATE, the name's lock,
	// the UPDATE, the SELECT back, COMMIT.
	if got, n := claim(3); len(got.Claimed) != 1 || n != 7 {
		t.Errorf("Claim of a task of the name without a key = %+v in %d statements, want it claimed in 7", got, n)
	}
}

// PruneKeyStarts deletes the claim times of the view's namespace whose last claim is
// a day (store.MaxRatePer) or more ago, and only those: not a fresh key's, nor another
// namespace's as old; a limit caps how many.
func TestPruneKeyStarts(t *testing.T) {
	t.Parallel()
	s, db := openWithDB(t)
	other := view(t, s, "other")
	ctx := t.Context()
	for _, v := range []*mysql.Store{s, other} {
		if _, err := v.SetKeyRate(ctx, "sync", 5, time.Minute, "test"); err != nil {
			t.Fatal(err)
		}
		now, _ := v.Now(ctx)
		var nts []store.NewTask
		for _, key := range []string{"old", "old-2", "fresh"} {
			nt := newTask(key, now.Add(-time.Second))
			nt.Name, nt.TaskKey, nt.Overlap = "sync", key, store.OverlapQueue
			nts = append(nts, nt)
		}
		res, err := v.Insert(ctx, nts)
		if err != nil {
			t.Fatal(err)
		}
		var claims []store.Claim
		for i, r := range res {
			claims = append(claims, store.Claim{ID: r.Task.ID, ExecutionID: fmt.Sprintf("exec-%d-%d", i, rand.Uint64())})
		}
		if got, err := v.Claim(ctx, store.Fence{}, claims); err != nil || len(got.Claimed) != 3 {
			t.Fatalf("Claim = %+v, %v; want all 3 claimed", got, err)
		}
	}
	if n, err := s.PruneKeyStarts(ctx, 10); err != nil || n != 0 {
		t.Errorf("PruneKeyStarts with every claim fresh = %d, %v; want 0", n, err)
	}
	// Aged past every window: "old" and "old-2" in both namespaces, "old-2" a day ago
	// to the microsecond and "old" 25 hours ago.
	if _, err := db.Exec(`UPDATE ax_key_starts SET last_at = UTC_TIMESTAMP(6) - INTERVAL 25 HOUR WHERE task_key = 'old'`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE ax_key_starts SET last_at = UTC_TIMESTAMP(6) - INTERVAL 1 DAY WHERE task_key = 'old-2'`); err != nil {
		t.Fatal(err)
	}
	if n, err := s.PruneKeyStarts(ctx, 1); err != nil || n != 1 {
		t.Fatalf("PruneKeyStarts(1) = %d, %v; want 1", n, err)
	}
	if got, _ := storedKeyStarts(t, db, "default", "sync", "old"); got != nil {
		t.Errorf("the oldest row is left after PruneKeyStarts(1): %v; want it first", got)
	}
	if got, _ := storedKeyStarts(t, db, "default", "sync", "old-2"); len(got) != 1 {
		t.Errorf("times of old-2 = %v after PruneKeyStarts(1); want them kept, past the limit", got)
	}
	if n, err := s.PruneKeyStarts(ctx, 10); err != nil || n != 1 {
		t.Errorf("PruneKeyStarts(10) = %d, %v; want 1: old-2", n, err)
	}
	for _, c := range []struct {
		ns, key string
		kept    bool
	}{{"default", "old", false}, {"default", "old-2", false}, {"default", "fresh", true}, {"other", "old", true}, {"other", "old-2", true}, {"other", "fresh", true}} {
		if got, _ := storedKeyStarts(t, db, c.ns, "sync", c.key); (len(got) == 1) != c.kept {
			t.Errorf("times of (%s, %s) after the prune = %v; want kept %v", c.ns, c.key, got, c.kept)
		}
	}
	if n, err := s.PruneKeyStarts(ctx, 10); err != nil || n != 0 {
		t.Errorf("PruneKeyStarts again = %d, %v; want 0", n, err)
	}
	if n, err := other.PruneKeyStarts(ctx, 10); err != nil || n != 2 {
		t.Errorf("PruneKeyStarts of namespace other = %d, %v; want its 2 old rows", n, err)
	}
}

// TestMigrateKeyRatesInstantly: migration 17 adds ax_names' rate per key instantly
// (ALGORITHM = INSTANT, which fails rather than rebuild the table) and creates
// ax_key_starts; a name limited before it reads without a rate per key, and one set
// after applies.
func TestMigrateKeyRatesInstantly(t *testing.T) {
	t.Parallel()
	dsn := servicetest.MySQLDSN(t)
	db := rawDB(t, dsn)
	const keyRates = 17 // 0017_key_rates.sql
	if err := mysql.MigrateTo(db, keyRates-1); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO ax_names (namespace, name, concurrency, changed_by, changed_at)
		VALUES ('default', 'report', 2, 'alice', UTC_TIMESTAMP(6))`); err != nil {
		t.Fatal(err)
	}
	stmts := mysql.Statements(mustRead(t, "migrations/0017_key_rates.sql"), collation(t, db))
	for _, q := range stmts {
		if strings.HasPrefix(q, "ALTER TABLE") {
			q += ", ALGORITHM = INSTANT"
		}
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%v:\n%s", err, q)
		}
	}
	if _, err := db.Exec(`INSERT INTO ax_schema_migrations (version, step, started_at, applied_at)
		VALUES (?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`, keyRates, len(stmts)); err != nil {
		t.Fatal(err)
	}
	s := openDSN(t, dsn)
	ctx := t.Context()
	names, err := s.Names(ctx)
	if err != nil || len(names) != 1 || names[0].Concurrency != 2 || names[0].KeyRate != 0 || names[0].KeyPer != 0 || names[0].ChangedBy != "alice" {
		t.Fatalf("Names = %+v, %v; want report limited to 2 by alice, no rate per key", names, err)
	}
	st, err := s.SetKeyRate(ctx, "report", 1, time.Minute, "bob")
	if err != nil || st.Concurrency != 2 || st.KeyRate != 1 || st.KeyPer != time.Minute || st.ChangedBy != "bob" {
		t.Errorf("SetKeyRate = %+v, %v; want report limited to 2, and 1 a minute per key, by bob", st, err)
	}
	now, _ := s.Now(ctx)
	var nts []store.NewTask
	for _, key := range []string{"a", "b"} {
		nt := newTask(key, now)
		nt.Name, nt.TaskKey, nt.Overlap = "report", "k", store.OverlapSkip
		nts = append(nts, nt)
	}
	res, err := s.Insert(ctx, nts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, store.Fence{}, []store.Claim{{ID: res[0].Task.ID, ExecutionID: "exec-a"}})
	if err != nil || len(got.Claimed) != 1 {
		t.Fatalf("Claim = %+v, %v; want it claimed", got, err)
	}
	if _, err := s.Start(ctx, store.Fence{}, []store.StartParams{{TaskID: res[0].Task.ID, ExecutionID: "exec-a", Name: "report"}}); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Finish(ctx, store.Fence{}, []store.Finish{{TaskID: res[0].Task.ID, ExecutionID: "exec-a", Status: store.Succeeded}}); err != nil || !ok[0] {
		t.Fatalf("Finish = %v, %v", ok, err)
	}
	got, err = s.Claim(ctx, store.Fence{}, []store.Claim{{ID: res[1].Task.ID, ExecutionID: "exec-b"}})
	if err != nil || len(got.Limited) != 1 || got.Limited[0].Limit != 1 || got.Limited[0].TaskKey != "k" || got.Limited[0].RetryAt.IsZero() {
		t.Errorf("Claim = %+v, %v; want it Limited by key k's rate", got, err)
	}
}
