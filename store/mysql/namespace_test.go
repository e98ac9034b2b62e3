package mysql_test

import (
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/mysql"
)

const migration4 = "migrations/0004_namespaces.sql"

// view returns s's view of namespace ns.
func view(t *testing.T, s *mysql.Store, ns string) *mysql.Store {
	t.Helper()
	v, err := s.InNamespace(ns)
	if err != nil {
		t.Fatalf("InNamespace(%q): %v", ns, err)
	}
	return v.(*mysql.Store)
}

// collation is the {{bin}} collation of the server behind db.
func collation(t *testing.T, db *sql.DB) string {
	t.Helper()
	var version string
	if err := db.QueryRow(`SELECT VERSION()`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.ToLower(version), "mariadb") {
		return "utf8mb4_nopad_bin"
	}
	return "utf8mb4_0900_bin"
}

// v3Rows writes rows as version 3 wrote them: a SCHEDULED task, a task DISPATCHING
// with task key "k" (skip), its key's lock row, and a schedule.
func v3Rows(t *testing.T, db *sql.DB) {
	t.Helper()
	for _, q := range []string{
		"INSERT INTO ax_tasks (name, `key`, payload, status, due_at, last_error, backoff, seq, execution_id, task_key, overlap, dispatched_at, created_at, updated_at) VALUES " +
			"('old', 'scheduled', 'p', 'SCHEDULED', UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, '', '', 1, NULL, '', '', NULL, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))," +
			"('old', 'holder', 'p', 'DISPATCHING', UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, '', '', 2, 'exec-old', 'k', 'skip', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
		`INSERT INTO ax_task_keys (task_key) VALUES ('k')`,
		`INSERT INTO ax_schedules (name, spec, time_zone, overlap, misfire, payload, paused, next_fire_at, created_at, updated_at)
			VALUES ('report', '@every 1m', 'UTC', 'skip', 'fire_once', NULL, FALSE, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
}

// Migration 4 on a database with version 3 rows: every ALTER runs online — the ADD
// COLUMNs instantly (no table rebuild), the index changes without a table copy and
// without blocking writes — and the old rows are the default namespace's: its view
// sees them, its task key "k" is held there and only there.
func TestMigrateNamespacesOnline(t *testing.T) {
	t.Parallel()
	dsn := servicetest.MySQLDSN(t)
	db := rawDB(t, dsn)
	if err := mysql.MigrateTo(db, 3); err != nil {
		t.Fatal(err)
	}
	v3Rows(t, db)
	bin := collation(t, db)
	stmts := mysql.Statements(mustRead(t, migration4), bin)
	for _, q := range stmts {
		u := strings.ToUpper(q)
		if strings.HasPrefix(u, "ALTER TABLE") {
			clauses := topLevelClauses(u)
			switch {
			case allPrefixed(clauses, "ADD COLUMN "):
				q += ", ALGORITHM = INSTANT"
			case strings.Contains(u, "PRIMARY KEY"):
				q += ", LOCK = NONE" // a rebuild of a small table, online
			case allPrefixed(clauses, "DROP KEY ", "ADD KEY ", "ADD UNIQUE KEY "):
				if bin == "utf8mb4_nopad_bin" {
					q += ", ALGORITHM = NOCOPY, LOCK = NONE" // MariaDB: no rebuild of the clustered index
				} else {
					q += ", ALGORITHM = INPLACE, LOCK = NONE"
				}
			default:
				t.Fatalf("unclassified ALTER:\n%s", q)
			}
		}
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%v:\n%s", err, q)
		}
	}
	if _, err := db.Exec(`INSERT INTO ax_schema_migrations (version, step, started_at, applied_at)
		VALUES (4, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`, len(stmts)); err != nil {
		t.Fatal(err)
	}
	s := openDSN(t, dsn)
	if got := mysql.Applied(s); got != mysql.SchemaVersion()-4 {
		t.Errorf("Open after migration 4 applied %d migrations, want %d", got, mysql.SchemaVersion()-4)
	}
	ctx := t.Context()
	a := view(t, s, "a")
	old, err := s.Lookup(ctx, "old", "scheduled")
	if err != nil {
		t.Fatalf("Lookup of a version 3 task in the default namespace: %v", err)
	}
	if _, err := a.Get(ctx, old.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get of a version 3 task in namespace a: error %v, want ErrNotFound", err)
	}
	if sc, err := s.Schedules(ctx); err != nil || len(sc) != 1 || sc[0].Name != "report" {
		t.Errorf("Schedules of the default namespace = %+v, %v; want the version 3 schedule", sc, err)
	}
	if sc, err := a.Schedules(ctx); err != nil || len(sc) != 0 {
		t.Errorf("Schedules of namespace a = %+v, %v; want none", sc, err)
	}
	now, _ := s.Now(ctx)
	keyed := func(st *mysql.Store, key string) *store.ClaimResult {
		nt := newTask(key, now.Add(-time.Second))
		nt.TaskKey, nt.Overlap = "k", store.OverlapSkip
		ins, err := st.Insert(ctx, []store.NewTask{nt})
		if err != nil {
			t.Fatal(err)
		}
		res, err := st.Claim(ctx, store.Fence{}, []store.Claim{{ID: ins[0].Task.ID, ExecutionID: "exec-" + key}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := keyed(s, "second"); len(res.Skipped) != 1 {
		t.Errorf("Claim in the default namespace of a task of the key a version 3 task holds = %+v, want it skipped", res)
	}
	if res := keyed(a, "second"); len(res.Claimed) != 1 {
		t.Errorf("Claim in namespace a of a task of the key the default namespace holds = %+v, want it claimed", res)
	}
}

func allPrefixed(clauses []string, prefixes ...string) bool {
	for _, c := range clauses {
		ok := false
		for _, p := range prefixes {
			ok = ok || strings.HasPrefix(c, p)
		}
		if !ok {
			return false
		}
	}
	return true
}

var autoIncrement = regexp.MustCompile(` AUTO_INCREMENT=\d+`)

// schema returns the definitions of the tables migration 4 changes or creates.
func schema(t *testing.T, db *sql.DB) string {
	t.Helper()
	var b strings.Builder
	for _, table := range []string{"ax_tasks", "ax_task_keys", "ax_schedules", "ax_nodes"} {
		var name, def string
		if err := db.QueryRow("SHOW CREATE TABLE "+table).Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		b.WriteString(autoIncrement.ReplaceAllString(def, "") + "\n")
	}
	return b.String()
}

// A crash inside migration 4 after any of its statements took effect, before its step
// was recorded: the next Open reruns that statement, takes it as done or redoes it,
// and ends with the schema of a migration that never stopped.
func TestMigrateResumesNamespacesAfterCrash(t *testing.T) {
	t.Parallel()
	_, clean := migrated(t)
	want := schema(t, clean)
	stmts := mysql.Statements(mustRead(t, migration4), collation(t, clean))
	for k := range stmts {
		t.Run(fmt.Sprintf("statement%d", k+1), func(t *testing.T) {
			t.Parallel()
			dsn := servicetest.MySQLDSN(t)
			db := rawDB(t, dsn)
			if err := mysql.MigrateTo(db, 3); err != nil {
				t.Fatal(err)
			}
			v3Rows(t, db)
			for _, q := range stmts[:k+1] {
				if _, err := db.Exec(q); err != nil {
					t.Fatalf("%v:\n%s", err, q)
				}
			}
			if _, err := db.Exec(`INSERT INTO ax_schema_migrations (version, step, started_at) VALUES (4, ?, UTC_TIMESTAMP(6))`, k); err != nil {
				t.Fatal(err)
			}
			s, err := mysql.Open(dsn)
			if err != nil {
				t.Fatalf("Open after a crash before step %d of migration 4 was recorded: %v", k+1, err)
			}
			defer s.Close()
			if got := mysql.Applied(s); got != mysql.SchemaVersion()-3 {
				t.Errorf("Open after the crash applied %d migrations, want %d", got, mysql.SchemaVersion()-3)
			}
			if got := schema(t, db); got != want {
				t.Errorf("schema after the resumed migration:\n%s\nwant:\n%s", got, want)
			}
			if _, err := s.Lookup(t.Context(), "old", "scheduled"); err != nil {
				t.Errorf("Lookup of a version 3 task after the resumed migration: %v", err)
			}
		})
	}
}

// The refill cursor is global: a transaction of namespace a still open holds back b's
// cursor (never past a number that may still commit, whatever its namespace), each view
// returns only its own rows, and after the commit each reaches its own.
func TestRefillNamespacesOpenTransaction(t *testing.T) {
	t.Parallel()
	s, db := openWithDB(t)
	a, b := view(t, s, "a"), view(t, s, "b")
	ctx := t.Context()
	now, _ := s.Now(ctx)
	c0 := cursor(t, b)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	res, err := bindTx(t, a, tx).Insert(ctx, []store.NewTask{newTask("slow", now)})
	if err != nil {
		t.Fatal(err)
	}
	slow := res[0].Task.ID
	res, err = b.Insert(ctx, []store.NewTask{newTask("fast", now)})
	if err != nil {
		t.Fatal(err)
	}
	fast := res[0].Task.ID
	r1 := changed(t, b, c0)
	if len(r1.Changed) != 0 || r1.Seq != c0 {
		t.Errorf("b's Refill(AfterSeq %d) with a's earlier transaction open = %v, cursor %d; want nothing and cursor %d",
			c0, ids(r1.Changed), r1.Seq, c0)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := ids(changed(t, b, c0).Changed); len(got) != 1 || got[0] != fast {
		t.Errorf("b's Refill after the commit = %v, want [%d]", got, fast)
	}
	if got := ids(changed(t, a, c0).Changed); len(got) != 1 || got[0] != slow {
		t.Errorf("a's Refill after the commit = %v, want [%d]", got, slow)
	}
	if _, err := s.Lookup(ctx, "order.close", "slow"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the default namespace sees a's bound insert: error %v, want ErrNotFound", err)
	}
}

// Task keys are per namespace: a claim in one namespace neither sees another's holder
// of the same key nor waits for another's lock on it.
func TestKeysPerNamespace(t *testing.T) {
	t.Parallel()
	s, db := openWithDB(t)
	a, b := view(t, s, "a"), view(t, s, "b")
	ctx := t.Context()
	now, _ := s.Now(ctx)
	insert := func(st *mysql.Store, key string, p store.OverlapPolicy) int64 {
		nt := newTask(key, now.Add(-time.Second))
		nt.TaskKey, nt.Overlap = "shared", p
		ins, err := st.Insert(ctx, []store.NewTask{nt})
		if err != nil {
			t.Fatal(err)
		}
		return ins[0].Task.ID
	}
	ta := insert(a, "first", store.OverlapSkip)
	if res, err := a.Claim(ctx, store.Fence{}, []store.Claim{{ID: ta, ExecutionID: "exec-a"}}); err != nil || len(res.Claimed) != 1 {
		t.Fatalf("Claim in a = %+v, %v", res, err)
	}
	// A transaction holding a's lock row of the key, as a claim in flight would.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var k string
	if err := tx.QueryRowContext(ctx, `SELECT task_key FROM ax_task_keys WHERE namespace = 'a' AND task_key = 'shared' FOR UPDATE`).Scan(&k); err != nil {
		t.Fatal(err)
	}
	tb := insert(b, "first", store.OverlapSkip)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if res, err := b.Claim(ctx, store.Fence{}, []store.Claim{{ID: tb, ExecutionID: "exec-b"}}); err != nil || len(res.Claimed) != 1 {
			t.Errorf("Claim in b of the key a holds = %+v, %v; want it claimed", res, err)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Claim in b waited for a's lock on the same key")
	}
	tx.Rollback()
	tb2 := insert(b, "second", store.OverlapQueue)
	if _, err := b.Trigger(ctx, tb2, "exec-b2"); !errors.Is(err, store.ErrNotTriggerable) {
		t.Errorf("Trigger in b of a second task of b's held key: error %v, want ErrNotTriggerable", err)
	}
	ts := insert(s, "first", store.OverlapQueue)
	if got, err := s.Trigger(ctx, ts, "exec-default"); err != nil || got.Status != store.Dispatching {
		t.Errorf("Trigger in the default namespace of the key a and b hold = %+v, %v; want it triggered", got, err)
	}
}

// A claim and a lifecycle in a namespace's view cost the statements they cost in the
// store as opened: the namespace is a predicate, not a round trip.
func TestClaimStatementsInView(t *testing.T) {
	t.Parallel()
	s, db := newWithDB(t, func(cfg *gomysql.Config) { cfg.InterpolateParams = true })
	db.SetMaxOpenConns(1)
	v := view(t, s, "a")
	ctx := t.Context()
	now, _ := s.Now(ctx)
	res, err := v.Insert(ctx, []store.NewTask{newTask("cost-0", now.Add(-time.Second)), newTask("cost-1", now.Add(-time.Second))})
	if err != nil {
		t.Fatal(err)
	}
	before := statements(t, db)
	got, err := v.Claim(ctx, store.Fence{}, []store.Claim{{ID: res[0].Task.ID, ExecutionID: "exec-0"}, {ID: res[1].Task.ID, ExecutionID: "exec-1"}})
	n := statements(t, db) - before - 1
	const plain = 6 // SET TRANSACTION, START TRANSACTION, SELECT … FOR UPDATE, UPDATE, SELECT, COMMIT
	if err != nil || len(got.Claimed) != 2 || n != plain {
		t.Errorf("Claim in a view: %+v, %v in %d statements, want 2 claimed in %d", got, err, n, plain)
	}
}

// Node rows: handlers round-trip in order, a given start is kept, a handler name with
// the separator and over-long fields are refused, and a closed store refuses calls.
func TestNodesDriver(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := t.Context()
	start := time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.UTC)
	n := store.NodeInfo{Name: "n1", Advertise: "http://10.0.0.1:7000", Handlers: []string{"z.last", "a.first", "m ünïcode"},
		Capacity: 10, InFlight: 2, StartedAt: start}
	if err := s.RegisterNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	got, err := s.Nodes(ctx, time.Hour)
	if err != nil || len(got) != 1 {
		t.Fatalf("Nodes = %+v, %v", got, err)
	}
	if h := got[0].Handlers; strings.Join(h, "|") != "a.first|m ünïcode|z.last" {
		t.Errorf("Handlers = %q, want them sorted", h)
	}
	if !got[0].StartedAt.Equal(start.Truncate(time.Microsecond)) {
		t.Errorf("StartedAt = %v, want the given %v to the microsecond", got[0].StartedAt, start)
	}
	if got, err := s.Nodes(ctx, 100*365*24*time.Hour); err != nil || len(got) != 1 {
		t.Errorf("Nodes(a century) = %+v, %v; want the node", got, err)
	}
	for what, bad := range map[string]store.NodeInfo{
		"handler with a line break": {Name: "n2", Handlers: []string{"a\nb"}},
		"name of 201 bytes":         {Name: strings.Repeat("n", 201)},
		"advertise of 2001 bytes":   {Name: "n2", Advertise: strings.Repeat("u", 2001)},
		"non-UTF-8 handler":         {Name: "n2", Handlers: []string{"\xff"}},
		"start in year 10000":       {Name: "n2", StartedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		if err := s.RegisterNode(ctx, bad); !errors.Is(err, store.ErrInvalid) || !strings.HasPrefix(err.Error(), "ax: mysql: register node") {
			t.Errorf("RegisterNode(%s) error %v, want ErrInvalid under \"ax: mysql: register node\"", what, err)
		}
	}
	if _, err := s.InNamespace("a b"); !errors.Is(err, store.ErrInvalid) || strings.Count(err.Error(), "ax:") != 1 {
		t.Errorf("InNamespace(\"a b\") error %v, want one ErrInvalid with one prefix", err)
	}
	v := view(t, s, "a")
	s.Close()
	if err := v.RegisterNode(ctx, n); !errors.Is(err, store.ErrClosed) {
		t.Errorf("RegisterNode on a view of a closed store: error %v, want ErrClosed", err)
	}
	if err := v.Close(); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Close of a view of a closed store: error %v, want ErrClosed", err)
	}
}

// TestMigrateConsoleTimesInstantly: migration 9 adds its columns instantly (each
// ALTER runs with ALGORITHM = INSTANT, which fails rather than rebuild a table), and
// the rows written before it read with zero due and claim times and a zero offset.
func TestMigrateConsoleTimesInstantly(t *testing.T) {
	t.Parallel()
	dsn := servicetest.MySQLDSN(t)
	db := rawDB(t, dsn)
	if err := mysql.MigrateTo(db, 8); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"INSERT INTO ax_tasks (id, name, `key`, status, due_at, last_error, backoff, seq, execution_id, created_at, updated_at, started_at) VALUES " +
			"(1, 'old', 'ran', 'RUNNING', UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE, '', '', 1, 'exec-8', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
		`INSERT INTO ax_executions (id, task_id, attempt, node, status, started_at, heartbeat_at, error)
			VALUES ('exec-8', 1, 0, 'node-8', 'RUNNING', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), '')`,
		`INSERT INTO ax_nodes (namespace, name, advertise, handlers, capacity, in_flight, started_at, heartbeat_at)
			VALUES ('default', 'node-8', '', '', 1, 0, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%v:\n%s", err, q)
		}
	}
	stmts := mysql.Statements(mustRead(t, "migrations/0009_console_times.sql"), collation(t, db))
	for _, q := range stmts {
		if _, err := db.Exec(q + ", ALGORITHM = INSTANT"); err != nil {
			t.Fatalf("%v:\n%s", err, q)
		}
	}
	if _, err := db.Exec(`INSERT INTO ax_schema_migrations (version, step, started_at, applied_at)
		VALUES (9, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`, len(stmts)); err != nil {
		t.Fatal(err)
	}
	s := openDSN(t, dsn)
	ctx := t.Context()
	execs, err := s.Executions(ctx, 1)
	if err != nil || len(execs) != 1 {
		t.Fatalf("Executions(1) = %+v, %v; want the version 8 record", execs, err)
	}
	if x := execs[0]; !x.DueAt.IsZero() || !x.ClaimedAt.IsZero() || x.Lateness() != 0 {
		t.Errorf("a version 8 record reads %+v; want zero DueAt and ClaimedAt, no lateness", x)
	}
	nodes, err := s.Nodes(ctx, time.Hour)
	if err != nil || len(nodes) != 1 || nodes[0].ClockOffset != 0 {
		t.Errorf("Nodes = %+v, %v; want node-8 with a zero ClockOffset", nodes, err)
	}
}

// TestMigrateTraceOnline: the trace migration (version 12) adds its columns instantly
// (ALGORITHM = INSTANT, which fails rather than rebuild a table) and rebuilds the held
// key's index without a table copy or a lock on writes; a task and a schedule written
// before it read with an empty Trace, and a task written after keeps its own.
func TestMigrateTraceOnline(t *testing.T) {
	t.Parallel()
	dsn := servicetest.MySQLDSN(t)
	db := rawDB(t, dsn)
	const trace = 12 // 0012_trace.sql
	if err := mysql.MigrateTo(db, trace-1); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"INSERT INTO ax_tasks (id, name, `key`, status, due_at, last_error, backoff, seq, created_at, updated_at) VALUES " +
			"(1, 'old', 'untraced', 'SCHEDULED', UTC_TIMESTAMP(6), '', '', 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
		`INSERT INTO ax_schedules (namespace, name, spec, time_zone, overlap, misfire, paused, next_fire_at, created_at, updated_at)
			VALUES ('default', 'report', '@every 1m', 'UTC', 'skip', 'fire_once', FALSE, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%v:\n%s", err, q)
		}
	}
	bin := collation(t, db)
	stmts := mysql.Statements(mustRead(t, "migrations/0012_trace.sql"), bin)
	for _, q := range stmts {
		switch clauses := topLevelClauses(strings.ToUpper(q)); {
		case allPrefixed(clauses, "ADD COLUMN "):
			q += ", ALGORITHM = INSTANT"
		case allPrefixed(clauses, "DROP KEY ", "ADD KEY "):
			if bin == "utf8mb4_nopad_bin" {
				q += ", ALGORITHM = NOCOPY, LOCK = NONE" // MariaDB: no rebuild of the clustered index
			} else {
				q += ", ALGORITHM = INPLACE, LOCK = NONE"
			}
		default:
			t.Fatalf("unclassified statement:\n%s", q)
		}
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%v:\n%s", err, q)
		}
	}
	if _, err := db.Exec(`INSERT INTO ax_schema_migrations (version, step, started_at, applied_at)
		VALUES (?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`, trace, len(stmts)); err != nil {
		t.Fatal(err)
	}
	s := openDSN(t, dsn)
	ctx := t.Context()
	if old, err := s.Get(ctx, 1); err != nil || old.Trace != "" {
		t.Errorf("Get of a task written before the migration = %+v, %v; want an empty Trace", old, err)
	}
	if sc, err := s.Schedules(ctx); err != nil || len(sc) != 1 || sc[0].Trace != "" {
		t.Errorf("Schedules = %+v, %v; want report with an empty Trace", sc, err)
	}
	nt := newTask("traced", time.Now())
	nt.Trace = "traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ins, err := s.Insert(ctx, []store.NewTask{nt})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, ins[0].Task.ID); err != nil || got.Trace != nt.Trace {
		t.Errorf("Get of a traced task = %+v, %v; want Trace %q", got, err, nt.Trace)
	}
}
