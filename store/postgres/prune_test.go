package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/postgres"
)

// seedFinished writes n SUCCEEDED tasks of the default namespace, finished an hour
// ago, each with one execution, straight into the tables of the schema of dsn.
func seedFinished(tb testing.TB, dsn string, n int) {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO ax_tasks (namespace, name, key, status, due_at, seq, created_at, updated_at, execution_id, finished_at)
			SELECT 'default', 'old.job', 'k-' || g, 'SUCCEEDED', now() - interval '2 hours', nextval('ax_seq'), now(), now(),
				gen_random_uuid()::text, now() - interval '1 hour' - g * interval '1 millisecond'
			FROM generate_series(1, %d) g`, n),
		`INSERT INTO ax_executions (id, task_id, attempt, node, status, started_at, finished_at)
			SELECT execution_id, id, 0, 'n', 'SUCCEEDED', finished_at, finished_at FROM ax_tasks WHERE name = 'old.job'`,
		`VACUUM ANALYZE ax_tasks`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			tb.Fatal(err)
		}
	}
}

// A finished task another transaction holds (a Retry of it waiting for its commit,
// another pruner) is skipped, not waited for: Prune deletes the others and returns.
func TestPruneSkipsLockedRows(t *testing.T) {
	t.Parallel()
	dsn := servicetest.PostgresDSN(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	seedFinished(t, dsn, 3)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var locked int64
	if err := tx.QueryRow(ctx, `SELECT id FROM ax_tasks ORDER BY finished_at LIMIT 1 FOR UPDATE`).Scan(&locked); err != nil {
		t.Fatal(err)
	}
	p := store.PruneParams{Status: store.Succeeded, Before: time.Now(), Limit: 10}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if n, err := st.Prune(pctx, p); err != nil || n != 2 {
		t.Fatalf("Prune with the oldest task locked = %d, %v; want the other 2", n, err)
	}
	if _, err := st.Get(ctx, locked); err != nil {
		t.Fatalf("the locked task: %v, want it kept", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Prune(ctx, p); err != nil || n != 1 {
		t.Fatalf("Prune after the lock went = %d, %v; want 1", n, err)
	}
}

// PruneKeyStarts deletes the claim times of a (name, task key) whose last claim is
// older than any window of a rate per key, of the view's namespace only, and keeps
// those a window still reaches.
func TestPruneKeyStarts(t *testing.T) {
	t.Parallel()
	dsn := servicetest.PostgresDSN(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	other, err := st.InNamespace("other")
	if err != nil {
		t.Fatal(err)
	}
	// One claim of each key, recorded by the name's rate per key, in both namespaces.
	for _, s := range []store.Store{st, other} {
		if _, err := s.SetKeyRate(ctx, "sync", 5, time.Hour, "alice"); err != nil {
			t.Fatal(err)
		}
		var claims []store.Claim
		for _, key := range []string{"old", "fresh"} {
			res, err := s.Insert(ctx, []store.NewTask{{Name: "sync", Key: key, DueAt: time.Now().Add(-time.Second),
				TaskKey: key, Overlap: store.OverlapQueue}})
			if err != nil || res[0].Err != nil {
				t.Fatalf("Insert: %+v, %v", res, err)
			}
			claims = append(claims, store.Claim{ID: res[0].Task.ID, ExecutionID: fmt.Sprintf("0190a0a0-0000-7000-8000-%012d", len(claims)+1)})
		}
		if res, err := s.Claim(ctx, store.Fence{}, claims); err != nil || len(res.Claimed) != 2 {
			t.Fatalf("Claim = %+v, %v; want both claimed", res, err)
		}
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The key "old" of both namespaces was last claimed 25 hours ago: beyond
	// store.MaxRatePer, the longest window.
	if tag, err := conn.Exec(ctx, `UPDATE ax_key_starts SET last_at = last_at - interval '25 hours' WHERE task_key = 'old'`); err != nil || tag.RowsAffected() != 2 {
		t.Fatalf("aging the rows of key old: %v, %v; want 2 rows", tag, err)
	}
	keys := func() []string {
		t.Helper()
		rows, _ := conn.Query(ctx, `SELECT namespace || '/' || task_key FROM ax_key_starts ORDER BY 1`)
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if n, err := st.PruneKeyStarts(ctx, 10); err != nil || n != 1 {
		t.Fatalf("PruneKeyStarts = %d, %v; want 1, the aged row of the view's namespace", n, err)
	}
	if got, want := keys(), []string{"default/fresh", "other/fresh", "other/old"}; !slices.Equal(got, want) {
		t.Fatalf("after PruneKeyStarts, ax_key_starts holds %v, want %v", got, want)
	}
	if n, err := st.PruneKeyStarts(ctx, 10); err != nil || n != 0 {
		t.Errorf("PruneKeyStarts again = %d, %v; want 0", n, err)
	}
	if n, err := other.PruneKeyStarts(ctx, 10); err != nil || n != 1 {
		t.Errorf("PruneKeyStarts of namespace other = %d, %v; want 1", n, err)
	}
	if got, want := keys(), []string{"default/fresh", "other/fresh"}; !slices.Equal(got, want) {
		t.Errorf("after both prunes, ax_key_starts holds %v, want %v", got, want)
	}
}

// BenchmarkClaimWhilePruning measures the claim of 100 due tasks (inserted just
// before, left DISPATCHING) on a table with 200,000 finished tasks,
// while nothing else runs ("idle"), while Prune deletes them in batches of 1,000
// without a pause ("pruning", the worst case) and with the scheduler's default pause
// between batches ("paced", as ax.Config.Retention runs it): claim-p50-ms and
// claim-p99-ms per claim. Run with -benchtime 300x, alternating the modes with -count.
func BenchmarkClaimWhilePruning(b *testing.B) {
	for _, mode := range []string{"idle", "pruning", "paced"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			dsn := servicetest.PostgresDSN(b)
			st, err := postgres.Open(ctx, dsn)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			const finished = 200_000
			seedFinished(b, dsn, finished)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			pruned := 0
			if mode != "idle" {
				wg.Go(func() {
					p := store.PruneParams{Status: store.Succeeded, Before: time.Now(), Limit: store.MaxPrune}
					for {
						select {
						case <-stop:
							return
						default:
						}
						n, err := st.Prune(ctx, p)
						if err != nil {
							b.Error(err)
							return
						}
						if pruned += n; n == 0 { // all gone: seed again, so that pruning goes on
							seedFinished(b, dsn, finished)
						}
						if mode == "paced" {
							select {
							case <-stop:
							case <-time.After(50 * time.Millisecond): // ax.DefaultRetentionPause
							}
						}
					}
				})
			}
			var lat []time.Duration
			n := 0
			for b.Loop() {
				nts := make([]store.NewTask, 100)
				for i := range nts {
					n++
					nts[i] = store.NewTask{Name: "job", Key: fmt.Sprint(n), DueAt: time.Now().Add(-time.Second)}
				}
				res, err := st.Insert(ctx, nts)
				if err != nil {
					b.Fatal(err)
				}
				claims := make([]store.Claim, len(res))
				for i, r := range res {
					claims[i] = store.Claim{ID: r.Task.ID, ExecutionID: fmt.Sprintf("0190a0a0-0000-7000-8000-%012d", n*1000+i)}
				}
				t0 := time.Now()
				c, err := st.Claim(ctx, store.Fence{}, claims)
				lat = append(lat, time.Since(t0))
				if err != nil || len(c.Claimed) != len(claims) {
					b.Fatalf("Claim: %d of %d, %v", len(c.Claimed), len(claims), err)
				}
			}
			close(stop)
			wg.Wait()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "claim-p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "claim-p99-ms")
			b.ReportMetric(float64(pruned), "pruned")
		})
	}
}
