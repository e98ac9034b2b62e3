package mysql_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/internal/galeracluster"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/mysql"
	"github.com/axsched/ax/store/storetest"
)

// TestGalera runs the store on a three-node MariaDB Galera cluster of its own (see
// internal/galeracluster): one cluster for all its subtests, which take a fresh
// database each.
func TestGalera(t *testing.T) {
	if testing.Short() {
		t.Skip("the Galera cluster takes about 15 s to start")
	}
	c := galeracluster.Start(t)
	t.Run("Refuses", func(t *testing.T) { testGaleraRefuses(t, c) })
	t.Run("CausalRetry", func(t *testing.T) { testCausalRetry(t, c) })
	t.Run("FenceRace", func(t *testing.T) { testFenceRace(t, c, true) })
	t.Run("FenceRaceUnfenced", func(t *testing.T) { testFenceRace(t, c, false) })
	t.Run("NotReady", func(t *testing.T) { testNotReady(t, c) })
	// The conformance suite through node0 alone, as ax should be run on Galera (one
	// writer node). The lifecycle storm runs 2 s here whatever CI asks of the single
	// servers.
	t.Run("Conformance", func(t *testing.T) {
		t.Setenv(storetest.StormEnv, "2s")
		dbs := newReusedDBs(t, c)
		storetest.Run(t, func(t *testing.T) store.Store { return openDSN(t, c.DSN(0, dbs.get(t))) })
	})
}

// reusedDBs hands each subtest of the conformance suite a migrated database of its
// own on the cluster, emptied as it was when migrated. On Galera every DDL statement is
// a cluster-wide operation in total order (TOI): a fresh database and its migrations
// take about 0.3 s, mostly the 45 statements of the migrations, and the suite's 223
// subtests spent 160 s there, where they take 15 s so. A database a subtest is done with is
// instead emptied with DML (each table's rows deleted, and the rows the migrations
// seed — ax_counters' — copied back from a template migrated once) and handed to the
// next. What it does not reset is AUTO_INCREMENT: ids go on from where the previous
// subtest left them, which the suite does not depend on.
type reusedDBs struct {
	c        *galeracluster.Cluster
	template string
	tables   []string // every table of the schema
	seeded   []string // those with rows in the template
	mu       sync.Mutex
	free     []string
	created  []string
}

func newReusedDBs(t *testing.T, c *galeracluster.Cluster) *reusedDBs {
	t.Helper()
	r := &reusedDBs{c: c, template: c.FreshDatabase(t)}
	s, err := mysql.Open(c.DSN(0, r.template))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db := rawDB(t, c.DSN(0, r.template))
	rows, err := db.Query(`SELECT table_name, table_rows FROM information_schema.tables WHERE table_schema = DATABASE()`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		r.tables = append(r.tables, name)
		var exact int64 // table_rows is an estimate
		if err := db.QueryRow("SELECT COUNT(*) FROM `" + name + "`").Scan(&exact); err != nil {
			t.Fatal(err)
		}
		if exact > 0 {
			r.seeded = append(r.seeded, name)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, name := range r.created {
			if _, err := db.ExecContext(ctx, "DROP DATABASE `"+name+"`"); err != nil {
				t.Errorf("drop %s: %v", name, err)
			}
		}
	})
	return r
}

// get returns a database for t alone, and hands it on, emptied, once t is done.
func (r *reusedDBs) get(t *testing.T) string {
	t.Helper()
	r.mu.Lock()
	var name string
	if n := len(r.free); n > 0 {
		name, r.free = r.free[n-1], r.free[:n-1]
	}
	r.mu.Unlock()
	if name == "" {
		var b [6]byte
		rand.Read(b[:])
		name = "ax_test_" + hex.EncodeToString(b[:])
		db := rawDB(t, r.c.DSN(0, r.template))
		if _, err := db.Exec("CREATE DATABASE `" + name + "` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
			t.Fatal(err)
		}
		r.mu.Lock()
		r.created = append(r.created, name)
		r.mu.Unlock()
	}
	// Registered before the store's Close (openDSN's), so it runs after it.
	t.Cleanup(func() {
		if err := r.empty(name); err != nil {
			t.Errorf("emptying %s for the next subtest: %v", name, err)
			return
		}
		r.mu.Lock()
		r.free = append(r.free, name)
		r.mu.Unlock()
	})
	return name
}

// empty deletes every row of database name and copies the template's seed rows in.
func (r *reusedDBs) empty(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := sql.Open("mysql", r.c.DSN(0, name))
	if err != nil {
		return err
	}
	defer db.Close()
	var migrated int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()`).Scan(&migrated); err != nil {
		return err
	}
	if migrated == 0 {
		return nil // the subtest failed before Open migrated it: empty already
	}
	for _, table := range r.tables {
		if _, err := db.ExecContext(ctx, "DELETE FROM `"+table+"`"); err != nil {
			return err
		}
	}
	for _, table := range r.seeded {
		if _, err := db.ExecContext(ctx, "INSERT INTO `"+table+"` SELECT * FROM `"+r.template+"`.`"+table+"`"); err != nil {
			return err
		}
	}
	return nil
}

// A transaction the store tries again on Galera begins once its node has caught up
// with the cluster: with node0's applier held behind a row lock, a causal read through
// the store on node0 waits, and then sees what was committed through node1.
func testCausalRetry(t *testing.T, c *galeracluster.Cluster) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	name := c.FreshDatabase(t)
	a := openDSN(t, c.DSN(0, name))
	raw0, raw1 := rawDB(t, c.DSN(0, name)), rawDB(t, c.DSN(1, name))
	stallTable(ctx, t, raw0, raw1)
	stall := lockOutOfReplication(t, ctx, c.DSN(0, name))
	defer stall.release()
	if _, err := raw1.ExecContext(ctx, `UPDATE ax_test_stall SET v = 1 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	var v int
	go func() {
		read <- mysql.ReadCausally(ctx, a, `SELECT v FROM ax_test_stall WHERE id = 1`, &v)
	}()
	waitFor(t, ctx, "the causal read waiting for node0 to catch up", func() (bool, error) {
		var waiting int
		err := raw0.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.processlist WHERE info = ?`, mysql.CausalSQL).Scan(&waiting)
		return waiting > 0, err
	})
	select {
	case err := <-read:
		t.Fatalf("the causal read returned (v = %d, %v) while node0 lagged", v, err)
	default:
	}
	stall.release()
	if err := <-read; err != nil || v != 1 {
		t.Errorf("the causal read after node0 caught up: v = %d, %v; want 1, node1's write", v, err)
	}
}

// A node that lost quorum refuses every statement with ERROR 1047. The store takes it
// for a transaction that wrote nothing and closes its pool's connections, which reach
// that node: opened through HAProxy, it follows HAProxy to the node that has quorum;
// opened on the node, it refuses meanwhile and works again once the node has joined.
func testNotReady(t *testing.T, c *galeracluster.Cluster) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	name := c.FreshDatabase(t)
	direct := openDSN(t, c.DSN(0, name))
	proxied := openDSN(t, c.ProxyDSN(name))
	var keys atomic.Int64
	insert := func(s *mysql.Store) error {
		key := fmt.Sprintf("k%d", keys.Add(1))
		_, err := s.Insert(ctx, []store.NewTask{newTask(key, time.Now().Add(time.Hour))})
		return err
	}
	// Both pools hold idle connections to node0.
	for _, s := range []*mysql.Store{direct, proxied} {
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if err := insert(s); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	if idle := mysql.PoolStats(direct).Idle; idle == 0 {
		t.Fatal("no idle connection in the pool on node0")
	}

	if err := c.Isolate(ctx, 0, true); err != nil {
		t.Fatal(err)
	}
	rejoined := false
	defer func() { // the cluster is shared with the next subtests
		if !rejoined {
			c.Isolate(context.Background(), 0, false)
			c.WaitSynced(context.Background(), 3)
		}
	}()
	isolated := time.Now()
	waitFor(t, ctx, "node0 without quorum", func() (bool, error) {
		st, err := c.Status(ctx, 0)
		return st.Cluster == "non-Primary", err
	})
	err := insert(direct)
	if me := (*gomysql.MySQLError)(nil); !errors.As(err, &me) || me.Number != 1047 {
		t.Fatalf("an insert on node0 without quorum: %v; want ERROR 1047", err)
	}
	if st := mysql.PoolStats(direct); st.OpenConnections != 0 {
		t.Errorf("the pool on node0 keeps %d connections (%d idle) after ERROR 1047, want none", st.OpenConnections, st.Idle)
	}

	// Through HAProxy: refused, or cut, until HAProxy passes to node1; then committed,
	// on the same store.
	errs := map[string]int{} // how many inserts failed with each error
	for {
		err := insert(proxied)
		if err == nil {
			break
		}
		errs[err.Error()]++
		if ctx.Err() != nil {
			t.Fatalf("no insert through HAProxy with node0 isolated: %v", errs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("through HAProxy, an insert committed %v after node0 was isolated; failed before: %v",
		time.Since(isolated).Round(time.Millisecond), errs)

	if err := c.Isolate(ctx, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitSynced(ctx, 3); err != nil {
		t.Fatal(err)
	}
	rejoined = true
	if err := insert(direct); err != nil {
		t.Errorf("an insert on node0 joined again: %v", err)
	}
	waitFor(t, ctx, "an insert through HAProxy once node0 is back", func() (bool, error) {
		return true, insert(proxied)
	})
}

// The store on a single server fences without Galera's row write.
func TestNoGalera(t *testing.T) {
	t.Parallel()
	if s := open(t); mysql.Galera(s) {
		t.Error("the store found Galera on the test server, which has none")
	}
}

// On Galera, Open and New refuse the settings the store cannot be correct on, naming
// them, and accept the cluster's own.
func testGaleraRefuses(t *testing.T, c *galeracluster.Cluster) {
	name := c.FreshDatabase(t)
	for _, tc := range []struct{ variable, value string }{
		{"binlog_format", "STATEMENT"},
		{"binlog_format", "MIXED"},
		{"wsrep_OSU_method", "RSU"},
	} {
		cfg, err := gomysql.ParseDSN(c.DSN(0, name))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Params = map[string]string{tc.variable: "'" + tc.value + "'"} // set on every session
		s, err := mysql.Open(cfg.FormatDSN())
		if err == nil {
			s.Close()
			t.Errorf("Open with %s = %s on Galera succeeded, want ErrInvalid", tc.variable, tc.value)
			continue
		}
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), tc.variable) ||
			!strings.HasPrefix(err.Error(), "ax: mysql: ") || strings.Count(err.Error(), "ax:") != 1 {
			t.Errorf("Open with %s = %s on Galera: %v; want ErrInvalid naming %s", tc.variable, tc.value, err, tc.variable)
		}
		db := rawDB(t, cfg.FormatDSN())
		if s, err := mysql.New(db); !errors.Is(err, store.ErrInvalid) {
			if err == nil {
				s.Close()
			}
			t.Errorf("New with %s = %s on Galera: %v; want ErrInvalid", tc.variable, tc.value, err)
		}
	}
	var tables int
	if err := rawDB(t, c.DSN(0, name)).QueryRow(`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()`).Scan(&tables); err != nil || tables != 0 {
		t.Errorf("the refused stores left %d tables (%v), want none: refuse before migrating", tables, err)
	}
	s := openDSN(t, c.DSN(0, name))
	if !mysql.Galera(s) {
		t.Error("Open on the cluster's own settings: no Galera found")
	}
}

// testFenceRace is the race Galera's certification must decide: a claim on node0 has
// passed its fence check and is held there while the fence is raised through node1,
// committed; then the claim goes on and commits. Node0's applier is held behind a row
// lock meanwhile, so the raise has not reached node0 when the claim replicates: the
// window a node that lags behind the cluster leaves open.
//
// With the store's Galera fencing (galera true) the claim's write-set writes the
// namespace's ax_leader row, as the raise's does, so certification refuses it (1213);
// the retry reads the raised epoch and answers ErrFenced, and the task stays
// SCHEDULED on every node. With it off (the shared lock alone, as on a single server)
// nothing in the claim's write-set conflicts with the raise: the claim commits after
// the raise returned, which is the bug the Galera fencing fixes.
func testFenceRace(t *testing.T, c *galeracluster.Cluster, galera bool) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	name := c.FreshDatabase(t)
	a := openDSN(t, c.DSN(0, name)) // node0: the old leader's claim
	b := openDSN(t, c.DSN(1, name)) // node1: the new leader's raise
	if !mysql.Galera(a) || !mysql.Galera(b) {
		t.Fatal("the store did not detect Galera (wsrep_on)")
	}
	mysql.SetGalera(a, galera)
	raw0, raw1 := rawDB(t, c.DSN(0, name)), rawDB(t, c.DSN(1, name))
	var appliers int
	if err := raw0.QueryRowContext(ctx, `SELECT @@wsrep_slave_threads`).Scan(&appliers); err != nil || appliers != 1 {
		t.Fatalf("node0 has %d applier threads (%v): the test holds its one applier", appliers, err)
	}

	old, err := a.RaiseFence(ctx, "ns", "old", 1)
	if err != nil {
		t.Fatal(err)
	}
	now, err := a.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ins, err := a.Insert(ctx, []store.NewTask{newTask("race", now.Add(-time.Second))})
	if err != nil {
		t.Fatal(err)
	}
	id := ins[0].Task.ID
	stallTable(ctx, t, raw0, raw1) // node1 has all of that

	// 1. The claim on node0 passes its fence check and waits there.
	checked, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	mysql.SetAfterFence(a, func(store.Fence) {
		once.Do(func() {
			close(checked)
			<-release
		})
	})
	before := wsrepStatus(t, raw0, "wsrep_replicated")
	certBefore := wsrepStatus(t, raw0, "wsrep_local_cert_failures")
	abortsBefore := wsrepStatus(t, raw0, "wsrep_local_bf_aborts")
	type result struct {
		res *store.ClaimResult
		err error
	}
	claimed := make(chan result, 1)
	go func() {
		res, err := a.Claim(ctx, old, []store.Claim{{ID: id, ExecutionID: "old-exec"}})
		claimed <- result{res, err}
	}()
	select {
	case <-checked:
	case r := <-claimed:
		t.Fatalf("Claim returned before its fence check held: %+v, %v", r.res, r.err)
	case <-ctx.Done():
		t.Fatal("the claim did not pass its fence check")
	}
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()

	// 2. Node0's applier stops: a transaction of node0's own, out of replication
	//    (wsrep_on off, so no applier can abort it), holds a row that a write through
	//    node1 then updates. Node0's one applier thread applies the write-sets in their
	//    order, so it applies nothing ordered after that write until the lock goes.
	stall := lockOutOfReplication(t, ctx, c.DSN(0, name))
	defer stall.release()
	if _, err := raw1.ExecContext(ctx, `UPDATE ax_test_stall SET v = v + 1 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	// 3. The new leader raises the fence through node1: committed.
	raised, err := b.RaiseFence(ctx, "ns", "new", 2)
	if err != nil || raised.Token != 2 {
		t.Fatalf("RaiseFence through node1 = %+v, %v; want token 2", raised, err)
	}
	if e := epochOn(t, ctx, raw0, false); e != 1 {
		t.Fatalf("node0 has epoch %d before the claim goes on, want 1: its applier does not lag", e)
	}

	// 4. The claim goes on and commits: it replicates, and its certification waits
	//    for node0's applier (certification is in the write-sets' order, and node0's
	//    one applier thread is still on the stalled write). Then node0 may go on.
	close(release)
	released = true
	waitFor(t, ctx, "the claim's write-set replicated from node0", func() (bool, error) {
		return wsrepStatus(t, raw0, "wsrep_replicated") > before, nil
	})
	stall.release()
	var r result
	select {
	case r = <-claimed:
	case <-ctx.Done():
		t.Fatal("Claim did not return")
	}

	for i, db := range []*sql.DB{raw0, raw1} {
		if e := epochOn(t, ctx, db, true); e != 2 {
			t.Errorf("node%d: epoch %d after the race, want 2", i, e)
		}
	}
	status := func(db *sql.DB) string {
		var s string
		if err := db.QueryRowContext(ctx, `SET STATEMENT wsrep_sync_wait = 1 FOR SELECT status FROM ax_tasks WHERE id = ?`, id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if galera {
		if !errors.Is(r.err, store.ErrFenced) {
			t.Errorf("Claim with token 1 racing a raise to 2 on another node: %+v, %v; want ErrFenced", r.res, r.err)
		}
		for i, db := range []*sql.DB{raw0, raw1} {
			if s := status(db); s != string(store.Scheduled) {
				t.Errorf("node%d: the task is %s after the refused claim, want SCHEDULED", i, s)
			}
		}
		// Refused by certification, or aborted by the raise's applier when that came
		// first: a deadlock either way, and the retry read the raise. The counters are
		// node0's, not the claim's: another session of the test (the stalling one, once
		// it lets go) may be counted too, so at least one, not exactly one.
		cert := wsrepStatus(t, raw0, "wsrep_local_cert_failures") - certBefore
		aborts := wsrepStatus(t, raw0, "wsrep_local_bf_aborts") - abortsBefore
		if cert+aborts < 1 {
			t.Errorf("node0 counts %d certification failures and %d aborts, want at least one: the claim's first attempt", cert, aborts)
		}
		t.Logf("the claim refused: %d certification failure, %d abort by the raise's applier, then ErrFenced", cert, aborts)
		return
	}
	// Without the Galera fencing: the claim went through, after the raise returned.
	if r.err != nil || len(r.res.Claimed) != 1 {
		t.Fatalf("Claim without the Galera fencing: %+v, %v; want the task claimed (the race this test shows)", r.res, r.err)
	}
	for i, db := range []*sql.DB{raw0, raw1} {
		if s := status(db); s != string(store.Dispatching) {
			t.Errorf("node%d: the task is %s, want DISPATCHING", i, s)
		}
	}
	t.Logf("without the Galera fencing, a claim with token 1 committed after RaiseFence to 2 had returned (node0: %d replays)",
		wsrepStatus(t, raw0, "wsrep_local_replays"))
}

// stallLock is a row lock held on one node by a transaction out of replication.
type stallLock struct {
	db   *sql.DB
	tx   *sql.Tx
	once sync.Once
}

// lockOutOfReplication locks row 1 of ax_test_stall on the node of dsn in a session
// with wsrep_on off: Galera cannot abort such a transaction, so an applier that needs
// the row waits until release.
func lockOutOfReplication(t *testing.T, ctx context.Context, dsn string) *stallLock {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1) // one session: the one with wsrep_on off, closed with db
	if _, err := db.ExecContext(ctx, `SET SESSION wsrep_on = OFF`); err != nil {
		db.Close()
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	var v int
	if err := tx.QueryRowContext(ctx, `SELECT v FROM ax_test_stall WHERE id = 1 FOR UPDATE`).Scan(&v); err != nil {
		tx.Rollback()
		db.Close()
		t.Fatal(err)
	}
	return &stallLock{db: db, tx: tx}
}

func (l *stallLock) release() {
	l.once.Do(func() {
		l.tx.Rollback()
		l.db.Close()
	})
}

// wsrepStatus reads a numeric wsrep status variable of db's node.
func wsrepStatus(t *testing.T, db *sql.DB, name string) int64 {
	t.Helper()
	var k, v string
	if err := db.QueryRow(`SHOW GLOBAL STATUS LIKE '`+name+`'`).Scan(&k, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s = %q: %v", name, v, err)
	}
	return n
}

// epochOn reads namespace ns's epoch on db's node, causally (once the node has applied
// everything committed before) or not.
func epochOn(t *testing.T, ctx context.Context, db *sql.DB, causal bool) int64 {
	t.Helper()
	q := `SELECT epoch FROM ax_leader WHERE namespace = 'ns'`
	if causal {
		q = `SET STATEMENT wsrep_sync_wait = 1 FOR ` + q
	}
	var e int64
	if err := db.QueryRowContext(ctx, q).Scan(&e); err != nil {
		t.Fatal(err)
	}
	return e
}

// waitFor polls cond until it holds, failing t when ctx ends first.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() (bool, error)) {
	t.Helper()
	var last error
	for {
		ok, err := cond()
		if ok && err == nil {
			return
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			t.Fatal(fmt.Sprintf("waiting for %s: %v (last error: %v)", what, ctx.Err(), last))
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// stallTable creates ax_test_stall, one row, through raw0 (node0), and waits until
// raw1's node has it and everything before (a causal read).
func stallTable(ctx context.Context, t *testing.T, raw0, raw1 *sql.DB) {
	t.Helper()
	if _, err := raw0.ExecContext(ctx, `CREATE TABLE ax_test_stall (id INT PRIMARY KEY, v INT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := raw0.ExecContext(ctx, `INSERT INTO ax_test_stall VALUES (1, 0)`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := raw1.QueryRowContext(ctx, `SET STATEMENT wsrep_sync_wait = 1 FOR SELECT COUNT(*) FROM ax_test_stall`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the other node: %d stall rows, %v", n, err)
	}
}
