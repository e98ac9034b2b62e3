package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/postgres"
)

func newPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatalf("pgxpool.New: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// migrateTo applies the migrations up to version v to pool's empty schema, as New of
// a build of that version would.
func migrateTo(t *testing.T, pool *pgxpool.Pool, v int) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE ax_schema_migrations (
		version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(files) <= v {
		t.Fatalf("migrations: %v, %v; want more than %d", files, err, v)
	}
	sort.Strings(files)
	for i, f := range files[:v] {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, string(body)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO ax_schema_migrations (version) VALUES ($1)`, i+1); err != nil {
			t.Fatal(err)
		}
	}
}

// migrateFrom opens a store on pool's schema, at version v, which migrates it to the
// current version, and checks that every version is recorded once.
func migrateFrom(t *testing.T, pool *pgxpool.Pool, v int) *postgres.Store {
	t.Helper()
	st, err := postgres.New(pool)
	if err != nil {
		t.Fatalf("New on a version %d schema: %v", v, err)
	}
	t.Cleanup(func() { st.Close() })
	if got := versions(t, pool); len(got) != postgres.SchemaVersion() || got[len(got)-1] != postgres.SchemaVersion() {
		t.Errorf("ax_schema_migrations = %v, want 1..%d once each", got, postgres.SchemaVersion())
	}
	return st
}

func versions(t *testing.T, pool *pgxpool.Pool) []int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT version FROM ax_schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatalf("read ax_schema_migrations: %v", err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatalf("read ax_schema_migrations: %v", err)
	}
	return vs
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	pool := newPool(t, servicetest.PostgresDSN(t))
	for range 2 { // from empty, then again: a no-op
		st, err := postgres.New(pool)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if err := st.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := pool.Ping(context.Background()); err != nil {
			t.Fatalf("Close closed the caller's pool: %v", err)
		}
	}
	if got := versions(t, pool); len(got) != postgres.SchemaVersion() || got[len(got)-1] != postgres.SchemaVersion() {
		t.Errorf("ax_schema_migrations = %v, want 1..%d once each", got, postgres.SchemaVersion())
	}
	// Everything lives in the DSN's schema, none of it in public.
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relname LIKE 'ax\_%' AND n.nspname = current_schema()`).Scan(&n); err != nil || n < 10 {
		t.Errorf("ax relations in current_schema() = %d, %v; want the tables, indexes and sequence", n, err)
	}
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relname = 'ax_tasks' AND n.nspname = 'public'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("ax_tasks in public = %d, %v; want none", n, err)
	}
	// So do the fence functions of version 4.
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE p.proname IN ('ax_fence', 'ax_fence_lock') AND n.nspname = current_schema()`).Scan(&n); err != nil || n != 2 {
		t.Errorf("ax_fence, ax_fence_lock in current_schema() = %d, %v; want both", n, err)
	}
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	dsn := servicetest.PostgresDSN(t)
	const n = 5
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			st, err := postgres.Open(context.Background(), dsn)
			if err == nil {
				err = st.Close()
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open #%d: %v", i, err)
		}
	}
	if got := versions(t, newPool(t, dsn)); len(got) != postgres.SchemaVersion() {
		t.Errorf("after %d concurrent Opens, ax_schema_migrations = %v, want each version once", n, got)
	}
}

func TestMigrateNewerSchema(t *testing.T) {
	t.Parallel()
	dsn := servicetest.PostgresDSN(t)
	pool := newPool(t, dsn)
	if _, err := pool.Exec(context.Background(), `CREATE TABLE ax_schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL);
		INSERT INTO ax_schema_migrations VALUES (999, now())`); err != nil {
		t.Fatal(err)
	}
	if st, err := postgres.Open(context.Background(), dsn); !errors.Is(err, store.ErrSchemaVersion) {
		if st != nil {
			st.Close()
		}
		t.Errorf("Open(schema at version 999) error = %v, want ErrSchemaVersion", err)
	}
	if _, err := postgres.New(pool); !errors.Is(err, store.ErrSchemaVersion) {
		t.Errorf("New(schema at version 999) error = %v, want ErrSchemaVersion", err)
	}
}

func TestOpenUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := postgres.Open(ctx, "postgres://postgres@"+addr+"/test?sslmode=disable&connect_timeout=5")
	if err == nil {
		st.Close()
		t.Fatalf("Open(%s) succeeded, want an error", addr)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "ax: postgres: open:") || !strings.Contains(msg, "refused") {
		t.Errorf("Open(%s) error = %q, want an ax: postgres: open: error saying the connection was refused", addr, msg)
	}
	if _, err := postgres.Open(ctx, "postgres://[bad"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Open(malformed dsn) error = %v, want ErrInvalid", err)
	}
}

func TestClosedPool(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), servicetest.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	st, err := postgres.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	pool.Close()
	if _, err := st.Get(context.Background(), 1); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Get on a closed pool: error = %v, want ErrClosed", err)
	}
	if _, err := st.Insert(context.Background(), []store.NewTask{{Name: "n", Key: "k", DueAt: time.Now()}}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Insert on a closed pool: error = %v, want ErrClosed", err)
	}
}

// txKinds begins a transaction of each kind Bind accepts on the store's database.
var txKinds = []struct {
	name  string
	begin func(t *testing.T, pool *pgxpool.Pool) (tx any, commit, rollback func() error)
}{
	{"pgx.Tx", func(t *testing.T, pool *pgxpool.Pool) (any, func() error, func() error) {
		tx, err := pool.Begin(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return tx, func() error { return tx.Commit(context.Background()) }, func() error { return tx.Rollback(context.Background()) }
	}},
	{"*sql.Tx", func(t *testing.T, pool *pgxpool.Pool) (any, func() error, func() error) {
		db := stdlib.OpenDBFromPool(pool)
		t.Cleanup(func() { db.Close() })
		tx, err := db.BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return tx, tx.Commit, tx.Rollback
	}},
}

// setup opens a store on a fresh schema and a pool of the caller's on the same schema.
func setup(t *testing.T) (*postgres.Store, *pgxpool.Pool) {
	t.Helper()
	dsn := servicetest.PostgresDSN(t)
	st, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st, newPool(t, dsn)
}

func dbNow(t *testing.T, st store.Store) time.Time {
	t.Helper()
	now, err := st.Now(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return now
}

func cursor(t *testing.T, st store.Store) int64 {
	t.Helper()
	now := dbNow(t, st)
	r, err := st.Refill(context.Background(), store.RefillParams{AfterSeq: -1, From: now, To: now, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	return r.Seq
}

func changed(t *testing.T, st store.Store, after int64) *store.RefillResult {
	t.Helper()
	to := dbNow(t, st).Add(24 * time.Hour)
	r, err := st.Refill(context.Background(), store.RefillParams{AfterSeq: after, From: to, To: to, Limit: 100})
	if err != nil {
		t.Fatalf("Refill(AfterSeq %d): %v", after, err)
	}
	return r
}

func ids(ds []store.Due) []int64 {
	out := []int64{}
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

func contains(ds []store.Due, id int64) bool {
	for _, d := range ds {
		if d.ID == id {
			return true
		}
	}
	return false
}

// bind binds tx to st, failing the test if it cannot.
func bind(t *testing.T, st *postgres.Store, tx any) store.Tx {
	t.Helper()
	v, err := st.Bind(context.Background(), tx)
	if err != nil {
		t.Fatalf("Bind(%T): %v", tx, err)
	}
	return v
}

func TestBindInsert(t *testing.T) {
	t.Parallel()
	for _, kind := range txKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			st, pool := setup(t)
			ctx := context.Background()
			due := dbNow(t, st).Add(-time.Minute)
			c0 := cursor(t, st)

			// Rolled back: nothing.
			tx, _, rollback := kind.begin(t, pool)
			res, err := bind(t, st, tx).Insert(ctx, []store.NewTask{{Name: "order.close", Key: "rolled-back", DueAt: due, Payload: []byte{}}})
			if err != nil || len(res) != 1 || res[0].Err != nil || res[0].Task.Payload == nil {
				t.Fatalf("Insert = %+v, %v; want one task with an empty, non-nil payload", res, err)
			}
			if err := rollback(); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Lookup(ctx, "order.close", "rolled-back"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Lookup after rollback: error = %v, want ErrNotFound", err)
			}

			// Committed: visible, and the refill finds it.
			tx, commit, _ := kind.begin(t, pool)
			res, err = bind(t, st, tx).Insert(ctx, []store.NewTask{
				{Name: "order.close", Key: "committed", DueAt: due},
				{Name: "order.close", Key: "committed", DueAt: due},
			})
			if err != nil || len(res) != 2 || res[0].Err != nil || !errors.Is(res[1].Err, store.ErrDuplicate) || res[1].Task.ID != res[0].Task.ID {
				t.Fatalf("Insert(task, same task) = %+v, %v; want the task, then it as a duplicate", res, err)
			}
			if _, err := st.Lookup(ctx, "order.close", "committed"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Lookup before commit: error = %v, want ErrNotFound", err)
			}
			if err := commit(); err != nil {
				t.Fatal(err)
			}
			got, err := st.Lookup(ctx, "order.close", "committed")
			if err != nil || got.ID != res[0].Task.ID || got.Payload != nil {
				t.Fatalf("Lookup after commit = %+v, %v; want task %d with a nil payload", got, err, res[0].Task.ID)
			}
			if r := changed(t, st, c0); !contains(r.Changed, got.ID) {
				t.Errorf("Refill(AfterSeq %d).Changed = %v, want task %d", c0, ids(r.Changed), got.ID)
			}
			// A duplicate of a committed task, through a transaction.
			tx, commit, _ = kind.begin(t, pool)
			res, err = bind(t, st, tx).Insert(ctx, []store.NewTask{{Name: "order.close", Key: "committed", DueAt: due}})
			if err != nil || !errors.Is(res[0].Err, store.ErrDuplicate) || res[0].Task.ID != got.ID {
				t.Errorf("Insert(existing) = %+v, %v; want ErrDuplicate with task %d", res, err, got.ID)
			}
			if err := commit(); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("InvalidKind", func(t *testing.T) {
		t.Parallel()
		st, _ := setup(t)
		for _, tx := range []any{nil, "tx", &sql.DB{}, (*sql.Tx)(nil), pgx.Tx(nil)} {
			if v, err := st.Bind(context.Background(), tx); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("Bind(%T) = %v, %v; want ErrInvalid", tx, v, err)
			}
		}
	})
}

// TestRefillOpenTransaction: a row stamped by a transaction that commits after a
// Refill read later rows is still returned by the next Refill.
func TestRefillOpenTransaction(t *testing.T) {
	t.Parallel()
	st, pool := setup(t)
	ctx := context.Background()
	due := dbNow(t, st).Add(-time.Minute)
	c0 := cursor(t, st)
	before, err := st.Insert(ctx, []store.NewTask{{Name: "n", Key: "before", DueAt: due}})
	if err != nil {
		t.Fatal(err)
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	slow, err := bind(t, st, tx).Insert(ctx, []store.NewTask{{Name: "n", Key: "slow", DueAt: due}})
	if err != nil {
		t.Fatal(err)
	}
	// Stamped after the open transaction, committed before it.
	after, err := st.Insert(ctx, []store.NewTask{{Name: "n", Key: "after", DueAt: due}})
	if err != nil {
		t.Fatal(err)
	}

	r1 := changed(t, st, c0)
	if r1.Seq <= c0 {
		t.Errorf("Refill(AfterSeq %d).Seq = %d, want it past the insert committed before the open transaction", c0, r1.Seq)
	}
	if !contains(r1.Changed, before[0].Task.ID) || !contains(r1.Changed, after[0].Task.ID) || contains(r1.Changed, slow[0].Task.ID) {
		t.Errorf("Refill(AfterSeq %d).Changed = %v, want %d and %d, not the uncommitted %d",
			c0, ids(r1.Changed), before[0].Task.ID, after[0].Task.ID, slow[0].Task.ID)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r2 := changed(t, st, r1.Seq)
	if !contains(r2.Changed, slow[0].Task.ID) {
		t.Fatalf("Refill(AfterSeq %d) after the commit: Changed = %v, want the late task %d", r1.Seq, ids(r2.Changed), slow[0].Task.ID)
	}
	if r2.Seq < r1.Seq {
		t.Errorf("Refill.Seq went back from %d to %d", r1.Seq, r2.Seq)
	}
	if r3 := changed(t, st, r2.Seq); len(r3.Changed) != 0 {
		t.Errorf("Refill(AfterSeq %d) with nothing in flight = %v, want nothing", r2.Seq, ids(r3.Changed))
	}
}

// TestRefillIgnoresOtherSchemas: a long transaction elsewhere on the server (which
// holds back the snapshot xmin for everyone) does not hold this schema's cursor back.
func TestRefillIgnoresOtherSchemas(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := context.Background()
	// Another ax schema on the same server, with a transaction that has stamped a
	// task and stays open.
	otherDSN := servicetest.PostgresDSN(t)
	other, err := postgres.Open(ctx, otherDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := newPool(t, otherDSN).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := bind(t, other, tx).Insert(ctx, []store.NewTask{{Name: "n", Key: "elsewhere", DueAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	c0 := cursor(t, st)
	res, err := st.Insert(ctx, []store.NewTask{{Name: "n", Key: "k", DueAt: dbNow(t, st)}})
	if err != nil {
		t.Fatal(err)
	}
	r1 := changed(t, st, c0)
	if r1.Seq <= c0 || !contains(r1.Changed, res[0].Task.ID) {
		t.Errorf("Refill(AfterSeq %d) = %+v, want task %d and a cursor past it", c0, r1, res[0].Task.ID)
	}
	if r2 := changed(t, st, r1.Seq); len(r2.Changed) != 0 {
		t.Errorf("Refill(AfterSeq %d) = %v, want nothing changed", r1.Seq, ids(r2.Changed))
	}
}

func TestListen(t *testing.T) {
	t.Parallel()
	st, pool := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	var (
		calls    atomic.Int64
		first    = make(chan time.Time, 1)
		freed    = make(chan struct{}, 1)
		listened = make(chan error, 1)
	)
	go func() {
		listened <- st.Listen(ctx, func(sig store.Signal) {
			if sig == store.SignalFreed {
				freed <- struct{}{}
				return
			}
			if calls.Add(1) == 1 {
				first <- time.Now()
			}
		})
	}()
	waitListeners(t, pool, st.Channel(), 1)

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bind(t, st, tx).Insert(ctx, []store.NewTask{{Name: "n", Key: "k", DueAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the transaction stays open
	if n := calls.Load(); n != 0 {
		t.Fatalf("f called %d times before the commit", n)
	}
	committed := time.Now()
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-first:
		if at.Before(committed) {
			t.Errorf("f called at %v, before the commit at %v", at, committed)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("f not called within 10s of the commit")
	}

	// A finish of a task of a limited name signals that slots freed; one of another
	// name does not.
	if _, err := st.SetConcurrency(ctx, "limited", 1, "test"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"other", "limited"} {
		ins, err := st.Insert(ctx, []store.NewTask{{Name: name, Key: "k", DueAt: time.Now().Add(-time.Second)}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := st.ClaimStart(ctx, store.Fence{}, store.StartOn{Node: "n", Handlers: []string{name}},
			[]store.Claim{{ID: ins[0].Task.ID, ExecutionID: "e-" + name, Start: true}})
		if err != nil || len(res.Claimed)+len(res.Started) != 1 {
			t.Fatalf("claim of %s = %+v, %v", name, res, err)
		}
		if len(res.Claimed) == 1 {
			if _, err := st.Start(ctx, store.Fence{}, []store.StartParams{{TaskID: ins[0].Task.ID, ExecutionID: "e-" + name, Name: name, Node: "n"}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := st.Finish(ctx, store.Fence{}, []store.Finish{{TaskID: ins[0].Task.ID, ExecutionID: "e-" + name, Status: store.Succeeded}}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-freed:
			if name == "other" {
				t.Errorf("a finish of a name without a limit signalled freed slots")
			}
		case <-time.After(time.Second):
			if name == "limited" {
				t.Errorf("a finish of a limited name's task did not signal freed slots within 1s")
			}
		}
	}
	cancel()
	if err := <-listened; err != nil {
		t.Errorf("Listen after ctx ended = %v, want nil", err)
	}

	// Close ends a running Listen with ErrClosed.
	waitListeners(t, pool, st.Channel(), 0)
	go func() { listened <- st.Listen(context.Background(), func(store.Signal) {}) }()
	waitListeners(t, pool, st.Channel(), 1)
	st.Close()
	select {
	case err := <-listened:
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("Listen after Close = %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Listen still running 10s after Close")
	}
}

// A Marked view's Insert signals SignalMarked to the listening views of its mark —
// through COPY too — and SignalWork to every other; its other writes, and inserts in a
// transaction it binds, signal SignalWork. A bad mark is ErrInvalid.
func TestListenMarked(t *testing.T) {
	t.Parallel()
	st, pool := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	view := func(mark string) *postgres.Store {
		t.Helper()
		v, err := st.Marked(mark)
		if err != nil {
			t.Fatalf("Marked(%q): %v", mark, err)
		}
		return v.(*postgres.Store)
	}
	a, a2, b := view("a"), view("a"), view("b")
	postgres.SetCopyThreshold(a2, 10) // every view's: only a2's insert has 10 tasks
	listen := func(v *postgres.Store) chan store.Signal {
		sigs := make(chan store.Signal, 16)
		go v.Listen(ctx, func(sig store.Signal) { sigs <- sig })
		return sigs
	}
	onA, onPlain := listen(a), listen(st)
	waitListeners(t, pool, st.Channel(), 2)

	tasks := func(key string, n int) []store.NewTask {
		nts := make([]store.NewTask, n)
		for i := range nts {
			nts[i] = store.NewTask{Name: "n", Key: fmt.Sprint(key, i), DueAt: time.Now().Add(time.Hour)}
		}
		return nts
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, c := range []struct {
		what  string
		write func() error
		onA   store.Signal
	}{
		{"an insert through the view", func() error { _, err := a.Insert(ctx, tasks("a", 1)); return err }, store.SignalMarked},
		{"a COPY through another view of its mark", func() error { _, err := a2.Insert(ctx, tasks("copy", 20)); return err }, store.SignalMarked},
		{"an insert through a view of another mark", func() error { _, err := b.Insert(ctx, tasks("b", 1)); return err }, store.SignalWork},
		{"an unmarked insert", func() error { _, err := st.Insert(ctx, tasks("plain", 1)); return err }, store.SignalWork},
		{"an insert in a transaction the view binds", func() error {
			if _, err := bind(t, a, tx).Insert(ctx, tasks("tx", 1)); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}, store.SignalWork},
		{"another write of the view", func() error {
			ins, err := st.Insert(ctx, tasks("due", 1))
			if err != nil {
				return err
			}
			for _, sigs := range []chan store.Signal{onA, onPlain} { // the insert's
				select {
				case <-sigs:
				case <-time.After(10 * time.Second):
					return errors.New("no signal of the insert within 10s")
				}
			}
			_, err = a.MakeDue(ctx, ins[0].Task.ID)
			return err
		}, store.SignalWork},
	} {
		if err := c.write(); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		for _, l := range []struct {
			name string
			sigs chan store.Signal
			want store.Signal
		}{{"the view", onA, c.onA}, {"the unmarked store", onPlain, store.SignalWork}} {
			select {
			case got := <-l.sigs:
				if got != l.want {
					t.Errorf("%s: %s heard signal %d, want %d", c.what, l.name, got, l.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: %s heard nothing within 10s", c.what, l.name)
			}
		}
	}
	for _, mark := range []string{"", "a b", "é", strings.Repeat("m", store.MaxMark+1)} {
		if _, err := st.Marked(mark); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Marked(%q) = %v, want ErrInvalid", mark, err)
		}
	}
}

// waitListeners waits, up to 10s, until want sessions have LISTENed on channel.
func waitListeners(t *testing.T, pool *pgxpool.Pool, channel string, want int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE query = $1`,
			"LISTEN "+pgx.Identifier{channel}.Sanitize()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions LISTEN on %s after 10s, want %d", n, channel, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestClaimWaitsForLockedRow: a claim waits for a row another transaction holds and
// claims it when that transaction ends with the row still due, rather than skipping it.
func TestClaimWaitsForLockedRow(t *testing.T) {
	t.Parallel()
	st, pool := setup(t)
	ctx := context.Background()
	res, err := st.Insert(ctx, []store.NewTask{
		{Name: "n", Key: "a", DueAt: dbNow(t, st).Add(-time.Minute)},
		{Name: "n", Key: "b", DueAt: dbNow(t, st).Add(-time.Minute)},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, b := res[0].Task.ID, res[1].Task.ID
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM ax_tasks WHERE id = $1 FOR UPDATE`, b); err != nil {
		t.Fatal(err)
	}
	done := make(chan *store.ClaimResult, 1)
	go func() {
		r, err := st.Claim(ctx, store.Fence{}, []store.Claim{{ID: a, ExecutionID: "e-a"}, {ID: b, ExecutionID: "e-b"}})
		if err != nil {
			t.Errorf("Claim: %v", err)
		}
		done <- r
	}()
	postgres.WaitBlocking(t, tx)
	select {
	case r := <-done:
		t.Fatalf("Claim returned %+v while task %d was locked, want it to wait", r, b)
	default:
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r == nil || len(r.Claimed) != 2 || r.Claimed[0].ID != a || r.Claimed[1].ID != b {
			t.Errorf("Claim after the lock was released = %+v, want tasks %d and %d claimed", r, a, b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Claim still waiting 10s after the lock was released")
	}
}

// TestRefillConcurrentWriters chains Refill cursors while writers commit in any
// order: every task must show up in Changed (repeats allowed), none may be skipped.
func TestRefillConcurrentWriters(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := context.Background()
	run := 1500 * time.Millisecond
	if testing.Short() {
		run = 300 * time.Millisecond
	}
	due := dbNow(t, st).Add(-time.Minute)
	to := due.Add(time.Hour)
	cur := cursor(t, st)
	var (
		mu       sync.Mutex
		inserted []int64
		n        atomic.Int64
		wg       sync.WaitGroup
	)
	stop := time.Now().Add(run)
	for w := range 6 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				nts := make([]store.NewTask, 1+w%3)
				for i := range nts {
					nts[i] = store.NewTask{Name: "n", Key: fmt.Sprint(n.Add(1)), DueAt: due}
				}
				res, err := st.Insert(ctx, nts)
				if err != nil {
					t.Errorf("Insert: %v", err)
					return
				}
				mu.Lock()
				for _, r := range res {
					inserted = append(inserted, r.Task.ID)
				}
				mu.Unlock()
			}
		})
	}
	seen := map[int64]bool{}
	refill := func() bool {
		r, err := st.Refill(ctx, store.RefillParams{AfterSeq: cur, From: to, To: to, Limit: 25})
		if err != nil {
			t.Fatalf("Refill: %v", err)
		}
		if r.Seq < cur {
			t.Fatalf("Refill(AfterSeq %d).Seq = %d: went back", cur, r.Seq)
		}
		for _, d := range r.Changed {
			seen[d.ID] = true
		}
		cur = r.Seq
		return r.More
	}
	for time.Now().Before(stop) {
		refill()
	}
	wg.Wait()
	for refill() {
	}
	refill()
	missed := 0
	for _, id := range inserted {
		if !seen[id] {
			missed++
		}
	}
	if missed > 0 {
		t.Errorf("%d of %d tasks never appeared in Changed from the chained cursors", missed, len(inserted))
	}
	t.Logf("%d tasks inserted by 6 writers, all seen through chained Refill cursors", len(inserted))
}

// TestMigrateFromV1: a schema migrated and used by version 1 (before task keys and
// schedules) migrates to the current version; its rows have no task key and work
// as before.
func TestMigrateFromV1(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t, servicetest.PostgresDSN(t))
	migrateTo(t, pool, 1)
	var old, running int64
	// Written by version 1: a due task, and a running one.
	for _, row := range []struct {
		key, status string
		id          *int64
	}{{"old", "SCHEDULED", &old}, {"running", "RUNNING", &running}} {
		if err := pool.QueryRow(ctx, `INSERT INTO ax_tasks (name, key, status, due_at, seq, created_at, updated_at, execution_id)
			VALUES ('n', $1, $2, clock_timestamp() - interval '1 minute', nextval('ax_seq'), clock_timestamp(), clock_timestamp(),
				CASE $2 WHEN 'RUNNING' THEN 'e-running' END)
			RETURNING id`, row.key, row.status).Scan(row.id); err != nil {
			t.Fatal(err)
		}
	}

	st := migrateFrom(t, pool, 1)
	got, err := st.Get(ctx, old)
	if err != nil || got.TaskKey != "" || got.Overlap != "" {
		t.Fatalf("Get(v1 task) = %+v, %v; want no task key, no overlap", got, err)
	}
	res, err := st.Claim(ctx, store.Fence{}, []store.Claim{{ID: old, ExecutionID: "e-old"}})
	if err != nil || len(res.Claimed) != 1 {
		t.Errorf("Claim(v1 task) = %+v, %v; want it claimed", res, err)
	}
	// A keyed task is not held off by a v1 task (its key is empty).
	ins, err := st.Insert(ctx, []store.NewTask{{Name: "n", Key: "keyed", DueAt: dbNow(t, st).Add(-time.Minute),
		TaskKey: "report", Overlap: store.OverlapSkip}})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := st.Claim(ctx, store.Fence{}, []store.Claim{{ID: ins[0].Task.ID, ExecutionID: "e-keyed"}}); err != nil || len(res.Claimed) != 1 {
		t.Errorf("Claim(keyed task beside v1 tasks) = %+v, %v; want it claimed", res, err)
	}
	if _, err := st.RegisterSchedules(ctx, []store.ScheduleDef{{Name: "report", Spec: "@every 1m", TimeZone: "UTC",
		Overlap: store.OverlapSkip, Misfire: store.MisfireFireOnce, NextFireAt: time.Now()}}); err != nil {
		t.Errorf("RegisterSchedules after migrating from v1: %v", err)
	}
	var indexed bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('ax_tasks_key_held') IS NOT NULL`).Scan(&indexed); err != nil || !indexed {
		t.Errorf("index ax_tasks_key_held exists = %t, %v", indexed, err)
	}
}

// TestMigrateNamespaces: a schema at version 4 with rows migrates to version 5
// without rewriting ax_tasks or ax_schedules (the namespace column's default stays in
// the catalog); the old rows are in the default namespace and invisible to others.
func TestMigrateNamespaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t, servicetest.PostgresDSN(t))
	migrateTo(t, pool, 4)
	var old int64
	if err := pool.QueryRow(ctx, `INSERT INTO ax_tasks (name, key, status, due_at, seq, created_at, updated_at, task_key, overlap)
		VALUES ('report', 'r-1', 'SCHEDULED', clock_timestamp() - interval '1 minute', nextval('ax_seq'), clock_timestamp(), clock_timestamp(),
			'report', 'skip')
		RETURNING id`).Scan(&old); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO ax_schedules (name, spec, time_zone, overlap, misfire, next_fire_at, created_at, updated_at)
		VALUES ('report', '@every 1m', 'UTC', 'skip', 'fire_once', clock_timestamp(), clock_timestamp(), clock_timestamp())`); err != nil {
		t.Fatal(err)
	}
	const files4 = `SELECT c.relname, c.relfilenode FROM pg_class c
		WHERE c.oid IN ('ax_tasks'::regclass, 'ax_schedules'::regclass) ORDER BY c.relname`
	read := func() map[string]uint32 {
		rows, err := pool.Query(ctx, files4)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]uint32{}
		for rows.Next() {
			var name string
			var node uint32
			if err := rows.Scan(&name, &node); err != nil {
				t.Fatal(err)
			}
			m[name] = node
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	before := read()

	st := migrateFrom(t, pool, 4)
	if after := read(); after["ax_tasks"] != before["ax_tasks"] || after["ax_schedules"] != before["ax_schedules"] {
		t.Errorf("relfilenodes %v before the migration, %v after: a table was rewritten", before, after)
	}
	var missing int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_attribute
		WHERE attrelid IN ('ax_tasks'::regclass, 'ax_schedules'::regclass) AND attname = 'namespace' AND atthasmissing`).Scan(&missing); err != nil || missing != 2 {
		t.Errorf("namespace columns with their default in the catalog = %d, %v; want 2", missing, err)
	}
	if got, err := st.Get(ctx, old); err != nil || got.Key != "r-1" {
		t.Fatalf("Get(v4 task) in the default namespace = %+v, %v", got, err)
	}
	if scs, err := st.Schedules(ctx); err != nil || len(scs) != 1 || scs[0].Name != "report" {
		t.Fatalf("Schedules in the default namespace = %+v, %v; want the v4 schedule", scs, err)
	}
	v, err := st.InNamespace("other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Get(ctx, old); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(v4 task) in another namespace: error %v, want ErrNotFound", err)
	}
	if scs, err := v.Schedules(ctx); err != nil || len(scs) != 0 {
		t.Errorf("Schedules in another namespace = %+v, %v; want none", scs, err)
	}
	ins, err := v.Insert(ctx, []store.NewTask{{Name: "report", Key: "r-1", DueAt: dbNow(t, st)}})
	if err != nil || ins[0].Err != nil || ins[0].Task.ID == old {
		t.Fatalf("Insert of the v4 task's key in another namespace = %+v, %v; want a new task", ins, err)
	}
	if _, err := v.RegisterSchedules(ctx, []store.ScheduleDef{{Name: "report", Spec: "@every 1m", TimeZone: "UTC",
		Overlap: store.OverlapSkip, Misfire: store.MisfireFireOnce, NextFireAt: time.Now()}}); err != nil {
		t.Errorf("RegisterSchedules of the v4 schedule's name in another namespace: %v", err)
	}
	if n, err := st.DeleteSchedule(ctx, "report"); err != nil || n != 1 {
		t.Errorf("DeleteSchedule(report) in the default namespace = %d, %v; want its one occurrence cancelled", n, err)
	}
	if got, err := v.Lookup(ctx, "report", "r-1"); err != nil || got.Status != store.Scheduled {
		t.Errorf("the other namespace's task after the default's schedule was deleted = %+v, %v; want it SCHEDULED", got, err)
	}
}

// tracer counts what a pool sends: round trips (a batch, or a query outside one)
// and statements.
type tracer struct {
	roundTrips, statements atomic.Int64
}

func (tr *tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	if ctx.Value(inBatch{}) == nil {
		tr.roundTrips.Add(1)
		tr.statements.Add(1)
	}
	return ctx
}
func (tr *tracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (tr *tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	tr.roundTrips.Add(1)
	tr.statements.Add(int64(d.Batch.Len()))
	return context.WithValue(ctx, inBatch{}, true)
}
func (tr *tracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (tr *tracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

type inBatch struct{}

func (tr *tracer) take() (roundTrips, statements int64) {
	return tr.roundTrips.Swap(0), tr.statements.Swap(0)
}

// TestClaimRoundTrips pins the cost of Claim: tasks without a key (or with Overlap
// allow) cost one round trip of four statements (BEGIN, plans, the claim,
// COMMIT) as before task keys existed; keyed tasks add one transaction of two round
// trips; a fence adds one statement and no round trip.
func TestClaimRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(servicetest.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	tr := &tracer{}
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st, err := postgres.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	due := dbNow(t, st).Add(-time.Minute)
	var nts []store.NewTask
	for i := range 250 { // two chunks
		nt := store.NewTask{Name: "n", Key: fmt.Sprint(i), DueAt: due}
		if i%2 == 1 {
			nt.TaskKey, nt.Overlap = fmt.Sprintf("fanout-%d", i%3), store.OverlapAllow
		}
		nts = append(nts, nt)
	}
	nts = append(nts, store.NewTask{Name: "n", Key: "skip-a", DueAt: due, TaskKey: "k", Overlap: store.OverlapSkip},
		store.NewTask{Name: "n", Key: "skip-b", DueAt: due, TaskKey: "k", Overlap: store.OverlapSkip},
		store.NewTask{Name: "n", Key: "queue", DueAt: due, TaskKey: "j", Overlap: store.OverlapQueue})
	ins, err := st.Insert(ctx, nts)
	if err != nil {
		t.Fatal(err)
	}
	claims := func(from, to int) []store.Claim {
		var c []store.Claim
		for i, r := range ins[from:to] {
			c = append(c, store.Claim{ID: r.Task.ID, ExecutionID: fmt.Sprintf("e-%d", from+i)})
		}
		return c
	}

	tr.take()
	res, err := st.Claim(ctx, store.Fence{}, claims(0, 250))
	if err != nil || len(res.Claimed) != 250 {
		t.Fatalf("Claim(250 tasks without a restricting key) = %d claimed, %v", len(res.Claimed), err)
	}
	if rt, n := tr.take(); rt != 1 || n != 5 {
		t.Errorf("Claim(250 tasks without a restricting key): %d round trips, %d statements; want 1, 5 (BEGIN, plans, 2 chunks, COMMIT)", rt, n)
	}

	res, err = st.Claim(ctx, store.Fence{}, claims(250, 253))
	if err != nil || len(res.Claimed) != 2 || len(res.Skipped) != 1 {
		t.Fatalf("Claim(keyed tasks) = %+v, %v; want 2 claimed (one per key), 1 skipped", res, err)
	}
	// 1: the claim statement; 2: BEGIN, plans, lock, lock the tasks, holders;
	// 3: claim the winners, skip the loser, COMMIT.
	if rt, n := tr.take(); rt != 3 || n != 4+5+3 {
		t.Errorf("Claim(keyed tasks): %d round trips, %d statements; want 3, 12", rt, n)
	}

	// A fence adds one statement, SELECT ax_fence(…), to the same round trip.
	fence, err := st.RaiseFence(ctx, "ns", "me", 1)
	if err != nil {
		t.Fatal(err)
	}
	more, err := st.Insert(ctx, []store.NewTask{{Name: "n", Key: "fenced", DueAt: due}})
	if err != nil {
		t.Fatal(err)
	}
	tr.take()
	res, err = st.Claim(ctx, fence, []store.Claim{{ID: more[0].Task.ID, ExecutionID: "e-fenced"}})
	if err != nil || len(res.Claimed) != 1 {
		t.Fatalf("Claim(fenced) = %+v, %v; want claimed", res, err)
	}
	if rt, n := tr.take(); rt != 1 || n != 5 {
		t.Errorf("Claim(fenced): %d round trips, %d statements; want 1, 5 (BEGIN, plans, fence, claim, COMMIT)", rt, n)
	}
}

// TestMigrateIdsFromSeq: version 9 moves the ids of a version 8 schema onto ax_seq
// without handing out a value twice, whichever sequence was ahead (ids were drawn
// from the identity's sequence, stamps from ax_seq): every task inserted afterwards,
// by COPY or one at a time, has an id above the old rows' and above every value
// ax_seq had handed out, the old rows read as before, and the identity's sequence is
// gone.
func TestMigrateIdsFromSeq(t *testing.T) {
	t.Parallel()
	for _, ahead := range []string{"ax_tasks_id_seq", "ax_seq"} {
		t.Run(ahead+" ahead", func(t *testing.T) {
			t.Parallel()
			migrateIdsFromSeq(t, ahead)
		})
	}
}

func migrateIdsFromSeq(t *testing.T, ahead string) {
	ctx := context.Background()
	pool := newPool(t, servicetest.PostgresDSN(t))
	migrateTo(t, pool, 8)
	if _, err := pool.Exec(ctx, `SELECT setval($1, 5000)`, ahead); err != nil {
		t.Fatal(err)
	}
	var old []int64
	for _, key := range []string{"old-1", "old-2"} {
		var id int64
		if err := pool.QueryRow(ctx, `INSERT INTO ax_tasks (name, key, status, due_at, seq, created_at, updated_at)
			VALUES ('n', $1, 'SCHEDULED', clock_timestamp() + interval '1 hour', nextval('ax_seq'), clock_timestamp(), clock_timestamp())
			RETURNING id`, key).Scan(&id); err != nil {
			t.Fatal(err)
		}
		old = append(old, id)
	}
	var drawn int64 // the last value either sequence handed out
	if err := pool.QueryRow(ctx, `SELECT GREATEST((SELECT last_value FROM ax_seq), (SELECT last_value FROM ax_tasks_id_seq))`).Scan(&drawn); err != nil {
		t.Fatal(err)
	}
	if drawn < 5000 {
		t.Fatalf("the sequences handed out up to %d; want 5000 or more", drawn)
	}

	st := migrateFrom(t, pool, 8)
	var gone bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('ax_tasks_id_seq') IS NULL`).Scan(&gone); err != nil || !gone {
		t.Errorf("ax_tasks_id_seq dropped = %t, %v", gone, err)
	}
	for i, id := range old {
		if got, err := st.Get(ctx, id); err != nil || got.Key != fmt.Sprintf("old-%d", i+1) {
			t.Fatalf("Get(%d) after the migration = %+v, %v", id, got, err)
		}
	}
	due := dbNow(t, st).Add(time.Hour)
	var bulk []store.NewTask
	for i := range 1500 { // above the COPY threshold
		bulk = append(bulk, store.NewTask{Name: "n", Key: fmt.Sprintf("bulk-%d", i), DueAt: due})
	}
	copied, err := st.Insert(ctx, bulk)
	if err != nil {
		t.Fatal(err)
	}
	single, err := st.Insert(ctx, []store.NewTask{{Name: "n", Key: "single", DueAt: due}})
	if err != nil {
		t.Fatal(err)
	}
	seen, bulkMax := map[int64]bool{}, int64(0)
	for _, r := range append(copied, single...) {
		if r.Err != nil || r.Task.ID <= drawn || seen[r.Task.ID] {
			t.Fatalf("after the migration, task %+v (%v): want a new id above %d", r.Task, r.Err, drawn)
		}
		seen[r.Task.ID] = true
	}
	for _, r := range copied {
		bulkMax = max(bulkMax, r.Task.ID)
	}
	if single[0].Task.ID <= bulkMax {
		t.Errorf("the task inserted last has id %d, not above the bulk's largest, %d", single[0].Task.ID, bulkMax)
	}
}

// localeCollated lists the index columns of ax_tasks and ax_executions that compare by
// a collation other than "C", as index.column (collation).
func localeCollated(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT i.indexrelid::regclass::text || '.' || a.attname || ' (' || c.collname || ')'
		FROM pg_index i
		JOIN pg_class r ON r.oid = i.indrelid
		CROSS JOIN LATERAL unnest(i.indkey::int2[], i.indcollation::oid[]) AS k(attnum, coll)
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
		JOIN pg_collation c ON c.oid = k.coll
		WHERE r.relname IN ('ax_tasks', 'ax_executions') AND r.relnamespace = current_schema()::regnamespace
			AND c.collname <> 'C'
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMigrateCollateC: version 10 makes the text columns of ax_tasks' and
// ax_executions' indexes compare bytes, on a fresh schema as on one migrated from
// version 9 with rows in it, whose unique business key still refuses a duplicate
// and whose tasks and executions read and move on as before.
func TestMigrateCollateC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("fresh", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t, servicetest.PostgresDSN(t))
		migrateFrom(t, pool, 0)
		if got := localeCollated(t, pool); len(got) != 0 {
			t.Errorf("index columns by a locale's collation: %v", got)
		}
	})
	t.Run("from v9", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t, servicetest.PostgresDSN(t))
		migrateTo(t, pool, 9)
		if got := localeCollated(t, pool); len(got) == 0 {
			t.Fatal("at version 9 no index column compares by the database's collation: the test proves nothing here")
		}
		var id int64
		if err := pool.QueryRow(ctx, `INSERT INTO ax_tasks (name, key, status, due_at, seq, created_at, updated_at, execution_id, started_at)
			VALUES ('n', 'old', 'RUNNING', clock_timestamp(), nextval('ax_seq'), clock_timestamp(), clock_timestamp(),
				'0190a0a0-0000-7000-8000-000000000001', clock_timestamp())
			RETURNING id`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO ax_executions (id, task_id, attempt, status, started_at)
			VALUES ('0190a0a0-0000-7000-8000-000000000001', $1, 0, 'RUNNING', clock_timestamp())`, id); err != nil {
			t.Fatal(err)
		}
		// A task that succeeded before version 10, whose execution record was closed
		// then, and an earlier record of it left RUNNING (as by a crash before
		// recovery closed it): each reads as it was written.
		var done int64
		if err := pool.QueryRow(ctx, `INSERT INTO ax_tasks (name, key, status, due_at, seq, created_at, updated_at, execution_id, started_at, finished_at)
			VALUES ('n', 'done', 'SUCCEEDED', clock_timestamp(), nextval('ax_seq'), clock_timestamp(), clock_timestamp(),
				'0190a0a0-0000-7000-8000-000000000003', clock_timestamp(), '2026-06-01 12:00:00+00')
			RETURNING id`).Scan(&done); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO ax_executions (id, task_id, attempt, status, started_at, finished_at) VALUES
			('0190a0a0-0000-7000-8000-000000000002', $1, 0, 'RUNNING', '2026-06-01 11:00:00+00', NULL),
			('0190a0a0-0000-7000-8000-000000000003', $1, 1, 'SUCCEEDED', '2026-06-01 11:30:00+00', '2026-06-01 11:59:00+00')`, done); err != nil {
			t.Fatal(err)
		}
		st := migrateFrom(t, pool, 9)
		xs, err := st.Executions(ctx, done)
		if err != nil || len(xs) != 2 || xs[0].Status != store.Running || !xs[0].FinishedAt.IsZero() ||
			xs[1].Status != store.Succeeded || !xs[1].FinishedAt.Equal(time.Date(2026, 6, 1, 11, 59, 0, 0, time.UTC)) {
			t.Errorf("Executions(%d) = %+v, %v; want the RUNNING record as it is, then the one closed at 11:59", done, xs, err)
		}
		if got := localeCollated(t, pool); len(got) != 0 {
			t.Errorf("index columns by a locale's collation after the migration: %v", got)
		}
		res, err := st.Insert(ctx, []store.NewTask{{Name: "n", Key: "old", DueAt: time.Now()}})
		if err != nil || !errors.Is(res[0].Err, store.ErrDuplicate) || res[0].Task.ID != id {
			t.Errorf("Insert of the old task's key = %+v, %v; want ErrDuplicate with task %d", res, err, id)
		}
		ok, err := st.Finish(ctx, store.Fence{}, []store.Finish{{TaskID: id, ExecutionID: "0190a0a0-0000-7000-8000-000000000001", Status: store.Succeeded}})
		if err != nil || !ok[0] {
			t.Fatalf("Finish of the old execution = %v, %v", ok, err)
		}
		xs, err = st.Executions(ctx, id)
		if err != nil || len(xs) != 1 || xs[0].Status != store.Succeeded || xs[0].FinishedAt.IsZero() {
			t.Errorf("Executions(%d) = %+v, %v; want the old execution, succeeded", id, xs, err)
		}
	})
}

// TestMigrateConsoleTimes: a schema at version 13 with an execution and a node
// migrates to version 14 without rewriting ax_executions or ax_nodes; the old
// execution reads with zero due and claim times, the old node with a zero offset.
func TestMigrateConsoleTimes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t, servicetest.PostgresDSN(t))
	migrateTo(t, pool, 13)
	var id int64
	if err := pool.QueryRow(ctx, `INSERT INTO ax_tasks (name, key, status, due_at, seq, created_at, updated_at, execution_id, started_at)
		VALUES ('n', 'k', 'RUNNING', clock_timestamp() - interval '1 minute', nextval('ax_seq'), clock_timestamp(), clock_timestamp(),
			'e-13', clock_timestamp()) RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO ax_executions (id, task_id, attempt, node, status, started_at, heartbeat_at)
		VALUES ('e-13', $1, 0, 'node-13', 'RUNNING', clock_timestamp(), clock_timestamp())`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO ax_nodes (namespace, name, capacity, in_flight, started_at, heartbeat_at)
		VALUES ('default', 'node-13', 1, 0, clock_timestamp(), clock_timestamp())`); err != nil {
		t.Fatal(err)
	}
	files := func() (execs, nodes uint32) {
		if err := pool.QueryRow(ctx, `SELECT (SELECT relfilenode FROM pg_class WHERE oid = 'ax_executions'::regclass),
			(SELECT relfilenode FROM pg_class WHERE oid = 'ax_nodes'::regclass)`).Scan(&execs, &nodes); err != nil {
			t.Fatal(err)
		}
		return execs, nodes
	}
	e0, n0 := files()
	st := migrateFrom(t, pool, 13)
	if e1, n1 := files(); e1 != e0 || n1 != n0 {
		t.Errorf("relfilenodes of ax_executions, ax_nodes: %d, %d before the migration, %d, %d after: a table was rewritten", e0, n0, e1, n1)
	}
	execs, err := st.Executions(ctx, id)
	if err != nil || len(execs) != 1 {
		t.Fatalf("Executions(%d) = %+v, %v; want the version 13 record", id, execs, err)
	}
	if x := execs[0]; !x.DueAt.IsZero() || !x.ClaimedAt.IsZero() || x.Lateness() != 0 {
		t.Errorf("a version 13 record reads %+v; want zero DueAt and ClaimedAt, no lateness", x)
	}
	nodes, err := st.Nodes(ctx, time.Hour)
	if err != nil || len(nodes) != 1 || nodes[0].ClockOffset != 0 {
		t.Errorf("Nodes = %+v, %v; want node-13 with a zero ClockOffset", nodes, err)
	}
}
