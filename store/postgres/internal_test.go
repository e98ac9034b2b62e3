package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store"
)

func TestWiden(t *testing.T) {
	const span = int64(1) << 31
	for _, c := range []struct{ full, ref int64 }{
		{0, 0}, {5, 9}, {100, 100}, {span - 1, span + 3}, {span + 2, span - 5},
		{7*span + 12345, 7*span + 99999}, {7*span - 3, 7*span + 1000}, {1 << 40, 1<<40 + 1<<29},
	} {
		if got := widen(c.full&(span-1), c.ref); got != c.full {
			t.Errorf("widen(%d mod 2^31, ref %d) = %d, want %d", c.full, c.ref, got, c.full)
		}
	}
}

func TestRetryable(t *testing.T) {
	for code, want := range map[string]bool{
		"40P01": true, "40001": true, // rolled back
		"57P03": true, "25006": true, // never began: a server starting, a read-only one
		"23505": false, "57014": false, // a duplicate, a statement cancelled
		"57P01": false, "08006": false, // the connection lost: the outcome unknown
	} {
		err := fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: code})
		if got := retryable(err); got != want {
			t.Errorf("retryable(%s) = %t, want %t", code, got, want)
		}
	}
	if retryable(errors.New("x")) {
		t.Error("retryable(plain error) = true")
	}
	if retryable(io.ErrUnexpectedEOF) {
		t.Error("retryable(unexpected EOF) = true: the outcome of a lost connection is unknown")
	}
}

// A failed connect began nothing, so the store's retry runs the attempt again: a
// store whose server comes back within its retries (a failover's last moments)
// answers instead of failing. Here the server never comes back (a port nothing
// listens on), and the error is still the connect's, after maxAttempts tries.
func TestRetryAfterAFailedConnect(t *testing.T) {
	s, err := Open(context.Background(), servicetest.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ce *pgconn.ConnectError
	if !retryable(fmt.Errorf("acquire: %w", &pgconn.ConnectError{Config: &pgconn.Config{}})) {
		t.Fatal("retryable(ConnectError) = false")
	}
	attempts := 0
	err = s.retry(context.Background(), "op", func() error {
		attempts++
		_, err := pgx.Connect(context.Background(), "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=1")
		return err
	})
	if !errors.As(err, &ce) || attempts != maxAttempts {
		t.Errorf("retry of a connect that always fails: %d attempts, err %v; want %d attempts and the ConnectError", attempts, err, maxAttempts)
	}
}

// A write refused by a read-only server (25006: a standby reached through a stale
// connection or a DSN that does not pick the primary) is retried, each time on
// connections opened anew: the pool is reset.
func TestReadOnlyResetsThePool(t *testing.T) {
	dsn := servicetest.PostgresDSN(t)
	s, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Now(context.Background()); err != nil { // a connection in the pool
		t.Fatal(err)
	}
	before := s.pool.pool.Stat().NewConnsCount()
	ctx := context.Background()
	attempts := 0
	err = s.retry(ctx, "insert", func() error {
		attempts++
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `SET TRANSACTION READ ONLY`); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO ax_names (namespace, name) VALUES ('ro', 'ro')`)
		return err
	})
	if !readOnly(err) || attempts != maxAttempts {
		t.Fatalf("a write in a read-only transaction: %d attempts, err %v; want %d attempts ending 25006", attempts, err, maxAttempts)
	}
	if opened := s.pool.pool.Stat().NewConnsCount() - before; opened < maxAttempts-1 {
		t.Errorf("%d connections opened over %d attempts refused as read-only, want one after each reset", opened, attempts)
	}
}

func TestChannelName(t *testing.T) {
	if got := channelName("ax_test_1"); got != "ax_ax_test_1" {
		t.Errorf("channelName = %q", got)
	}
	long := fmt.Sprintf("%063d", 0)
	if got := channelName(long); len(got) > 63 || got == channelName(long[1:]+"1") {
		t.Errorf("channelName(63 bytes) = %q: too long, or not distinct", got)
	}
}

func TestKeyLocks(t *testing.T) {
	for _, schema := range []string{"public", "ax", "ax_test_1"} {
		if c := keyLockClass(schema); c >= 0 {
			t.Errorf("keyLockClass(%q) = %d, want negative (refill lock classes are not)", schema, c)
		}
	}
	ids := keyLockIDs(store.DefaultNamespace, []string{"b", "a", "c", "a"})
	if len(ids) != 3 || !slices.IsSorted(ids) {
		t.Errorf("keyLockIDs(b, a, c, a) = %v, want 3 ids ascending", ids)
	}
	// A key is per namespace: one key of two namespaces is two locks, and the
	// namespace and key do not run into each other.
	if keyLockID("a", "k") == keyLockID("b", "k") || keyLockID("a", "bk") == keyLockID("ab", "k") {
		t.Error("keyLockID: one lock for two namespaces' keys")
	}
}

// TestClaimWaitsForKeyLock: a keyed claim waits for the key's lock, and then sees
// what the transaction that held it committed: here a task of the key moved to
// RUNNING, so the claimed task is blocked.
func TestClaimWaitsForKeyLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openInternal(t)
	now, err := s.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ins, err := s.Insert(ctx, []store.NewTask{
		{Name: "n", Key: "holder", DueAt: now.Add(-time.Minute), TaskKey: "k", Overlap: store.OverlapQueue},
		{Name: "n", Key: "waiter", DueAt: now.Add(-time.Minute), TaskKey: "k", Overlap: store.OverlapQueue},
	})
	if err != nil {
		t.Fatal(err)
	}
	holder, waiter := ins[0].Task.ID, ins[1].Task.ID
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1::int4, $2::int4)`, s.keyLock, keyLockID(store.DefaultNamespace, "k")); err != nil {
		t.Fatal(err)
	}
	done := make(chan *store.ClaimResult, 1)
	go func() {
		res, err := s.Claim(ctx, store.Fence{}, []store.Claim{{ID: waiter, ExecutionID: "e-waiter"}})
		if err != nil {
			t.Errorf("Claim: %v", err)
		}
		done <- res
	}()
	waitBlocking(t, tx)
	select {
	case res := <-done:
		t.Fatalf("Claim returned %+v while the key's lock was held, want it to wait", res)
	default:
	}
	if _, err := tx.Exec(ctx, `UPDATE ax_tasks SET status = 'RUNNING', execution_id = 'e-holder' WHERE id = $1`, holder); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res == nil || len(res.Claimed) != 0 || len(res.Blocked) != 1 || res.Blocked[0].ID != waiter {
			t.Errorf("Claim after the holder committed = %+v, want task %d blocked", res, waiter)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Claim still waiting 10s after the key's lock was released")
	}
}

// waitBlocking waits, up to 10s, until another session waits for a lock that tx
// holds.
func waitBlocking(t *testing.T, tx pgx.Tx) {
	t.Helper()
	ctx := context.Background()
	pid := tx.Conn().PgConn().PID()
	for deadline := time.Now().Add(10 * time.Second); ; {
		// pg_locks, not pg_stat_activity, which a transaction reads once and keeps.
		var blocked bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l
			WHERE NOT l.granted AND $1::int4 = ANY(pg_blocking_pids(l.pid)))`, int32(pid)).Scan(&blocked); err != nil {
			t.Fatalf("read the sessions blocked by %d: %v", pid, err)
		}
		if blocked {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session waited for a lock of session %d within 10s", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestKeyLockPerNamespace: task keys are per namespace. A claim of key k in one
// namespace neither waits for the lock of k held in another nor sees the other's
// holder of k; in its own namespace the holder still blocks it.
func TestKeyLockPerNamespace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openInternal(t)
	v, err := s.InNamespace("other")
	if err != nil {
		t.Fatal(err)
	}
	other := v.(*Store)
	now, err := s.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	due := now.Add(-time.Minute)
	keyed := func(key string) store.NewTask {
		return store.NewTask{Name: "n", Key: key, DueAt: due, TaskKey: "k", Overlap: store.OverlapQueue}
	}
	ins, err := s.Insert(ctx, []store.NewTask{keyed("holder"), keyed("waiter")})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := s.Claim(ctx, store.Fence{}, []store.Claim{{ID: ins[0].Task.ID, ExecutionID: "e-holder"}}); err != nil || len(res.Claimed) != 1 {
		t.Fatalf("Claim(holder) = %+v, %v", res, err)
	}
	oins, err := other.Insert(ctx, []store.NewTask{keyed("holder")})
	if err != nil {
		t.Fatal(err)
	}
	// The default namespace's lock of k, held as a claim in flight holds it.
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1::int4, $2::int4)`, s.keyLock, keyLockID(s.ns, "k")); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := other.Claim(cctx, store.Fence{}, []store.Claim{{ID: oins[0].Task.ID, ExecutionID: "e-other"}})
	if err != nil || len(res.Claimed) != 1 {
		t.Fatalf("Claim of k in another namespace while the default's k is locked and held = %+v, %v; want it claimed at once", res, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = s.Claim(ctx, store.Fence{}, []store.Claim{{ID: ins[1].Task.ID, ExecutionID: "e-waiter"}})
	if err != nil || len(res.Blocked) != 1 || res.Blocked[0].ID != ins[1].Task.ID {
		t.Fatalf("Claim(waiter) in the default namespace = %+v, %v; want it blocked by its own namespace's holder", res, err)
	}
}

// openInternal opens a store on a fresh schema, closed when the test ends.
func openInternal(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), servicetest.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// slowCommits makes every COMMIT that inserted a task in s's schema take d, as a
// COMMIT waiting for a synchronous standby does: a deferred constraint trigger sleeps.
func slowCommits(t *testing.T, s *Store, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []string{
		fmt.Sprintf(`CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN PERFORM pg_sleep(%f); RETURN NULL; END $$`, d.Seconds()),
		`CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON ax_tasks
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()`,
	} {
		if _, err := s.pool.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
}

// A deadline that fires while a write's COMMIT runs does not cut it: the COMMIT has
// commitGrace more, and the write is answered, committed. Before, pgx closed the
// connection and sent a cancel request, which aborted the commit — or, for one
// waiting on a synchronous standby, kept it locally unreplicated — and the caller
// could not know which.
func TestCommitOutlivesTheDeadline(t *testing.T) {
	t.Parallel()
	s, err := Open(context.Background(), servicetest.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	slowCommits(t, s, 500*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	ins, err := s.Insert(ctx, []store.NewTask{{Name: "job", Key: "slow", DueAt: time.Now().Add(time.Hour)}})
	if err != nil {
		t.Fatalf("Insert with a COMMIT slower than its deadline: %v; want it answered", err)
	}
	if got, err := s.Get(context.Background(), ins[0].Task.ID); err != nil || got.Key != "slow" {
		t.Errorf("Get(%d) = %v, %v; want the task committed", ins[0].Task.ID, got, err)
	}
}

// A COMMIT still unanswered the grace past the deadline has its connection cut, the
// error says the outcome is unknown, and no cancel request reaches the server, which
// goes on and commits: with pgx's cancel request, the COMMIT's deferred trigger
// would be cancelled and the transaction rolled back (and a COMMIT waiting for a
// synchronous standby kept locally, unreplicated: TestClusterCommitWaitingOnStandby).
func TestCommitPastTheGraceIsUnknown(t *testing.T) {
	t.Parallel()
	const grace = 200 * time.Millisecond
	s, err := Open(context.Background(), servicetest.PostgresDSN(t), WithCommitGrace(grace))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	slowCommits(t, s, grace+time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = s.Insert(ctx, []store.NewTask{{Name: "job", Key: "slower", DueAt: time.Now().Add(time.Hour)}})
	if err == nil || !strings.Contains(err.Error(), "outcome unknown") {
		t.Errorf("Insert whose COMMIT outlasts the grace: %v; want an error saying the outcome is unknown", err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		var n int
		if err := s.pool.pool.QueryRow(context.Background(), `SELECT count(*) FROM ax_tasks WHERE key = 'slower'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the COMMIT cut past the grace never committed: a cancel request reached the server")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Open's connections, and those of a pool from PoolConfig, send no cancel request
// while they commit; a pool of the caller's own is used as it is.
func TestCommittingConnectionsAreMarked(t *testing.T) {
	t.Parallel()
	dsn := servicetest.PostgresDSN(t)
	ctx := context.Background()
	cfg, err := PoolConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close()
	plain, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	for _, c := range []struct {
		name string
		pool *pgxpool.Pool
		want bool
	}{{"PoolConfig's", ours, true}, {"pgxpool.New's", plain, false}} {
		conn, err := c.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		nc := marked(conn.Conn().PgConn())
		if (nc != nil) != c.want {
			t.Errorf("%s connection marked: %t, want %t", c.name, nc != nil, c.want)
		}
		if nc != nil {
			nc.committing.Store(true)
			if got := nc.RemoteAddr().Network(); got != noCancelNetwork {
				t.Errorf("a committing connection's remote network is %q, want %q", got, noCancelNetwork)
			}
			if _, err := cfg.ConnConfig.DialFunc(ctx, nc.RemoteAddr().Network(), nc.RemoteAddr().String()); !errors.Is(err, errNoCancel) {
				t.Errorf("dialling a committing connection's remote address: %v, want errNoCancel", err)
			}
			nc.committing.Store(false)
			if got := nc.RemoteAddr().Network(); got != "tcp" {
				t.Errorf("a connection done committing has remote network %q, want tcp", got)
			}
		}
		conn.Release()
	}
	for _, bad := range []Option{WithCommitGrace(0), WithCommitGrace(-time.Second)} {
		if _, err := Open(ctx, dsn, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Open with a grace not positive: %v, want ErrInvalid", err)
		}
	}
	if _, err := PoolConfig("postgres://[::1"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("PoolConfig of a bad DSN: %v, want ErrInvalid", err)
	}
}

func TestUnknownOutcome(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "57P01"}, true}, {&pgconn.PgError{Code: "08006"}, true},
		{io.ErrUnexpectedEOF, true}, {fmt.Errorf("read: %w", io.EOF), true},
		{&pgconn.PgError{Code: "23505"}, false}, {&pgconn.PgError{Code: "25006"}, false}, // refused: nothing written
		{&pgconn.ConnectError{Config: &pgconn.Config{}}, false}, // never began
		{errors.New("the database drew too few ids"), false},
	} {
		if got := unknownOutcome(c.err); got != c.want {
			t.Errorf("unknownOutcome(%v) = %t, want %t", c.err, got, c.want)
		}
	}
}

// A write that meets a server gone (class 08, 57P0x, a connection closed under it)
// drops the pool's connections, as a read-only one does: the others most likely lead
// to the same server. Its outcome is unknown, so it is not retried.
func TestServerGoneResetsThePool(t *testing.T) {
	t.Parallel()
	s, err := Open(context.Background(), servicetest.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, gone := range []error{&pgconn.PgError{Code: "57P01"}, &pgconn.PgError{Code: "08006"}, io.ErrUnexpectedEOF} {
		if _, err := s.Now(context.Background()); err != nil { // a connection in the pool
			t.Fatal(err)
		}
		if n := s.pool.pool.Stat().IdleConns(); n == 0 {
			t.Fatal("no idle connection in the pool")
		}
		attempts := 0
		err := s.retry(context.Background(), "op", func() error { attempts++; return gone })
		if attempts != 1 || !errors.Is(err, gone) || !strings.Contains(err.Error(), "outcome unknown") {
			t.Errorf("%v: %d attempts, err %v; want one attempt, its outcome unknown", gone, attempts, err)
		}
		if n := s.pool.pool.Stat().IdleConns(); n != 0 {
			t.Errorf("%v: %d idle connections left in the pool, want it reset", gone, n)
		}
	}
}
