package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"testing/iotest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store"
)

// TestBulkInsertWithoutTempPrivilege: a role that may not create temporary tables (the
// TEMPORARY privilege revoked from PUBLIC on its database, a common hardening) inserts
// batches above the COPY threshold: the COPY goes straight into ax_tasks. (It went
// through a temporary staging table before, and such a role fell back to the arrays.)
func TestBulkInsertWithoutTempPrivilege(t *testing.T) {
	t.Parallel()
	servicetest.PostgresDSN(t) // skips, or fails under AX_REQUIRE_SERVICES, without the server
	base := os.Getenv("AX_TEST_POSTGRES_DSN")
	if base == "" {
		base = servicetest.DefaultPostgresDSN
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := servicetest.Name()
	admin := func(dsn string, stmts ...string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		for _, stmt := range stmts {
			if _, err := conn.Exec(ctx, stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
	}
	admin(base, "CREATE DATABASE "+name, "REVOKE TEMPORARY ON DATABASE "+name+" FROM PUBLIC", "CREATE ROLE "+name+" LOGIN")
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), base)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(context.Background())
		for _, stmt := range []string{"DROP DATABASE " + name + " WITH (FORCE)", "DROP ROLE " + name} {
			if _, err := conn.Exec(context.Background(), stmt); err != nil {
				t.Errorf("%s: %v", stmt, err)
			}
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("AX_TEST_POSTGRES_DSN is not a URL: %v", err)
	}
	u.Path = "/" + name
	admin(u.String(), "CREATE SCHEMA ax AUTHORIZATION "+name)
	u.User = url.User(name)
	q := u.Query()
	q.Set("search_path", "ax")
	u.RawQuery = q.Encode()

	st, err := Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	bulkRounds(ctx, t, st)
}

// bulkRounds inserts 20 new tasks into st twice, above a COPY threshold lowered to
// 10, and checks every answer, and that the rows were copied (copiedRows).
func bulkRounds(ctx context.Context, t *testing.T, st *Store) {
	t.Helper()
	st.copyThreshold = 10
	for round := range 2 {
		var tasks []store.NewTask
		for i := range 20 {
			tasks = append(tasks, store.NewTask{Name: "bulk", Key: fmt.Sprintf("%d-%d", round, i), DueAt: time.Now().Add(time.Hour)})
		}
		res, err := st.Insert(ctx, tasks)
		if err != nil {
			t.Fatalf("round %d: Insert of %d tasks: %v", round, len(tasks), err)
		}
		for i, r := range res {
			if r.Err != nil || r.Task == nil || r.Task.Key != tasks[i].Key {
				t.Fatalf("round %d: result %d = %+v", round, i, r)
			}
		}
		if copied := copiedRows(ctx, t, st, fmt.Sprintf("%d-%%", round)); copied != len(tasks) {
			t.Fatalf("round %d: %d of %d rows were copied (id = seq)", round, copied, len(tasks))
		}
	}
}

// copiedRows counts the tasks in st whose key is LIKE keys and that were written by a
// COPY: a copied row's id is its refill stamp, one value of ax_seq, where the arrays
// draw the two apart.
func copiedRows(ctx context.Context, t *testing.T, st *Store, keys string) int {
	t.Helper()
	var n int
	if err := st.pool.QueryRow(ctx, `SELECT count(*) FROM ax_tasks WHERE key LIKE $1 AND id = seq`, keys).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBulkInsertWithOnlyTablePrivileges: a role granted what ax's statements need on
// the tables and USAGE on ax_seq, nothing else, inserts in bulk by COPY, which draws
// its ids from ax_seq (schema v9). (Before v9 the ids came from the identity column's
// own sequence, and such a role fell back to the arrays.)
func TestBulkInsertWithOnlyTablePrivileges(t *testing.T) {
	t.Parallel()
	dsn := servicetest.PostgresDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	owner, err := Open(ctx, dsn) // migrates the schema as its owner
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	schema, role := u.Query().Get("search_path"), servicetest.Name()
	for _, stmt := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"GRANT USAGE ON SCHEMA " + schema + " TO " + role,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA " + schema + " TO " + role,
		"GRANT USAGE ON SEQUENCE " + schema + ".ax_seq TO " + role,
	} {
		if _, err := owner.pool.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() { // after owner.Close: on a connection of its own
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(context.Background())
		for _, stmt := range []string{"DROP OWNED BY " + role, "DROP ROLE " + role} {
			if _, err := conn.Exec(context.Background(), stmt); err != nil {
				t.Errorf("%s: %v", stmt, err)
			}
		}
	})
	u.User = url.User(role)
	st, err := Open(ctx, u.String()) // a schema up to date: no migration, no CREATE privilege needed
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	bulkRounds(ctx, t, st)
}

// TestCopyRoundTrip: every column a bulk insert's COPY writes reads back as the same
// task as the arrays write it (and as the Insert answered), over the values the
// store's own encoding must get right: NULL, empty and binary payloads, text beyond
// ASCII, retry delays, a key window, task keys, times before PostgreSQL's epoch of
// 2000, far ahead, in another zone and below the microsecond, the integer column's
// limit. A MaxRetry beyond that limit is ErrInvalid and writes nothing.
func TestCopyRoundTrip(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := openInternal(t)
	st.copyThreshold = 2
	zone := time.FixedZone("UTC-7", -7*3600)
	base := time.Date(2031, 5, 6, 7, 8, 9, 123456789, zone)
	tasks := []store.NewTask{
		{Name: "copy", Key: "plain", DueAt: base},
		{Name: "copy", Key: "empty-payload", DueAt: base, Payload: []byte{}},
		{Name: "copy", Key: "binary-payload", DueAt: base, Payload: []byte{0, 1, 0xff, '\n', 0}},
		{Name: "cöpy ✓", Key: "ключ 🗝", DueAt: base, OwnerService: "bílling"},
		{Name: "copy", Key: "before-2000", DueAt: time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.UTC)},
		{Name: "copy", Key: "before-1970", DueAt: time.Date(1969, 7, 20, 20, 17, 40, 500, time.UTC)},
		{Name: "copy", Key: "far", DueAt: time.Date(2999, 1, 1, 0, 0, 0, 1000, time.UTC)},
		{Name: "copy", Key: "options", DueAt: base, MaxRetry: math.MaxInt32, Timeout: 1500*time.Millisecond + 999,
			Backoff: []time.Duration{time.Second, 90 * time.Minute, 1234567891}},
		{Name: "copy", Key: "one-delay", DueAt: base, Backoff: []time.Duration{time.Microsecond}},
		{Name: "copy", Key: "keyed", DueAt: base, TaskKey: "tenant-7", Overlap: store.OverlapQueue, KeyHold: store.HoldForever},
		{Name: "copy", Key: "window", DueAt: base, KeyHold: store.HoldActive, KeyUntil: base.Add(36*time.Hour + 999)},
		{Name: "copy", Key: "traced", DueAt: base, Trace: "traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01&tracestate=ä%3D1"},
	}
	for i := range 3 { // rows across the reader's 64 KiB chunks
		tasks = append(tasks, store.NewTask{Name: "copy", Key: fmt.Sprintf("large-%d", i), DueAt: base, Payload: bytes.Repeat([]byte{byte('a' + i)}, 40<<10)})
	}
	for _, col := range copyColumns {
		var typ string
		if err := st.pool.QueryRow(ctx, `SELECT format_type(atttypid, atttypmod) FROM pg_attribute
			WHERE attrelid = 'ax_tasks'::regclass AND attname = $1 AND NOT attisdropped`, col.name).Scan(&typ); err != nil {
			t.Fatalf("column %s: %v", col.name, err)
		}
		if typ != col.typ {
			t.Errorf("column %s is %s; the COPY encodes it as %s", col.name, typ, col.typ)
		}
	}
	copied, err := st.Insert(ctx, tasks)
	if err != nil {
		t.Fatal(err)
	}
	if viaCopy := copiedRows(ctx, t, st, "%"); viaCopy != len(tasks) {
		t.Fatalf("%d of %d tasks were copied", viaCopy, len(tasks))
	}
	// The same tasks under other keys, through the arrays.
	st.copyThreshold = math.MaxInt
	again := slices.Clone(tasks)
	for i := range again {
		again[i].Key += "/arrays"
	}
	bound, err := st.Insert(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	for i := range tasks {
		c, b := copied[i], bound[i]
		if c.Err != nil || b.Err != nil {
			t.Fatalf("task %q: results %v and %v", tasks[i].Key, c.Err, b.Err)
		}
		gc, err := st.Get(ctx, c.Task.ID)
		if err != nil {
			t.Fatal(err)
		}
		gb, err := st.Get(ctx, b.Task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(gc, c.Task) {
			t.Errorf("task %q as copied reads back as\n%+v\nnot as Insert answered\n%+v", tasks[i].Key, gc, c.Task)
		}
		gb.ID, gb.Key, gb.CreatedAt, gb.UpdatedAt = gc.ID, gc.Key, gc.CreatedAt, gc.UpdatedAt
		if !reflect.DeepEqual(gc, gb) {
			t.Errorf("task %q as copied reads back as\n%+v\nnot as the arrays write it\n%+v", tasks[i].Key, gc, gb)
		}
	}

	if strconv.IntSize < 64 {
		return // no int beyond the integer column
	}
	st.copyThreshold = 2
	limit := int64(math.MaxInt32)
	for _, n := range []int64{limit + 1, -limit - 2} {
		over := []store.NewTask{{Name: "copy", Key: "over-1", DueAt: base}, {Name: "copy", Key: "over-2", DueAt: base, MaxRetry: int(n)}}
		if _, err := st.Insert(ctx, over); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("Insert with MaxRetry %d: %v, want ErrInvalid", n, err)
		}
		if _, err := st.Lookup(ctx, "copy", "over-1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("after the refused Insert, Lookup(over-1): %v, want ErrNotFound", err)
		}
	}
}

// TestCopyReader: the encoded rows read alike whatever the sizes of the reads, begin
// with COPY's signature and end with its trailer, and a read after the end is io.EOF.
func TestCopyReader(t *testing.T) {
	var tasks []store.NewTask
	for i := range 700 { // about 100 KiB: two chunks
		tasks = append(tasks, store.NewTask{Name: "copy", Key: strconv.Itoa(i), DueAt: time.Now(), Backoff: []time.Duration{time.Second}})
	}
	in, err := newInsertion("insert", "default", tasks)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(tasks))
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	now := time.Now()
	want, err := io.ReadAll(newCopyReader(in, ids, now))
	if err != nil {
		t.Fatal(err)
	}
	if len(want) <= copyChunk || !bytes.HasPrefix(want, []byte(copyHeader)) || !bytes.HasSuffix(want, []byte{0xff, 0xff}) {
		t.Fatalf("%d bytes, beginning %q, ending %x: want more than one chunk, the signature and the trailer", len(want), want[:min(len(want), 19)], want[max(0, len(want)-2):])
	}
	if err := iotest.TestReader(newCopyReader(in, ids, now), want); err != nil {
		t.Fatal(err)
	}
	r := newCopyReader(in, ids, now)
	if got, err := io.ReadAll(iotest.OneByteReader(r)); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read a byte at a time: %d bytes, %v; want the %d bytes", len(got), err, len(want))
	}
	if n, err := r.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Fatalf("Read after the end = %d, %v; want 0, io.EOF", n, err)
	}
}
