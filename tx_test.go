package ax_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store/memory"
	"github.com/axsched/ax/store/sqlite"
)

// openSQLitePair opens the scheduler's store and the application's own database/sql
// handle on the same file, with an orders table, as a service would.
func openSQLitePair(t *testing.T) (*sqlite.Store, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app.db")
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return st, db
}

func TestWithTxRollbackMeansTheTaskNeverExisted(t *testing.T) {
	t.Parallel()
	st, db := openSQLitePair(t)
	s := newScheduler(t, st, nil)
	rec := newRecorder()
	s.Handle("order.close.timeout", rec)
	start(t, s)
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO orders VALUES ('42', 'unpaid')`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delay(ctx, "order.close.timeout", "42", 50*time.Millisecond, ax.WithTx(tx)); err != nil {
		t.Fatalf("Delay in tx: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	// A witness due after it proves the scheduler got past the rolled-back task's time.
	witness, _ := s.Delay(ctx, "order.close.timeout", "witness", 300*time.Millisecond)
	waitStatus(t, s, witness.ID, ax.Succeeded, 10*time.Second)
	if _, err := s.Lookup(ctx, "order.close.timeout", "42"); !errors.Is(err, ax.ErrNotFound) {
		t.Errorf("Lookup after rollback: %v, want ErrNotFound", err)
	}
	if runs := rec.runs("42"); len(runs) != 0 {
		t.Errorf("rolled-back task ran %d times", len(runs))
	}
}

// A task due in 100 ms whose transaction commits after a second fires right after
// the commit. The refill interval is an hour, so only the commit can bring it.
func TestWithTxCommittedLateFiresAfterCommit(t *testing.T) {
	t.Parallel()
	st, db := openSQLitePair(t)
	s := newScheduler(t, st, func(c *ax.Config) { c.RefillInterval = time.Hour })
	rec := newRecorder()
	s.Handle("order.close.timeout", rec)
	start(t, s)
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO orders VALUES ('42', 'unpaid')`); err != nil {
		t.Fatal(err)
	}
	task, err := s.Delay(ctx, "order.close.timeout", "42", 100*time.Millisecond, ax.WithTx(tx))
	if err != nil {
		t.Fatalf("Delay in tx: %v", err)
	}
	time.Sleep(time.Second) // the application's transaction is still busy
	if runs := rec.runs("42"); len(runs) != 0 {
		t.Fatalf("task ran %d times before its transaction committed", len(runs))
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	committed := time.Now()
	waitStatus(t, s, task.ID, ax.Succeeded, 10*time.Second)
	runs := rec.runs("42")
	if len(runs) != 1 || runs[0].Before(committed) {
		t.Fatalf("runs = %v, want one after the commit at %v", runs, committed)
	}
	t.Logf("ran %v after the commit", runs[0].Sub(committed))
	var status string
	if err := db.QueryRow(`SELECT status FROM orders WHERE id = '42'`).Scan(&status); err != nil || status != "unpaid" {
		t.Errorf("order = %q, %v; want the committed order", status, err)
	}
}

func TestWithTxRejectsWhatTheStoreCannotUse(t *testing.T) {
	t.Parallel()
	st, _ := openSQLitePair(t)
	s := newScheduler(t, st, nil)
	ctx := context.Background()
	for name, opt := range map[string]ax.Option{"nil": ax.WithTx(nil), "string": ax.WithTx("not a tx")} {
		if _, err := s.Delay(ctx, "job", "k", 0, opt); !errors.Is(err, ax.ErrInvalid) {
			t.Errorf("WithTx(%s): %v, want ErrInvalid", name, err)
		}
	}
	m := newScheduler(t, memory.New(), nil)
	if _, err := m.Delay(ctx, "job", "k", 0, ax.WithTx(&sql.Tx{})); !errors.Is(err, ax.ErrInvalid) {
		t.Errorf("WithTx on a store without transactions: %v, want ErrInvalid", err)
	}
	if _, err := s.Lookup(ctx, "job", "k"); !errors.Is(err, ax.ErrNotFound) {
		t.Errorf("a rejected submit wrote a task: %v", err)
	}
}
