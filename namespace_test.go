package ax_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/elect/sqllease"
	"github.com/axsched/ax/internal/teststores"
)

// TestNamespacesKeepServicesApart: two services on one database, each in its own
// Namespace with two replicas elected by SQL leases of that namespace, submit tasks and
// a schedule under the same names and keys. Each namespace has its own leader, and each
// service runs, counts and fires only its own.
func TestNamespacesKeepServicesApart(t *testing.T) {
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			st := teststores.Durable[kind](t)
			var mu sync.Mutex
			ran := map[string][]string{} // namespace/key → nodes
			fired := map[string]int{}    // namespace → occurrences run
			svc := map[string][]*ax.Scheduler{}
			for _, ns := range []string{"billing", "orders"} {
				for i := range 2 {
					el, err := sqllease.New(st, sqllease.WithNamespace(ns), sqllease.WithTTL(time.Second))
					if err != nil {
						t.Fatal(err)
					}
					node := fmt.Sprintf("%s-%d", ns, i)
					s, err := ax.New(ax.Config{Store: st, Namespace: ns, Node: node, Elector: el, Logger: quietLogger(),
						RefillInterval: 100 * time.Millisecond, HeartbeatInterval: 200 * time.Millisecond, OrphanAfter: 5 * time.Second})
					if err != nil {
						t.Fatal(err)
					}
					s.HandleFunc("job", func(ctx context.Context, task *ax.Task) error {
						mu.Lock()
						defer mu.Unlock()
						ran[ns+"/"+task.Key] = append(ran[ns+"/"+task.Key], node)
						return nil
					})
					s.HandleFunc("tick", func(ctx context.Context, task *ax.Task) error {
						mu.Lock()
						defer mu.Unlock()
						fired[ns]++
						return nil
					})
					if err := s.Every("tick", time.Second); err != nil {
						t.Fatal(err)
					}
					if err := s.Start(t.Context()); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { s.Stop(context.Background()) })
					svc[ns] = append(svc[ns], s)
				}
			}
			ctx := context.Background()
			for _, ns := range []string{"billing", "orders"} {
				for i := range 10 {
					if _, err := svc[ns][i%2].Delay(ctx, "job", fmt.Sprint(i), 100*time.Millisecond); err != nil {
						t.Fatalf("%s: Delay(job, %d): %v", ns, i, err)
					}
				}
			}
			waitFor(t, 20*time.Second, "both services to run their tasks and a few ticks", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(ran) == 20 && fired["billing"] >= 2 && fired["orders"] >= 2
			})
			leaders := map[string]string{}
			for ns, ss := range svc {
				cs, err := ss[0].Cluster(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if cs.Namespace != ns || cs.Leader == "" || len(cs.Nodes) != 2 {
					t.Fatalf("%s: Cluster = %+v, want its own leader and its 2 nodes", ns, cs)
				}
				for _, n := range cs.Nodes {
					if !strings.HasPrefix(n.Node, ns+"-") {
						t.Errorf("%s: Cluster lists node %s of another namespace", ns, n.Node)
					}
				}
				leaders[ns] = cs.Leader
			}
			if !strings.HasPrefix(leaders["billing"], "billing-") || !strings.HasPrefix(leaders["orders"], "orders-") {
				t.Fatalf("leaders %v: want one of each namespace's own replicas", leaders)
			}
			mu.Lock()
			for key, nodes := range ran {
				ns, _, _ := strings.Cut(key, "/")
				if len(nodes) != 1 || !strings.HasPrefix(nodes[0], ns+"-") {
					t.Errorf("task %s ran on %v, want once, on its own namespace's leader", key, nodes)
				}
			}
			mu.Unlock()
			for ns, ss := range svc {
				task, err := ss[0].Lookup(ctx, "job", "3")
				if err != nil {
					t.Fatal(err)
				}
				other := "orders"
				if ns == "orders" {
					other = "billing"
				}
				if _, err := svc[other][0].Get(ctx, task.ID); err == nil {
					t.Errorf("%s sees %s's task %d", other, ns, task.ID)
				}
				scheds, err := ss[0].Schedules(ctx)
				if err != nil || len(scheds) != 1 {
					t.Errorf("%s: Schedules = %+v, %v; want its own tick only", ns, scheds, err)
				}
			}
		})
	}
}
