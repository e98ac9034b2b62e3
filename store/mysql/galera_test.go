package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/internal/galeracluster"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/mysql"
)

// TestGalera runs the store on a three-node MariaDB Galera cluster of its own (see
// internal/galeracluster): one cluster for all its subtests, which take a fresh
// database each.
func TestGalera(t *testing.T) {
	if testing.Short() {
		t.Skip("the Galera cluster takes about 15 s to start")
	}
	c := galeracluster.Start(t)
	t.Run("FenceRace", func(t *testing.T) { testFenceRace(t, c, true) })
	t.Run("FenceRaceUnfenced", func(t *testing.T) { testFenceRace(t, c, false) })
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
	if _, err := raw0.ExecContext(ctx, `CREATE TABLE ax_test_stall (id INT PRIMARY KEY, v INT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := raw0.ExecContext(ctx, `INSERT INTO ax_test_stall VALUES (1, 0)`); err != nil {
		t.Fatal(err)
	}
	// Node1 has all of that (a causal read waits for it).
	var n int
	if err := raw1.QueryRowContext(ctx, `SET STATEMENT wsrep_sync_wait = 1 FOR SELECT COUNT(*) FROM ax_test_stall`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("node1 before the race: %d stall rows, %v", n, err)
	}

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
	//    node1 then updates. Node0 applies nothing more until it lets go.
	stall := lockOutOfReplication(t, ctx, c.DSN(0, name))
	defer stall.release()
	if _, err := raw1.ExecContext(ctx, `UPDATE ax_test_stall SET v = v + 1 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "node0's applier waiting for the stall lock", func() (bool, error) {
		var waiting int
		err := raw0.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'`).Scan(&waiting)
		return waiting > 0, err
	})

	// 3. The new leader raises the fence through node1: committed.
	raised, err := b.RaiseFence(ctx, "ns", "new", 2)
	if err != nil || raised.Token != 2 {
		t.Fatalf("RaiseFence through node1 = %+v, %v; want token 2", raised, err)
	}
	if e := epochOn(t, ctx, raw0, false); e != 1 {
		t.Fatalf("node0 has epoch %d before the claim goes on, want 1: its applier does not lag", e)
	}

	// 4. The claim goes on and commits (it replicates); then node0's applier may go on.
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
		if f := wsrepStatus(t, raw0, "wsrep_local_cert_failures"); f == 0 {
			t.Errorf("node0 counts no certification failure: the claim was refused otherwise")
		}
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
