package ax_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for *sql.Tx on PostgreSQL

	"github.com/axsched/ax"
	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store/memory"
	"github.com/axsched/ax/store/mysql"
	"github.com/axsched/ax/store/postgres"
	"github.com/axsched/ax/store/sqlite"
)

// appTx is an application's transaction: its own statement, and the handle to give
// WithTx.
type appTx struct {
	handle   any
	exec     func(ctx context.Context, query string) error
	commit   func() error
	rollback func() error
}

func sqlTx(tx *sql.Tx) appTx {
	return appTx{
		handle:   tx,
		exec:     func(ctx context.Context, q string) error { _, err := tx.ExecContext(ctx, q); return err },
		commit:   tx.Commit,
		rollback: tx.Rollback,
	}
}

// txStores opens, per store, the scheduler's store and the application's own handle on
// the same database with an orders table, and begins application transactions.
var txStores = map[string]func(t *testing.T) (ax.Store, func(ctx context.Context) appTx){
	"sqlite": func(t *testing.T) (ax.Store, func(context.Context) appTx) {
		path := filepath.Join(t.TempDir(), "app.db")
		st, err := sqlite.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st, sqlBegin(t, "sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	},
	"postgres/sql.Tx": func(t *testing.T) (ax.Store, func(context.Context) appTx) {
		dsn := servicetest.PostgresDSN(t)
		st, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st, sqlBegin(t, "pgx", dsn)
	},
	"postgres/pgx.Tx": func(t *testing.T) (ax.Store, func(context.Context) appTx) {
		dsn := servicetest.PostgresDSN(t)
		st, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		pool, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		if _, err := pool.Exec(context.Background(), `CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		return st, func(ctx context.Context) appTx {
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return appTx{
				handle:   tx,
				exec:     func(ctx context.Context, q string) error { _, err := tx.Exec(ctx, q); return err },
				commit:   func() error { return tx.Commit(context.Background()) },
				rollback: func() error { return tx.Rollback(context.Background()) },
			}
		}
	},
	"mysql": func(t *testing.T) (ax.Store, func(context.Context) appTx) {
		dsn := servicetest.MySQLDSN(t)
		st, err := mysql.Open(dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st, sqlBegin(t, "mysql", dsn)
	},
}

// sqlBegin opens the application's database/sql handle and creates its orders table.
func sqlBegin(t *testing.T, driver, dsn string) func(context.Context) appTx {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY, status TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context) appTx {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		return sqlTx(tx)
	}
}

func TestWithTxRollbackMeansTheTaskNeverExisted(t *testing.T) {
	t.Parallel()
	for name, open := range txStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, begin := open(t)
			s := newScheduler(t, st, nil)
			rec := newRecorder()
			s.Handle("order.close.timeout", rec)
			start(t, s)
			ctx := context.Background()
			tx := begin(ctx)
			if err := tx.exec(ctx, `INSERT INTO orders VALUES ('42', 'unpaid')`); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Delay(ctx, "order.close.timeout", "42", 50*time.Millisecond, ax.WithTx(tx.handle)); err != nil {
				t.Fatalf("Delay in tx: %v", err)
			}
			if err := tx.rollback(); err != nil {
				t.Fatal(err)
			}
			// A witness due after it shows the scheduler got past the rolled-back task's time.
			witness, err := s.Delay(ctx, "order.close.timeout", "witness", 300*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			waitStatus(t, s, witness.ID, ax.Succeeded, 10*time.Second)
			if _, err := s.Lookup(ctx, "order.close.timeout", "42"); !errors.Is(err, ax.ErrNotFound) {
				t.Errorf("Lookup after rollback: %v, want ErrNotFound", err)
			}
			if runs := rec.runs("42"); len(runs) != 0 {
				t.Errorf("rolled-back task ran %d times", len(runs))
			}
		})
	}
}

// A task due in 100 ms whose transaction commits after a second fires right after
// the commit. The refill interval is an hour, so only the commit can bring it.
func TestWithTxCommittedLateFiresAfterCommit(t *testing.T) {
	t.Parallel()
	for name, open := range txStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, begin := open(t)
			s := newScheduler(t, st, func(c *ax.Config) { c.RefillInterval = time.Hour })
			rec := newRecorder()
			s.Handle("order.close.timeout", rec)
			start(t, s)
			ctx := context.Background()
			tx := begin(ctx)
			if err := tx.exec(ctx, `INSERT INTO orders VALUES ('42', 'unpaid')`); err != nil {
				t.Fatal(err)
			}
			task, err := s.Delay(ctx, "order.close.timeout", "42", 100*time.Millisecond, ax.WithTx(tx.handle))
			if err != nil {
				t.Fatalf("Delay in tx: %v", err)
			}
			time.Sleep(time.Second) // the application's transaction is still busy
			if runs := rec.runs("42"); len(runs) != 0 {
				t.Fatalf("task ran %d times before its transaction committed", len(runs))
			}
			// The commit takes effect on the server before its answer is back here, and
			// a claim waiting on the row's lock may run the task in between: the bound
			// is the moment the commit was sent.
			committing := time.Now()
			if err := tx.commit(); err != nil {
				t.Fatal(err)
			}
			waitStatus(t, s, task.ID, ax.Succeeded, 10*time.Second)
			runs := rec.runs("42")
			if len(runs) != 1 || runs[0].Before(committing) {
				t.Fatalf("runs = %v, want one after the commit sent at %v", runs, committing)
			}
			t.Logf("ran %v after the commit was sent", runs[0].Sub(committing))
		})
	}
}

func TestWithTxRejectsWhatTheStoreCannotUse(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, openSQLite(t), nil)
	ctx := context.Background()
	for name, opt := range map[string]ax.TaskOption{"nil": ax.WithTx(nil), "string": ax.WithTx("not a tx")} {
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

// "Mark the order paid and cancel its timeout" is one transaction: committed, the
// timeout is CANCELLED and never runs; rolled back, the order is unpaid and the
// timeout still fires on time (the scheduler kept it in its wheel).
func TestCancelWithTx(t *testing.T) {
	t.Parallel()
	for name, open := range txStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, begin := open(t)
			s := newScheduler(t, st, nil)
			rec := newRecorder()
			s.Handle("order.close.timeout", rec)
			start(t, s)
			ctx := context.Background()
			paid, err := s.Delay(ctx, "order.close.timeout", "paid", 1500*time.Millisecond) // cancelled in its tx well before
			if err != nil {
				t.Fatal(err)
			}
			unpaid, err := s.Delay(ctx, "order.close.timeout", "unpaid", 1500*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				key    string
				commit bool
			}{{"paid", true}, {"unpaid", false}} {
				tx := begin(ctx)
				if err := tx.exec(ctx, `INSERT INTO orders VALUES ('`+c.key+`', 'paid')`); err != nil {
					t.Fatal(err)
				}
				if err := s.Cancel(ctx, "order.close.timeout", c.key, ax.WithTx(tx.handle)); err != nil {
					t.Fatalf("Cancel(%s) in tx: %v", c.key, err)
				}
				end := tx.rollback
				if c.commit {
					end = tx.commit
				}
				if err := end(); err != nil {
					t.Fatal(err)
				}
			}
			waitStatus(t, s, unpaid.ID, ax.Succeeded, 10*time.Second)
			if got := mustGet(t, s, paid.ID); got.Status != ax.Cancelled {
				t.Errorf("the paid order's timeout is %s, want CANCELLED", got.Status)
			}
			if runs := rec.runs("paid"); len(runs) != 0 {
				t.Errorf("the cancelled timeout ran %d times", len(runs))
			}
			if runs := rec.runs("unpaid"); len(runs) != 1 || runs[0].Before(unpaid.DueAt) {
				t.Errorf("the rolled-back cancellation's timeout ran at %v, want once, at or after %v", runs, unpaid.DueAt)
			}
		})
	}
}

// A transaction on another database (another schema on PostgreSQL, another file on
// SQLite) is ErrInvalid, for a submit and a cancellation, and is not aborted by it:
// the caller's own statements go on and commit.
func TestWithTxOnAnotherDatabase(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(t *testing.T) (ax.Store, func(context.Context) appTx){
		"sqlite": func(t *testing.T) (ax.Store, func(context.Context) appTx) {
			_, begin := txStores["sqlite"](t) // the application's file
			return openSQLite(t), begin       // the scheduler's, another
		},
		"postgres/sql.Tx": func(t *testing.T) (ax.Store, func(context.Context) appTx) {
			_, begin := txStores["postgres/sql.Tx"](t)
			st, _ := txStores["postgres/pgx.Tx"](t) // another schema
			return st, begin
		},
		"postgres/pgx.Tx": func(t *testing.T) (ax.Store, func(context.Context) appTx) {
			_, begin := txStores["postgres/pgx.Tx"](t)
			st, _ := txStores["postgres/sql.Tx"](t)
			return st, begin
		},
		"mysql": func(t *testing.T) (ax.Store, func(context.Context) appTx) {
			_, begin := txStores["mysql"](t)
			st, _ := txStores["mysql"](t) // another database
			return st, begin
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, begin := open(t)
			s := newScheduler(t, st, nil)
			ctx := context.Background()
			if _, err := s.Delay(ctx, "order.close.timeout", "42", time.Hour); err != nil {
				t.Fatal(err)
			}
			tx := begin(ctx)
			if _, err := s.Delay(ctx, "order.close.timeout", "43", time.Hour, ax.WithTx(tx.handle)); !errors.Is(err, ax.ErrInvalid) {
				t.Errorf("Delay in a transaction elsewhere: %v, want ErrInvalid", err)
			}
			if err := s.Cancel(ctx, "order.close.timeout", "42", ax.WithTx(tx.handle)); !errors.Is(err, ax.ErrInvalid) {
				t.Errorf("Cancel in a transaction elsewhere: %v, want ErrInvalid", err)
			}
			if err := tx.exec(ctx, `INSERT INTO orders VALUES ('42', 'paid')`); err != nil {
				t.Errorf("the caller's transaction after the refusals: %v", err)
			}
			if err := tx.commit(); err != nil {
				t.Errorf("commit after the refusals: %v", err)
			}
			if task, err := s.Lookup(ctx, "order.close.timeout", "42"); err != nil || task.Status != ax.Scheduled {
				t.Errorf("the task after a refused cancellation: %v, %v; want SCHEDULED", task, err)
			}
			if _, err := s.Lookup(ctx, "order.close.timeout", "43"); !errors.Is(err, ax.ErrNotFound) {
				t.Errorf("a refused submit wrote a task: %v", err)
			}
		})
	}
}

// A trigger inside the caller's transaction: committed, the task runs right after the
// commit, not before; rolled back, it stays as it was, due in an hour.
func TestTriggerWithTx(t *testing.T) {
	t.Parallel()
	for name, open := range txStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, begin := open(t)
			s := newScheduler(t, st, func(c *ax.Config) { c.RefillInterval = time.Hour })
			rec := newRecorder()
			s.Handle("order.close.timeout", rec)
			start(t, s)
			ctx := context.Background()
			kept, err := s.Delay(ctx, "order.close.timeout", "rolled-back", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			task, err := s.Delay(ctx, "order.close.timeout", "committed", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			tx := begin(ctx)
			if err := s.Trigger(ctx, kept.ID, ax.WithTx(tx.handle)); err != nil {
				t.Fatalf("Trigger in tx: %v", err)
			}
			if err := tx.rollback(); err != nil {
				t.Fatal(err)
			}
			tx = begin(ctx)
			if err := tx.exec(ctx, `INSERT INTO orders VALUES ('committed', 'compensated')`); err != nil {
				t.Fatal(err)
			}
			if err := s.Trigger(ctx, task.ID, ax.WithTx(tx.handle)); err != nil {
				t.Fatalf("Trigger in tx: %v", err)
			}
			time.Sleep(300 * time.Millisecond) // the application's transaction is still busy
			committing := time.Now()           // the bound: the commit may apply before its answer is back
			if err := tx.commit(); err != nil {
				t.Fatal(err)
			}
			done := waitStatus(t, s, task.ID, ax.Succeeded, 10*time.Second)
			if runs := rec.runs("committed"); len(runs) != 1 || runs[0].Before(committing) || done.TriggeredAt.IsZero() {
				t.Errorf("the triggered task ran at %v (TriggeredAt %v), want once, after the commit sent at %v", runs, done.TriggeredAt, committing)
			}
			after := mustGet(t, s, kept.ID)
			if after.Status != ax.Scheduled || !after.DueAt.Equal(kept.DueAt) || !after.TriggeredAt.IsZero() || len(rec.runs("rolled-back")) != 0 {
				t.Errorf("the task whose trigger rolled back: %s due %v triggered %v, ran %d times; want it SCHEDULED as before",
					after.Status, after.DueAt, after.TriggeredAt, len(rec.runs("rolled-back")))
			}
			tx = begin(ctx)
			defer tx.rollback()
			if err := s.Trigger(ctx, task.ID, ax.WithTx(tx.handle)); !errors.Is(err, ax.ErrNotTriggerable) {
				t.Errorf("Trigger in tx of a SUCCEEDED task: %v, want ErrNotTriggerable", err)
			}
		})
	}
}

// A key freed by a cancelled task can be submitted again inside the caller's
// transaction: rolled back, the old task keeps its key (not superseded) and nothing
// new exists; committed, the new task exists and the old one is superseded.
func TestWithTxReusesAKey(t *testing.T) {
	t.Parallel()
	for name, open := range txStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, begin := open(t)
			s := newScheduler(t, st, nil) // not started: nothing runs
			ctx := context.Background()
			old, err := s.Delay(ctx, "order.close.timeout", "order-9", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Cancel(ctx, "order.close.timeout", "order-9"); err != nil {
				t.Fatal(err)
			}
			for _, commit := range []bool{false, true} {
				tx := begin(ctx)
				again, err := s.Delay(ctx, "order.close.timeout", "order-9", time.Hour, ax.WithTx(tx.handle))
				if err != nil || again.ID == old.ID {
					t.Fatalf("Delay of a cancelled task's key in a tx = %+v, %v; want a new task", again, err)
				}
				end := tx.rollback
				if commit {
					end = tx.commit
				}
				if err := end(); err != nil {
					t.Fatal(err)
				}
				looked, err := s.Lookup(ctx, "order.close.timeout", "order-9")
				if err != nil {
					t.Fatal(err)
				}
				superseded := mustGet(t, s, old.ID).Superseded
				switch {
				case !commit && (looked.ID != old.ID || superseded):
					t.Errorf("rolled back: Lookup = task %d, the old one superseded %t; want the old task %d, not superseded", looked.ID, superseded, old.ID)
				case commit && (looked.ID != again.ID || looked.Status != ax.Scheduled || !superseded):
					t.Errorf("committed: Lookup = task %d (%s), the old one superseded %t; want the new task %d, the old one superseded",
						looked.ID, looked.Status, superseded, again.ID)
				}
			}
		})
	}
}

// Trigger on a scheduler that would not run the task — not started, or started
// without its handler — hands it to the one that runs its handler: due now, run once
// there, no dispatch retry spent.
func TestTriggerHandsOver(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"sqlite", "postgres/pgx.Tx", "mysql"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, _ := txStores[name](t)
			runner := newScheduler(t, st, func(c *ax.Config) { c.RefillInterval = 200 * time.Millisecond })
			rec := newRecorder()
			runner.Handle("job", rec)
			start(t, runner)
			idle := newScheduler(t, st, nil) // not started: an operations node
			noLead := false
			other := newScheduler(t, st, func(c *ax.Config) { c.CanLead = &noLead })
			other.Handle("other.job", newRecorder()) // started, but not job's handler
			start(t, other)
			ctx := context.Background()
			for i, via := range []*ax.Scheduler{idle, other} {
				key := []string{"idle", "other"}[i]
				task, err := runner.Delay(ctx, "job", key, time.Hour)
				if err != nil {
					t.Fatal(err)
				}
				if err := via.Trigger(ctx, task.ID); err != nil {
					t.Fatalf("Trigger through the %s scheduler: %v", key, err)
				}
				got := waitStatus(t, runner, task.ID, ax.Succeeded, 10*time.Second)
				if runs := rec.runs(key); len(runs) != 1 || got.TriggeredAt.IsZero() || got.DispatchRetries != 0 || got.Attempt != 0 {
					t.Errorf("through the %s scheduler: %d runs, %+v; want one run, TriggeredAt set, no dispatch retry", key, len(runs), got)
				}
			}
		})
	}
}
