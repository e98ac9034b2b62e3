package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/axsched/ax"
	"github.com/axsched/ax/admin"
	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store/memory"
)

// TestMain lets the tests run this test binary as the ax command itself: with
// AX_TEST_MAIN=1 it calls main, which exits with the command's status. Otherwise
// it runs the tests, and every command they run in-process must leave no goroutine
// behind.
func TestMain(m *testing.M) {
	if os.Getenv("AX_TEST_MAIN") == "1" {
		main()
		return
	}
	goleak.VerifyTestMain(m)
}

// runAx runs the command in-process and returns its exit status, stdout and stderr.
func runAx(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestDemoSmoke runs the demo with --metrics (TestBinary runs it without);
// internal/demo's tests scrape the metrics.
func TestDemoSmoke(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runAx(t, "demo", "--orders", "6", "--scale", "fast", "--metrics", "127.0.0.1:0")
	if code != exitOK {
		t.Fatalf("ax demo --orders 6 --scale fast --metrics 127.0.0.1:0: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitOK, stdout, stderr)
	}
	for _, want := range []string{"verify: OK", "summary: fired ", "early = 0", "verify: OK: reconciliation", "max concurrent 1, no overlap",
		"  metrics:  Prometheus metrics at http://127.0.0.1:"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("ax demo: stdout lacks %q:\n%s", want, stdout)
		}
	}
}

// TestBinary runs main itself, as a process, and checks its exit status.
func TestBinary(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		code int
		want string // in stdout+stderr
	}{
		{[]string{"demo", "--orders", "6", "--scale", "fast"}, exitOK, "summary: fired "},
		{[]string{"bogus"}, exitUsage, `unknown command "bogus"`},
		// The binary re-executes itself as the second process.
		{[]string{"bench", "--workload", "pickup", "--from", "other", "--tasks", "30", "--rate", "100"}, exitOK, `"from":"other"`},
	} {
		cmd := exec.Command(os.Args[0], c.args...)
		cmd.Env = append(os.Environ(), "AX_TEST_MAIN=1")
		out, err := cmd.CombinedOutput()
		code := 0
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			code = exitErr.ExitCode()
		} else if err != nil {
			t.Fatalf("ax %s: %v", strings.Join(c.args, " "), err)
		}
		if code != c.code || !strings.Contains(string(out), c.want) {
			t.Errorf("ax %s: exit %d, want %d with %q in the output:\n%s", strings.Join(c.args, " "), code, c.code, c.want, out)
		}
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		code int
		want string // in stdout when the code is 0 (help was asked for), else in stderr
	}{
		{nil, exitUsage, "usage: ax COMMAND"},
		{[]string{"help"}, exitOK, "usage: ax COMMAND"},
		{[]string{"-h"}, exitOK, "usage: ax COMMAND"},
		{[]string{"--help"}, exitOK, "usage: ax COMMAND"},
		{[]string{"help", "demo"}, exitOK, "usage: ax demo"},
		{[]string{"help", "migrate"}, exitOK, "usage: ax migrate"},
		{[]string{"help", "bench"}, exitOK, "usage: ax bench"},
		{[]string{"help", "nope"}, exitUsage, `unknown command "nope"`},
		{[]string{"nope"}, exitUsage, `ax: unknown command "nope"`},
		{[]string{"demo", "-h"}, exitOK, "-orders"},
		{[]string{"demo", "--help"}, exitOK, "-orders"},
		{[]string{"migrate", "--help"}, exitOK, "usage: ax migrate"},
		{[]string{"bench", "-h"}, exitOK, "-workload"},
		{[]string{"demo", "--bogus"}, exitUsage, "flag provided but not defined: -bogus"},
		{[]string{"demo", "extra"}, exitUsage, `unexpected argument "extra"`},
		{[]string{"demo", "--scale", "slow"}, exitUsage, `--scale "slow": want normal or fast`},
		{[]string{"demo", "--orders", "2"}, exitUsage, "need at least 3"},
		{[]string{"demo", "--metrics", "9090"}, exitUsage, `Metrics "9090": want HOST:PORT`},
		{[]string{"migrate"}, exitUsage, "missing action: want up or status"},
		{[]string{"migrate", "--dsn", "ax.db", "up"}, exitUsage, `the action (up or status) comes first, before the flags; got "--dsn"`},
		{[]string{"migrate", "sideways"}, exitUsage, `unknown action "sideways"`},
		{[]string{"migrate", "up"}, exitUsage, "--dsn is required"},
		{[]string{"migrate", "status", "--dsn", "ax.db", "extra"}, exitUsage, `unexpected argument "extra"`},
		{[]string{"bench", "extra"}, exitUsage, `unexpected argument "extra"`},
	} {
		code, stdout, stderr := runAx(t, c.args...)
		out, other := stderr, stdout
		if c.code == exitOK {
			out, other = stdout, stderr
		}
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("ax %s: exit %d, stdout:\n%s\nstderr:\n%s\nwant exit %d with %q", strings.Join(c.args, " "), code, stdout, stderr, c.code, c.want)
		}
		if other != "" {
			t.Errorf("ax %s: unexpected output on the other stream: %q", strings.Join(c.args, " "), other)
		}
	}
	code, stdout, _ := runAx(t, "help")
	for _, cmd := range commands {
		if !strings.Contains(stdout, cmd.name) {
			t.Errorf("ax help: exit %d, usage lacks command %q:\n%s", code, cmd.name, stdout)
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runAx(t, "version")
	if code != exitOK || !strings.HasPrefix(stdout, "ax ") || !strings.Contains(stdout, "schema: sqlite ") || stderr != "" {
		t.Errorf("ax version: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, _, _ := runAx(t, "version", "extra"); code != exitUsage {
		t.Errorf("ax version extra: exit %d, want %d", code, exitUsage)
	}
}

// The store kind comes from the DSN when --store is absent.
func TestKindOfDSN(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ dsn, kind, open string }{
		{"postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"},
		{"postgresql://u:p@db/x", "postgres", "postgresql://u:p@db/x"},
		{"mysql://root:s%40cret@127.0.0.1:3306/test?parseTime=true", "mysql", "root:s@cret@tcp(127.0.0.1:3306)/test?parseTime=true"},
		{"mysql://root@127.0.0.1:3306/test", "mysql", "root@tcp(127.0.0.1:3306)/test"},
		{"root@tcp(127.0.0.1:3306)/test", "mysql", "root@tcp(127.0.0.1:3306)/test"},
		{"u:p@unix(/run/mysqld.sock)/db", "mysql", "u:p@unix(/run/mysqld.sock)/db"},
		{"/var/lib/app/ax.db", "sqlite", "/var/lib/app/ax.db"},
		{"ax.db", "sqlite", "ax.db"},
	} {
		if kind, open := kindOfDSN(c.dsn); kind != c.kind || open != c.open {
			t.Errorf("kindOfDSN(%q) = %q, %q; want %q, %q", c.dsn, kind, open, c.kind, c.open)
		}
	}
}

func TestBenchSmoke(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runAx(t, "bench", "--workload", "drain", "--tasks", "200", "--concurrency", "20")
	if code != exitOK {
		t.Fatalf("ax bench: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, `"workload":"drain"`) || !strings.Contains(stdout, "sqlite") {
		t.Errorf("ax bench output lacks the drain result:\n%s", stdout)
	}
	if code, _, _ := runAx(t, "bench", "--nodes", "3", "--elector", "etcd"); code != exitUsage {
		t.Errorf("ax bench --nodes 3 --elector etcd: exit %d, want %d", code, exitUsage)
	}
	code, stdout, stderr = runAx(t, "bench", "--workload", "pickup", "--tasks", "30", "--rate", "100")
	if code != exitOK || !strings.Contains(stdout, `"workload":"pickup"`) || !strings.Contains(stdout, `"from":"here"`) {
		t.Errorf("ax bench --workload pickup: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if code, _, _ := runAx(t, "bench", "--workload", "pickup", "--from", "there"); code != exitUsage {
		t.Errorf("ax bench --workload pickup --from there: exit %d, want %d", code, exitUsage)
	}
	if code, _, _ := runAx(t, "bench", "--store", "oracle"); code != exitUsage {
		t.Errorf("ax bench --store oracle: exit %d, want %d", code, exitUsage)
	}
}

func TestMigrateSQLite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ax.db")
	if code, _, _ := runAx(t, "migrate", "status", "--dsn", path); code != exitFail {
		t.Errorf("migrate status of a missing file: exit %d, want %d", code, exitFail)
	}
	code, stdout, stderr := runAx(t, "migrate", "up", "--store", "sqlite", "--dsn", path)
	if code != exitOK || !strings.Contains(stdout, "up to date") {
		t.Fatalf("migrate up: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, stdout, _ := runAx(t, "migrate", "status", "--dsn", path); code != exitOK || !strings.Contains(stdout, "up to date") {
		t.Errorf("migrate status after up: exit %d, %q", code, stdout)
	}
	// A file a newer ax migrated: status says so, instead of a negative count.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO ax_schema_migrations (version, applied_at) VALUES (99, 0)`); err != nil {
		t.Fatal(err)
	}
	if code, stdout, _ := runAx(t, "migrate", "status", "--dsn", path); code != exitFail || !strings.Contains(stdout, "newer than this ax") {
		t.Errorf("migrate status of a newer schema: exit %d, %q; want %d and newer", code, stdout, exitFail)
	}
}

func TestMigrateNetworkStores(t *testing.T) {
	for name, dsn := range map[string]func(testing.TB) string{"postgres": servicetest.PostgresDSN, "mysql": servicetest.MySQLDSN} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := dsn(t)
			if code, stdout, stderr := runAx(t, "migrate", "status", "--store", name, "--dsn", d); code != exitFail || !strings.Contains(stdout, "pending") {
				t.Errorf("migrate status of an empty schema: exit %d, %q %q; want %d and pending", code, stdout, stderr, exitFail)
			}
			// No --store: the DSN says which.
			if code, stdout, stderr := runAx(t, "migrate", "up", "--dsn", d); code != exitOK || !strings.Contains(stdout, "up to date") {
				t.Fatalf("migrate up: exit %d, %q %q", code, stdout, stderr)
			}
			if code, stdout, _ := runAx(t, "migrate", "status", "--store", name, "--dsn", d); code != exitOK || !strings.Contains(stdout, "up to date") {
				t.Errorf("migrate status after up: exit %d, %q", code, stdout)
			}
		})
	}
}

// ax bench on the network stores: each run makes its own schema or database in the
// server of --dsn and removes it after.
func TestBenchNetworkStores(t *testing.T) {
	for name, dsn := range map[string]func(testing.TB) string{"postgres": servicetest.PostgresDSN, "mysql": servicetest.MySQLDSN} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runAx(t, "bench", "--store", name, "--dsn", dsn(t), "--workload", "drain", "--tasks", "100", "--concurrency", "10", "--runs", "2")
			if code != exitOK {
				t.Fatalf("ax bench --store %s: exit %d\nstdout:\n%s\nstderr:\n%s", name, code, stdout, stderr)
			}
			if n := strings.Count(stdout, `"workload":"drain"`); n != 2 || !strings.Contains(stdout, `"store":"`+name+`"`) {
				t.Errorf("ax bench --store %s --runs 2: %d drain results, want 2 of store %s:\n%s", name, n, name, stdout)
			}
			// Both count the statements the database ran for the store.
			if n := strings.Count(stdout, `"store_statements_per_task":`); n != 2 {
				t.Errorf("ax bench --store %s --runs 2: %d results with store_statements_per_task:\n%s", name, n, stdout)
			}
			// PostgreSQL's runs carry the server's CPU per round trip, the unit of
			// their db-cpu/task; MariaDB's, whose connections are threads, do not.
			if n := strings.Count(stdout, `"db_cpu_per_roundtrip_ns":`); n != map[string]int{"postgres": 2, "mysql": 0}[name] {
				t.Errorf("ax bench --store %s --runs 2: %d results with db_cpu_per_roundtrip_ns:\n%s", name, n, stdout)
			}
		})
	}
}

// ax tasks and ax schedules against an admin API: aligned tables, --json, the
// server's errors as exit status 1, usage errors as 2.
func TestTasksCommands(t *testing.T) {
	t.Parallel()
	st := memory.New()
	defer st.Close()
	s, err := ax.New(ax.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), OwnerService: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	s.HandleFunc("payment.reconcile", func(context.Context, *ax.Task) error { return nil })
	if err := s.Every("payment.reconcile", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	var ids []int64
	for _, key := range []string{"cust-7/1", "cust-7/2", "cust-9/3"} {
		task, err := s.Delay(context.Background(), "order.close", key, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	h, err := admin.NewHandler(s, admin.Config{Tokens: []admin.Token{{Actor: "ops", Role: admin.Viewer, Hash: admin.HashToken("tok")},
		{Actor: "oncall", Role: admin.Operator, Hash: admin.HashToken("op-tok")}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	api := []string{"--server", srv.URL, "--token", "tok"}
	op := []string{"--server", srv.URL, "--token", "op-tok"}
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { // a console, not the API
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, "<!doctype html><title>ax</title>")
	}))
	defer page.Close()
	id := func(i int) string { return strconv.FormatInt(ids[i], 10) }
	runCommands(t, []commandCase{
		{append([]string{"tasks", "list", "--name", "order.close"}, api...), exitOK,
			[]string{"ID  NAME", "order.close  cust-9/3  SCHEDULED", "cust-7/1", "orders"}},
		{append([]string{"tasks", "list", "--status", "SCHEDULED", "--limit", "2", "--order", "soonest"}, api...), exitOK, []string{"next: "}},
		{append([]string{"tasks", "list", "--json"}, api...), exitOK, []string{`"tasks":[`}},
		{append([]string{"tasks", "show", strconv.FormatInt(ids[2], 10)}, api...), exitOK, []string{"key:", "cust-9/3", "status:", "SCHEDULED"}},
		{append([]string{"schedules", "list"}, api...), exitOK, []string{"NAME", "payment.reconcile  @every 1h0m0s  UTC", "active"}},
		{append([]string{"tasks", "show", "999999"}, api...), exitFail, []string{"not_found (404)"}},
		{append([]string{"tasks", "list", "--limit", "5000"}, api...), exitFail, []string{"invalid (400)"}},
		{[]string{"tasks", "list", "--server", srv.URL, "--token", "forged"}, exitFail, []string{"unauthorized (401)"}},
		{append([]string{"tasks", "cancel", id(0)}, api...), exitFail, []string{"forbidden (403)"}},
		{append([]string{"tasks", "cancel", id(0), "--reason", "paid"}, op...), exitOK, []string{"status:", "CANCELLED", "audit:", "task.cancel by oncall"}},
		{append([]string{"tasks", "cancel", id(0)}, op...), exitFail, []string{"conflict (409)"}},
		{append([]string{"tasks", "show", id(0)}, api...), exitOK, []string{"status:", "CANCELLED", "cancel:", "asked by oncall at "}},
		{append([]string{"tasks", "reschedule", id(1), "--at", "2h", "--reason", "the customer asked"}, op...), exitOK, []string{"SCHEDULED", "task.reschedule"}},
		{append([]string{"tasks", "reschedule", id(1), "--at", "2h"}, op...), exitFail, []string{"invalid (400)", "needs a reason"}},
		{append([]string{"tasks", "trigger", id(2), "--reason", "compensation", "--json"}, op...), exitOK, []string{`"action":"task.trigger"`, `"status_after":"SCHEDULED"`}}, // handed over: it runs no order.close
		{append([]string{"tasks", "trigger", id(2), "--reason", "again"}, op...), exitOK, []string{"SCHEDULED", "handed over:", "runs order.close starts it"}},
		{[]string{"tasks", "list", "--server", page.URL, "--token", "tok"}, exitFail, []string{"answered text/html", "is --server the admin API's base URL?"}},
		{append([]string{"tasks", "retry", id(2)}, op...), exitFail, []string{"conflict (409)"}},
		{append([]string{"schedules", "pause", "payment.reconcile"}, op...), exitOK, []string{"schedule payment.reconcile", "schedule.pause by oncall"}},
		{append([]string{"schedules", "list"}, api...), exitOK, []string{"paused"}},
		{append([]string{"schedules", "resume", "payment.reconcile"}, op...), exitOK, []string{"schedule.resume"}},
		{[]string{"tasks", "reschedule", id(1), "--at", "soon"}, exitUsage, []string{"neither an RFC 3339 time nor a duration"}},
		{[]string{"tasks"}, exitUsage, []string{"missing action: want list, show, cancel, retry, trigger or reschedule"}},
		{[]string{"tasks", "--server", srv.URL, "list"}, exitUsage, []string{"comes first, before the flags"}},
		{[]string{"tasks", "show"}, exitUsage, []string{"missing task ID"}},
		{append([]string{"tasks", "list", "extra"}, api...), exitUsage, []string{`unexpected argument "extra"`}},
		{[]string{"schedules"}, exitUsage, []string{"missing action: want list, pause, resume or trigger"}},
		{append([]string{"names", "pause", "order.close"}, api...), exitFail, []string{"forbidden (403)"}},
		{append([]string{"names", "pause", "order.close", "--reason", "warehouse closed"}, op...), exitOK,
			[]string{"target:", "name order.close", "state:", "paused", "name.pause by oncall"}},
		{append([]string{"names", "list"}, api...), exitOK, []string{"NAME", "CONCURRENCY", "IN USE", "PER KEY", "RATE", "CHANGED BY", "order.close", "paused", "oncall"}},
		{append([]string{"names", "list", "--json"}, api...), exitOK, []string{`"names":[{"name":"order.close","paused":true,"changed_by":"oncall"`}},
		{append([]string{"names", "resume", "order.close", "--json"}, op...), exitOK, []string{`"action":"name.resume"`, `"paused":false`}},
		{append([]string{"names", "limit", "order.close", "--concurrency", "3", "--rate", "10", "--per", "1m", "--key-concurrency", "2", "--key-rate", "4", "--key-per", "1h", "--reason", "warehouse slow"}, op...), exitOK,
			[]string{"name.concurrency by oncall", "name.rate by oncall", "name.key_concurrency by oncall", "name.key_rate by oncall", "concurrency:", "rate:", "10/1m0s", "per task key:", "2, 4/1h0m0s"}},
		{append([]string{"names", "limit", "order.close", "--concurrency", "two"}, op...), exitUsage, []string{`--concurrency "two": want a whole number`}},
		{append([]string{"names", "list", "--json"}, api...), exitOK, []string{`"concurrency":3`, `"rate":10`, `"per":"1m0s"`, `"key_concurrency":2`, `"key_rate":4`, `"key_per":"1h0m0s"`}},
		{append([]string{"names", "limit", "order.close"}, op...), exitUsage, []string{"give --concurrency, --rate with --per, --key-concurrency, --key-rate with --key-per"}},
		{append([]string{"names", "limit", "order.close", "--key-rate", "5"}, op...), exitUsage, []string{"--key-rate needs --key-per"}},
		{append([]string{"names", "limit", "order.close", "--rate", "5"}, op...), exitUsage, []string{"--rate needs --per"}},
		{append([]string{"names", "limit", "order.close", "--concurrency", "3"}, api...), exitFail, []string{"forbidden (403)"}},
		{append([]string{"names", "pause", strings.Repeat("n", ax.MaxNameLen+1)}, op...), exitFail, []string{"invalid (400)"}},
		{[]string{"names"}, exitUsage, []string{"missing action: want list, pause, resume or limit"}},
		{[]string{"names", "pause"}, exitUsage, []string{"missing task name"}},
		{[]string{"names", "stop", "x"}, exitUsage, []string{`unknown action "stop"`}},
		{[]string{"names", "pause", "-h"}, exitOK, []string{"usage: ax names pause NAME", "-reason"}},
		{[]string{"tasks", "list", "-h"}, exitOK, []string{"-key-prefix"}},
	})
	recs, err := s.AuditLog(context.Background(), ax.AuditQuery{Target: "name order.close", Limit: 10})
	if err != nil || len(recs) != 8 || !strings.HasPrefix(recs[0].Result, "forbidden") || recs[1].Result != "ok: key rate 4 per 1h0m0s" ||
		recs[2].Result != "ok: key concurrency 2" || recs[3].Result != "ok: rate 10 per 1m0s" || recs[4].Result != "ok: concurrency 3" ||
		recs[4].Reason != "warehouse slow" || recs[5].Action != "name.resume" || recs[6].Reason != "warehouse closed" ||
		recs[6].Actor != "oncall" || !strings.HasPrefix(recs[7].Result, "forbidden") {
		t.Errorf("the names commands' audit records, newest first: %+v, %v; want the viewer's refused limit, the limits set, the resume, the pause, the viewer's refused pause", recs, err)
	}
}

// TestTasksBulkCommands: ax tasks cancel|retry|trigger without an ID act on many tasks,
// by --ids or by a filter, after a dry run if asked; a selection must be given.
func TestTasksBulkCommands(t *testing.T) {
	t.Parallel()
	st := memory.New()
	defer st.Close()
	s, err := ax.New(ax.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, key := range []string{"a", "b", "c", "d"} {
		task, err := s.Delay(context.Background(), "order.close", key, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, strconv.FormatInt(task.ID, 10))
	}
	if _, err := s.Delay(context.Background(), "other", "x", time.Hour); err != nil {
		t.Fatal(err)
	}
	h, err := admin.NewHandler(s, admin.Config{Tokens: []admin.Token{{Actor: "oncall", Role: admin.Operator, Hash: admin.HashToken("op-tok")}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	op := []string{"--server", srv.URL, "--token", "op-tok"}
	runCommands(t, []commandCase{
		{append([]string{"tasks", "cancel", "--name", "order.close", "--reason", "r", "--dry-run"}, op...), exitOK, []string{"would cancel 4 of 4 tasks selected"}},
		{append([]string{"tasks", "cancel", "--ids", ids[0] + "," + ids[1], "--reason", "r"}, op...), exitOK,
			[]string{"cancel: 2 of 2 tasks changed (bulk ", "audit: 3 (task.bulk_cancel by oncall)"}}, // the records of the two tasks, then its own
		{append([]string{"tasks", "cancel", "--ids", ids[0] + "," + ids[2], "--reason", "r"}, op...), exitOK,
			[]string{"NOT CHANGED  STATUS     RESULT\n" + ids[0] + "            CANCELLED  conflict: ", "cancel: 1 of 2 tasks changed"}},
		{append([]string{"tasks", "cancel", "--name", "order.close", "--status", "SCHEDULED", "--reason", "r", "--json"}, op...), exitOK,
			[]string{`"selected":1`, `"changed":1`}},
		{append([]string{"tasks", "cancel", "--all", "--reason", "r", "--dry-run"}, op...), exitOK, []string{"would cancel 1 of 1 tasks selected"}},
		{append([]string{"tasks", "retry", "--ids", ids[0]}, op...), exitUsage, []string{"--reason is required"}},
		{append([]string{"tasks", "retry", "--status", "RUNNING", "--reason", "r"}, op...), exitFail, []string{"invalid (400)", "status RUNNING selects none"}},
		{append([]string{"tasks", "cancel", "--reason", "r", ids[3]}, op...), exitUsage, []string{"the task ID comes first, before the flags: ax tasks cancel " + ids[3]}},
		{[]string{"tasks", "cancel", "-h"}, exitOK, []string{"usage: ax tasks cancel ID [flags]", "usage: ax tasks cancel --ids ID,ID,…", "-dry-run"}},
		{append([]string{"tasks", "cancel", "--reason", "r"}, op...), exitUsage, []string{"which tasks?"}},
		{append([]string{"tasks", "cancel", "--ids", "1", "--name", "x", "--reason", "r"}, op...), exitUsage, []string{"not both"}},
		{append([]string{"tasks", "cancel", "--all", "--name", "x", "--reason", "r"}, op...), exitUsage, []string{"without a filter"}},
		{append([]string{"tasks", "cancel", "--ids", "1,x", "--reason", "r"}, op...), exitUsage, []string{`"x" is not a task ID`}},
	})
}

// commandCase is a command line of a test, its exit status, and what it prints.
type commandCase struct {
	args []string
	code int
	want []string // in stdout when the status is 0, else in stderr
}

// runCommands runs each command in turn, in-process.
func runCommands(t *testing.T, cs []commandCase) {
	t.Helper()
	for _, c := range cs {
		code, stdout, stderr := runAx(t, c.args...)
		out := stderr
		if c.code == exitOK {
			out = stdout
		}
		for _, w := range c.want {
			if code != c.code || !strings.Contains(out, w) {
				t.Errorf("ax %s: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d with %q", strings.Join(c.args, " "), code, stdout, stderr, c.code, w)
				break
			}
		}
	}
}
