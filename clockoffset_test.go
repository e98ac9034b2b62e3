package ax

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/elect/sqllease"
	"github.com/axsched/ax/internal/clock"
	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store/postgres"
)

// TestClockOffsetBetweenReplicas runs a leader whose host clock is 30s ahead and two
// executor replicas whose clocks are on time and 30s behind, on PostgreSQL, with the
// leader dispatching over signed HTTP. Each replica measures its offset to the
// database's clock, so every due decision agrees: every task runs once, on an
// executor, none is handed back, and none starts before its DueAt by the database's
// clock.
//
// The replicas share one process (each with its own clock, its own pool, its own
// endpoint); internal/clustertest TestClockOffsetAcrossProcesses runs the same in three
// processes. Either way the clocks are skewed in the schedulers: a process cannot set
// its host clock off without privileges, so what reads the host's clock directly is
// not put to the test — which is why requests are signed and verified by the
// store-corrected clock (Scheduler.New), not by the host's.
func TestClockOffsetBetweenReplicas(t *testing.T) {
	t.Parallel()
	dsn := servicetest.PostgresDSN(t)
	secret := make([]byte, 32)
	rand.Read(secret)
	var mu sync.Mutex
	ran := map[string][]string{}
	skews := []time.Duration{30 * time.Second, 0, -30 * time.Second}
	var ss []*Scheduler
	for i, skew := range skews {
		st, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		el, err := sqllease.New(st, sqllease.WithTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var (
			smu sync.Mutex
			s   *Scheduler
		)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			smu.Lock()
			sc := s
			smu.Unlock()
			sc.ExecutorHandler().ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		cfg := Config{Store: st, Node: fmt.Sprintf("node-%d", i), Elector: el,
			Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
			HeartbeatInterval: 200 * time.Millisecond, OrphanAfter: 5 * time.Second, RefillInterval: 100 * time.Millisecond,
			Cluster: ClusterConfig{Advertise: srv.URL, Secret: secret}}
		if i > 0 {
			no := false
			cfg.CanLead = &no
		}
		sc, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		sc.clock = clock.NewSkewed(skew)
		smu.Lock()
		s = sc
		smu.Unlock()
		if i > 0 {
			node := cfg.Node
			sc.HandleFunc("job", func(ctx context.Context, task *Task) error {
				mu.Lock()
				ran[task.Key] = append(ran[task.Key], node)
				mu.Unlock()
				return nil
			})
		}
		if err := sc.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sc.Stop(context.Background()) })
		ss = append(ss, sc)
	}
	ctx := context.Background()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		cs, err := ss[0].Cluster(ctx)
		if err == nil && cs.IsLeader && len(cs.Nodes) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader with 3 nodes registered: %+v, %v", cs, err)
		}
	}
	// Each replica wrote its offset to the database's clock: the opposite of its
	// host's skew, give or take the measurement's round trip.
	cs, err := ss[0].Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.Nodes) != len(skews) {
		t.Fatalf("Cluster lists %d nodes, want %d: %+v", len(cs.Nodes), len(skews), cs.Nodes)
	}
	for i, n := range cs.Nodes {
		if d := n.ClockOffset + skews[i]; n.Node != fmt.Sprintf("node-%d", i) || d.Abs() > time.Second {
			t.Errorf("Cluster: %s has ClockOffset %v, want about %v", n.Node, n.ClockOffset, -skews[i])
		}
	}
	const n = 30
	for i := range n {
		if _, err := ss[1+i%2].Delay(ctx, "job", fmt.Sprint(i), time.Duration(i%6)*250*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		done := len(ran) == n
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d tasks ran within 20s", len(ran), n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for key, nodes := range ran {
		task, err := ss[0].Lookup(ctx, "job", key)
		if err != nil {
			t.Fatal(err)
		}
		execs, err := ss[0].Executions(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case len(nodes) != 1 || len(execs) != 1:
			t.Errorf("task %s ran on %v with executions %+v, want once", key, nodes, execs)
		case execs[0].StartedAt.Before(task.DueAt):
			t.Errorf("task %s started at %v, before its DueAt %v by the database's clock", key, execs[0].StartedAt, task.DueAt)
		case task.DispatchRetries != 0:
			t.Errorf("task %s was handed back %d times: a dispatch was refused (%s)", key, task.DispatchRetries, task.LastError)
		}
	}
}
