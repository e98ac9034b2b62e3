package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/axsched/ax"
	"github.com/axsched/ax/elect"
	axredis "github.com/axsched/ax/elect/redis"
	"github.com/axsched/ax/elect/sqllease"
	"github.com/axsched/ax/internal/childproc"
	"github.com/axsched/ax/store/postgres"
)

// ChildEnv is the environment variable that carries a child node's ChildConfig, as
// JSON, from RunCluster to the process it starts (`ax bench --child-node=NAME`, or a
// test binary): the secret stays out of the command line.
const ChildEnv = "AX_BENCH_CHILD"

// The task names of the cluster bench, one per phase; every node has a no-op handler
// for each.
const (
	nameDrain    = "bench.drain"
	nameSteady   = "bench.steady"
	nameFailover = "bench.failover"
)

var taskNames = []string{nameDrain, nameSteady, nameFailover}

// ChildConfig is what one node of the cluster bench runs: an ax scheduler on a
// PostgreSQL schema, elected by Redis, serving its executor endpoint on a loopback
// port it advertises.
type ChildConfig struct {
	Node              string        `json:"node"`
	DSN               string        `json:"dsn"` // the schema's DSN (search_path set)
	RedisAddr         string        `json:"redis_addr"`
	RedisDB           int           `json:"redis_db"`
	RedisPrefix       string        `json:"redis_prefix"` // elect/redis WithKeyPrefix
	SQLLease          bool          `json:"sql_lease"`    // elect/sqllease on the schema instead of Redis
	TTL               time.Duration `json:"ttl"`          // the lease's
	HeartbeatInterval time.Duration `json:"heartbeat_interval"`
	OrphanAfter       time.Duration `json:"orphan_after"`
	DispatchTimeout   time.Duration `json:"dispatch_timeout"`
	Concurrency       int           `json:"concurrency"`
	Secret            []byte        `json:"secret"` // Cluster.Secret, the same on every node
	// RunLog is the file the handlers append one line to per call:
	// "<task id> <execution id> <unix nanos>".
	RunLog string `json:"run_log"`
}

// ChildStats are a child's counters since it started, from its Observer.
type ChildStats struct {
	Node string `json:"node"`
	// Handled counts the handler calls.
	Handled int64 `json:"handled"`
	// Requests are the EventExecutorRequest events (this node leading, sending
	// batches to the others), by result.
	Requests map[string]RequestStats `json:"requests,omitempty"`
	// DispatchFailed counts the EventDispatchFailed events, by reason.
	DispatchFailed map[string]int64 `json:"dispatch_failed,omitempty"`
	// Dropped counts the events the observer queue dropped (the counts above miss
	// them).
	Dropped int64 `json:"dropped,omitempty"`
}

// RequestStats sums the executor requests of one result.
type RequestStats struct {
	Requests int64         `json:"requests"`
	Tasks    int64         `json:"tasks"`
	Total    time.Duration `json:"total_ns"` // the requests' durations, summed
	Max      time.Duration `json:"max_ns"`   // the longest since the previous report
}

// sub returns s − base, counter by counter (Max: s's).
func (s ChildStats) sub(base ChildStats) ChildStats {
	d := ChildStats{Node: s.Node, Handled: s.Handled - base.Handled, Dropped: s.Dropped - base.Dropped}
	for k, v := range s.Requests {
		b := base.Requests[k]
		if r := (RequestStats{Requests: v.Requests - b.Requests, Tasks: v.Tasks - b.Tasks, Total: v.Total - b.Total, Max: v.Max}); r.Requests > 0 {
			if d.Requests == nil {
				d.Requests = map[string]RequestStats{}
			}
			d.Requests[k] = r
		}
	}
	for k, v := range s.DispatchFailed {
		if n := v - base.DispatchFailed[k]; n > 0 {
			if d.DispatchFailed == nil {
				d.DispatchFailed = map[string]int64{}
			}
			d.DispatchFailed[k] = n
		}
	}
	return d
}

// add returns s + o, counter by counter (Max: the larger).
func (s ChildStats) add(o ChildStats) ChildStats {
	d := ChildStats{Node: s.Node, Handled: s.Handled + o.Handled, Dropped: s.Dropped + o.Dropped,
		Requests: map[string]RequestStats{}, DispatchFailed: map[string]int64{}}
	for _, m := range []map[string]RequestStats{s.Requests, o.Requests} {
		for k, v := range m {
			r := d.Requests[k]
			r.Requests, r.Tasks, r.Total, r.Max = r.Requests+v.Requests, r.Tasks+v.Tasks, r.Total+v.Total, max(r.Max, v.Max)
			d.Requests[k] = r
		}
	}
	for _, m := range []map[string]int64{s.DispatchFailed, o.DispatchFailed} {
		for k, v := range m {
			d.DispatchFailed[k] += v
		}
	}
	return d
}

// observer prints the leadership events and counts the dispatch events.
type observer struct {
	out *childproc.Writer

	mu    sync.Mutex
	stats ChildStats
}

func (o *observer) Observe(e ax.Event) {
	reason := e.Reason
	if reason == "" {
		reason = "-"
	}
	switch e.Kind {
	case ax.EventLeadership:
		if e.Leader {
			o.out.Printf("LEADING %d %d", e.Epoch, e.At.UnixNano())
		} else {
			o.out.Printf("FOLLOWING %s %d", reason, e.At.UnixNano())
		}
	case ax.EventFenceRejected:
		o.out.Printf("FENCED %s %d", reason, e.At.UnixNano())
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stats.Dropped += int64(e.Dropped)
	switch e.Kind {
	case ax.EventExecutorRequest:
		if o.stats.Requests == nil {
			o.stats.Requests = map[string]RequestStats{}
		}
		r := o.stats.Requests[reason]
		r.Requests++
		r.Tasks += int64(e.Count)
		r.Total += e.Duration
		r.Max = max(r.Max, e.Duration)
		o.stats.Requests[reason] = r
	case ax.EventDispatchFailed:
		if o.stats.DispatchFailed == nil {
			o.stats.DispatchFailed = map[string]int64{}
		}
		o.stats.DispatchFailed[reason]++
	}
}

// snapshot returns the counters; it resets each Max, so that the next report's is
// the longest since this one.
func (o *observer) snapshot() ChildStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.stats
	s.Requests = make(map[string]RequestStats, len(o.stats.Requests))
	for k, v := range o.stats.Requests {
		s.Requests[k] = v
		v.Max = 0 // each report's Max is since the previous one
		o.stats.Requests[k] = v
	}
	s.DispatchFailed = make(map[string]int64, len(o.stats.DispatchFailed))
	for k, v := range o.stats.DispatchFailed {
		s.DispatchFailed[k] = v
	}
	return s
}

// RunChildFromEnv runs the child node that ChildEnv describes (see RunChild), with
// stdin and stdout as its channel to the parent and its logs on stderr.
func RunChildFromEnv(ctx context.Context, node string) error {
	raw := os.Getenv(ChildEnv)
	if raw == "" {
		return fmt.Errorf("ax: bench: child node %q: %s is not set; this mode is started by `ax bench --nodes N` only", node, ChildEnv)
	}
	var cfg ChildConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return fmt.Errorf("ax: bench: child: parse %s: %w", ChildEnv, err)
	}
	if node != "" && node != cfg.Node {
		return fmt.Errorf("ax: bench: child: --child-node=%s but %s names %s", node, ChildEnv, cfg.Node)
	}
	return RunChild(ctx, cfg, os.Stdin, os.Stdout, os.Stderr)
}

// RunChild is one node of the cluster bench: it starts an ax scheduler as cfg says,
// with a no-op handler for each task name of the bench, serves its ExecutorHandler
// on a loopback port it advertises, and runs until ctx ends (SIGTERM) or stdin
// closes (the parent is gone); then it stops the scheduler gracefully. It prints one
// line each to stdout:
//
//	READY <advertise URL>             the scheduler started
//	LEADING <epoch> <unix-nanos>      a term began (EventLeadership)
//	FOLLOWING <reason> <unix-nanos>   a term ended
//	FENCED <part> <unix-nanos>        the store refused a write as fenced
//	STATS <seq> <json>                its ChildStats, in answer to "STATS <seq>" on stdin
//	STOPPED <stop-nanos>              Stop returned, after taking that long
//	ERROR <message>                   the node failed (the parent gives up)
//
// and returns the error that made it fail, if any.
func RunChild(ctx context.Context, cfg ChildConfig, stdin io.Reader, stdout, stderr io.Writer) error {
	out := childproc.NewWriter(stdout)
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", cfg.Node)
	startCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	st, err := postgres.Open(startCtx, cfg.DSN)
	if err != nil {
		return err
	}
	defer st.Close()
	var el elect.Elector
	if cfg.SQLLease {
		if el, err = sqllease.New(st, sqllease.WithTTL(cfg.TTL), sqllease.WithLogger(logger)); err != nil {
			return fmt.Errorf("ax: bench: child: %w", err)
		}
	} else {
		rc := goredis.NewClient(&goredis.Options{Addr: cfg.RedisAddr, DB: cfg.RedisDB})
		defer rc.Close()
		el = axredis.New(rc, axredis.WithKeyPrefix(cfg.RedisPrefix), axredis.WithTTL(cfg.TTL), axredis.WithLogger(logger))
	}
	runLog, err := os.OpenFile(cfg.RunLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("ax: bench: child: %w", err)
	}
	defer runLog.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("ax: bench: child: listen: %w", err)
	}
	defer ln.Close()
	advertise := "http://" + ln.Addr().String()

	obs := &observer{out: out, stats: ChildStats{Node: cfg.Node}}
	s, err := ax.New(ax.Config{
		Store: st, Node: cfg.Node, Elector: el, Logger: logger, Observer: obs, OwnerService: "ax-bench",
		Concurrency: cfg.Concurrency, HeartbeatInterval: cfg.HeartbeatInterval, OrphanAfter: cfg.OrphanAfter,
		DispatchTimeout: cfg.DispatchTimeout,
		Cluster:         ax.ClusterConfig{Advertise: advertise, Secret: cfg.Secret},
	})
	if err != nil {
		return err
	}
	var logErr error
	var logMu sync.Mutex
	noop := func(_ context.Context, t *ax.Task) error {
		// One write(2) per line on an O_APPEND file: a kill leaves whole lines only.
		_, err := runLog.WriteString(strconv.FormatInt(t.ID, 10) + " " + t.ExecutionID + " " + strconv.FormatInt(time.Now().UnixNano(), 10) + "\n")
		obs.mu.Lock()
		obs.stats.Handled++
		obs.mu.Unlock()
		if err != nil {
			logMu.Lock()
			if logErr == nil {
				out.Error(fmt.Errorf("run log: %w", err)) // the parent gives up: a history with a hole proves nothing
			}
			logErr = errors.Join(logErr, err)
			logMu.Unlock()
		}
		return nil
	}
	for _, name := range taskNames {
		s.HandleFunc(name, noop)
	}
	srv := &http.Server{Handler: s.ExecutorHandler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if err := s.Start(startCtx); err != nil {
		srv.Close()
		return err
	}
	out.Printf("READY %s", advertise)

	// The parent's requests, until stdin closes.
	eof := make(chan struct{})
	go func() {
		defer close(eof)
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 2 && f[0] == "STATS" {
				b, _ := json.Marshal(obs.snapshot())
				out.Printf("STATS %s %s", f[1], b)
			}
		}
	}()
	select {
	case <-ctx.Done():
	case <-eof:
	case err := <-served:
		logger.Error("ax: bench: child: executor endpoint", "err", err)
	}
	t0 := time.Now()
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer stopCancel()
	stopErr := s.Stop(stopCtx)
	took := time.Since(t0)
	shutCtx, shutCancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer shutCancel()
	srv.Shutdown(shutCtx)
	if stopErr != nil {
		return stopErr
	}
	logMu.Lock()
	defer logMu.Unlock()
	if logErr != nil {
		return fmt.Errorf("ax: bench: child: run log: %w", logErr)
	}
	out.Printf("STOPPED %d", took.Nanoseconds())
	return nil
}
