// Package cluster is the scenario behind `ax demo --nodes N` (Run): the workload of
// package demo — orders closed after a timeout, a payment reconciliation every 2s —
// served by several replicas of the order service, each a process of its own with an
// ax scheduler on one shared SQLite file. One of them leads, elected by
// elect/sqllease on that file: it runs the scheduling loop and hands each due task,
// by round robin, to itself or over signed HTTP to another replica's executor
// endpoint (Scheduler.ExecutorHandler, on a loopback port each replica advertises).
// Partway through, the parent kills the leader with SIGKILL (kill -9); its lease
// expires after its TTL, another replica takes over with a higher epoch and runs the
// tasks that came due meanwhile — late, never early — and a replacement replica
// joins. At the end the parent checks, from the tables of the shared file, that every
// order was closed (or found paid) by exactly one execution, that no reconciliation
// slot was lost or run twice, and that two reconciliation runs never overlapped on
// any replicas. RunNode is one replica.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/cmd/ax/internal/demo"
	"github.com/axsched/ax/elect/sqllease"
	"github.com/axsched/ax/store/sqlite"
)

// Defaults of Config.
const (
	DefaultNodes    = 3
	MaxNodes        = 7
	DefaultLeaseTTL = 2 * time.Second
)

// minLeaseTTL is the shortest Config.LeaseTTL: below it, a replica on a busy
// machine may miss its renewals.
const minLeaseTTL = 500 * time.Millisecond

// Config configures Run. Zero fields take the documented defaults;
// Fast returns a quicker one.
type Config struct {
	// Config is the workload, as for demo.Run: Orders, MinTimeout, MaxTimeout, Paid,
	// Flaky, RetryBackoff, Progress, Wait (from the orders' creation), DB, Seed,
	// Logger (the parent's own warnings), ReconcileEvery, ReconcileSlowTook. Metrics
	// is not supported: the schedulers run in other processes.
	demo.Config
	// Nodes is how many replicas start, at least 2, at most MaxNodes; a replacement
	// joins after the failover. Defaults to DefaultNodes (3).
	Nodes int
	// LeaseTTL is the leader's lease (sqllease.WithTTL): how long a dead leader holds
	// it, so roughly the failover time. Defaults to DefaultLeaseTTL (2s; a service
	// would keep sqllease's 10s), at least 500ms.
	LeaseTTL time.Duration
	// KillAfter is when, after the orders are created, the leader is killed. Defaults
	// to MinTimeout + (MaxTimeout − MinTimeout)/6, so that some orders come due while
	// nobody leads and most after; below MaxTimeout.
	KillAfter time.Duration
	// NodeCommand returns a new command that runs one replica: a process that calls
	// RunNode with its stdin, stdout and stderr (`ax demo` re-executes itself).
	// Required. Its Stdin, Stdout and Stderr must be left unset.
	NodeCommand func() *exec.Cmd
	// NodeStderr receives the replicas' stderr: their schedulers' warnings, and
	// anything a crashing process prints. Nil discards it.
	NodeStderr io.Writer
	// NodeLogLevel is the level of the replicas' logs: "debug", "info", "warn"
	// (default) or "error".
	NodeLogLevel string
}

// Fast returns a Config that runs in about ten seconds after the
// replicas start: timeouts of 1–5s, a lease of 1s, a reconciliation every second
// whose slow runs take 2.2s, the leader killed 1.5s after the orders are created.
func Fast() Config {
	return Config{
		Config: demo.Config{
			MinTimeout:        time.Second,
			MaxTimeout:        5 * time.Second,
			RetryBackoff:      200 * time.Millisecond,
			Progress:          500 * time.Millisecond,
			ReconcileEvery:    time.Second,
			ReconcileSlowTook: 2200 * time.Millisecond,
		},
		LeaseTTL: time.Second,
	}
}

// clusterTiming is the replicas' configuration that follows from the lease.
type clusterTiming struct {
	heartbeat, orphanAfter, dispatchTimeout, refill time.Duration
}

// timing scales the replicas' intervals to the lease: heartbeats (and node
// registrations) every TTL/4, an orphan after 6 heartbeats, a claim not started
// handed back after as long, and a refill every 250ms, so that the leader sees the
// front end's orders soon after they are written.
func (cc Config) timing() clusterTiming {
	hb := max(cc.LeaseTTL/4, 100*time.Millisecond)
	return clusterTiming{heartbeat: hb, orphanAfter: 6 * hb, dispatchTimeout: 6 * hb, refill: 250 * time.Millisecond}
}

func (cc Config) withDefaults() Config {
	if cc.Nodes == 0 {
		cc.Nodes = DefaultNodes
	}
	if cc.LeaseTTL == 0 {
		cc.LeaseTTL = DefaultLeaseTTL
	}
	if cc.NodeLogLevel == "" {
		cc.NodeLogLevel = "warn"
	}
	noWait := cc.Wait == 0
	cc.Config = cc.Config.WithDefaults()
	if noWait {
		cc.Wait += 4*cc.LeaseTTL + 10*time.Second
	}
	if cc.KillAfter == 0 {
		cc.KillAfter = cc.MinTimeout + (cc.MaxTimeout-cc.MinTimeout)/6
	}
	return cc
}

func (cc Config) validate() error {
	errs := []error{cc.Config.Validate()}
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("demo: config: %s: %w", fmt.Sprintf(format, args...), demo.ErrConfig))
	}
	if cc.Nodes < 2 || cc.Nodes > MaxNodes {
		bad("Nodes %d: want 2 to %d replicas (one is killed)", cc.Nodes, MaxNodes)
	}
	if cc.LeaseTTL < minLeaseTTL {
		bad("LeaseTTL %v: at least %v", cc.LeaseTTL, minLeaseTTL)
	}
	if cc.KillAfter < 0 || cc.KillAfter >= cc.MaxTimeout {
		bad("KillAfter %v: want 0 or more and below MaxTimeout %v, so that orders come due after the kill", cc.KillAfter, cc.MaxTimeout)
	}
	if cc.NodeCommand == nil {
		bad("NodeCommand is required: the command that runs one replica (RunNode)")
	}
	if cc.Metrics != "" {
		bad("Metrics %q: not served in the cluster scenario (the schedulers run in the replicas' processes)", cc.Metrics)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cc.NodeLogLevel)); err != nil {
		bad("NodeLogLevel %q: want debug, info, warn or error", cc.NodeLogLevel)
	}
	return errors.Join(errs...)
}

// Summary is what a cluster run did, read back from the shared SQLite file.
type Summary struct {
	Namespace string // the run's ax namespace: its tasks, schedule, nodes and leader
	DB        string // the SQLite file
	KeptDB    bool   // false: DB was a temporary file, removed
	LeaseTTL  time.Duration

	Replicas    []string       // every replica started, the replacement last
	RunsByNode  map[string]int // handler executions (both kinds) by replica
	Replacement string         // the replica started after the failover
	// ReplacementRuns is how many executions the replacement ran.
	ReplacementRuns int

	// The failover.
	Killed            string        // the leader killed with SIGKILL
	KilledEpoch       int64         // its epoch
	KilledAt          time.Time     // when the signal was sent
	LeaseExpiredAfter time.Duration // from the kill to when its lease was seen expired (or taken)
	NewLeader         string        // the replica that led next
	NewEpoch          int64         // its epoch: above KilledEpoch
	Failover          time.Duration // from the kill to the new leader's term
	// Leaders is every term seen, in order: "node-1@1", "node-3@2".
	Leaders []string

	// The orders.
	Orders, Paid, Cancelled int
	Closed                  int // closed by their timeout's execution
	AlreadyPaid             int // the execution found the order paid
	Failed                  int // injected transient failures, each retried
	// Executions counts the close handler's executions: first attempts and retries.
	Executions int
	// ClosedOnce counts the orders whose timeout ran to a business outcome in exactly
	// one execution (closed, or found paid): all but the cancelled one.
	ClosedOnce int
	// Duplicates counts the orders whose timeout reached a business outcome in more
	// than one execution: must be 0.
	Duplicates int
	// Interrupted counts the executions the kill cut short (started on the killed
	// replica, never returned); ax re-runs them after OrphanAfter.
	Interrupted int
	// Redelivered counts the executions that reached their outcome on the killed
	// replica just before it died, before ax recorded the result, and so ran again
	// (ax runs a task at least once); their effect stayed once.
	Redelivered int
	// Early counts executions (of both kinds) that started before their due time:
	// must be 0.
	Early int
	// Lateness of the close handler's executions: start minus DueAt.
	LatenessP50, LatenessP99, LatenessMax time.Duration
	// GapTasks are the executions of tasks that came due between the kill and the new
	// leader's term; GapLatenessMin/Max their lateness.
	GapTasks                       int
	GapLatenessMin, GapLatenessMax time.Duration
	// OnTimeP99 is the lateness p99 of the other executions.
	OnTimeP99 time.Duration

	// The reconciliation.
	ReconcileFrom          time.Time // the first slot observed
	ReconcileSlots         int       // slots observed
	ReconcileRuns          int       // completed runs in those slots
	ReconcileSkipped       int       // slots SKIPPED (a run held the key)
	ReconcileLost          int       // slots without a task, or not SUCCEEDED/SKIPPED: must be 0
	ReconcileDoubled       int       // slots run to completion more than once: must be 0
	ReconcileMaxConcurrent int       // the most runs at once, over every replica: must be 1
	ReconcileLatenessP99   time.Duration

	Elapsed time.Duration // from the orders' creation to the last task settled
}

// cluster is one run of the cluster scenario.
type cluster struct {
	cc     Config
	tm     clusterTiming
	ns     string
	secret []byte
	st     *sqlite.Store
	biz    *bizDB
	el     *sqllease.Elector
	client *ax.Scheduler // the front end: submits, cancels, reads; never starts
	out    *demo.Printer
	plan   *demo.Plan
	due    map[string]time.Time // each order's due time, as Delay returned it
	stderr io.Writer
	dbPath string

	events chan replicaEvent
	quit   chan struct{} // closed at the end: the replicas' lines are no longer passed on

	replicas []*replica
	leader   *replica
	leaders  []string

	slowEvery, slowPhase int64

	// The failover, in the main loop.
	phase          clusterPhase
	killAt         time.Time
	killed         *replica
	killedEpoch    int64
	killedAt       time.Time
	leaseSeen      time.Time // the last poll of the lease that saw it held by killed
	leaseLeft      time.Duration
	leaseExpired   time.Time
	lastLeaseLine  time.Time
	newLeader      *replica
	newLeaderAt    time.Time
	newEpoch       int64
	replaceAt      time.Time
	replacement    *replica
	announcedFirst bool // the replacement's first execution was pointed out
	stopping       bool // stopAll was called: leadership changes are the handover of Stop

	// When the main loop next polls the lease, reads the tasks, prints progress.
	nextLease, nextSettle, nextProgress time.Time

	// Settlement, in the main loop.
	created    time.Time
	settled    map[string]ax.Status // orders whose task is terminal
	slot0      time.Time
	slots      int
	slotStatus []ax.Status
	taskNode   map[int64]string // task id → the replica that last started it
	closedN    int
	paidN      int
	recRuns    int
	recSkipped int
}

type clusterPhase int

const (
	phaseRunning    clusterPhase = iota // before the kill
	phaseKilled                         // the leader is dead; waiting for the next
	phaseFailedOver                     // a new leader; the replacement starts soon
	phaseReplaced                       // the replacement was started
)

// Run runs the cluster scenario and reports it to out, live: the replicas,
// which one leads and with which epoch, which replica runs each task, the kill, the
// lease expiring, the new leader and the time the failover took, the tasks that came
// due meanwhile running late and never early, the replacement joining; then the
// checks and a summary. It returns an error if the scenario could not run, did not
// finish within cc.Wait, or a check failed; the summary is filled as far as the run
// got.
func Run(ctx context.Context, cc Config, out io.Writer) (sum Summary, err error) {
	cc = cc.withDefaults()
	if err := cc.validate(); err != nil {
		return sum, err
	}
	sum.DB, sum.KeptDB, sum.LeaseTTL = cc.DB, cc.DB != "", cc.LeaseTTL
	if cc.DB == "" {
		dir, err := os.MkdirTemp("", "ax-demo-")
		if err != nil {
			return sum, fmt.Errorf("demo: temporary database: %w", err)
		}
		defer os.RemoveAll(dir)
		sum.DB = filepath.Join(dir, "ax.db")
	}
	tag := strconv.FormatInt(time.Now().UnixMilli(), 36)
	tag = tag[max(len(tag)-6, 0):]
	c := &cluster{
		cc: cc, tm: cc.timing(), ns: "demo-" + tag,
		out:    demo.NewPrinter(out),
		plan:   demo.NewPlan(cc.Config, tag),
		due:    map[string]time.Time{},
		events: make(chan replicaEvent, 64), quit: make(chan struct{}),
		settled: map[string]ax.Status{}, taskNode: map[int64]string{},
		slowEvery: 5,
	}
	defer c.out.Close()
	sum.Namespace, c.dbPath = c.ns, sum.DB
	c.slowPhase = mrand.New(mrand.NewPCG(cc.Seed, 0x7263)).Int64N(c.slowEvery)
	c.stderr = io.Discard
	if cc.NodeStderr != nil {
		c.stderr = &lockedWriter{w: cc.NodeStderr}
	}
	c.secret = make([]byte, 32)
	if _, err := rand.Read(c.secret); err != nil {
		return sum, fmt.Errorf("demo: cluster secret: %w", err)
	}

	if c.st, err = sqlite.Open(sum.DB); err != nil {
		return sum, fmt.Errorf("demo: %w", err)
	}
	defer c.st.Close()
	if c.biz, err = openBiz(ctx, sum.DB, c.ns, true); err != nil {
		return sum, fmt.Errorf("demo: %w", err)
	}
	defer c.biz.close()
	if c.el, err = sqllease.New(c.st, sqllease.WithNamespace(c.ns), sqllease.WithTTL(cc.LeaseTTL), sqllease.WithLogger(cc.Logger)); err != nil {
		return sum, fmt.Errorf("demo: %w", err)
	}
	no := false
	c.client, err = ax.New(ax.Config{
		Store: c.st, Node: "front-end", OwnerService: demo.OwnerService, Logger: cc.Logger,
		Namespace: c.ns, Elector: c.el, CanLead: &no,
	})
	if err != nil {
		return sum, fmt.Errorf("demo: %w", err)
	}
	defer c.shutdown()

	c.header(sum)
	for i := range cc.Nodes {
		if _, err := c.spawn(fmt.Sprintf("node-%d", i+1)); err != nil {
			return sum, err
		}
	}
	if err := c.waitStarted(ctx); err != nil {
		return sum, err
	}
	if err := c.createOrders(ctx); err != nil {
		return sum, err
	}
	script := newClusterScript(c, c.createdAt())
	script.start(ctx)
	defer script.Stop()

	loopErr := c.loop(ctx, script)
	elapsed := time.Since(c.created)
	c.paidN = int(script.paid.Load())
	if loopErr != nil {
		c.fillPartial(&sum)
		return sum, loopErr
	}
	if c.slots > 0 {
		if err := c.client.PauseSchedule(ctx, demo.ReconcileName); err != nil {
			return sum, fmt.Errorf("demo: pause the reconciliation: %w", err)
		}
	}
	if err := c.stopAll(); err != nil {
		return sum, err
	}
	problems, err := c.verify(ctx, &sum)
	sum.Elapsed = elapsed
	if err != nil {
		return sum, err
	}
	c.report(sum, problems)
	if len(problems) > 0 {
		return sum, fmt.Errorf("demo: verify failed: %s", demo.Clip(problems, 5))
	}
	return sum, nil
}

// createdAt returns each order's creation time, from its due time and timeout.
func (c *cluster) createdAt() map[string]time.Time {
	m := make(map[string]time.Time, len(c.due))
	for id, due := range c.due {
		m[id] = due.Add(-c.plan.Timeout[id])
	}
	return m
}

func (c *cluster) header(sum Summary) {
	cc := c.cc
	where := "temporary file, removed at the end"
	if sum.KeptDB {
		where = "kept"
	}
	o := c.out
	o.Plain("ax demo --nodes %d — order timeout and payment reconciliation on %d replicas sharing one SQLite file", cc.Nodes, cc.Nodes)
	o.Plain("  store:     sqlite %s (%s), ax namespace %q", sum.DB, where, c.ns)
	o.Plain("  replicas:  %d processes (this program, re-executed), each an ax.Scheduler with both handlers; each serves", cc.Nodes)
	o.Plain("             Scheduler.ExecutorHandler() on a loopback port it advertises, requests signed with a random 32-byte secret")
	o.Plain("  election:  elect/sqllease on the same file; lease TTL %s, renewed every %s — short for the demo, so that it",
		demo.Secs(cc.LeaseTTL), demo.Secs(cc.LeaseTTL/3))
	o.Plain("             takes well under a minute (sqllease's default is 10s); the leader routes tasks round robin")
	o.Plain("  timing:    heartbeats every %s, a RUNNING task without one for %s is retried, a claim not started in %s is handed back",
		demo.Secs(c.tm.heartbeat), demo.Secs(c.tm.orphanAfter), demo.Secs(c.tm.dispatchTimeout))
	o.Plain("  orders:    %d, each closed if unpaid after %s–%s, created by this process (a front end: s.Delay, never leads)",
		cc.Orders, demo.Secs(cc.MinTimeout), demo.Secs(cc.MaxTimeout))
	o.Plain("  script:    %d users pay in time, 1 cancels the order (s.Cancel), %d handlers fail once and retry after %s",
		len(c.plan.PayAt), len(c.plan.Flaky), demo.Secs(cc.RetryBackoff))
	if cc.Reconciles() {
		o.Plain("  schedule:  s.Every(%q, %s) on every replica, fired by the leader; a run takes %s, a slow one %s (overlap: skip)",
			demo.ReconcileName, cc.ReconcileEvery, demo.Secs(demo.ReconcileFastTook), demo.Secs(cc.ReconcileSlowTook))
	}
	o.Plain("  failover:  the leader is killed with SIGKILL (kill -9) %s after the orders are created; a replacement joins after",
		demo.Secs(cc.KillAfter))
	o.Plain("")
}

// spawn starts replica name.
func (c *cluster) spawn(name string) (*replica, error) {
	cfg := nodeConfig{
		Node: name, DB: c.dbPath, Namespace: c.ns, Secret: c.secret,
		LeaseTTL: c.cc.LeaseTTL, HeartbeatInterval: c.tm.heartbeat, OrphanAfter: c.tm.orphanAfter,
		DispatchTimeout: c.tm.dispatchTimeout, RefillInterval: c.tm.refill, RetryBackoff: c.cc.RetryBackoff,
		ReconcileSlowTook: c.cc.ReconcileSlowTook, SlowEvery: c.slowEvery, SlowPhase: c.slowPhase,
		LogLevel: c.cc.NodeLogLevel,
	}
	if c.cc.Reconciles() {
		cfg.ReconcileEvery = c.cc.ReconcileEvery
	}
	r, err := spawn(c.cc.NodeCommand(), cfg, c.stderr, c.events, c.quit)
	if r != nil {
		c.replicas = append(c.replicas, r)
	}
	if err != nil {
		return r, fmt.Errorf("demo: %w", err)
	}
	return r, nil
}

// replicaStartTimeout bounds a replica's start, up to its ready line.
const replicaStartTimeout = 30 * time.Second

// waitStarted waits until every replica is ready and one leads.
func (c *cluster) waitStarted(ctx context.Context) error {
	deadline := time.NewTimer(replicaStartTimeout)
	defer deadline.Stop()
	for {
		ready := 0
		for _, r := range c.replicas {
			if r.ready {
				ready++
			}
		}
		if ready == len(c.replicas) && c.leader != nil {
			return nil
		}
		select {
		case e := <-c.events:
			if err := c.handle(e); err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("demo: interrupted: %w", ctx.Err())
				}
				return err
			}
		case <-ctx.Done():
			return fmt.Errorf("demo: interrupted: %w", ctx.Err())
		case <-deadline.C:
			return fmt.Errorf("demo: the replicas did not all start and elect a leader within %v (%d of %d ready)",
				replicaStartTimeout, ready, len(c.replicas))
		}
	}
}

// createOrders inserts the orders and submits their close timeouts through the front
// end, and fixes the reconciliation slots observed.
func (c *cluster) createOrders(ctx context.Context) error {
	c.created = time.Now()
	for _, id := range c.plan.IDs {
		if err := c.biz.insertOrder(ctx, id, c.plan.Amount[id]); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		b, err := json.Marshal(clusterPayload{OrderID: id, AmountCents: c.plan.Amount[id], CreatedAt: time.Now().UTC(), FailOnce: c.plan.Flaky[id]})
		if err != nil {
			return fmt.Errorf("demo: order %s: %w", id, err)
		}
		t, err := c.client.Delay(ctx, demo.TaskName, id, c.plan.Timeout[id], ax.WithPayload(b))
		if err != nil {
			return fmt.Errorf("demo: schedule the close of order %s: %w", id, err)
		}
		c.due[id] = t.DueAt
	}
	c.killAt = c.created.Add(c.cc.KillAfter)
	c.out.Line("created %d orders through the front end; their close timeouts are in the store, for whichever replica leads", len(c.plan.IDs))
	if c.cc.Reconciles() {
		every := c.cc.ReconcileEvery
		c.slot0 = time.Unix(0, 0).Add((time.Since(time.Unix(0, 0))/every + 1) * every)
		c.slots = max(demo.CeilDiv(c.cc.MaxTimeout+c.cc.RetryBackoff, every), 3)
		// Do not end on a slow run: the demo would wait for it, doing nothing else.
		for c.slots > 3 && slowSlot(c.slot(c.slots-1), every, c.slowEvery, c.slowPhase) {
			c.slots--
		}
		c.slotStatus = make([]ax.Status, c.slots)
		var slow []string
		for i := range c.slots {
			if slowSlot(c.slot(i), every, c.slowEvery, c.slowPhase) {
				slow = append(slow, demo.Clock(c.slot(i)))
			}
		}
		what := "none"
		if len(slow) > 0 {
			what = strings.Join(slow, ", ")
		}
		c.out.Line("reconcile: observing %d slots from %s; slow runs planned at %s", c.slots, demo.Clock(c.slot0), what)
	}
	return nil
}

func (c *cluster) slot(i int) time.Time { return c.slot0.Add(time.Duration(i) * c.cc.ReconcileEvery) }

// slotIndex returns the observed slot whose key is key, if any.
func (c *cluster) slotIndex(key string) (int, bool) {
	t, err := time.Parse(time.RFC3339Nano, key)
	if err != nil || c.slots == 0 {
		return 0, false
	}
	d := t.Sub(c.slot0)
	if d < 0 || d%c.cc.ReconcileEvery != 0 {
		return 0, false
	}
	i := int(d / c.cc.ReconcileEvery)
	return i, i < c.slots
}

// The main loop's intervals.
const (
	clusterTick   = 50 * time.Millisecond
	settlePoll    = 250 * time.Millisecond
	leasePoll     = 100 * time.Millisecond
	leaseLineGap  = 500 * time.Millisecond
	killPatience  = 1500 * time.Millisecond // how long the kill waits for the leader to run nothing
	clusterStopTO = nodeStopTimeout + 5*time.Second
)

// loop runs the scenario until every task settled: it passes on the replicas'
// events, kills the leader at killAt, follows its lease until another leads, starts
// the replacement, and reads the tasks' states.
func (c *cluster) loop(ctx context.Context, script *clusterScript) error {
	deadline := time.NewTimer(c.cc.Wait)
	defer deadline.Stop()
	tick := time.NewTicker(clusterTick)
	defer tick.Stop()
	if c.cc.Progress > 0 {
		c.nextProgress = time.Now().Add(c.cc.Progress)
	}
	scriptDone := script.Done
	for {
		select {
		case e := <-c.events:
			if err := c.handle(e); err != nil {
				if ctx.Err() != nil { // Ctrl-C reaches the replicas too: they stop on their own
					return fmt.Errorf("demo: interrupted: %w", ctx.Err())
				}
				return err
			}
			continue
		case <-scriptDone:
			scriptDone = nil
			if script.Err != nil {
				return script.Err
			}
			continue
		case <-ctx.Done():
			return fmt.Errorf("demo: interrupted: %w", ctx.Err())
		case <-deadline.C:
			return fmt.Errorf("demo: not finished after %v: %s", c.cc.Wait, c.pendingReport())
		case <-tick.C:
		}
		if err := c.step(ctx, script, time.Now(), scriptDone == nil); err != nil {
			if errors.Is(err, errSettled) {
				return nil
			}
			if ctx.Err() != nil {
				return fmt.Errorf("demo: interrupted: %w", ctx.Err())
			}
			return err
		}
	}
}

// errSettled ends the main loop: every task settled.
var errSettled = errors.New("settled")

// step is one tick of the main loop: the kill, the lease, the replacement, the
// settlement and the progress line, each when its time has come.
func (c *cluster) step(ctx context.Context, script *clusterScript, now time.Time, scriptDone bool) error {
	switch c.phase {
	case phaseRunning:
		if !now.Before(c.killAt) {
			if err := c.tryKill(ctx, now); err != nil {
				return err
			}
		}
	case phaseKilled:
		if !now.Before(c.nextLease) {
			c.nextLease = now.Add(leasePoll)
			c.watchLease(ctx, now)
		}
	case phaseFailedOver:
		if !now.Before(c.replaceAt) {
			if err := c.startReplacement(); err != nil {
				return err
			}
		}
	}
	if !now.Before(c.nextSettle) {
		c.nextSettle = now.Add(settlePoll)
		done, err := c.settle(ctx, now)
		if err != nil {
			return err
		}
		if done && scriptDone && c.phase == phaseReplaced && c.replacement.ready {
			if c.cc.Progress > 0 {
				c.out.Line("%s", c.progressLine(script))
			}
			return errSettled
		}
	}
	if c.cc.Progress > 0 && !now.Before(c.nextProgress) {
		c.nextProgress = now.Add(c.cc.Progress)
		c.out.Line("%s", c.progressLine(script))
	}
	return nil
}

// handle applies one replica event and prints what it means.
func (c *cluster) handle(e replicaEvent) error {
	r := e.r
	if e.exit {
		r.gone = true
		r.leading = false
		if c.leader == r {
			c.leader = nil
		}
		switch {
		case r.killed:
			c.out.Line("%-7s is gone (%v): it ran no code of its own after the signal", r.name, r.exitErr)
		case r.stopping && r.exitErr == nil:
		case r.stopping:
			return fmt.Errorf("demo: replica %s stopped with %v", r.name, r.exitErr)
		default:
			return fmt.Errorf("demo: replica %s exited unexpectedly (%v)", r.name, r.exitErr)
		}
		return nil
	}
	if e.bad != "" {
		c.out.Line("%-7s printed: %s", r.name, e.bad)
		return nil
	}
	ev := e.ev
	switch ev.Ev {
	case evReady:
		r.ready, r.readyAt, r.addr = true, time.Now(), ev.Addr
		what := ""
		if r == c.replacement {
			what = fmt.Sprintf(", replacing %s: it registers in ax_nodes, and the leader routes tasks to it from its next refresh of the nodes (every %s)",
				c.killed.name, demo.Secs(c.tm.heartbeat))
		}
		c.out.Line("%-7s ready: pid %d, executor endpoint at %s (started in %s)%s", r.name, ev.PID, ev.Addr, demo.Secs(r.readyAt.Sub(r.spawned)), what)
	case evLeading:
		r.leading, r.epoch = true, ev.Epoch
		c.leader = r
		if c.stopping {
			c.out.Line("%-7s LEADS (epoch %d) as the others stop: a stopping leader resigns its lease, and a standby takes it at once", r.name, ev.Epoch)
			return nil
		}
		c.leaders = append(c.leaders, fmt.Sprintf("%s@%d", r.name, ev.Epoch))
		if c.phase == phaseKilled && r != c.killed {
			c.newLeader, c.newLeaderAt, c.newEpoch = r, ev.At, ev.Epoch
			if c.leaseExpired.IsZero() {
				// Taken before a poll saw it expire: it expired when the last poll
				// said it would.
				c.leaseExpired = c.leaseSeen.Add(c.leaseLeft)
				if c.leaseExpired.After(ev.At) {
					c.leaseExpired = ev.At
				}
				c.out.Line("lease of %s expired %s after the kill; a standby, waiting for exactly that moment, took it",
					c.killed.name, secs2(c.leaseExpired.Sub(c.killedAt)))
			}
			c.out.Line("%-7s LEADS (epoch %d), %s after the kill (lease TTL %s): it raised the fence, loads the window and claims what came due meanwhile",
				r.name, ev.Epoch, secs2(ev.At.Sub(c.killedAt)), demo.Secs(c.cc.LeaseTTL))
			c.phase = phaseFailedOver
			c.replaceAt = time.Now().Add(c.cc.LeaseTTL / 4)
			return nil
		}
		c.out.Line("%-7s LEADS (epoch %d): it runs the scheduling loop and hands each due task to a replica, itself included", r.name, ev.Epoch)
	case evFollowing:
		r.leading = false
		if c.leader == r {
			c.leader = nil
		}
		c.out.Line("%-7s no longer leads (epoch %d ended: %s)", r.name, ev.Epoch, ev.Reason)
	case evFenced:
		c.out.Line("%-7s was fenced: the store refused its %s write, a newer leader is recorded", r.name, ev.Reason)
	case evHandBack:
		c.out.Line("%-7s handed back a %s task: %s", r.name, ev.Name, ev.Reason)
	case evUnreachable:
		dead := ""
		if c.killed != nil {
			dead = fmt.Sprintf(" — the killed %s is routed to until its row in ax_nodes is 3 heartbeats old (%s) —",
				c.killed.name, secs2(3*c.tm.heartbeat))
		}
		c.out.Line("%-7s could not reach a replica (%s) with %d tasks%s: it routes them to another replica", r.name, ev.Reason, ev.Count, dead)
	case evOrphan:
		c.out.Line("%-7s recovered an orphaned %s task (RUNNING, no heartbeat for %s): it will run again", r.name, ev.Name, demo.Secs(c.tm.orphanAfter))
	case evStart:
		r.inflight[ev.Exec] = ev
		r.runs++
		c.taskNode[ev.TaskID] = r.name
		if ev.Name == demo.ReconcileName {
			c.printReconcileStart(r, ev)
		}
		if r == c.replacement && !c.announcedFirst {
			c.announcedFirst = true
			c.out.Line("%-7s runs its first task, handed to it by the leader %s", r.name, c.leaderName())
		}
	case evEnd:
		delete(r.inflight, ev.Exec)
		c.printEnd(r, ev)
	case evError:
		return fmt.Errorf("demo: replica %s failed: %s", r.name, ev.Err)
	case evStopped:
	}
	return nil
}

func (c *cluster) leaderName() string {
	if c.leader == nil {
		return "(none)"
	}
	return c.leader.name
}

// gapNote says when a task due at due came due while nobody led.
func (c *cluster) gapNote(due time.Time, late time.Duration) string {
	switch {
	case late < 0:
		return fmt.Sprintf(" — EARLY by %s", demo.Ms(-late))
	case c.inGap(due):
		return " — due while nobody led: late, not early"
	}
	return ""
}

// inGap reports whether due fell between the kill and the new leader's term.
func (c *cluster) inGap(due time.Time) bool {
	if c.killedAt.IsZero() || due.Before(c.killedAt) {
		return false
	}
	return c.newLeaderAt.IsZero() || !due.After(c.newLeaderAt)
}

func (c *cluster) printReconcileStart(r *replica, ev nodeEvent) {
	what := ""
	if ev.Slow {
		what = fmt.Sprintf(": a SLOW run, takes %s", demo.Secs(c.cc.ReconcileSlowTook))
	}
	if ev.Attempt > 0 {
		what += fmt.Sprintf(" (attempt %d)", ev.Attempt+1)
	}
	c.out.Line("%-7s reconcile slot %s: run started %s after its slot%s%s", r.name, demo.Clock(ev.Due), demo.Ms(ev.Late), what, c.gapNote(ev.Due, ev.Late))
}

func (c *cluster) printEnd(r *replica, ev nodeEvent) {
	if ev.Name == demo.ReconcileName {
		if ev.Slow || ev.Outcome != outReconciled {
			c.out.Line("%-7s reconcile slot %s: run ended after %s (%s)", r.name, demo.Clock(ev.Due), demo.Secs(ev.Took), ev.Outcome)
		}
		if ev.Outcome == outReconciled {
			if _, ok := c.slotIndex(ev.Key); ok {
				c.recRuns++
			}
		}
		return
	}
	note := c.gapNote(ev.Due, ev.Late)
	retry := ""
	if ev.Attempt > 0 {
		retry = fmt.Sprintf(" (retry %d)", ev.Attempt)
	}
	switch ev.Outcome {
	case outClosed:
		c.closedN++
		c.out.Line("%-7s order %s closed%s: unpaid after %s; started %s after its due time%s",
			r.name, ev.Key, retry, demo.Secs(c.plan.Timeout[ev.Key]), demo.Ms(ev.Late), note)
	case outAlreadyPaid:
		c.out.Line("%-7s order %s%s: already paid, nothing to do (%s late)%s", r.name, ev.Key, retry, demo.Ms(ev.Late), note)
	case outFailed:
		c.out.Line("%-7s order %s: close failed on attempt %d: order database timed out (injected); ax retries in %s%s",
			r.name, ev.Key, ev.Attempt+1, demo.Secs(c.cc.RetryBackoff), note)
	case outAlreadyClosed:
		c.out.Line("%-7s order %s%s: ALREADY CLOSED by another execution: a duplicate run", r.name, ev.Key, retry)
	default:
		c.out.Line("%-7s order %s%s: %s: %s", r.name, ev.Key, retry, ev.Outcome, ev.Err)
	}
}

// tryKill kills the leader, at a moment it runs no handler of its own if one comes
// within killPatience (a task it runs itself would wait OrphanAfter to run again).
func (c *cluster) tryKill(ctx context.Context, now time.Time) error {
	l := c.leader
	if l == nil || l.gone {
		return nil // between terms: wait for the next
	}
	if len(l.inflight) > 0 && now.Before(c.killAt.Add(killPatience)) {
		return nil
	}
	st, err := c.el.Leader(ctx)
	if err != nil {
		return fmt.Errorf("demo: read the lease: %w", err)
	}
	if st.Holder != l.name {
		return nil // the lease says otherwise, for the moment
	}
	running := ""
	if n := len(l.inflight); n > 0 {
		running = fmt.Sprintf("; it was running %d handlers, which ax re-runs elsewhere after OrphanAfter (%s)", n, demo.Secs(c.tm.orphanAfter))
	}
	killedAt, err := l.kill()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	c.killedAt = killedAt
	l.killed = true
	c.killed, c.killedEpoch = l, l.epoch
	c.leaseSeen, c.leaseLeft = c.killedAt, st.Remaining
	c.lastLeaseLine = c.killedAt
	c.phase = phaseKilled
	c.out.Line("kill -9 %s (pid %d), the leader (epoch %d): its lease has %s left and will not be renewed%s",
		l.name, l.pid, l.epoch, secs2(st.Remaining), running)
	return nil
}

// watchLease polls the lease after the kill and prints it running out.
func (c *cluster) watchLease(ctx context.Context, now time.Time) {
	if !c.leaseExpired.IsZero() {
		return
	}
	st, err := c.el.Leader(ctx)
	if err != nil {
		c.cc.Logger.WarnContext(ctx, "demo: read the lease", "err", err)
		return
	}
	if st.Holder == c.killed.name && st.Token == c.killedEpoch && st.Remaining > 0 {
		c.leaseSeen, c.leaseLeft = now, st.Remaining
		if now.Sub(c.lastLeaseLine) >= leaseLineGap {
			c.lastLeaseLine = now
			c.out.Line("lease of %s (epoch %d): %s left, not renewed; the standbys wait for it to expire", c.killed.name, c.killedEpoch, demo.Secs(st.Remaining))
		}
		return
	}
	c.leaseExpired = c.leaseSeen.Add(c.leaseLeft)
	if c.leaseExpired.After(now) {
		c.leaseExpired = now
	}
	who := "nobody holds it yet"
	if st.Holder != "" {
		who = fmt.Sprintf("%s holds it now (epoch %d)", st.Holder, st.Token)
	}
	c.out.Line("lease of %s expired %s after the kill: %s", c.killed.name, secs2(c.leaseExpired.Sub(c.killedAt)), who)
}

// startReplacement starts a replica in place of the killed one.
func (c *cluster) startReplacement() error {
	name := fmt.Sprintf("node-%d", len(c.replicas)+1)
	r, err := c.spawn(name)
	if err != nil {
		return err
	}
	c.replacement = r
	c.phase = phaseReplaced
	c.out.Line("starting %s to replace %s", name, c.killed.name)
	return nil
}

// settle reads the state of the tasks not yet terminal; it reports whether every
// order's task and every observed slot is.
func (c *cluster) settle(ctx context.Context, now time.Time) (bool, error) {
	done := true
	for _, id := range c.plan.IDs {
		if _, ok := c.settled[id]; ok {
			continue
		}
		t, err := c.client.Lookup(ctx, demo.TaskName, id)
		if err != nil {
			return false, fmt.Errorf("demo: %w", err)
		}
		if !t.Status.Terminal() {
			done = false
			continue
		}
		c.settled[id] = t.Status
	}
	for i := range c.slots {
		if c.slotStatus[i] != "" {
			continue
		}
		if c.slot(i).After(now) {
			done = false
			continue
		}
		t, err := c.client.Lookup(ctx, demo.ReconcileName, demo.SlotKey(c.slot(i)))
		switch {
		case errors.Is(err, ax.ErrNotFound):
			done = false
			continue
		case err != nil:
			return false, fmt.Errorf("demo: %w", err)
		case !t.Status.Terminal():
			done = false
			continue
		}
		c.slotStatus[i] = t.Status
		if t.Status == ax.Skipped {
			c.recSkipped++
			holder := ""
			if id, ok := heldBy(t.LastError); ok {
				switch n := c.taskNode[id]; {
				case n == "":
				case c.killed != nil && n == c.killed.name && c.slot(i).After(c.killedAt):
					holder = fmt.Sprintf(", whose run on the killed %s holds the key until recovery finds it without heartbeats", n)
				default:
					holder = ", running on " + n
				}
			}
			c.out.Line("reconcile slot %s: SKIPPED by ax (%s%s)", demo.Clock(c.slot(i)), strings.TrimPrefix(t.LastError, "skipped: "), holder)
		}
	}
	return done, nil
}

// heldBy returns the task id a skip's reason ("… held by task 42") names.
func heldBy(reason string) (int64, bool) {
	i := strings.LastIndex(reason, " task ")
	if i < 0 {
		return 0, false
	}
	id, err := strconv.ParseInt(reason[i+len(" task "):], 10, 64)
	return id, err == nil
}

func (c *cluster) progressLine(script *clusterScript) string {
	var by []string
	for _, r := range c.replicas {
		state := ""
		switch {
		case r.killed:
			state = " (killed)"
		case r.leading:
			state = fmt.Sprintf(" (leader, epoch %d)", r.epoch)
		}
		by = append(by, fmt.Sprintf("%s %d%s", r.name, r.runs, state))
	}
	line := fmt.Sprintf("runs: %s | orders closed %d, paid %d, settled %d/%d", strings.Join(by, ", "),
		c.closedN, script.paid.Load(), len(c.settled), len(c.plan.IDs))
	if c.slots > 0 {
		line += fmt.Sprintf(" | reconcile runs %d, skipped %d", c.recRuns, c.recSkipped)
	}
	return line
}

// pendingReport names what has not settled, for the deadline's error.
func (c *cluster) pendingReport() string {
	var pending []string
	if c.phase == phaseKilled {
		pending = append(pending, fmt.Sprintf("no new leader since %s was killed %s ago", c.killed.name, demo.Secs(time.Since(c.killedAt))))
	}
	for _, id := range c.plan.IDs {
		if _, ok := c.settled[id]; !ok {
			pending = append(pending, "order "+id)
		}
	}
	for i := range c.slots {
		if c.slotStatus[i] == "" {
			pending = append(pending, "reconcile slot "+demo.Clock(c.slot(i)))
		}
	}
	return fmt.Sprintf("%d pending: %s", len(pending), demo.Clip(pending, 10))
}

// stopAll stops every live replica gracefully (it closes their stdin) and waits
// for them, passing on their last events.
func (c *cluster) stopAll() error {
	c.stopping = true
	for _, r := range c.replicas {
		if !r.gone && !r.stopping {
			r.stop()
		}
	}
	deadline := time.NewTimer(clusterStopTO)
	defer deadline.Stop()
	for {
		live := 0
		for _, r := range c.replicas {
			if !r.gone {
				live++
			}
		}
		if live == 0 {
			return nil
		}
		select {
		case e := <-c.events:
			if err := c.handle(e); err != nil {
				return err
			}
		case <-deadline.C:
			return fmt.Errorf("demo: %d replicas did not stop within %v", live, clusterStopTO)
		}
	}
}

// shutdown ends every replica still running — gracefully, then with SIGKILL after
// clusterStopTO — and waits until each is reaped and its lines read.
func (c *cluster) shutdown() {
	for _, r := range c.replicas {
		if !r.hasExited() && !r.stopping {
			r.stop()
		}
	}
	close(c.quit)
	giveUp := time.After(clusterStopTO)
	for _, r := range c.replicas {
		select {
		case <-r.proc.Done():
		case <-giveUp:
			r.kill()
			<-r.proc.Done()
		}
	}
}

// fillPartial fills what is known of a run that did not finish.
func (c *cluster) fillPartial(sum *Summary) {
	for _, r := range c.replicas {
		sum.Replicas = append(sum.Replicas, r.name)
	}
	sum.Leaders = slices.Clone(c.leaders)
	if c.killed != nil {
		sum.Killed, sum.KilledEpoch, sum.KilledAt = c.killed.name, c.killedEpoch, c.killedAt
	}
	if c.newLeader != nil {
		sum.NewLeader, sum.NewEpoch, sum.Failover = c.newLeader.name, c.newEpoch, c.newLeaderAt.Sub(c.killedAt)
	}
}

// secs2 formats a duration in seconds with two decimals, e.g. "1.52s".
func secs2(d time.Duration) string {
	return fmt.Sprintf("%.2fs", d.Seconds())
}
