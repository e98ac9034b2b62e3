package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/axsched/ax"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/postgres"
)

// ClusterConfig configures RunCluster: the nodes, their timings, and the sizes of
// the workloads.
type ClusterConfig struct {
	Nodes       int    // node processes running at once (3)
	DSN         string // an empty PostgreSQL schema (search_path set); the caller creates and drops it
	Schema      string // its name, for the report
	RedisAddr   string
	RedisDB     int
	RedisPrefix string // a key prefix no one else uses; RunCluster deletes its keys at the end
	// SQLLease elects by elect/sqllease on the schema instead of Redis.
	SQLLease bool

	TTL               time.Duration // the lease's (elect/redis or elect/sqllease WithTTL)
	HeartbeatInterval time.Duration
	OrphanAfter       time.Duration
	DispatchTimeout   time.Duration
	Concurrency       int // each node's

	Drain     int           // tasks of the drain backlog
	Rate      int           // tasks per second of the steady streams
	Steady    time.Duration // how long the lateness stream runs
	Delay     time.Duration // each stream task is due this long after it was written
	Failovers int           // leader kills (kill -9)
	Handovers int           // leader stops (SIGTERM)
	Settle    time.Duration // steady leadership before each stop, and each kill (plus a random part of TTL/3)
	// Analyze runs ANALYZE on ax_tasks once the drain's backlog is written (as
	// autovacuum would, up to a minute later), so that the drain runs on fresh
	// planner statistics.
	Analyze bool

	// Dir receives the nodes' run logs and stderr.
	Dir string
	// Command returns the command of a node process that runs RunChildFromEnv(node):
	// `ax bench --child-node=NAME`, or a test binary. RunCluster sets its
	// environment (adding ChildEnv to cmd.Env, or to the parent's environment when
	// that is nil), stdio and parent-death signal.
	Command func(node string) (*exec.Cmd, error)
	// Progress, when set, receives a line at each step.
	Progress io.Writer
}

// electorName names the election for the report.
func electorName(sqlLease bool) string {
	if sqlLease {
		return "sqllease"
	}
	return "redis"
}

// Dist is a distribution of durations: min, percentiles and max of N samples.
type Dist struct {
	N   int           `json:"n"`
	Min time.Duration `json:"min_ns"`
	P50 time.Duration `json:"p50_ns"`
	P90 time.Duration `json:"p90_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

// distOf summarises ds (sorting it).
func distOf(ds []time.Duration) Dist {
	n := len(ds)
	if n == 0 {
		return Dist{}
	}
	slices.Sort(ds)
	pct := func(p float64) time.Duration { return ds[min(int(p*float64(n)), n-1)] }
	return Dist{N: n, Min: ds[0], P50: pct(0.50), P90: pct(0.90), P99: pct(0.99), Max: ds[n-1]}
}

// NodeCount is how many tasks of a phase one node ran (its successful executions).
type NodeCount struct {
	Node   string `json:"node"`
	Tasks  int    `json:"tasks"`
	Leader bool   `json:"leader,omitempty"` // it led, at some time before the phase ended
}

// PhaseReport is what one workload measured, from the store's stamps.
type PhaseReport struct {
	Tasks int `json:"tasks"`
	// Elapsed: drain: from the due instant to the last completion, by the store's
	// stamps; streams: how long tasks were written.
	Elapsed   time.Duration `json:"elapsed_ns"`
	LastStart time.Duration `json:"last_start_ns,omitempty"` // drain: from the due instant
	PerSec    float64       `json:"tasks_per_sec"`
	// Lateness is each task's first execution start minus its due time as written.
	Lateness Dist        `json:"lateness"`
	Early    int         `json:"early"` // executions started before their task's due time
	Spread   []NodeCount `json:"spread"`
	// RetriedTasks are the tasks with DispatchRetries > 0; DispatchRetries their sum.
	RetriedTasks    int `json:"retried_tasks"`
	DispatchRetries int `json:"dispatch_retries"`
	// Nodes sums the nodes' counters over the phase (ChildStats; a killed node's up to
	// its last report before the kill).
	Nodes ChildStats `json:"nodes"`
}

// Failover is one leader kill.
type Failover struct {
	Victim      string        `json:"victim"`
	Epoch       int64         `json:"epoch"`
	KilledAt    time.Time     `json:"killed_at"`
	Next        string        `json:"next"`
	NextEpoch   int64         `json:"next_epoch"`
	LeadAt      time.Time     `json:"lead_at"` // the next leader's EventLeadership stamp
	Took        time.Duration `json:"took_ns"` // LeadAt − KilledAt
	Replacement string        `json:"replacement"`
	// GapTasks are the tasks due during the gap (from the kill to LeadAt); GapMax the
	// largest lateness among them.
	GapTasks int           `json:"gap_tasks"`
	GapMax   time.Duration `json:"gap_max_ns"`
}

// Handover is one graceful stop of the leader.
type Handover struct {
	Stopped     string        `json:"stopped"`
	Epoch       int64         `json:"epoch"`
	Next        string        `json:"next"`
	NextEpoch   int64         `json:"next_epoch"`
	Took        time.Duration `json:"took_ns"`      // SIGTERM → the next leader's EventLeadership
	StopTook    time.Duration `json:"stop_took_ns"` // the old leader's Stop
	Replacement string        `json:"replacement"`
}

// CheckReport is the check of the whole history: every task ran exactly once, none
// early.
type CheckReport struct {
	Tasks        int `json:"tasks"`
	Succeeded    int `json:"succeeded"`
	Executions   int `json:"executions"`    // execution records
	HandlerCalls int `json:"handler_calls"` // run-log lines
	// ExactlyOnce counts the tasks with one execution record and one handler call.
	ExactlyOnce int `json:"exactly_once"`
	// RerunAfterKill counts the tasks that ran again because their execution was on
	// a node killed by the bench (kill -9) and recovery declared it orphaned: the
	// at-least-once case the guarantees allow, not a violation.
	RerunAfterKill int `json:"rerun_after_kill"`
	// Released counts the tasks that ran again after a graceful Stop released their
	// execution (allowed too).
	Released   int      `json:"released"`
	Early      int      `json:"early"`
	Violations int      `json:"violations"`
	Examples   []string `json:"examples,omitempty"` // the first violations
}

// ClusterReport is the result of RunCluster.
type ClusterReport struct {
	Nodes             int           `json:"nodes"`
	Schema            string        `json:"schema"`
	RedisPrefix       string        `json:"redis_prefix"`
	Elector           string        `json:"elector"` // "redis" or "sqllease"
	TTL               time.Duration `json:"ttl_ns"`
	HeartbeatInterval time.Duration `json:"heartbeat_ns"`
	OrphanAfter       time.Duration `json:"orphan_after_ns"`
	DispatchTimeout   time.Duration `json:"dispatch_timeout_ns"`
	Concurrency       int           `json:"concurrency"`
	Rate              int           `json:"rate"`
	Delay             time.Duration `json:"delay_ns"`
	Settle            time.Duration `json:"settle_ns"`
	Analyze           bool          `json:"analyze,omitempty"`

	Drain          PhaseReport   `json:"drain"`
	Steady         PhaseReport   `json:"steady"`
	FailoverStream PhaseReport   `json:"failover_stream"`
	Failovers      []Failover    `json:"failovers"`
	FailoverTimes  Dist          `json:"failover_times"` // kill → next EventLeadership
	GapLateness    Dist          `json:"gap_lateness"`   // the tasks due during the failover gaps
	Handovers      []Handover    `json:"handovers"`
	HandoverTimes  Dist          `json:"handover_times"`
	Check          CheckReport   `json:"check"`
	Elapsed        time.Duration `json:"elapsed_ns"`
}

// run is one RunCluster call.
type run struct {
	cfg   ClusterConfig
	p     *procs
	st    store.Store
	db    *pgxpool.Pool
	dues  map[string][]time.Time // by task name, by key (its index)
	mu    sync.Mutex             // guards dues while a stream writes
	start time.Time
}

func (r *run) progress(format string, args ...any) {
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "%s bench: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
}

// RunCluster runs the cluster bench: cfg.Nodes node processes on one PostgreSQL
// schema with Redis election (or a SQL lease), every one executing (the leader
// in-process and over signed HTTP to the others). It measures, in order:
//
//  1. drain: cfg.Drain tasks all due at one instant, no-op handlers: throughput from
//     that instant to the last completion, the spread over the nodes, the dispatch
//     failures and the leader's executor requests by result;
//  2. lateness: a stream of cfg.Rate tasks/s for cfg.Steady, each due cfg.Delay after
//     it was written: handler start − due (the store's stamps) p50/p90/p99/max;
//  3. failover: the leader killed (SIGKILL) cfg.Failovers times under such a stream,
//     a replacement started each time: the time from each kill to the next leader's
//     EventLeadership, and the lateness of the tasks due during the gaps;
//  4. handover: the leader stopped (SIGTERM, Stop) cfg.Handovers times: the time
//     until another leads;
//
// and at the end checks, from ax_tasks, ax_executions and the handlers' run logs,
// that every task ran exactly once and none early (Check.Violations). An error means
// the bench could not run to the end.
func RunCluster(ctx context.Context, cfg ClusterConfig) (rep ClusterReport, err error) {
	if cfg.Nodes < 2 || cfg.Drain < 1 || cfg.Rate < 1 || cfg.Steady <= 0 || cfg.Delay < 0 || cfg.Failovers < 0 || cfg.Handovers < 0 || cfg.Command == nil {
		return rep, fmt.Errorf("ax: bench: cluster: bad config (nodes %d, drain %d, rate %d, steady %v, delay %v, failovers %d, handovers %d)",
			cfg.Nodes, cfg.Drain, cfg.Rate, cfg.Steady, cfg.Delay, cfg.Failovers, cfg.Handovers)
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	r := &run{cfg: cfg, dues: map[string][]time.Time{}, start: time.Now()}
	rep = ClusterReport{Nodes: cfg.Nodes, Schema: cfg.Schema, RedisPrefix: cfg.RedisPrefix, Elector: electorName(cfg.SQLLease), TTL: cfg.TTL,
		HeartbeatInterval: cfg.HeartbeatInterval, OrphanAfter: cfg.OrphanAfter, DispatchTimeout: cfg.DispatchTimeout,
		Concurrency: cfg.Concurrency, Rate: cfg.Rate, Delay: cfg.Delay, Settle: cfg.Settle, Analyze: cfg.Analyze}

	// The parent's store migrates the schema before any node opens it.
	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := postgres.Open(openCtx, cfg.DSN)
	if err != nil {
		return rep, err
	}
	defer st.Close()
	r.st = st
	if r.db, err = pgxpool.New(openCtx, cfg.DSN); err != nil {
		return rep, fmt.Errorf("ax: bench: %w", err)
	}
	defer r.db.Close()
	if !cfg.SQLLease {
		rc := goredis.NewClient(&goredis.Options{Addr: cfg.RedisAddr, DB: cfg.RedisDB})
		defer func() {
			// The lease expires by itself, the epoch key would not.
			key := cfg.RedisPrefix + "leader:" + ax.DefaultNamespace
			rc.Del(context.WithoutCancel(ctx), key, "{"+key+"}:epoch")
			rc.Close()
		}()
	}

	r.p = &procs{ctx: ctx, dir: cfg.Dir, command: cfg.Command, changed: make(chan struct{}), base: ChildConfig{
		DSN: cfg.DSN, RedisAddr: cfg.RedisAddr, RedisDB: cfg.RedisDB, RedisPrefix: cfg.RedisPrefix, SQLLease: cfg.SQLLease, TTL: cfg.TTL,
		HeartbeatInterval: cfg.HeartbeatInterval, OrphanAfter: cfg.OrphanAfter, DispatchTimeout: cfg.DispatchTimeout,
		Concurrency: cfg.Concurrency, Secret: secret,
	}}
	defer func() {
		if err != nil {
			r.p.killAll()
			return
		}
		r.p.shutdown(30 * time.Second)
		if ferr := r.p.failure(); ferr != nil {
			err = ferr
		}
	}()

	for range cfg.Nodes {
		if _, err := r.p.spawn(); err != nil {
			return rep, err
		}
	}
	for _, c := range r.p.snapshot() {
		if err := r.p.ready(c, time.Minute); err != nil {
			return rep, err
		}
	}
	leader, epoch, _, err := r.p.leader(3*cfg.TTL + 30*time.Second)
	if err != nil {
		return rep, err
	}
	r.progress("%d nodes ready; %s leads with epoch %d", cfg.Nodes, leader.node, epoch)

	if rep.Drain, err = r.drain(ctx); err != nil {
		return rep, err
	}
	if rep.Steady, err = r.steady(ctx); err != nil {
		return rep, err
	}
	if err := r.failovers(ctx, &rep); err != nil {
		return rep, err
	}
	if rep.Check, err = r.check(ctx); err != nil {
		return rep, err
	}
	rep.Elapsed = time.Since(r.start)
	return rep, nil
}

// snapshot returns the children started so far.
func (p *procs) snapshot() []*child {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*child(nil), p.children...)
}

// failure returns an error if a child failed.
func (p *procs) failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failureLocked()
}

// awaitRegistered waits until the live nodes are all in the executor registry, then
// one heartbeat interval more: the leader reads the registry at that interval.
func (r *run) awaitRegistered(ctx context.Context) error {
	reg := r.st
	deadline := time.Now().Add(time.Minute)
	for {
		r.p.mu.Lock()
		want := map[string]bool{}
		for _, c := range r.p.liveLocked() {
			want[c.node] = true
		}
		r.p.mu.Unlock()
		ns, err := reg.Nodes(ctx, 3*r.cfg.HeartbeatInterval)
		if err != nil {
			return err
		}
		for _, n := range ns {
			if n.Advertise != "" {
				delete(want, n.Name)
			}
		}
		if len(want) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ax: bench: nodes %v not registered within a minute", want)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return sleep(ctx, r.cfg.HeartbeatInterval+100*time.Millisecond)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// statsBase asks every live node for its counters and returns the number of the
// request, the base (or the end) of a phase's counts.
func (r *run) statsBase() (int, error) {
	return r.p.stats(30 * time.Second)
}

// phaseStats sums the nodes' counters between the requests from and to (see
// procs.stats): per node, its last report up to to (for a node that exited, its last
// before it did) minus its report of from (zero for a node started later); Max is the
// largest reported after from.
func (r *run) phaseStats(from, to int) ChildStats {
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	var sum ChildStats
	for _, c := range r.p.children {
		lastSeq := -1
		maxes := map[string]time.Duration{}
		for seq, st := range c.stats {
			if seq <= from || seq > to {
				continue
			}
			lastSeq = max(lastSeq, seq)
			for k, q := range st.Requests {
				maxes[k] = max(maxes[k], q.Max)
			}
		}
		if lastSeq < 0 {
			continue
		}
		d := c.stats[lastSeq].sub(c.stats[from])
		for k, q := range d.Requests {
			q.Max = maxes[k]
			d.Requests[k] = q
		}
		sum = sum.add(d)
	}
	sum.Node = ""
	return sum
}

// drain runs the drain phase.
func (r *run) drain(ctx context.Context) (PhaseReport, error) {
	if err := r.awaitRegistered(ctx); err != nil {
		return PhaseReport{}, err
	}
	base, err := r.statsBase()
	if err != nil {
		return PhaseReport{}, err
	}
	n := r.cfg.Drain
	// All due at one instant after the insert: the leader has them in its wheel when
	// they come due, the backlog is whole at that instant.
	lead := 3*time.Second + time.Duration(n)*250*time.Microsecond
	due := time.Now().Add(lead).Truncate(time.Microsecond)
	dues := make([]time.Time, n)
	for i := range dues {
		dues[i] = due
	}
	r.progress("drain: writing %d tasks due at %s", n, due.Format("15:04:05.000"))
	if err := insertAll(ctx, r.st, nameDrain, dues); err != nil {
		return PhaseReport{}, err
	}
	if r.cfg.Analyze {
		if _, err := r.db.Exec(ctx, `ANALYZE ax_tasks`); err != nil {
			return PhaseReport{}, fmt.Errorf("ax: bench: analyze: %w", err)
		}
	}
	if left := time.Until(due); left < 100*time.Millisecond {
		return PhaseReport{}, fmt.Errorf("ax: bench: drain: writing %d tasks took past their due time (%v left): use fewer --tasks", n, left)
	}
	r.mu.Lock()
	r.dues[nameDrain] = dues
	r.mu.Unlock()
	if err := r.awaitDone(ctx, nameDrain, n, 2*time.Minute+time.Duration(n)*5*time.Millisecond); err != nil {
		return PhaseReport{}, err
	}
	last, err := r.statsBase()
	if err != nil {
		return PhaseReport{}, err
	}
	rep, err := r.phase(ctx, nameDrain, r.phaseStats(base, last))
	if err != nil {
		return rep, err
	}
	rep.Elapsed, rep.LastStart = 0, 0
	tasks, err := r.load(ctx, nameDrain)
	if err != nil {
		return rep, err
	}
	for _, t := range tasks {
		for _, x := range t.execs {
			if x.Status == string(store.Succeeded) {
				rep.Elapsed = max(rep.Elapsed, x.Finished.Sub(due))
			}
			rep.LastStart = max(rep.LastStart, x.Started.Sub(due))
		}
	}
	rep.PerSec = float64(n) / rep.Elapsed.Seconds()
	r.progress("drain: %d tasks in %v (%.0f/s)", n, rep.Elapsed.Round(time.Millisecond), rep.PerSec)
	return rep, nil
}

// steady runs the lateness phase: a stream for cfg.Steady.
func (r *run) steady(ctx context.Context) (PhaseReport, error) {
	base, err := r.statsBase()
	if err != nil {
		return PhaseReport{}, err
	}
	r.progress("lateness: %d tasks/s for %v, each due %v after it is written", r.cfg.Rate, r.cfg.Steady, r.cfg.Delay)
	s := r.startStream(ctx, nameSteady)
	werr := sleep(ctx, r.cfg.Steady)
	n, elapsed, err := s.stop()
	if err = errors.Join(werr, err); err != nil {
		return PhaseReport{}, err
	}
	if err := r.awaitDone(ctx, nameSteady, n, r.cfg.Delay+2*time.Minute); err != nil {
		return PhaseReport{}, err
	}
	last, err := r.statsBase()
	if err != nil {
		return PhaseReport{}, err
	}
	rep, err := r.phase(ctx, nameSteady, r.phaseStats(base, last))
	rep.Elapsed, rep.PerSec = elapsed, float64(n)/elapsed.Seconds()
	r.progress("lateness: %d tasks, p50 %v p99 %v max %v", n, rep.Lateness.P50, rep.Lateness.P99, rep.Lateness.Max)
	return rep, err
}

// failovers runs the failover and handover phases under one stream.
func (r *run) failovers(ctx context.Context, rep *ClusterReport) error {
	base, err := r.statsBase()
	if err != nil {
		return err
	}
	r.progress("failover: %d tasks/s, each due %v after it is written; %d kills, %d graceful stops", r.cfg.Rate, r.cfg.Delay, r.cfg.Failovers, r.cfg.Handovers)
	s := r.startStream(ctx, nameFailover)
	stopped := false
	defer func() {
		if !stopped {
			s.stop()
		}
	}()
	var leader *child
	var epoch int64
	// settled waits until the nodes are all up and the leader has led for cfg.Settle
	// (and the stream has run that long) plus jitter, then takes every node's
	// counters.
	settled := func(jitter time.Duration) error {
		if err := r.p.wait(time.Minute, fmt.Sprintf("%d nodes ready", r.cfg.Nodes), func() bool {
			live := r.p.liveLocked()
			for _, c := range live {
				if !c.ready {
					return false
				}
			}
			return len(live) == r.cfg.Nodes
		}); err != nil {
			return err
		}
		var at time.Time
		var err error
		if leader, epoch, at, err = r.p.leader(3*r.cfg.TTL + 30*time.Second); err != nil {
			return err
		}
		if at.Before(s.start) {
			at = s.start // the stream runs steadily before the first kill, too
		}
		if err := sleep(ctx, time.Until(at.Add(r.cfg.Settle+jitter))); err != nil {
			return err
		}
		_, err = r.p.stats(30 * time.Second) // the last counts of the node about to go
		return err
	}
	for i := range r.cfg.Failovers {
		// A kill at a random point of the renew cycle (TTL/3): the time to the next
		// leader is TTL minus the time since the last renewal, and each kill samples it.
		if err := settled(mrand.N(r.cfg.TTL / 3)); err != nil {
			return err
		}
		killedAt, err := r.p.kill(leader)
		if err != nil {
			return err
		}
		repl, err := r.p.spawn()
		if err != nil {
			return err
		}
		next, nextEpoch, leadAt, err := r.p.nextLeader(leader, epoch, 3*r.cfg.TTL+30*time.Second)
		if err != nil {
			return err
		}
		f := Failover{Victim: leader.node, Epoch: epoch, KilledAt: killedAt, Next: next.node, NextEpoch: nextEpoch,
			LeadAt: leadAt, Took: leadAt.Sub(killedAt), Replacement: repl.node}
		rep.Failovers = append(rep.Failovers, f)
		r.progress("failover %d: %s (epoch %d) killed; %s leads with epoch %d %v later; replacement %s",
			i+1, f.Victim, f.Epoch, f.Next, f.NextEpoch, f.Took.Round(time.Millisecond), f.Replacement)
		if err := r.p.ready(repl, time.Minute); err != nil {
			return err
		}
	}
	for i := range r.cfg.Handovers {
		if err := settled(0); err != nil {
			return err
		}
		termAt, err := r.p.term(leader)
		if err != nil {
			return err
		}
		next, nextEpoch, leadAt, err := r.p.nextLeader(leader, epoch, 3*r.cfg.TTL+30*time.Second)
		if err != nil {
			return err
		}
		if err := r.p.stopped(leader, time.Minute); err != nil {
			return err
		}
		repl, err := r.p.spawn()
		if err != nil {
			return err
		}
		r.p.mu.Lock()
		stopTook := leader.stopTook
		r.p.mu.Unlock()
		h := Handover{Stopped: leader.node, Epoch: epoch, Next: next.node, NextEpoch: nextEpoch, Took: leadAt.Sub(termAt), StopTook: stopTook, Replacement: repl.node}
		rep.Handovers = append(rep.Handovers, h)
		r.progress("handover %d: %s (epoch %d) stopped in %v; %s leads with epoch %d %v after SIGTERM; replacement %s",
			i+1, h.Stopped, h.Epoch, h.StopTook.Round(time.Millisecond), h.Next, h.NextEpoch, h.Took.Round(time.Millisecond), h.Replacement)
		if err := r.p.ready(repl, time.Minute); err != nil {
			return err
		}
	}
	if err := settled(0); err != nil {
		return err
	}
	stopped = true
	n, elapsed, err := s.stop()
	if err != nil {
		return err
	}
	// Tasks run on a killed node wait for OrphanAfter, claims it did not start for
	// DispatchTimeout.
	r.progress("failover: %d tasks written; waiting for them to finish", n)
	if err := r.awaitDone(ctx, nameFailover, n, r.cfg.Delay+r.cfg.OrphanAfter+r.cfg.DispatchTimeout+2*time.Minute); err != nil {
		return err
	}
	last, err := r.statsBase()
	if err != nil {
		return err
	}
	if rep.FailoverStream, err = r.phase(ctx, nameFailover, r.phaseStats(base, last)); err != nil {
		return err
	}
	rep.FailoverStream.Elapsed, rep.FailoverStream.PerSec = elapsed, float64(n)/elapsed.Seconds()

	// The lateness of the tasks due during each gap, by their first start.
	tasks, err := r.load(ctx, nameFailover)
	if err != nil {
		return err
	}
	r.mu.Lock()
	dues := r.dues[nameFailover]
	r.mu.Unlock()
	var took, gaps, handovers []time.Duration
	for i := range rep.Failovers {
		f := &rep.Failovers[i]
		took = append(took, f.Took)
		for _, t := range tasks {
			due := dues[t.idx]
			if due.Before(f.KilledAt) || !due.Before(f.LeadAt) {
				continue
			}
			if first := t.firstStart(); !first.IsZero() {
				f.GapTasks++
				f.GapMax = max(f.GapMax, first.Sub(due))
				gaps = append(gaps, first.Sub(due))
			}
		}
	}
	for _, h := range rep.Handovers {
		handovers = append(handovers, h.Took)
	}
	rep.FailoverTimes, rep.GapLateness, rep.HandoverTimes = distOf(took), distOf(gaps), distOf(handovers)
	return nil
}

// stream writes tasks of one name at cfg.Rate, each due cfg.Delay after it is
// written, until stopped.
type stream struct {
	r     *run
	name  string
	quit  chan struct{}
	done  chan struct{}
	err   error
	start time.Time
	end   time.Time
}

func (r *run) startStream(ctx context.Context, name string) *stream {
	s := &stream{r: r, name: name, quit: make(chan struct{}), done: make(chan struct{}), start: time.Now()}
	go s.run(ctx)
	return s
}

func (s *stream) run(ctx context.Context) {
	defer close(s.done)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	sent := 0
	for {
		select {
		case <-s.quit:
			s.end = time.Now()
			return
		case <-ctx.Done():
			s.err, s.end = ctx.Err(), time.Now()
			return
		case <-tick.C:
		}
		want := int(float64(s.r.cfg.Rate) * time.Since(s.start).Seconds())
		if want <= sent {
			continue
		}
		due := time.Now().Add(s.r.cfg.Delay).Truncate(time.Microsecond)
		batch := make([]store.NewTask, 0, want-sent)
		for i := sent; i < want; i++ {
			batch = append(batch, store.NewTask{Name: s.name, Key: fmt.Sprint(i), DueAt: due.UTC(), MaxRetry: ax.DefaultMaxRetry})
		}
		// Recorded before the write: a task may run before Insert returns.
		s.r.mu.Lock()
		for range batch {
			s.r.dues[s.name] = append(s.r.dues[s.name], due)
		}
		s.r.mu.Unlock()
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, err := s.r.st.Insert(wctx, batch)
		cancel()
		if err != nil {
			s.err, s.end = fmt.Errorf("ax: bench: write %s tasks: %w", s.name, err), time.Now()
			return
		}
		sent = want
	}
}

// stop ends the stream and returns the number of tasks written and for how long.
func (s *stream) stop() (int, time.Duration, error) {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	<-s.done
	s.r.mu.Lock()
	n := len(s.r.dues[s.name])
	s.r.mu.Unlock()
	return n, s.end.Sub(s.start), s.err
}

// awaitDone waits until the n tasks of name are all in a final state.
func (r *run) awaitDone(ctx context.Context, name string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var final, succeeded int
		err := r.db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'SKIPPED')),
			count(*) FILTER (WHERE status = 'SUCCEEDED') FROM ax_tasks WHERE name = $1`, name).Scan(&final, &succeeded)
		if err != nil {
			return fmt.Errorf("ax: bench: count %s tasks: %w", name, err)
		}
		if final >= n {
			return nil
		}
		if err := r.p.failure(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ax: bench: %d of %d %s tasks finished (%d SUCCEEDED) after %v", final, n, name, succeeded, timeout)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil { // the stamps measure; this only waits
			return err
		}
	}
}

// phase reads a phase's tasks back and measures their lateness, spread and dispatch
// failures.
func (r *run) phase(ctx context.Context, name string, nodes ChildStats) (PhaseReport, error) {
	tasks, err := r.load(ctx, name)
	if err != nil {
		return PhaseReport{}, err
	}
	r.mu.Lock()
	dues := r.dues[name]
	r.mu.Unlock()
	rep := PhaseReport{Tasks: len(tasks), Nodes: nodes}
	var lates []time.Duration
	spread := map[string]int{}
	for _, t := range tasks {
		if t.idx >= len(dues) {
			continue // check reports it
		}
		due := dues[t.idx]
		if first := t.firstStart(); !first.IsZero() {
			lates = append(lates, first.Sub(due))
		}
		for _, x := range t.execs {
			if x.Started.Before(due.Add(-time.Microsecond)) {
				rep.Early++
			}
			if x.Status == string(store.Succeeded) {
				spread[x.Node]++
			}
		}
		if t.dispatchRetries > 0 {
			rep.RetriedTasks++
			rep.DispatchRetries += t.dispatchRetries
		}
	}
	rep.Lateness = distOf(lates)
	led := r.ledDuring()
	for node, n := range spread {
		rep.Spread = append(rep.Spread, NodeCount{Node: node, Tasks: n, Leader: led[node]})
	}
	slices.SortFunc(rep.Spread, func(a, b NodeCount) int { return compareNodes(a.Node, b.Node) })
	return rep, nil
}

// ledDuring returns the nodes that ever led.
func (r *run) ledDuring() map[string]bool {
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	led := map[string]bool{}
	for _, c := range r.p.children {
		if len(c.leadLines) > 0 {
			led[c.node] = true
		}
	}
	return led
}

// compareNodes orders node-2 before node-10.
func compareNodes(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
