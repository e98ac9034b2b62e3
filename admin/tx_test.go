package admin_test

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/axsched/ax"
	"github.com/axsched/ax/admin"
	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store/mysql"
	"github.com/axsched/ax/store/postgres"
	"github.com/axsched/ax/store/sqlite"
)

// sqlStore opens a fresh store and a database/sql handle on the same database, and
// the statements that make every insert into ax_audit fail, and that undo it.
type sqlStore struct {
	open       func(t *testing.T) (ax.Store, *sql.DB)
	break_, un []string
}

var sqlStores = map[string]sqlStore{
	"sqlite": {
		open: func(t *testing.T) (ax.Store, *sql.DB) {
			path := filepath.Join(t.TempDir(), "ax.db")
			st, err := sqlite.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st, openDB(t, "sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
		},
		break_: []string{`CREATE TRIGGER ax_audit_down BEFORE INSERT ON ax_audit BEGIN SELECT RAISE(ABORT, 'audit down'); END`},
		un:     []string{`DROP TRIGGER ax_audit_down`},
	},
	"postgres": {
		open: func(t *testing.T) (ax.Store, *sql.DB) {
			dsn := servicetest.PostgresDSN(t)
			st, err := postgres.Open(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st, openDB(t, "pgx", dsn)
		},
		break_: []string{
			`CREATE FUNCTION ax_audit_down() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'audit down'; END$$`,
			`CREATE TRIGGER ax_audit_down BEFORE INSERT ON ax_audit FOR EACH ROW EXECUTE FUNCTION ax_audit_down()`,
		},
		un: []string{`DROP TRIGGER ax_audit_down ON ax_audit`},
	},
	"mysql": {
		open: func(t *testing.T) (ax.Store, *sql.DB) {
			dsn := servicetest.MySQLDSN(t)
			st, err := mysql.Open(dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st, openDB(t, "mysql", dsn)
		},
		break_: []string{`CREATE TRIGGER ax_audit_down BEFORE INSERT ON ax_audit FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'audit down'`},
		un:     []string{`DROP TRIGGER ax_audit_down`},
	},
}

func openDB(t *testing.T, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// waitTask waits, at most 10 seconds, until task id reads as done says; want names it.
func waitTask(t *testing.T, s *ax.Scheduler, id int64, want string, done func(*ax.Task) bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got, err := s.Get(context.Background(), id)
		if err == nil && done(got) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %d is %+v, %v; want %s", id, got, err, want)
		}
	}
}

func execAll(t *testing.T, db *sql.DB, stmts []string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// On the SQL stores an action and its audit record commit together: a record that
// cannot be written undoes the change; a trigger on the scheduler that runs the task
// records the execution it claimed, which is the one that runs.
func TestActionsCommitWithTheirAuditRecord(t *testing.T) {
	t.Parallel()
	for name, c := range sqlStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, db := c.open(t)
			s, err := ax.New(ax.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			ran := map[string]int{} // runs by execution id
			s.HandleFunc("job", func(ctx context.Context, task *ax.Task) error {
				mu.Lock()
				ran[task.ExecutionID]++
				mu.Unlock()
				return nil
			})
			s.HandleFunc("nightly", func(context.Context, *ax.Task) error { return nil })
			if err := s.Cron("nightly", "0 3 * * *"); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := s.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Stop(context.Background()) })
			h, err := admin.NewHandler(s, admin.Config{Tokens: []admin.Token{{Actor: "ops", Role: admin.Operator, Hash: admin.HashToken("tok")}}})
			if err != nil {
				t.Fatal(err)
			}
			a, err := s.Delay(ctx, "job", "a", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			b, err := s.Delay(ctx, "job", "b", time.Hour)
			if err != nil {
				t.Fatal(err)
			}

			status, body := post(t, h, "/tasks/"+itoa(a.ID)+"/trigger", "tok", `{"reason":"the customer called"}`)
			entry, _ := body["audit"].(map[string]any)
			execID, _ := entry["execution_id"].(string)
			if status != 200 || execID == "" || entry["status_before"] != "SCHEDULED" || entry["status_after"] != "DISPATCHING" {
				t.Fatalf("trigger: %d %v, want 200 and a record of the execution it claimed", status, body)
			}
			waitTask(t, s, a.ID, "SUCCEEDED", func(got *ax.Task) bool { return got.Status == ax.Succeeded })
			mu.Lock()
			if len(ran) != 1 || ran[execID] != 1 {
				t.Errorf("runs by execution %v, want one, of the audited %s", ran, execID)
			}
			mu.Unlock()

			// The schedule's actions, each with its record.
			for _, step := range []struct {
				action string
				paused bool
			}{{"pause", true}, {"resume", false}} {
				if status, body := post(t, h, "/schedules/nightly/"+step.action, "tok", ``); status != 200 {
					t.Errorf("%s: %d %v, want 200", step.action, status, body)
				}
				scheds, err := s.Schedules(ctx)
				if err != nil || len(scheds) != 1 || scheds[0].Paused != step.paused {
					t.Errorf("after %s: %+v, %v; want paused %v", step.action, scheds, err, step.paused)
				}
				if log := auditLog(t, s); log[0].Action != "schedule."+step.action || log[0].Result != "ok" {
					t.Errorf("after %s: the newest audit record is %+v", step.action, log[0])
				}
			}
			status, body = post(t, h, "/schedules/nightly/trigger", "tok", `{"reason":"the report is late"}`)
			occ, _ := body["task"].(map[string]any)
			occID, _ := occ["id"].(float64)
			if status != 200 || occID == 0 {
				t.Fatalf("schedule trigger: %d %v, want 200 and the occurrence", status, body)
			}
			waitTask(t, s, int64(occID), "SUCCEEDED, triggered", func(got *ax.Task) bool {
				return got.Status == ax.Succeeded && !got.TriggeredAt.IsZero()
			})

			execAll(t, db, c.break_)
			records := len(auditLog(t, s))
			if status, body := post(t, h, "/tasks/"+itoa(b.ID)+"/cancel", "tok", ``); status != 500 || code(body) != "audit_failed" {
				t.Errorf("cancel with the audit log down: %d %v, want 500 audit_failed", status, body)
			}
			if got, err := s.Get(ctx, b.ID); err != nil || got.Status != ax.Scheduled {
				t.Errorf("after the cancel without its record: %+v, %v; want SCHEDULED, the change undone", got, err)
			}
			if n := len(auditLog(t, s)); n != records {
				t.Errorf("%d records written with the audit log down", n-records)
			}
			execAll(t, db, c.un)

			if status, body := post(t, h, "/tasks/"+itoa(b.ID)+"/cancel", "tok", ``); status != 200 {
				t.Errorf("cancel: %d %v, want 200", status, body)
			}
			if status, body := post(t, h, "/tasks/"+itoa(b.ID)+"/cancel", "tok", ``); status != 409 || code(body) != "conflict" {
				t.Errorf("cancel again: %d %v, want 409", status, body)
			}
			log := auditLog(t, s)
			if len(log) != records+2 || log[1].Result != "ok" || log[1].StatusAfter != ax.Cancelled ||
				!strings.HasPrefix(log[0].Result, "conflict") || log[0].StatusBefore != ax.Cancelled {
				t.Errorf("the audit log after a cancel and a refused one: %+v", log[:len(log)-records])
			}
			if got, err := s.Get(ctx, b.ID); err != nil || got.Status != ax.Cancelled {
				t.Errorf("after the cancel: %+v, %v; want CANCELLED", got, err)
			}
		})
	}
}
