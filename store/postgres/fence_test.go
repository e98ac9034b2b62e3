package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store"
)

// TestWrapFenced: ax_fence's SQLSTATE becomes store.ErrFenced, with driverkit.FencedError's
// text under the driver's prefix, and is not retried.
func TestWrapFenced(t *testing.T) {
	s := &Store{shared: &shared{}, limits: &limitCache{}}
	pe := &pgconn.PgError{Code: fencedCode, Message: "fencing token 3 below epoch 7", Detail: "7 3 ns with spaces"}
	err := s.wrap("claim", fmt.Errorf("batch: %w", pe))
	want := `ax: postgres: claim: token 3 below epoch 7 of namespace "ns with spaces": fenced by a newer leader`
	if !errors.Is(err, store.ErrFenced) || err.Error() != want {
		t.Errorf("wrap(AXF01) = %q (ErrFenced %t), want %q", err, errors.Is(err, store.ErrFenced), want)
	}
	if retryable(pe) {
		t.Error("retryable(AXF01) = true, want false")
	}
	pe.Detail = "garbled"
	if err := s.wrap("claim", pe); !errors.Is(err, store.ErrFenced) {
		t.Errorf("wrap(AXF01 without its detail) = %v, want ErrFenced", err)
	}
}

// openFence opens a store on a fresh schema and records epoch 1 for "ns", held by "a".
func openFence(t *testing.T) (*Store, store.Fence) {
	t.Helper()
	s, err := Open(context.Background(), servicetest.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f, err := s.RaiseFence(context.Background(), "ns", "a", 1)
	if err != nil || f.Token != 1 {
		t.Fatalf("RaiseFence(ns, a, 1) = %+v, %v", f, err)
	}
	return s, f
}

// holdFence begins a transaction that has passed the fence check of f, and so holds
// the namespace's fence lock shared, as a fenced write in flight does.
func holdFence(t *testing.T, s *Store, f store.Fence) pgx.Tx {
	t.Helper()
	tx, err := s.pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	if _, err := tx.Exec(context.Background(), fenceSQL, f.Namespace, f.Token); err != nil {
		t.Fatalf("fence check: %v", err)
	}
	return tx
}

// waitFenceWaiters waits, up to 10s, until n sessions wait for the fence lock of ns.
func waitFenceWaiters(t *testing.T, s *Store, ns string, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		var waiting int
		if err := s.pool.QueryRow(context.Background(), `WITH k AS (SELECT hashtextextended($1, hashtext('ax fence ' || current_schema())) AS key)
			SELECT count(*) FROM pg_locks l, k WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND NOT l.granted
				AND l.classid = ((k.key >> 32) & 4294967295)::oid AND l.objid = (k.key & 4294967295)::oid`, ns).Scan(&waiting); err != nil {
			t.Fatalf("read the fence lock's waiters: %v", err)
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions waiting for the fence lock of %q after 10s, want %d", waiting, ns, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRaiseFenceWaitsForFencedWrites: RaiseFence waits for a fenced write in flight;
// a fenced write that comes while the raise waits queues behind it (a stream of
// claims cannot starve the raise) and then finds the new epoch.
func TestRaiseFenceWaitsForFencedWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, old := openFence(t)
	now, err := s.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ins, err := s.Insert(ctx, []store.NewTask{{Name: "n", Key: "k", DueAt: now.Add(-time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	task := ins[0].Task
	tx := holdFence(t, s, old)

	type raised struct {
		f   store.Fence
		err error
	}
	raise := make(chan raised, 1)
	go func() {
		f, err := s.RaiseFence(ctx, "ns", "b", 1)
		raise <- raised{f, err}
	}()
	waitFenceWaiters(t, s, "ns", 1)
	claim := make(chan error, 1)
	go func() {
		_, err := s.Claim(ctx, old, []store.Claim{{ID: task.ID, ExecutionID: "e-old"}})
		claim <- err
	}()
	waitFenceWaiters(t, s, "ns", 2)
	select {
	case r := <-raise:
		t.Fatalf("RaiseFence returned %+v, %v while a fenced write was in flight, want it to wait", r.f, r.err)
	case err := <-claim:
		t.Fatalf("Claim returned %v while a raise was waiting, want it to queue behind the raise", err)
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-raise:
		if r.err != nil || r.f != (store.Fence{Namespace: "ns", Token: 2}) {
			t.Fatalf("RaiseFence after the fenced write ended = %+v, %v; want token 2", r.f, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RaiseFence still waiting 10s after the fenced write ended")
	}
	select {
	case err := <-claim:
		if !errors.Is(err, store.ErrFenced) {
			t.Fatalf("Claim queued behind the raise: error %v, want ErrFenced", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Claim still waiting 10s after the raise")
	}
	if got, err := s.Get(ctx, task.ID); err != nil || got.Status != store.Scheduled {
		t.Fatalf("task after the fenced Claim = %+v, %v; want SCHEDULED", got, err)
	}
}

// TestLeaseAndFenceLock: renewing a lease raises no epoch and does not wait for the
// leader's fenced writes; acquiring an expired one does.
func TestLeaseAndFenceLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openFence(t)
	info, ok, err := s.AcquireLease(ctx, "ns", "h1", time.Minute)
	if err != nil || !ok || info.Epoch != 2 {
		t.Fatalf("AcquireLease(ns, h1) = %+v, %v, %v; want epoch 2", info, ok, err)
	}
	tx := holdFence(t, s, store.Fence{Namespace: "ns", Token: info.Epoch})
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if ok, err := s.RenewLease(rctx, "ns", "h1", info.Epoch, time.Minute); err != nil || !ok {
		t.Fatalf("RenewLease during a fenced write = %v, %v; want true at once", ok, err)
	}
	if ok, err := s.ReleaseLease(rctx, "ns", "h1", info.Epoch); err != nil || !ok {
		t.Fatalf("ReleaseLease during a fenced write = %v, %v; want true at once", ok, err)
	}
	type acquired struct {
		info store.LeaseInfo
		ok   bool
		err  error
	}
	acq := make(chan acquired, 1)
	go func() {
		info, ok, err := s.AcquireLease(ctx, "ns", "h2", time.Minute)
		acq <- acquired{info, ok, err}
	}()
	waitFenceWaiters(t, s, "ns", 1)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-acq:
		if a.err != nil || !a.ok || a.info.Epoch != 3 {
			t.Fatalf("AcquireLease(ns, h2) after the fenced write = %+v, %v, %v; want epoch 3", a.info, a.ok, a.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("AcquireLease still waiting 10s after the fenced write ended")
	}
}

// TestRaiseFenceWaitsWithoutRow: the fence lock exists before the namespace's row, so
// a raise that creates the row still waits for a fenced write that found none.
func TestRaiseFenceWaitsWithoutRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openFence(t)
	tx := holdFence(t, s, store.Fence{Namespace: "fresh", Token: 1}) // no row: admitted
	raise := make(chan error, 1)
	go func() {
		_, err := s.RaiseFence(ctx, "fresh", "b", 5)
		raise <- err
	}()
	waitFenceWaiters(t, s, "fresh", 1)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-raise; err != nil {
		t.Fatalf("RaiseFence(fresh) after the fenced write: %v", err)
	}
}

// TestClaimKeyedChecksFence: the keyed claim, Claim's second transaction, checks the
// fence too (a raise may come between the two).
func TestClaimKeyedChecksFence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, old := openFence(t)
	now, err := s.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ins, err := s.Insert(ctx, []store.NewTask{{Name: "n", Key: "k", DueAt: now.Add(-time.Minute), TaskKey: "k", Overlap: store.OverlapSkip}})
	if err != nil {
		t.Fatal(err)
	}
	task := ins[0].Task
	cur, err := s.RaiseFence(ctx, "ns", "b", 1)
	if err != nil {
		t.Fatal(err)
	}
	claims := []store.Claim{{ID: task.ID, ExecutionID: "e-k"}}
	if err := s.claimKeyed(ctx, old, claims, []string{"k"}, nil, nil, &store.ClaimResult{}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("claimKeyed with the old fence: error %v, want ErrFenced", err)
	}
	if got, err := s.Get(ctx, task.ID); err != nil || got.Status != store.Scheduled {
		t.Fatalf("task after a fenced keyed claim = %+v, %v; want SCHEDULED", got, err)
	}
	res := &store.ClaimResult{}
	if err := s.claimKeyed(ctx, cur, claims, []string{"k"}, nil, nil, res); err != nil || len(res.Claimed) != 1 {
		t.Fatalf("claimKeyed with the current fence = %+v, %v; want the task claimed", res, err)
	}
}

// TestTablesAreLogged: every table of the schema is logged (relpersistence 'p'). An
// UNLOGGED table is not replicated and is emptied after a crash: a failover or a crash
// of the primary would lose ax_leader's epoch, and with it the fence, and the tasks
// and executions the fence protects.
func TestTablesAreLogged(t *testing.T) {
	s, _ := openFence(t)
	rows, err := s.pool.Query(t.Context(), `SELECT c.relname, c.relpersistence FROM pg_class c
		WHERE c.relnamespace = to_regnamespace($1) AND c.relkind IN ('r', 'p', 'S') ORDER BY c.relname`, s.schema)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name, persistence string
		if err := rows.Scan(&name, &persistence); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
		if persistence != "p" {
			t.Errorf("%s has relpersistence %q, want 'p' (logged)", name, persistence)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ax_leader", "ax_tasks", "ax_executions", "ax_seq"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s is not among the schema's tables and sequences %v", want, names)
		}
	}
}
