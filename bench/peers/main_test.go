package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// services returns the PostgreSQL DSN and Redis address of the test, or skips it (fails
// it under AX_REQUIRE_SERVICES=1) if either is unreachable.
func services(t *testing.T) (pg, rd string) {
	t.Helper()
	pg = envOr("AX_TEST_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	rd = envOr("AX_TEST_REDIS_ADDR", "127.0.0.1:6379")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pg)
	if err != nil {
		unavailable(t, fmt.Sprintf("PostgreSQL unreachable at %s (set AX_TEST_POSTGRES_DSN): %v", redactDSN(pg), err))
	}
	conn.Close(ctx)
	c, err := net.DialTimeout("tcp", rd, 3*time.Second)
	if err != nil {
		unavailable(t, fmt.Sprintf("Redis unreachable at %s (set AX_TEST_REDIS_ADDR): %v", rd, err))
	}
	c.Close()
	return pg, rd
}

// testRedisDB is the test's own Redis database, not the benchmark's default (13),
// so that a test never empties a running benchmark's.
const testRedisDB = "12"

func runPeers(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(context.Background(), args, &out, &errb); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "ax/peer") || !strings.Contains(out.String(), "check: every task ran exactly once") {
		t.Fatalf("no table or no check line:\n%s", out.String())
	}
	return out.String()
}

// TestEndToEnd runs every workload but precision on every backend at a tiny scale.
func TestEndToEnd(t *testing.T) {
	pg, rd := services(t)
	defer func(d time.Duration) { idleWindow = d }(idleWindow)
	out := runPeers(t, "-runs", "1", "-scale", "0.002", "-idle", "1s", "-pg", pg, "-redis", rd, "-redis-db", testRedisDB,
		"-workloads", "enqueue-single,enqueue-batch,enqueue-batch-copy,drain-100,drain-20,idle")
	for _, b := range []string{"ax", "river-default", "river-tuned", "asynq-default", "asynq-tuned", "river-default InsertManyFast/COPY"} {
		if !strings.Contains(out, b) {
			t.Errorf("no row for %s:\n%s", b, out)
		}
	}
}

// TestPrecision runs a short precision workload on the backends that never start a
// task early (asynq keeps due times in whole seconds, so it may).
func TestPrecision(t *testing.T) {
	pg, rd := services(t)
	defer func(f, to time.Duration) { precisionFrom, precisionTo = f, to }(precisionFrom, precisionTo)
	precisionFrom, precisionTo = time.Second, 2*time.Second
	runPeers(t, "-runs", "1", "-scale", "0.01", "-pg", pg, "-redis", rd, "-redis-db", testRedisDB,
		"-workloads", "precision", "-backends", "ax,river-tuned")
}

func TestTallyCheck(t *testing.T) {
	now := time.Now()
	dues := []time.Time{now.Add(-time.Second), now.Add(time.Hour), now.Add(-time.Second), now}
	tl := newTally(4)
	tl.record(0)
	tl.record(1) // early
	tl.record(2)
	tl.record(2) // twice
	tl.record(7) // unknown
	got := strings.Join(tl.check(dues), "; ")
	for _, want := range []string{"1 tasks never ran (first keys [3])", "1 tasks ran more than once (first keys [2])",
		"1 tasks started before their due time (first keys [1])", "1 handler calls with an unknown key"} {
		if !strings.Contains(got, want) {
			t.Errorf("check() = %q, want it to contain %q", got, want)
		}
	}
}

func TestParse(t *testing.T) {
	var errb bytes.Buffer
	o, err := parse([]string{"-workloads", "idle,drain-20", "-backends", "asynq-tuned,ax", "-scale", "0.5"}, &errb)
	if err != nil {
		t.Fatal(err)
	}
	if names(o.workloads, wname) != "drain-20,idle" || names(o.backends, bname) != "ax,asynq-tuned" || o.scale != 0.5 {
		t.Errorf("parse: %s / %s / %g", names(o.workloads, wname), names(o.backends, bname), o.scale)
	}
	for _, bad := range [][]string{{"-workloads", "nope"}, {"-backends", ""}, {"-scale", "2"}, {"-runs", "0"}} {
		if _, err := parse(bad, &errb); err == nil {
			t.Errorf("parse(%q): no error", bad)
		}
	}
}

// unavailable skips the test for a service it cannot reach, or fails it when
// AX_REQUIRE_SERVICES=1 says the services must be there.
func unavailable(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("AX_REQUIRE_SERVICES") == "1" {
		t.Fatal(why)
	}
	t.Skip(why)
}
