package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/mysql"
	"github.com/axsched/ax/store/storetest"
)

// TestStoreNew runs the suite through New on a pool configured the driver's way:
// no parseTime, server-side prepared statements, the server's default isolation.
func TestStoreNew(t *testing.T) {
	if testing.Short() {
		t.Skip("the suite runs once through Open in short mode")
	}
	// The lifecycle storm races for its default length here: the long one CI asks
	// for runs once, through Open (TestStore), whose statements are the same.
	t.Setenv(storetest.StormEnv, "")
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := newWithDB(t, func(cfg *gomysql.Config) { cfg.ParseTime = false })
		return s
	})
}

// newWithDB returns a store made by New on a fresh database, through a pool of the
// caller's own whose DSN edit adjusts, and that pool.
func newWithDB(t *testing.T, edit func(*gomysql.Config)) (*mysql.Store, *sql.DB) {
	t.Helper()
	cfg, err := gomysql.ParseDSN(servicetest.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	edit(cfg)
	db := rawDB(t, cfg.FormatDSN())
	s, err := mysql.New(db)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, db
}

// openWithDB returns a store made by Open on a fresh database, and a pool of its own
// on that database, for the caller's transactions and raw statements.
func openWithDB(t *testing.T) (*mysql.Store, *sql.DB) {
	t.Helper()
	dsn := servicetest.MySQLDSN(t)
	return openDSN(t, dsn), rawDB(t, dsn)
}

// migrated returns a fresh database migrated by Open (the store closed again), and a
// pool on it.
func migrated(t *testing.T) (string, *sql.DB) {
	t.Helper()
	dsn := servicetest.MySQLDSN(t)
	s, err := mysql.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	return dsn, rawDB(t, dsn)
}

func rawDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newTask(key string, due time.Time) store.NewTask {
	return store.NewTask{Name: "order.close", Key: key, Payload: []byte("p"), DueAt: due, MaxRetry: 3, OwnerService: "orders"}
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	dsn := servicetest.MySQLDSN(t)
	s, err := mysql.Open(dsn)
	if err != nil {
		t.Fatalf("Open(empty database): %v", err)
	}
	if got := mysql.Applied(s); got != mysql.SchemaVersion() {
		t.Errorf("Open(empty database) applied %d migrations, want %d", got, mysql.SchemaVersion())
	}
	s.Close()
	again, err := mysql.Open(dsn)
	if err != nil {
		t.Fatalf("Open(migrated database): %v", err)
	}
	defer again.Close()
	if got := mysql.Applied(again); got != 0 {
		t.Errorf("Open(migrated database) applied %d migrations, want 0", got)
	}
	db := rawDB(t, dsn)
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM ax_schema_migrations WHERE applied_at IS NOT NULL`).Scan(&n); err != nil || n != mysql.SchemaVersion() {
		t.Errorf("ax_schema_migrations holds %d applied versions (%v), want %d", n, err, mysql.SchemaVersion())
	}
}

func TestMigrateConcurrent(t *testing.T) {
	t.Parallel()
	dsn := servicetest.MySQLDSN(t)
	const n = 5
	stores := make([]*mysql.Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = mysql.Open(dsn)
		})
	}
	close(start)
	wg.Wait()
	applied := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("Open #%d: %v", i, errs[i])
			continue
		}
		applied += mysql.Applied(stores[i])
		defer stores[i].Close()
	}
	if applied != mysql.SchemaVersion() {
		t.Errorf("%d concurrent Opens applied %d migrations in all, want %d (once)", n, applied, mysql.SchemaVersion())
	}
}

func TestMigrateNewerSchema(t *testing.T) {
	t.Parallel()
	dsn, db := migrated(t)
	if _, err := db.Exec(`INSERT INTO ax_schema_migrations (version, step, started_at, applied_at)
		VALUES (999, 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`); err != nil {
		t.Fatal(err)
	}
	if s, err := mysql.Open(dsn); !errors.Is(err, store.ErrSchemaVersion) {
		if s != nil {
			s.Close()
		}
		t.Errorf("Open(database at version 999) error = %v, want ErrSchemaVersion", err)
	}
	if _, err := mysql.New(db); !errors.Is(err, store.ErrSchemaVersion) {
		t.Errorf("New(database at version 999) error = %v, want ErrSchemaVersion", err)
	}
}

// A crash in the middle of a migration: DDL committed statement by statement, the
// migration's row records how far it got. The next Open finishes it.
func TestMigrateResumesAfterCrash(t *testing.T) {
	t.Parallel()
	dsn, db := migrated(t)
	// As if the process died after the statement creating ax_executions.
	for _, q := range []string{
		`DROP TABLE ax_seq_holds`, `DROP TABLE ax_counters`,
		`UPDATE ax_schema_migrations SET step = 2, applied_at = NULL WHERE version = 1`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	s, err := mysql.Open(dsn)
	if err != nil {
		t.Fatalf("Open after an interrupted migration: %v", err)
	}
	defer s.Close()
	if got := mysql.Applied(s); got != 1 {
		t.Errorf("Open after an interrupted migration applied %d, want 1", got)
	}
	ctx := t.Context()
	now, _ := s.Now(ctx)
	if _, err := s.Insert(ctx, []store.NewTask{newTask("k", now)}); err != nil {
		t.Errorf("Insert after the resumed migration: %v", err)
	}
	if res, err := s.Refill(ctx, store.RefillParams{AfterSeq: 0, To: now.Add(time.Hour), Limit: 10}); err != nil || len(res.Changed) != 1 {
		t.Errorf("Refill after the resumed migration = %+v, %v; want one change", res, err)
	}
}

// Every migration statement is harmless to rerun: CREATE TABLE IF NOT EXISTS, an
// upsert, or an ALTER TABLE whose rerun either answers an error migrate takes as done
// when it resumes at that statement — ADD COLUMN "duplicate column", ADD KEY
// "duplicate key name", a lone DROP KEY "can't drop" — or rebuilds what it built: a
// DROP KEY with the ADD KEY of the same name, DROP PRIMARY KEY with ADD PRIMARY KEY.
// constantUpdate matches an upper-cased UPDATE that sets one column to a constant.
var constantUpdate = regexp.MustCompile(`^UPDATE \w+ SET \w+ = '[^']*' WHERE [^;]*$`)

func TestMigrationsIdempotentStatements(t *testing.T) {
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(files) != mysql.SchemaVersion() {
		t.Fatalf("migrations/*.sql = %v, %v; want %d files", files, err, mysql.SchemaVersion())
	}
	for _, f := range files {
		for _, q := range mysql.Statements(mustRead(t, f), "utf8mb4_nopad_bin") {
			u := strings.ToUpper(q)
			switch {
			case strings.HasPrefix(u, "CREATE TABLE IF NOT EXISTS"), strings.Contains(u, "ON DUPLICATE KEY UPDATE"):
			case constantUpdate.MatchString(u): // sets a constant: a rerun writes what the first run wrote
			case strings.HasPrefix(u, "ALTER TABLE"):
				clauses := topLevelClauses(u)
				added := map[string]bool{}
				for _, c := range clauses {
					if name, ok := strings.CutPrefix(c, "ADD UNIQUE KEY "); ok {
						added[strings.Fields(name)[0]] = true
					} else if name, ok := strings.CutPrefix(c, "ADD KEY "); ok {
						added[strings.Fields(name)[0]] = true
					}
				}
				for _, c := range clauses {
					switch {
					case strings.HasPrefix(c, "ADD COLUMN "), strings.HasPrefix(c, "ADD KEY "), strings.HasPrefix(c, "ADD UNIQUE KEY "):
					case strings.HasPrefix(c, "DROP KEY "):
						if name := strings.TrimPrefix(c, "DROP KEY "); !added[name] && len(clauses) > 1 {
							t.Errorf("%s: ALTER TABLE clause %q neither stands alone nor comes with the ADD KEY of its name", f, c)
						}
					case c == "DROP PRIMARY KEY", strings.HasPrefix(c, "ADD PRIMARY KEY "):
						if !slices.Contains(clauses, "DROP PRIMARY KEY") || !slices.ContainsFunc(clauses, func(c string) bool {
							return strings.HasPrefix(c, "ADD PRIMARY KEY ")
						}) {
							t.Errorf("%s: ALTER TABLE clause %q without its pair (DROP PRIMARY KEY, ADD PRIMARY KEY)", f, c)
						}
					default:
						t.Errorf("%s: ALTER TABLE clause %q is not harmless to rerun", f, c)
					}
				}
			default:
				t.Errorf("%s: migration statement is not idempotent:\n%s", f, q)
			}
		}
	}
}

// topLevelClauses splits "ALTER TABLE t c1, c2, …" into its clauses, ignoring commas
// inside parentheses.
func topLevelClauses(alter string) []string {
	fields := strings.Fields(alter)
	body := strings.Join(fields[3:], " ") // after ALTER TABLE <name>
	var out []string
	depth, start := 0, 0
	for i, r := range body {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(body[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(body[start:]))
}

// A database left at version 1 by an older ax migrates to the current version, and
// its rows read as tasks without a key.
func TestMigrateFromV1(t *testing.T) {
	t.Parallel()
	dsn := servicetest.MySQLDSN(t)
	db := rawDB(t, dsn)
	if err := mysql.MigrateTo(db, 1); err != nil {
		t.Fatalf("MigrateTo(1): %v", err)
	}
	// Rows as version 1 wrote them.
	if _, err := db.Exec("INSERT INTO ax_tasks (name, `key`, payload, status, due_at, last_error, backoff, seq, execution_id, created_at, updated_at) VALUES " +
		"('old', 'scheduled', 'p', 'SCHEDULED', UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, '', '', 1, NULL, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))," +
		"('old', 'running', 'p', 'RUNNING', UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, '', '', 2, 'exec-old', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))"); err != nil {
		t.Fatal(err)
	}
	s := openDSN(t, dsn)
	if got := mysql.Applied(s); got != mysql.SchemaVersion()-1 {
		t.Errorf("Open(version 1 database) applied %d migrations, want %d", got, mysql.SchemaVersion()-1)
	}
	ctx := t.Context()
	old, err := s.Lookup(ctx, "old", "scheduled")
	if err != nil {
		t.Fatal(err)
	}
	if old.TaskKey != "" || old.Overlap != "" {
		t.Errorf("version 1 row: TaskKey, Overlap = %q, %q; want empty", old.TaskKey, old.Overlap)
	}
	if res, err := s.Claim(ctx, store.Fence{}, []store.Claim{{ID: old.ID, ExecutionID: "exec-1"}}); err != nil || len(res.Claimed) != 1 {
		t.Errorf("Claim(version 1 row) = %+v, %v; want it claimed", res, err)
	}
	var held int
	if err := db.QueryRow(`SELECT COUNT(*) FROM ax_tasks WHERE held_key IS NOT NULL`).Scan(&held); err != nil || held != 0 {
		t.Errorf("rows holding a key after migrating = %d, %v; want 0", held, err)
	}
	now, _ := s.Now(ctx)
	nt := newTask("keyed", now)
	nt.TaskKey, nt.Overlap = "old-key", store.OverlapSkip
	ins, err := s.Insert(ctx, []store.NewTask{nt})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := s.Claim(ctx, store.Fence{}, []store.Claim{{ID: ins[0].Task.ID, ExecutionID: "exec-2"}}); err != nil || len(res.Claimed) != 1 {
		t.Errorf("Claim(keyed task after migrating) = %+v, %v; want it claimed", res, err)
	}
	if _, err := s.RegisterSchedules(ctx, []store.ScheduleDef{{Name: "report", Spec: "@every 1m", TimeZone: "UTC",
		Overlap: store.OverlapSkip, Misfire: store.MisfireFireOnce, NextFireAt: now}}); err != nil {
		t.Errorf("RegisterSchedules after migrating: %v", err)
	}
}

// A crash inside migration 2, after an ALTER TABLE took effect but before its step
// was recorded: the next Open reruns that ALTER, takes its "duplicate" error as done,
// finishes, and applies the later migrations.
func TestMigrateResumesAlterAfterCrash(t *testing.T) {
	t.Parallel()
	for _, step := range []int{0, 1} {
		dsn := servicetest.MySQLDSN(t)
		db := rawDB(t, dsn)
		if err := mysql.MigrateTo(db, 2); err != nil {
			t.Fatal(err)
		}
		// Undo the statements after step+1 (the two CREATE TABLEs, and the second
		// ALTER when the crash followed the first), then forget step+1.
		undo := []string{`DROP TABLE ax_schedules`, `DROP TABLE ax_task_keys`}
		if step == 0 {
			undo = append(undo, `ALTER TABLE ax_tasks DROP COLUMN held_key`)
		}
		undo = append(undo, fmt.Sprintf(`UPDATE ax_schema_migrations SET step = %d, applied_at = NULL WHERE version = 2`, step))
		for _, q := range undo {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		s, err := mysql.Open(dsn)
		if err != nil {
			t.Fatalf("Open after a crash before step %d of migration 2 was recorded: %v", step+1, err)
		}
		defer s.Close()
		if got, want := mysql.Applied(s), mysql.SchemaVersion()-1; got != want {
			t.Errorf("Open after the crash applied %d migrations, want %d (2 and the later ones)", got, want)
		}
		if have, want, err := mysql.SchemaStatus(t.Context(), dsn); err != nil || have != want {
			t.Errorf("SchemaStatus after the resumed migration = %d, %d, %v; want equal", have, want, err)
		}
	}
}

func TestOpenUnreachable(t *testing.T) {
	t.Parallel()
	start := time.Now()
	s, err := mysql.Open("root@tcp(127.0.0.1:1)/ax")
	if err == nil {
		s.Close()
		t.Fatal("Open(closed port) succeeded")
	}
	if !strings.Contains(err.Error(), "ax: mysql:") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("Open(closed port) error = %q, want it to name the store and the address", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("Open(closed port) took %v", d)
	}
	if _, err := mysql.Open("not a dsn"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Open(bad DSN) error = %v, want ErrInvalid", err)
	}
	if _, err := mysql.Open("root@tcp(127.0.0.1:3306)/"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Open(DSN without a database) error = %v, want ErrInvalid", err)
	}
}

// A bound transaction's inserts become visible with its commit, and Bind refuses a
// transaction of another kind or database.
func TestBindInsert(t *testing.T) {
	t.Parallel()
	s, db := openWithDB(t)
	ctx := t.Context()
	now, _ := s.Now(ctx)

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := bindTx(t, s, tx).Insert(ctx, []store.NewTask{newTask("committed", now)})
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("Insert in a bound tx = %+v, %v", res, err)
	}
	if _, err := s.Lookup(ctx, "order.close", "committed"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Lookup before commit: error = %v, want ErrNotFound", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Lookup(ctx, "order.close", "committed"); err != nil || got.ID != res[0].Task.ID {
		t.Errorf("Lookup after commit = %+v, %v; want task %d", got, err, res[0].Task.ID)
	}

	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bindTx(t, s, tx).Insert(ctx, []store.NewTask{newTask("rolled-back", now)}); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	if _, err := s.Lookup(ctx, "order.close", "rolled-back"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Lookup after rollback: error = %v, want ErrNotFound", err)
	}

	// Duplicates inside the caller's transaction.
	tx, _ = db.BeginTx(ctx, nil)
	res, err = bindTx(t, s, tx).Insert(ctx, []store.NewTask{newTask("committed", now), newTask("fresh", now)})
	if err != nil || !errors.Is(res[0].Err, store.ErrDuplicate) || res[1].Err != nil {
		t.Errorf("Insert(existing, fresh) in a bound tx = %+v, %v; want ErrDuplicate, nil", res, err)
	}
	tx.Commit()

	for name, bad := range map[string]any{"nil": nil, "*sql.DB": db, "string": "tx", "nil *sql.Tx": (*sql.Tx)(nil)} {
		if v, err := s.Bind(ctx, bad); !errors.Is(err, store.ErrInvalid) || v != nil {
			t.Errorf("Bind(%s) = %v, %v; want nil, ErrInvalid", name, v, err)
		}
	}
	other := rawDB(t, servicetest.MySQLDSN(t))
	tx, _ = other.BeginTx(ctx, nil)
	defer tx.Rollback()
	if v, err := s.Bind(ctx, tx); !errors.Is(err, store.ErrInvalid) || v != nil {
		t.Errorf("Bind(tx on another database) = %v, %v; want nil, ErrInvalid", v, err)
	}
	if err := tx.Commit(); err != nil {
		t.Errorf("commit after a refused Bind: %v (the check must leave the transaction usable)", err)
	}
}

func openDSN(t testing.TB, dsn string) *mysql.Store {
	t.Helper()
	s, err := mysql.Open(dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// bindTx is s.Bind(tx), failing the test on an error.
func bindTx(t *testing.T, s *mysql.Store, tx *sql.Tx) store.Tx {
	t.Helper()
	v, err := s.Bind(t.Context(), tx)
	if err != nil {
		t.Fatalf("Bind: %v", err)
	}
	return v
}

func cursor(t *testing.T, s store.Store) int64 {
	t.Helper()
	now, _ := s.Now(t.Context())
	r, err := s.Refill(t.Context(), store.RefillParams{AfterSeq: -1, From: now, To: now, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	return r.Seq
}

func changed(t *testing.T, s store.Store, after int64) *store.RefillResult {
	t.Helper()
	now, _ := s.Now(t.Context())
	to := now.Add(24 * time.Hour)
	r, err := s.Refill(t.Context(), store.RefillParams{AfterSeq: after, From: to, To: to, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func ids(ds []store.Due) []int64 {
	var out []int64
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

// The refill cursor never passes a sequence number whose row is not yet visible: a
// task inserted in a transaction that commits after a later one still reaches Changed.
func TestRefillOpenTransaction(t *testing.T) {
	t.Parallel()
	s, db := openWithDB(t)
	ctx := t.Context()
	now, _ := s.Now(ctx)
	c0 := cursor(t, s)

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	res, err := bindTx(t, s, tx).Insert(ctx, []store.NewTask{newTask("slow", now)})
	if err != nil {
		t.Fatal(err)
	}
	slow := res[0].Task.ID
	r1 := changed(t, s, c0)
	if len(r1.Changed) != 0 {
		t.Errorf("Refill during the open transaction = %v, want nothing", r1.Changed)
	}
	res, err = s.Insert(ctx, []store.NewTask{newTask("fast", now)}) // commits meanwhile
	if err != nil {
		t.Fatal(err)
	}
	fast := res[0].Task.ID
	r2 := changed(t, s, r1.Seq)
	if len(r2.Changed) != 0 || r2.Seq != r1.Seq {
		t.Errorf("Refill(AfterSeq %d) with an earlier transaction open = %v, cursor %d; want nothing and cursor %d (not past the open row)",
			r1.Seq, r2.Changed, r2.Seq, r1.Seq)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r3 := changed(t, s, r2.Seq)
	if got := ids(r3.Changed); len(got) != 2 || got[0] != slow || got[1] != fast {
		t.Errorf("Refill(AfterSeq %d) after the commit = %v, want [%d %d] in sequence order", r2.Seq, got, slow, fast)
	}
	if r3.Seq <= r2.Seq {
		t.Errorf("Refill after the commit: cursor %d, want past %d", r3.Seq, r2.Seq)
	}
}

// A rolled-back submit holds the cursor back for HoldGrace at most.
func TestRefillRolledBackTransaction(t *testing.T) {
	t.Parallel()
	s, db := openWithDB(t)
	mysql.SetHoldGrace(s, 200*time.Millisecond)
	ctx := t.Context()
	now, _ := s.Now(ctx)
	c0 := cursor(t, s)
	tx, _ := db.BeginTx(ctx, nil)
	if _, err := bindTx(t, s, tx).Insert(ctx, []store.NewTask{newTask("gone", now)}); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	res, err := s.Insert(ctx, []store.NewTask{newTask("after", now)})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := changed(t, s, c0)
		if got := ids(r.Changed); len(got) == 1 && got[0] == res[0].Task.ID {
			break
		} else if len(got) != 0 {
			t.Fatalf("Refill(AfterSeq %d) = %v, want only task %d", c0, got, res[0].Task.ID)
		}
		if time.Now().After(deadline) {
			t.Fatal("the refill cursor stayed behind a rolled-back transaction")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Business keys compare byte for byte: no case folding, no trailing-space padding.
func TestKeysAreExact(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := t.Context()
	now, _ := s.Now(ctx)
	keys := []string{"k", "k ", "K", "ḱ", "k\x00"}
	var nts []store.NewTask
	for _, k := range keys {
		nts = append(nts, newTask(k, now))
	}
	res, err := s.Insert(ctx, nts)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Errorf("Insert(key %q) = %v, want a new task", keys[i], r.Err)
			continue
		}
		got, err := s.Lookup(ctx, "order.close", keys[i])
		if err != nil || got.ID != r.Task.ID {
			t.Errorf("Lookup(%q) = %+v, %v; want task %d", keys[i], got, err, r.Task.ID)
		}
	}
}

func TestInsertLimits(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := t.Context()
	now, _ := s.Now(ctx)
	ok := newTask(strings.Repeat("界", 500/3), now) // 498 bytes
	ok.Name = strings.Repeat("n", 200)
	ok.TaskKey, ok.Overlap = strings.Repeat("界", 500/3), store.OverlapQueue
	if _, err := s.Insert(ctx, []store.NewTask{ok}); err != nil {
		t.Errorf("Insert(name of 200 bytes, key and task key of 498) error: %v", err)
	}
	for what, spoil := range map[string]func(*store.NewTask){
		"name of 201 bytes": func(nt *store.NewTask) { nt.Name = strings.Repeat("n", 201) },
		"key of 501 bytes":  func(nt *store.NewTask) { nt.Key = strings.Repeat("k", 501) },
		"invalid UTF-8 key": func(nt *store.NewTask) { nt.Key = "\xff" },
		"due in year 10000": func(nt *store.NewTask) { nt.DueAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
		"task key of 501 bytes": func(nt *store.NewTask) {
			nt.TaskKey, nt.Overlap = strings.Repeat("k", 501), store.OverlapSkip
		},
	} {
		nt := newTask("x", now)
		spoil(&nt)
		if _, err := s.Insert(ctx, []store.NewTask{nt}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Insert(%s) error = %v, want ErrInvalid", what, err)
		}
	}
}

func TestNewOwnsNothing(t *testing.T) {
	t.Parallel()
	db := rawDB(t, servicetest.MySQLDSN(t))
	s, err := mysql.New(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.PingContext(context.Background()); err != nil {
		t.Errorf("Close closed the caller's *sql.DB: %v", err)
	}
	if _, err := s.Now(t.Context()); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Now after Close: error = %v, want ErrClosed", err)
	}
}

// AcquireLease tells the insert of a namespace's first lease from a duplicate by the
// rows affected, which clientFoundRows would make 1 for both: Open turns it off
// whatever the DSN says, and New refuses a pool that sets it.
func TestClientFoundRows(t *testing.T) {
	t.Parallel()
	cfg, err := gomysql.ParseDSN(servicetest.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ClientFoundRows = true
	s := openDSN(t, cfg.FormatDSN())
	ctx := t.Context()
	if _, ok, err := s.AcquireLease(ctx, "ns", "a", time.Minute); err != nil || !ok {
		t.Fatalf("AcquireLease(free) = %v, %v; want true", ok, err)
	}
	for _, h := range []string{"b", "a"} {
		if info, ok, err := s.AcquireLease(ctx, "ns", h, time.Minute); err != nil || ok || info.Holder != "a" || info.Epoch != 1 {
			t.Fatalf("AcquireLease(%q, live lease of a) with clientFoundRows in the DSN = %+v, %v, %v; want a, epoch 1, false", h, info, ok, err)
		}
	}
	if _, err := mysql.New(rawDB(t, cfg.FormatDSN())); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("New(pool with clientFoundRows) error = %v, want ErrInvalid", err)
	}
}

func TestCheckVersion(t *testing.T) {
	for _, c := range []struct {
		version string
		mariaDB bool
		ok      bool
	}{
		{"8.0.36", false, true}, {"8.4.2", false, true}, {"9.1.0", false, true}, {"8.0.16", false, false}, {"5.7.44-log", false, false},
		{"10.11.19-MariaDB-0+deb12u1", true, true}, {"10.6.0-MariaDB", true, true}, {"11.4.2-MariaDB", true, true}, {"10.5.25-MariaDB", true, false},
	} {
		if err := mysql.CheckVersion(c.version, c.mariaDB); (err == nil) != c.ok {
			t.Errorf("checkVersion(%q) = %v, want ok %t", c.version, err, c.ok)
		}
	}
}
