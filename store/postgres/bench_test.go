package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/postgres"
)

// BenchmarkLifecycle runs batches of tasks through Insert, Claim, Start and Finish:
// one call of each per batch, as the scheduler coalesces them; straight to the
// server, with WithPooler, and through a PgBouncer in transaction mode (see
// benchStore).
func BenchmarkLifecycle(b *testing.B) {
	for _, via := range []string{"direct", "direct+pooler", "pgbouncer"} {
		for _, size := range []int{1, 200} {
			b.Run(fmt.Sprintf("via=%s/batch=%d", via, size), func(b *testing.B) { benchLifecycle(b, via, size) })
		}
	}
}

// benchStore opens a store on a fresh schema: straight to the server ("direct"),
// straight but with WithPooler ("direct+pooler": the cost of the options alone), or
// through a PgBouncer of its own in transaction mode with WithPooler ("pgbouncer").
func benchStore(b *testing.B, via string) *postgres.Store {
	b.Helper()
	ctx := context.Background()
	var (
		st  *postgres.Store
		err error
	)
	switch via {
	case "direct":
		st, err = postgres.Open(ctx, servicetest.PostgresDSN(b))
	case "direct+pooler":
		s := servicetest.StartPgBouncer(b, 4).Schema(b) // for its names only
		st, err = postgres.Open(ctx, s.Direct, postgres.WithPooler(s.Name))
	case "pgbouncer":
		s := servicetest.StartPgBouncer(b, 4).Schema(b)
		st, err = postgres.Open(ctx, s.Pooled, postgres.WithPooler(s.Name))
	default:
		b.Fatalf("via %q", via)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// BenchmarkGet reads one task, the store's simplest statement outside a transaction:
// behind a pooler it is sent after the statement that sets search_path, in one round
// trip.
func BenchmarkGet(b *testing.B) {
	for _, via := range []string{"direct", "direct+pooler", "pgbouncer"} {
		b.Run("via="+via, func(b *testing.B) {
			ctx := context.Background()
			st := benchStore(b, via)
			res, err := st.Insert(ctx, []store.NewTask{{Name: "bench", Key: "k", DueAt: time.Now()}})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := st.Get(ctx, res[0].Task.ID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchLifecycle(b *testing.B, via string, size int) {
	ctx := context.Background()
	st := benchStore(b, via)
	now, err := st.Now(ctx)
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		nts := make([]store.NewTask, size)
		for i := range nts {
			n++
			nts[i] = store.NewTask{Name: "bench", Key: fmt.Sprint(n), DueAt: now.Add(-time.Second), Payload: []byte("x")}
		}
		res, err := st.Insert(ctx, nts)
		if err != nil {
			b.Fatal(err)
		}
		claims := make([]store.Claim, size)
		starts := make([]store.StartParams, size)
		fins := make([]store.Finish, size)
		for i, r := range res {
			eid := fmt.Sprintf("0190a0a0-0000-7000-8000-%012d", n*1000+i)
			claims[i] = store.Claim{ID: r.Task.ID, ExecutionID: eid}
			starts[i] = store.StartParams{TaskID: r.Task.ID, ExecutionID: eid, Name: "bench", Node: "n"}
			fins[i] = store.Finish{TaskID: r.Task.ID, ExecutionID: eid, Status: store.Succeeded}
		}
		if c, err := st.Claim(ctx, store.Fence{}, claims); err != nil || len(c.Claimed) != size {
			b.Fatalf("Claim: %d claimed, %v", len(c.Claimed), err)
		}
		if _, err := st.Start(ctx, store.Fence{}, starts); err != nil {
			b.Fatal(err)
		}
		if ok, err := st.Finish(ctx, store.Fence{}, fins); err != nil || !ok[size-1] {
			b.Fatalf("Finish: %v, %v", ok, err)
		}
	}
	b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkBulkInsert inserts batches of new tasks, by binding arrays (insertSQL) and
// by COPY (copy.go), into a table that grows by b.N batches: alternate the two in one
// run (-count) to compare them.
func BenchmarkBulkInsert(b *testing.B) {
	for _, size := range []int{200, 1000, 2000, 5000} {
		for _, path := range []string{"arrays", "copy"} {
			b.Run(fmt.Sprintf("batch=%d/%s", size, path), func(b *testing.B) {
				ctx := context.Background()
				st, err := postgres.Open(ctx, servicetest.PostgresDSN(b))
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				postgres.SetCopyThreshold(st, map[string]int{"arrays": 1 << 30, "copy": 1}[path])
				due := time.Now().Add(time.Hour)
				n := 0
				for b.Loop() {
					nts := make([]store.NewTask, size)
					for i := range nts {
						n++
						nts[i] = store.NewTask{Name: "bench", Key: fmt.Sprint(n), DueAt: due, Payload: []byte(`{"order":42}`)}
					}
					if _, err := st.Insert(ctx, nts); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "tasks/s")
			})
		}
	}
}

// BenchmarkStartPath times the two writes that record executions, alone: Start of
// claimed tasks, and ClaimStart claiming and starting in one statement. Each round
// inserts (and for Start claims) its batch outside the timer.
func BenchmarkStartPath(b *testing.B) {
	for _, path := range []string{"start", "claimstart"} {
		for _, size := range []int{1, 200} {
			b.Run(fmt.Sprintf("%s/batch=%d", path, size), func(b *testing.B) {
				ctx := context.Background()
				st, err := postgres.Open(ctx, servicetest.PostgresDSN(b))
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				now, err := st.Now(ctx)
				if err != nil {
					b.Fatal(err)
				}
				on := store.StartOn{Node: "n", Handlers: []string{"bench"}}
				n := 0
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					nts := make([]store.NewTask, size)
					for i := range nts {
						n++
						nts[i] = store.NewTask{Name: "bench", Key: fmt.Sprint(n), DueAt: now.Add(-time.Second), Payload: []byte("x")}
					}
					res, err := st.Insert(ctx, nts)
					if err != nil {
						b.Fatal(err)
					}
					claims := make([]store.Claim, size)
					starts := make([]store.StartParams, size)
					for i, r := range res {
						eid := fmt.Sprintf("0190a0a0-0000-7000-8000-%012d", n*1000+i)
						claims[i] = store.Claim{ID: r.Task.ID, ExecutionID: eid, Start: path == "claimstart"}
						starts[i] = store.StartParams{TaskID: r.Task.ID, ExecutionID: eid, Name: "bench", Node: "n"}
					}
					if path == "start" {
						if c, err := st.Claim(ctx, store.Fence{}, claims); err != nil || len(c.Claimed) != size {
							b.Fatalf("Claim: %d claimed, %v", len(c.Claimed), err)
						}
						b.StartTimer()
						if res, err := st.Start(ctx, store.Fence{}, starts); err != nil || res[size-1].Outcome != store.Started {
							b.Fatalf("Start: %v, %v", res, err)
						}
						continue
					}
					b.StartTimer()
					if c, err := st.ClaimStart(ctx, store.Fence{}, on, claims); err != nil || len(c.Started) != size {
						b.Fatalf("ClaimStart: %d started, %v", len(c.Started), err)
					}
				}
				b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "tasks/s")
			})
		}
	}
}
