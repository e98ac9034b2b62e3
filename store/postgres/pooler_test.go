package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/postgres"
	"github.com/axsched/ax/store/storetest"
)

// poolerSize is the server connections of the PgBouncer the conformance suite runs
// through: more than its parallel subtests hold at once.
const poolerSize = 20

// TestStoreThroughPgBouncer runs the conformance suite on stores opened through
// PgBouncer in transaction mode, each on a fresh schema of its own named by
// WithPooler: its DSN's search_path, a startup parameter, the PgBouncer drops.
func TestStoreThroughPgBouncer(t *testing.T) {
	b := servicetest.StartPgBouncer(t, poolerSize)
	storetest.Run(t, func(t *testing.T) store.Store {
		st, _ := openPooled(t, b)
		return st
	})
}

// TestBulkInsertThroughPgBouncer runs the suite's inserts through COPY (copy.go),
// whatever their size, through PgBouncer in transaction mode.
func TestBulkInsertThroughPgBouncer(t *testing.T) {
	b := servicetest.StartPgBouncer(t, poolerSize)
	storetest.RunInsert(t, func(t *testing.T) store.Store {
		st, _ := openPooled(t, b)
		postgres.SetCopyThreshold(st, 1)
		return st
	})
}

// openPooled opens a store through b on a fresh schema, with Listen on a direct
// connection, closed when the test ends.
func openPooled(t *testing.T, b *servicetest.PgBouncer) (*postgres.Store, servicetest.PooledSchema) {
	t.Helper()
	s := b.Schema(t)
	st, err := postgres.Open(context.Background(), s.Pooled, postgres.WithPooler(s.Name), postgres.WithListenDSN(s.Direct))
	if err != nil {
		t.Fatalf("Open through PgBouncer: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st, s
}

// Two stores on two schemas, through a PgBouncer of one server connection, share one
// server session, on which a third client leaves its own search_path and the
// stores' DSNs name each other's schema: each still writes and reads its own schema
// only, and leaves no setting of its own on the session.
func TestPoolerSharesServerSession(t *testing.T) {
	t.Parallel()
	b := servicetest.StartPgBouncer(t, 1)
	ctx := context.Background()
	sa, sb := b.Schema(t), b.Schema(t)
	open := func(own, other servicetest.PooledSchema) *postgres.Store {
		t.Helper()
		st, err := postgres.Open(ctx, b.DSN(url.Values{"search_path": {other.Name}}), postgres.WithPooler(own.Name))
		if err != nil {
			t.Fatalf("Open(WithPooler(%s)): %v", own.Name, err)
		}
		t.Cleanup(func() { st.Close() })
		postgres.SetCopyThreshold(st, 5) // the inserts of 5 below go through COPY
		return st
	}
	stA, stB := open(sa, sb), open(sb, sa)

	// The third client sets search_path for the session: the pooler's one server
	// session keeps it for whoever comes next.
	rogue, err := pgx.Connect(ctx, b.DSN(url.Values{"default_query_exec_mode": {"exec"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer rogue.Close(ctx)
	setPath := func(s servicetest.PooledSchema) {
		t.Helper()
		if _, err := rogue.Exec(ctx, "SET search_path = "+pgx.Identifier{s.Name}.Sanitize()); err != nil {
			t.Fatal(err)
		}
	}
	setPath(sb)

	// Interleaved writes, alone and in pairs, single rows and COPY, then the
	// execution path on each: every statement shares the server session.
	const rounds = 10
	var wg sync.WaitGroup
	for i := range rounds {
		if i == rounds/2 {
			setPath(sa)
		}
		for _, st := range []*postgres.Store{stA, stB} {
			wg.Go(func() {
				prefix := "a"
				if st == stB {
					prefix = "b"
				}
				var batch []store.NewTask
				for k := range 5 {
					batch = append(batch, store.NewTask{Name: "n", Key: fmt.Sprintf("%s-%d-%d", prefix, i, k), DueAt: time.Now().Add(-time.Second)})
				}
				for _, ts := range [][]store.NewTask{batch[:1], batch} {
					if res, err := st.Insert(ctx, ts); err != nil || len(res) != len(ts) {
						t.Errorf("Insert(%d tasks of %s) = %d, %v", len(ts), prefix, len(res), err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	for _, c := range []struct {
		st     *postgres.Store
		s      servicetest.PooledSchema
		prefix string
	}{{stA, sa, "a-"}, {stB, sb, "b-"}} {
		tasks, err := c.st.Tasks(ctx, store.TaskQuery{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) != rounds*5 {
			t.Errorf("%s: %d tasks, want %d", c.s.Name, len(tasks), rounds*5)
		}
		var claims []store.Claim
		for _, task := range tasks {
			if !strings.HasPrefix(task.Key, c.prefix) {
				t.Errorf("%s: task %d has key %q, not one of its own (%s…)", c.s.Name, task.ID, task.Key, c.prefix)
			}
			claims = append(claims, store.Claim{ID: task.ID, ExecutionID: "x-" + task.Key, Start: true})
		}
		res, err := c.st.ClaimStart(ctx, store.Fence{}, store.StartOn{Node: "n", Handlers: []string{"n"}}, claims)
		if err != nil || len(res.Started) != len(claims) {
			t.Fatalf("%s: ClaimStart of %d = %d started, %v", c.s.Name, len(claims), len(res.Started), err)
		}
		// What PostgreSQL holds, read straight from the schema.
		direct := newPool(t, c.s.Direct)
		var n, own int
		if err := direct.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE starts_with(key, $1) AND status = 'RUNNING') FROM ax_tasks`, c.prefix).Scan(&n, &own); err != nil {
			t.Fatal(err)
		}
		if n != rounds*5 || own != n {
			t.Errorf("%s.ax_tasks: %d rows, %d of them its own and RUNNING; want %d, all", c.s.Name, n, own, rounds*5)
		}
	}

	// The session kept the third client's search_path and none of the stores'
	// transaction-local settings; it was the only server connection.
	var path, plans string
	if err := rogue.QueryRow(ctx, "SELECT current_setting('search_path'), current_setting('plan_cache_mode')").Scan(&path, &plans); err != nil {
		t.Fatal(err)
	}
	if path != sa.Name || plans != "auto" {
		t.Errorf("the session's search_path %q, plan_cache_mode %q; want %q, auto", path, plans, sa.Name)
	}
	if n := pgbouncerServers(t, b); n != 1 {
		t.Errorf("PgBouncer has %d server connections, want 1", n)
	}
}

// pgbouncerServers counts b's server connections (SHOW SERVERS).
func pgbouncerServers(t *testing.T, b *servicetest.PgBouncer) int {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, b.AdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	rows, err := admin.Query(ctx, "SHOW SERVERS")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// Listen through a PgBouncer: on WithListenDSN's direct connection it hears what
// transactions through the PgBouncer notify, the store's own and the caller's; without
// it, it listens to nothing and returns when ctx ends.
func TestListenThroughPgBouncer(t *testing.T) {
	t.Parallel()
	b := servicetest.StartPgBouncer(t, 4)
	ctx := context.Background()

	t.Run("ListenDSN", func(t *testing.T) {
		t.Parallel()
		st, s := openPooled(t, b)
		direct := newPool(t, s.Direct)
		lctx, cancel := context.WithCancel(ctx)
		defer cancel()
		signals := make(chan store.Signal, 16)
		listened := make(chan error, 1)
		go func() { listened <- st.Listen(lctx, func(sig store.Signal) { signals <- sig }) }()
		waitListeners(t, direct, st.Channel(), 1)

		expect := func(what string) {
			t.Helper()
			select {
			case sig := <-signals:
				if sig != store.SignalWork {
					t.Errorf("after %s: signal %v, want SignalWork", what, sig)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("no signal within 10s of %s", what)
			}
		}
		if _, err := st.Insert(ctx, []store.NewTask{{Name: "n", Key: "own", DueAt: time.Now()}}); err != nil {
			t.Fatal(err)
		}
		expect("an Insert through the PgBouncer")

		// The caller's transaction, through the PgBouncer, notifies when it commits.
		pool := pooledPool(t, s)
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := bind(t, st, tx).Insert(ctx, []store.NewTask{{Name: "n", Key: "bound", DueAt: time.Now()}}); err != nil {
			t.Fatal(err)
		}
		if len(signals) != 0 {
			t.Errorf("a signal before the caller's transaction committed")
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		expect("a bound Insert's commit through the PgBouncer")

		cancel()
		if err := <-listened; err != nil {
			t.Errorf("Listen after ctx ended = %v, want nil", err)
		}
		waitListeners(t, direct, st.Channel(), 0)
		go func() { listened <- st.Listen(ctx, func(store.Signal) {}) }()
		waitListeners(t, direct, st.Channel(), 1)
		st.Close()
		if err := <-listened; !errors.Is(err, store.ErrClosed) {
			t.Errorf("Listen after Close = %v, want ErrClosed", err)
		}
	})

	t.Run("PollOnly", func(t *testing.T) {
		t.Parallel()
		s := b.Schema(t)
		st, err := postgres.Open(ctx, s.Pooled, postgres.WithPooler(s.Name))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		direct := newPool(t, s.Direct)
		lctx, cancel := context.WithCancel(ctx)
		var calls atomic.Int64
		listened := make(chan error, 1)
		go func() { listened <- st.Listen(lctx, func(store.Signal) { calls.Add(1) }) }()
		if _, err := st.Insert(ctx, []store.NewTask{{Name: "n", Key: "k", DueAt: time.Now()}}); err != nil {
			t.Fatal(err)
		}
		waitListeners(t, direct, st.Channel(), 0)
		select {
		case err := <-listened:
			t.Fatalf("poll-only Listen returned %v before ctx ended", err)
		default:
		}
		cancel()
		select {
		case err := <-listened:
			if err != nil {
				t.Errorf("poll-only Listen after ctx ended = %v, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("poll-only Listen still running 10s after ctx ended")
		}
		if n := calls.Load(); n != 0 {
			t.Errorf("poll-only Listen called f %d times", n)
		}
		go func() { listened <- st.Listen(ctx, func(store.Signal) {}) }()
		st.Close()
		select {
		case err := <-listened:
			if !errors.Is(err, store.ErrClosed) {
				t.Errorf("poll-only Listen after Close = %v, want ErrClosed", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("poll-only Listen still running 10s after Close")
		}
	})

	t.Run("ListenDSNOtherDatabase", func(t *testing.T) {
		t.Parallel()
		s := b.Schema(t)
		u, err := url.Parse(s.Direct)
		if err != nil || u.Scheme == "" {
			t.Skipf("AX_TEST_POSTGRES_DSN is not a URL: %q", s.Direct)
		}
		u.Path = "/postgres"
		st, err := postgres.Open(ctx, s.Pooled, postgres.WithPooler(s.Name), postgres.WithListenDSN(u.String()))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if err := st.Listen(ctx, func(store.Signal) {}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Listen on WithListenDSN of database postgres = %v, want ErrInvalid", err)
		}
	})
}

// pooledPool is a pool of the caller's through the PgBouncer of s, running
// statements as WithPooler needs.
func pooledPool(t *testing.T, s servicetest.PooledSchema) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(s.Pooled)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Bind through a PgBouncer: the caller's transaction, whose server session has
// another search_path, gets the store's schema first on it, once, and keeps the rest.
func TestBindThroughPgBouncer(t *testing.T) {
	t.Parallel()
	b := servicetest.StartPgBouncer(t, 4)
	for _, kind := range txKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st, s := openPooled(t, b)
			pool := pooledPool(t, s)
			tx, commit, _ := kind.begin(t, pool)
			q := func(query string) string {
				t.Helper()
				var v string
				var err error
				switch tx := tx.(type) {
				case pgx.Tx:
					err = tx.QueryRow(ctx, query).Scan(&v)
				case *sql.Tx:
					err = tx.QueryRowContext(ctx, query).Scan(&v)
				}
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			before := q("SELECT current_setting('search_path')")
			for range 2 { // the second Bind leaves search_path as the first set it
				res, err := bind(t, st, tx).Insert(ctx, []store.NewTask{{Name: "n", Key: "k", DueAt: time.Now()}})
				if err != nil || len(res) != 1 {
					t.Fatalf("bound Insert = %+v, %v", res, err)
				}
				want := pgx.Identifier{s.Name}.Sanitize() + ", " + before
				if got := q("SELECT current_setting('search_path')"); got != want {
					t.Errorf("search_path after Bind = %q, want %q", got, want)
				}
			}
			if err := commit(); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Lookup(ctx, "n", "k"); err != nil {
				t.Errorf("Lookup of the bound Insert after commit: %v", err)
			}
		})
	}
}

// Options: WithPooler's schema must be a name that exists; New refuses a pool that
// prepares or describes statements; a pool on the server itself, in simple protocol,
// whose search_path names another schema, works in WithPooler's schema.
func TestPoolerOptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	own, other := servicetest.PostgresDSN(t), servicetest.PostgresDSN(t)
	schemaOf := func(dsn string) string {
		u, err := url.Parse(dsn)
		if err != nil || u.Query().Get("search_path") == "" {
			t.Skipf("AX_TEST_POSTGRES_DSN is not a URL: %q", dsn)
		}
		return u.Query().Get("search_path")
	}
	ownSchema := schemaOf(own)
	invalid := func(what string, err error, mentions string) {
		t.Helper()
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), mentions) || strings.Count(err.Error(), "ax: postgres:") != 1 {
			t.Errorf("%s: error = %v; want ErrInvalid, one \"ax: postgres:\", naming %s", what, err, mentions)
		}
	}
	for _, schema := range []string{"", `a\b`, strings.Repeat("s", 64)} {
		_, err := postgres.Open(ctx, own, postgres.WithPooler(schema))
		invalid(fmt.Sprintf("Open(WithPooler(%q))", schema), err, "WithPooler")
	}
	_, err := postgres.Open(ctx, own, postgres.WithPooler(servicetest.Name()))
	invalid("Open(WithPooler(a schema that does not exist))", err, "does not exist")
	_, err = postgres.Open(ctx, own, nil)
	invalid("Open(nil Option)", err, "nil Option")
	_, err = postgres.Open(ctx, own, postgres.WithListenDSN("postgres://%zz"))
	invalid("Open(WithListenDSN(malformed))", err, "WithListenDSN")

	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec"} {
		pool := newPool(t, own+"&default_query_exec_mode="+mode)
		_, err := postgres.New(pool, postgres.WithPooler(ownSchema))
		invalid("New(pool in "+mode+", WithPooler)", err, "default_query_exec_mode")
	}

	// The pool's search_path is the other schema; the store lives in its own.
	u, _ := url.Parse(other)
	q := u.Query()
	q.Set("default_query_exec_mode", "simple_protocol")
	u.RawQuery = q.Encode()
	st, err := postgres.New(newPool(t, u.String()), postgres.WithPooler(ownSchema))
	if err != nil {
		t.Fatalf("New(pool in simple protocol on another schema, WithPooler(%s)): %v", ownSchema, err)
	}
	defer st.Close()
	if _, err := st.Insert(ctx, []store.NewTask{{Name: "n", Key: "k", DueAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Lookup(ctx, "n", "k"); err != nil {
		t.Errorf("Lookup: %v", err)
	}
	var tasks int
	var otherMigrated bool
	if err := newPool(t, own).QueryRow(ctx, `SELECT (SELECT count(*) FROM ax_tasks), to_regclass($1) IS NOT NULL`,
		pgx.Identifier{schemaOf(other), "ax_tasks"}.Sanitize()).Scan(&tasks, &otherMigrated); err != nil {
		t.Fatal(err)
	}
	if tasks != 1 || otherMigrated {
		t.Errorf("%d tasks in the store's schema, the pool's schema migrated: %v; want 1, false", tasks, otherMigrated)
	}
}

// WithPooler costs no round trip: a statement outside a transaction goes out with the
// one that sets search_path, a transaction sets it in its plans statement or its
// BEGIN. Without it, the store sends what it always sent.
func TestPoolerRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := servicetest.PostgresDSN(t)
	u, err := url.Parse(dsn)
	if err != nil || u.Query().Get("search_path") == "" {
		t.Skipf("AX_TEST_POSTGRES_DSN is not a URL: %q", dsn)
	}
	schema := u.Query().Get("search_path")
	open := func(mode pgx.QueryExecMode, opts ...postgres.Option) (*postgres.Store, *tracer) {
		t.Helper()
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		tr := &tracer{}
		cfg.ConnConfig.Tracer, cfg.ConnConfig.DefaultQueryExecMode = tr, mode
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		st, err := postgres.New(pool, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st, tr
	}
	direct, dtr := open(pgx.QueryExecModeCacheStatement)
	pooled, ptr := open(pgx.QueryExecModeExec, postgres.WithPooler(schema))
	due := dbNow(t, direct).Add(-time.Minute)
	for _, c := range []struct {
		name             string
		st               *postgres.Store
		tr               *tracer
		statementsPerGet int64
	}{{"direct", direct, dtr, 1}, {"WithPooler", pooled, ptr, 2}} {
		var id int64
		steps := []struct {
			what                   string
			do                     func() error
			roundTrips, statements int64
		}{
			{"Insert", func() error {
				res, err := c.st.Insert(ctx, []store.NewTask{{Name: "n", Key: c.name, DueAt: due}})
				if err == nil {
					id = res[0].Task.ID
				}
				return err
			}, 1, 5}, // BEGIN, plans, publish, insert, COMMIT
			{"Get", func() error { _, err := c.st.Get(ctx, id); return err }, 1, c.statementsPerGet},
			{"MakeDue", func() error { _, err := c.st.MakeDue(ctx, id); return err }, 4, 4}, // BEGIN, publish, update, COMMIT
			{"Claim", func() error {
				res, err := c.st.Claim(ctx, store.Fence{}, []store.Claim{{ID: id, ExecutionID: "e-" + c.name}})
				if err == nil && len(res.Claimed) != 1 {
					err = fmt.Errorf("claimed %d", len(res.Claimed))
				}
				return err
			}, 1, 4}, // BEGIN, plans, claim, COMMIT
		}
		for _, s := range steps {
			c.tr.take()
			if err := s.do(); err != nil {
				t.Fatalf("%s: %s: %v", c.name, s.what, err)
			}
			if rt, n := c.tr.take(); rt != s.roundTrips || n != s.statements {
				t.Errorf("%s: %s: %d round trips, %d statements; want %d, %d", c.name, s.what, rt, n, s.roundTrips, s.statements)
			}
		}
	}
}
