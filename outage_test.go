package ax_test

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/axsched/ax"
	"github.com/axsched/ax/internal/servicetest"
	"github.com/axsched/ax/store/mysql"
	"github.com/axsched/ax/store/postgres"
)

// outageStores open a store of each network kind through a proxy the test can cut.
var outageStores = map[string]func(t *testing.T) (ax.Store, *servicetest.Proxy){
	"postgres": func(t *testing.T) (ax.Store, *servicetest.Proxy) {
		u, err := url.Parse(servicetest.PostgresDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		p := servicetest.NewProxy(t, u.Host)
		u.Host = p.Addr()
		q := u.Query()
		q.Set("connect_timeout", "2")
		u.RawQuery = q.Encode()
		st, err := postgres.Open(context.Background(), u.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st, p
	},
	"mysql": func(t *testing.T) (ax.Store, *servicetest.Proxy) {
		cfg, err := mysqldriver.ParseDSN(servicetest.MySQLDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		p := servicetest.NewProxy(t, cfg.Addr)
		cfg.Addr = p.Addr()
		cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 2*time.Second, 5*time.Second, 5*time.Second
		st, err := mysql.Open(cfg.FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st, p
	},
}

// TestDatabaseOutage cuts the connection to the database for a few seconds while
// tasks are falling due. Calls made during the cut fail with an error; once it is
// restored the scheduler resumes on its own, and every task runs exactly once.
func TestDatabaseOutage(t *testing.T) {
	t.Parallel()
	for name, open := range outageStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, proxy := open(t)
			s := newScheduler(t, st, func(c *ax.Config) {
				c.HeartbeatInterval = 200 * time.Millisecond
				c.OrphanAfter = time.Minute // longer than the cut: no task is orphaned by it
				c.DispatchTimeout = 2 * time.Second
			})
			var mu sync.Mutex
			runs := map[string]int{}
			s.HandleFunc("job", func(ctx context.Context, task *ax.Task) error {
				mu.Lock()
				runs[task.Key]++
				mu.Unlock()
				return nil
			})
			ctx := context.Background()
			const n = 300
			ids := make([]int64, n)
			for i := range n {
				task, err := s.Delay(ctx, "job", fmt.Sprint(i), time.Duration(i)*15*time.Millisecond)
				if err != nil {
					t.Fatal(err)
				}
				ids[i] = task.ID
			}
			start(t, s)
			waitFor(t, 20*time.Second, "the first tasks to run", func() bool { mu.Lock(); defer mu.Unlock(); return len(runs) >= 20 })

			proxy.Cut()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := s.Delay(cctx, "job", "during-the-cut", 0)
			cancel()
			if err == nil {
				t.Errorf("Delay while the database is unreachable: no error")
			}
			time.Sleep(3 * time.Second) // the outage
			proxy.Restore()

			for _, id := range ids {
				waitStatus(t, s, id, ax.Succeeded, time.Minute)
			}
			mu.Lock()
			defer mu.Unlock()
			for i := range n {
				if c := runs[fmt.Sprint(i)]; c != 1 {
					t.Errorf("task %d ran %d times, want exactly once", i, c)
				}
			}
		})
	}
}
