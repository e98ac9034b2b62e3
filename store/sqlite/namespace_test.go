package sqlite_test

import (
	"database/sql"
	"errors"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/store"

	"github.com/axsched/ax/store/internal/driverkit"
	"github.com/axsched/ax/store/sqlite"
)

// view returns s's view of namespace ns as a *sqlite.Store.
func view(t *testing.T, s *sqlite.Store, ns string) *sqlite.Store {
	t.Helper()
	v, err := s.InNamespace(ns)
	if err != nil {
		t.Fatalf("InNamespace(%q): %v", ns, err)
	}
	return v.(*sqlite.Store)
}

// TestMigrateFromV3 opens a file a version 3 ax left, with tasks and a schedule: the
// migration adds the namespace without rewriting ax_tasks (its root page stays), puts
// every old row in the default namespace, and swaps the indexes for the
// namespace-leading ones.
func TestMigrateFromV3(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ax.db")
	if err := sqlite.MigrateTo(path, 3); err != nil {
		t.Fatalf("MigrateTo(3): %v", err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	past := time.Now().Add(-time.Hour).UnixMicro()
	if _, err := db.Exec(`INSERT INTO ax_tasks (name, key, status, due_at, execution_id, task_key, overlap, created_at, updated_at)
		VALUES ('v3', 'waiting', 'SCHEDULED', ?1, NULL, '', '', ?1, ?1), ('v3', 'holder', 'RUNNING', ?1, 'exec-1', 'k', 'queue', ?1, ?1),
			('v3', 'done', 'SUCCEEDED', ?1, 'exec-2', '', '', ?1, ?1), ('report', 'at-1', 'SUCCEEDED', ?1, 'exec-3', 'report', 'skip', ?1, ?1)`,
		past); err != nil {
		t.Fatal(err)
	}
	next := time.Now().Add(time.Hour).Truncate(time.Second)
	if _, err := db.Exec(`INSERT INTO ax_schedules (name, spec, time_zone, overlap, misfire, payload, paused, next_fire_at, created_at, updated_at)
		VALUES ('report', '@every 1h', 'UTC', 'skip', 'skip', NULL, 0, ?, ?, ?)`, next.UnixMicro(), past, past); err != nil {
		t.Fatal(err)
	}
	rootpage := func() int {
		var p int
		if err := db.QueryRow(`SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = 'ax_tasks'`).Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	before := rootpage()

	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatalf("Open of a version 3 file: %v", err)
	}
	defer s.Close()
	if have, want, err := sqlite.SchemaStatus(path); err != nil || have != 18 || want != 18 {
		t.Fatalf("SchemaStatus after Open = %d, %d, %v; want 18, 18", have, want, err)
	}
	if after := rootpage(); after != before {
		t.Errorf("ax_tasks moved from root page %d to %d: the migration rewrote the table", before, after)
	}
	for name, want := range map[string]int{
		"ax_tasks_name_key": 0, "ax_tasks_scheduled_due": 0, "ax_tasks_scheduled_seq": 0, "ax_tasks_running_heartbeat": 0,
		"ax_tasks_dispatching_since": 0, "ax_tasks_key_holder": 0, "ax_schedules_v4": 0,
		"ax_tasks_ns_name_key": 1, "ax_tasks_ns_scheduled_due": 1, "ax_tasks_ns_scheduled_seq": 1, "ax_tasks_ns_running_heartbeat": 1,
		"ax_tasks_ns_dispatching_since": 1, "ax_tasks_ns_key_holder": 1, "ax_schedules": 1, "ax_nodes": 1,
	} {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = ?`, name).Scan(&n); err != nil || n != want {
			t.Errorf("%s: %d in sqlite_master (%v), want %d", name, n, err, want)
		}
	}
	var defaults int
	if err := db.QueryRow(`SELECT count(*) FROM ax_tasks WHERE namespace = 'default'`).Scan(&defaults); err != nil || defaults != 4 {
		t.Errorf("%d version 3 tasks in the default namespace (%v), want 4", defaults, err)
	}

	ctx := t.Context()
	a := view(t, s, "a")
	old, err := s.Lookup(ctx, "v3", "waiting")
	if err != nil {
		t.Fatalf("Lookup(v3, waiting) in the default namespace: %v", err)
	}
	if _, err := a.Lookup(ctx, "v3", "waiting"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Lookup(v3, waiting) in a: %v, want ErrNotFound", err)
	}
	if sc, err := s.Schedules(ctx); err != nil || len(sc) != 1 || sc[0].Name != "report" || !sc[0].NextFireAt.Equal(next) {
		t.Errorf("Schedules after migration = %+v, %v; want the version 3 report", sc, err)
	}
	if sc, err := a.Schedules(ctx); err != nil || len(sc) != 0 {
		t.Errorf("Schedules in a = %+v, %v; want none", sc, err)
	}
	// The old business key is the default namespace's: a may use it.
	ins, err := a.Insert(ctx, []store.NewTask{{Name: "v3", Key: "waiting", DueAt: time.Now().Add(-time.Minute)}})
	if err != nil || ins[0].Err != nil || ins[0].Task.ID == old.ID {
		t.Fatalf("Insert(v3, waiting) in a = %+v, %v; want a new task", ins, err)
	}
	// Since v6 a finished task's key can be used again, but not an occurrence's.
	again, err := s.Insert(ctx, []store.NewTask{{Name: "v3", Key: "done", DueAt: time.Now()}, {Name: "report", Key: "at-1", DueAt: time.Now()}})
	if err != nil || again[0].Err != nil || !errors.Is(again[1].Err, store.ErrDuplicate) {
		t.Errorf("Insert of a finished v3 task's key and of a finished occurrence's = %+v, %v; want a new task, then ErrDuplicate", again, err)
	}
	// The old running task holds k in the default namespace only.
	keyed := store.NewTask{Name: "v4", Key: "keyed", DueAt: time.Now().Add(-time.Minute), TaskKey: "k", Overlap: store.OverlapQueue}
	for _, c := range []struct {
		ns      string
		v       *sqlite.Store
		claimed bool
	}{{"default", s, false}, {"a", a, true}} {
		ins, err := c.v.Insert(ctx, []store.NewTask{keyed})
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.v.Claim(ctx, store.Fence{}, []store.Claim{{ID: ins[0].Task.ID, ExecutionID: "e-" + c.ns}})
		if err != nil || (len(res.Claimed) == 1) != c.claimed || (len(res.Blocked) == 1) == c.claimed {
			t.Errorf("Claim of a task keyed k in %s = %+v, %v; want claimed %v", c.ns, res, err, c.claimed)
		}
	}
	if sc, err := a.RegisterSchedules(ctx, []store.ScheduleDef{{Name: "report", Spec: "@every 1m", TimeZone: "UTC",
		Overlap: store.OverlapSkip, Misfire: store.MisfireSkip, NextFireAt: next.Add(time.Minute)}}); err != nil ||
		!sc[0].NextFireAt.Equal(next.Add(time.Minute)) {
		t.Errorf("RegisterSchedules(report) in a = %+v, %v; want a new schedule", sc, err)
	}
	if sc, err := s.Schedules(ctx); err != nil || len(sc) != 1 || sc[0].Spec != "@every 1h" {
		t.Errorf("the default namespace's schedules after a registered its report = %+v, %v; want the old one", sc, err)
	}
}

// TestTaskKeysPerNamespace: a task key is a namespace's, so two namespaces' tasks of
// one key do not block or skip each other, in Claim or in Trigger.
func TestTaskKeysPerNamespace(t *testing.T) {
	t.Parallel()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "ax.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	a, b := view(t, s, "a"), view(t, s, "b")
	nt := func(key string) store.NewTask {
		return store.NewTask{Name: "keys", Key: key, DueAt: time.Now().Add(-time.Minute), TaskKey: "k", Overlap: store.OverlapSkip}
	}
	insert := func(v *sqlite.Store, key string) int64 {
		t.Helper()
		ins, err := v.Insert(ctx, []store.NewTask{nt(key)})
		if err != nil || ins[0].Err != nil {
			t.Fatalf("Insert(%s) = %+v, %v", key, ins, err)
		}
		return ins[0].Task.ID
	}
	a1, b1, b2 := insert(a, "1"), insert(b, "1"), insert(b, "2")
	for _, c := range []struct {
		ns string
		v  *sqlite.Store
		id int64
	}{{"a", a, a1}, {"b", b, b1}} {
		res, err := c.v.Claim(ctx, store.Fence{}, []store.Claim{{ID: c.id, ExecutionID: "e-" + c.ns}})
		if err != nil || len(res.Claimed) != 1 {
			t.Fatalf("Claim in %s of its first task keyed k = %+v, %v; want claimed", c.ns, res, err)
		}
	}
	// b's second task is refused by b's holder, and a's second one by a's.
	if _, err := b.Trigger(ctx, b2, "e-b2"); !errors.Is(err, store.ErrNotTriggerable) {
		t.Errorf("Trigger in b of a second task keyed k: %v, want ErrNotTriggerable", err)
	}
	a2 := insert(a, "2")
	res, err := a.Claim(ctx, store.Fence{}, []store.Claim{{ID: a2, ExecutionID: "e-a2"}})
	if err != nil || len(res.Skipped) != 1 {
		t.Fatalf("Claim in a of a second task keyed k = %+v, %v; want skipped", res, err)
	}
	if !strings.Contains(res.Skipped[0].LastError, driverkit.SkipReason("k", a1)) {
		t.Errorf("skip reason %q, want a's holder: %q", res.Skipped[0].LastError, driverkit.SkipReason("k", a1))
	}
	// Once a's holder finishes, a's key is free and b's still held.
	if _, err := a.Start(ctx, store.Fence{}, []store.StartParams{{TaskID: a1, ExecutionID: "e-a", Name: "keys"}}); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.Finish(ctx, store.Fence{}, []store.Finish{{TaskID: a1, ExecutionID: "e-a", Status: store.Succeeded}}); err != nil || !ok[0] {
		t.Fatalf("Finish = %v, %v", ok, err)
	}
	a3 := insert(a, "3")
	if _, err := a.Trigger(ctx, a3, "e-a3"); err != nil {
		t.Errorf("Trigger in a once its holder finished: %v", err)
	}
	if _, err := b.Trigger(ctx, b2, "e-b2"); !errors.Is(err, store.ErrNotTriggerable) {
		t.Errorf("Trigger in b while b's holder runs: %v, want ErrNotTriggerable", err)
	}
}

// TestBindNamespace: a Tx bound by a view inserts into the view's namespace.
func TestBindNamespace(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ax.db")
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db, err := sql.Open("sqlite", "file:"+url.PathEscape(path)+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := t.Context()
	a := view(t, s, "a")
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	in, err := a.Bind(ctx, tx)
	if err != nil {
		tx.Rollback()
		t.Fatalf("Bind in a: %v", err)
	}
	ins, err := in.Insert(ctx, []store.NewTask{{Name: "tx", Key: "1", DueAt: time.Now()}})
	if err != nil || ins[0].Err != nil {
		tx.Rollback()
		t.Fatalf("Insert in a's Tx = %+v, %v", ins, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Lookup(ctx, "tx", "1"); err != nil || got.ID != ins[0].Task.ID {
		t.Errorf("Lookup in a of its Tx's task = %+v, %v", got, err)
	}
	if _, err := s.Get(ctx, ins[0].Task.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get in the default namespace of a's Tx's task: %v, want ErrNotFound", err)
	}
}

// TestViews: InNamespace's refusals carry the driver's prefix once, a view of a view is
// a view of the namespace it names, and a view's Close closes every view.
func TestViews(t *testing.T) {
	t.Parallel()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "ax.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	if _, err := s.InNamespace("a b"); !errors.Is(err, store.ErrInvalid) ||
		!strings.HasPrefix(err.Error(), "ax: sqlite: in namespace: ") || strings.Count(err.Error(), "ax:") != 1 {
		t.Errorf("InNamespace(a b) error %v, want ax: sqlite: in namespace: … ErrInvalid", err)
	}
	a := view(t, s, "a")
	b := view(t, a, "b")
	if err := b.RegisterNode(ctx, store.NodeInfo{Name: "n", Handlers: []string{"z", "a,b", `"q"`}}); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Nodes(ctx, time.Hour); err != nil || len(got) != 0 {
		t.Errorf("Nodes in a = %+v, %v; want none (n is b's)", got, err)
	}
	got, err := view(t, s, "b").Nodes(ctx, time.Hour)
	if err != nil || len(got) != 1 || !slices.Equal(got[0].Handlers, []string{`"q"`, "a,b", "z"}) {
		t.Errorf("Nodes in b = %+v, %v; want n with its handlers, sorted", got, err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close of a view: %v", err)
	}
	if err := s.Close(); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Close after a view's Close: %v, want ErrClosed", err)
	}
	if _, err := s.Get(ctx, 1); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Get after a view's Close: %v, want ErrClosed", err)
	}
	if _, err := a.Nodes(ctx, time.Hour); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Nodes in another view after Close: %v, want ErrClosed", err)
	}
	if err := a.RegisterNode(ctx, store.NodeInfo{Name: "n"}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("RegisterNode in another view after Close: %v, want ErrClosed", err)
	}
}
