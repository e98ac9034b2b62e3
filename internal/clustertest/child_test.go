//go:build linux

package clustertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/axsched/ax"
	"github.com/axsched/ax/elect"
	axredis "github.com/axsched/ax/elect/redis"
	"github.com/axsched/ax/elect/sqllease"
	"github.com/axsched/ax/internal/childproc"
	"github.com/axsched/ax/internal/clock"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/mysql"
	"github.com/axsched/ax/store/postgres"
)

// ChildEnv is the environment variable that carries a child's ChildConfig, as JSON.
const ChildEnv = "AX_CLUSTERTEST_CHILD"

// ChildTest is the test a child runs: the test package must have one of this name
// that calls RunChild.
const ChildTest = "TestChild"

// TaskName is the name the child's handler is registered under.
const TaskName = "job"

// EffectsTable is the table, in the test's schema, where handlers with
// ChildConfig.EffectTx write their effects: one row per committed effect, keyed by
// execution id. The parent creates it (CreateEffects).
const EffectsTable = "ax_test_effects"

// CreateEffects creates EffectsTable through st's database, in its schema.
func CreateEffects(ctx context.Context, st store.Transactor) error {
	return st.InTx(ctx, func(tx store.Tx) error {
		_, err := tx.Raw().(pgx.Tx).Exec(ctx, `CREATE TABLE `+EffectsTable+` (execution_id text PRIMARY KEY, task_id bigint NOT NULL,
			node text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`)
		return err
	})
}

// EveryName is the name of the periodic schedule a child registers when
// ChildConfig.Every is set, and of its handler.
const EveryName = "tick"

// listenerFD is the descriptor under which a child finds the listener StartChild
// passes it (the first of exec.Cmd.ExtraFiles).
const listenerFD = 3

// ChildConfig configures one child process: an ax scheduler on a PostgreSQL store (or
// a MySQL one), elected by Redis (or by a SQL lease on the store).
type ChildConfig struct {
	Node        string // Config.Node and the Redis candidate name
	PostgresDSN string
	// MySQLDSN, when set, puts the scheduler on a MySQL store at this DSN instead of
	// PostgresDSN's (EffectTx is PostgreSQL's only).
	MySQLDSN    string
	RedisAddr   string
	RedisDB     int
	RedisPrefix string // elect/redis WithKeyPrefix
	Namespace   string // Config.Namespace and the election's; "" is ax.DefaultNamespace

	// SQLLease elects by elect/sqllease on the store instead of Redis, with
	// LeasePoll as its fallback poll (zero: the elector's default).
	SQLLease  bool
	LeasePoll time.Duration

	TTL               time.Duration // the election's lease
	HeartbeatInterval time.Duration
	OrphanAfter       time.Duration
	DispatchTimeout   time.Duration // zero: ax's default

	// StoreTimeout is Config.StoreTimeout; zero: ax's default. Under an elector it
	// also bounds how long a leader's store may go without answering before it resigns.
	StoreTimeout time.Duration
	// Concurrency is Config.Concurrency; zero: ax's default.
	Concurrency int

	// HandlerDuration is how long the handler sleeps, unless its context ends first;
	// with HandlerJitter, a random duration in [0, HandlerJitter) more.
	HandlerDuration time.Duration
	HandlerJitter   time.Duration
	// Limit, when set, registers TaskName's handler with ax.WithConcurrency(Limit);
	// Rate, with ax.WithRate(Rate, RatePer); KeyRate, with ax.WithKeyRate(KeyRate,
	// KeyRatePer).
	Limit      int
	Rate       int
	RatePer    time.Duration
	KeyRate    int
	KeyRatePer time.Duration
	// RunLog is the path of the run log the handler appends to.
	RunLog string

	// ExecutorOnly makes the child never a candidate (Config.CanLead false): it runs
	// only what a leader dispatches to it.
	ExecutorOnly bool
	// NoHandler registers no handler for TaskName: a leader without it has to send
	// those tasks to another replica.
	NoHandler bool
	// EffectTx makes TaskName's handler write its effect, a row of EffectsTable, in
	// a transaction of its own on the store's database (a pool of its own, of
	// Concurrency + 2 connections, at most 18: set Concurrency): it inserts the row, waits half
	// of HandlerDuration (rolling back if its context ends), checks its context, works
	// for the other half — the window between a handler's last check and its commit —
	// and commits. With CompleteTx it also completes the task in that transaction
	// (Scheduler.CompleteTx), right before the commit.
	EffectTx   bool
	CompleteTx bool
	// Every, when set, registers the periodic schedule EveryName at this interval
	// (Scheduler.Every) with catch-up misfires (MisfireCatchUp), queued overlaps
	// (OverlapQueue: an occurrence due while the previous one is still running waits
	// for it rather than being SKIPPED), and business retries 100ms apart. Its handler
	// logs its runs as TaskName's does, and is registered whatever NoHandler says (a
	// schedule needs one).
	Every time.Duration

	// Listener, when set, is a loopback listener the parent made for the child: the
	// child serves its Scheduler.ExecutorHandler on it. StartChild passes it to the
	// child as a file descriptor and closes the parent's copy, so that a child killed
	// takes its endpoint with it.
	Listener *net.TCPListener `json:"-"`
	// Serve says that the child has a listener to serve on (set by StartChild).
	Serve bool
	// Advertise is Config.Cluster.Advertise: the URL at which the leader reaches the
	// child's executor — its listener's, or that of a proxy in front of it. Empty:
	// the child takes no remote dispatch.
	Advertise string
	// Secret is Config.Cluster.Secret, the same for every child of a test.
	Secret []byte
	// RequestTimeout is Config.Cluster.RequestTimeout; zero: ax's default.
	RequestTimeout time.Duration
	// ClockSkew runs the child's scheduler as on a host whose wall clock is off by
	// this much (internal/clock.WithSkew): ahead when positive.
	ClockSkew time.Duration
}

// RunChild is the child side: run from the test named ChildTest, it runs the
// scheduler ChildEnv describes until SIGTERM, then stops it gracefully and exits the
// process; without ChildEnv it skips the test. It prints, one line each, to stdout:
//
//	SERVING <addr>                 the executor endpoint serves on addr (ChildConfig.Listener)
//	READY                          the scheduler started
//	LEADING <epoch> <unix-nanos>   a term began (EventLeadership)
//	FOLLOWING <reason> <unix-nanos> a term ended
//	FENCED <part> <unix-nanos>     the store refused a write as fenced (EventFenceRejected)
//	DISPATCH_FAILED <reason> <name> <unix-nanos>  a claimed task was handed back (EventDispatchFailed)
//	REQUEST <result> <tasks> <nanos> <unix-nanos> a dispatch request to another replica did not
//	                               end ok (EventExecutorRequest): its result, batch size, duration
//	ORPHAN <name> <unix-nanos>     recovery declared an execution orphaned (EventOrphanRecovered)
//	STOPPED                        Stop returned, after SIGTERM
//	ERROR <message>                the child failed and exits
//
// The times are those of the events, by the scheduler's store-corrected clock.
//
// The handler of TaskName (and of EveryName) writes a start entry to the run log when
// it is called, sleeps for HandlerDuration or until its context ends, checks its
// context and writes an end entry: ResultOK if the context was still live,
// ResultCancelled otherwise.
func RunChild(t testing.TB) {
	raw := os.Getenv(ChildEnv)
	if raw == "" {
		t.Skip("the child side of the clustertest harness: run by StartChild only")
	}
	out := childproc.NewWriter(os.Stdout)
	if err := runChild(raw, out); err != nil {
		out.Error(err)
		os.Exit(1)
	}
	out.Printf("STOPPED")
	os.Exit(0)
}

// leadership prints the leadership events.
type leadership struct{ out *childproc.Writer }

func (l leadership) Observe(e ax.Event) {
	reason := e.Reason
	if reason == "" {
		reason = "-"
	}
	switch e.Kind {
	case ax.EventLeadership:
		if e.Leader {
			l.out.Printf("LEADING %d %d", e.Epoch, e.At.UnixNano())
		} else {
			l.out.Printf("FOLLOWING %s %d", reason, e.At.UnixNano())
		}
	case ax.EventFenceRejected:
		l.out.Printf("FENCED %s %d", reason, e.At.UnixNano())
	case ax.EventDispatchFailed:
		l.out.Printf("DISPATCH_FAILED %s %s %d", reason, e.Name, e.At.UnixNano())
	case ax.EventExecutorRequest:
		if e.Reason != "ok" {
			l.out.Printf("REQUEST %s %d %d %d", reason, e.Count, e.Duration.Nanoseconds(), e.At.UnixNano())
		}
	case ax.EventOrphanRecovered:
		l.out.Printf("ORPHAN %s %d", e.Name, e.At.UnixNano())
	}
}

func runChild(raw string, out *childproc.Writer) error {
	var cfg ChildConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return fmt.Errorf("parse %s: %w", ChildEnv, err)
	}
	if cfg.Namespace == "" {
		cfg.Namespace = ax.DefaultNamespace
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", cfg.Node)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	var el elect.Elector
	if cfg.SQLLease {
		opts := []sqllease.Option{sqllease.WithNamespace(cfg.Namespace), sqllease.WithTTL(cfg.TTL), sqllease.WithLogger(logger)}
		if cfg.LeasePoll > 0 {
			opts = append(opts, sqllease.WithPollInterval(cfg.LeasePoll))
		}
		if el, err = sqllease.New(st, opts...); err != nil {
			return err
		}
	} else {
		rc := goredis.NewClient(&goredis.Options{Addr: cfg.RedisAddr, DB: cfg.RedisDB})
		defer rc.Close()
		el = axredis.New(rc, axredis.WithKeyPrefix(cfg.RedisPrefix), axredis.WithNamespace(cfg.Namespace),
			axredis.WithTTL(cfg.TTL), axredis.WithLogger(logger))
	}
	rl, err := OpenRunLog(cfg.RunLog)
	if err != nil {
		return err
	}
	defer rl.Close()

	var canLead *bool
	if cfg.ExecutorOnly {
		no := false
		canLead = &no
	}
	s, err := ax.New(ax.Config{
		Store: st, Node: cfg.Node, Namespace: cfg.Namespace, Elector: el, CanLead: canLead,
		HeartbeatInterval: cfg.HeartbeatInterval, OrphanAfter: cfg.OrphanAfter, DispatchTimeout: cfg.DispatchTimeout,
		StoreTimeout: cfg.StoreTimeout, Concurrency: cfg.Concurrency,
		Logger: logger, Observer: leadership{out: out},
		Cluster: ax.ClusterConfig{Advertise: cfg.Advertise, Secret: cfg.Secret, RequestTimeout: cfg.RequestTimeout},
	})
	if err != nil {
		return err
	}
	pid := os.Getpid()
	handler := func(ctx context.Context, t *ax.Task) error {
		e := Entry{Event: EventStart, Node: cfg.Node, PID: pid, TaskID: t.ID, Name: t.Name, Key: t.Key, ExecutionID: t.ExecutionID,
			Attempt: t.Attempt, At: time.Now(), ClaimedAt: t.DispatchedAt}
		e.CtxDone = ctx.Err() != nil
		mustLog(rl, out, e)
		if !e.CtxDone {
			d := cfg.HandlerDuration
			if cfg.HandlerJitter > 0 {
				d += rand.N(cfg.HandlerJitter)
			}
			timer := time.NewTimer(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
			}
			timer.Stop()
		}
		e.Event, e.At, e.Result, e.ClaimedAt = EventEnd, time.Now(), ResultOK, time.Time{}
		err := ctx.Err() // the last check, as a handler would before it commits its effect
		if err != nil {
			e.Result, e.Err = ResultCancelled, err.Error()
		}
		e.CtxDone = false
		mustLog(rl, out, e)
		return err
	}
	if cfg.EffectTx {
		// The application's own pool on the store's database, as large as the
		// handlers are many (Concurrency, which such a test sets small: every
		// connection counts against the server's max_connections, shared by the
		// tests running in parallel); the store's pool is for the scheduler.
		pc, err := pgxpool.ParseConfig(cfg.PostgresDSN)
		if err != nil {
			return err
		}
		pc.MaxConns = int32(min(cfg.Concurrency, 16)) + 2
		app, err := pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			return err
		}
		defer app.Close()
		handler = func(ctx context.Context, t *ax.Task) error {
			return effectTx(ctx, app, s, cfg, rl, out, t)
		}
	}
	if !cfg.NoHandler {
		var opts []ax.HandlerOption
		if cfg.Limit > 0 {
			opts = append(opts, ax.WithConcurrency(cfg.Limit))
		}
		if cfg.Rate > 0 {
			opts = append(opts, ax.WithRate(cfg.Rate, cfg.RatePer))
		}
		if cfg.KeyRate > 0 {
			opts = append(opts, ax.WithKeyRate(cfg.KeyRate, cfg.KeyRatePer))
		}
		s.HandleFunc(TaskName, handler, opts...)
	}
	if cfg.Every > 0 {
		s.HandleFunc(EveryName, handler)
		if err := s.Every(EveryName, cfg.Every, ax.WithMisfire(ax.MisfireCatchUp), ax.WithOverlap(ax.OverlapQueue),
			ax.WithBackoff(func(int) time.Duration { return 100 * time.Millisecond })); err != nil {
			return err
		}
	}
	var srv *http.Server
	served := make(chan error, 1)
	if cfg.Serve {
		ln, err := net.FileListener(os.NewFile(listenerFD, "listener"))
		if err != nil {
			return fmt.Errorf("the listener passed as descriptor %d: %w", listenerFD, err)
		}
		srv = &http.Server{Handler: s.ExecutorHandler(), ReadHeaderTimeout: 5 * time.Second}
		go func() { served <- srv.Serve(ln) }()
		out.Printf("SERVING %s", ln.Addr())
	}
	if err := s.Start(clock.WithSkew(ctx, cfg.ClockSkew)); err != nil {
		return err
	}
	out.Printf("READY")
	var serveErr error
	select {
	case <-sigs:
	case serveErr = <-served:
		serveErr = fmt.Errorf("serve the executor endpoint: %w", serveErr)
	}
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer stopCancel()
	err = s.Stop(stopCtx)
	if srv != nil {
		srv.Close()
	}
	return errors.Join(serveErr, err)
}

// leaserStore is a store that can also hold elect/sqllease's lease.
type leaserStore interface {
	store.Store
	store.Leaser
}

// openStore opens the child's store: MySQL at MySQLDSN when set, else PostgreSQL at
// PostgresDSN. A store out of reach at the start — a proxy whose health check flaps on
// a loaded machine cuts the connection — is tried again for up to 30 s, as a service's
// supervisor would restart it; a store that refuses the configuration is not.
func openStore(ctx context.Context, cfg ChildConfig) (leaserStore, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := openStoreOnce(ctx, cfg)
		if err == nil || errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrSchemaVersion) || time.Now().After(deadline) {
			return st, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func openStoreOnce(ctx context.Context, cfg ChildConfig) (leaserStore, error) {
	if cfg.MySQLDSN == "" {
		return postgres.Open(ctx, cfg.PostgresDSN)
	}
	if cfg.EffectTx {
		return nil, errors.New("EffectTx needs the PostgreSQL store")
	}
	return mysql.Open(cfg.MySQLDSN)
}

// mustLog writes e to the run log, or ends the process: a history with a hole in it
// would prove nothing.
func mustLog(rl *RunLog, out *childproc.Writer, e Entry) {
	if err := rl.Write(e); err != nil {
		out.Error(err)
		os.Exit(2)
	}
}

// Line is one line a child printed.
type Line struct{ childproc.Line }

// Stamp returns the time in the line's last field (LEADING, FOLLOWING, FENCED), or
// the time it was received.
func (l Line) Stamp() time.Time {
	if len(l.Fields) >= 3 {
		if n, err := strconv.ParseInt(l.Fields[len(l.Fields)-1], 10, 64); err == nil {
			return time.Unix(0, n)
		}
	}
	return l.Received
}

// Epoch returns the epoch of a LEADING line, or 0.
func (l Line) Epoch() int64 {
	if len(l.Fields) >= 2 && l.Fields[0] == "LEADING" {
		n, _ := strconv.ParseInt(l.Fields[1], 10, 64)
		return n
	}
	return 0
}

// Child is a child process running RunChild, as the parent sees it.
type Child struct {
	Config ChildConfig
	// Stderr is the file the child's stderr (the scheduler's logs) goes to.
	Stderr string

	p *childproc.Process
}

// StartChild starts the test binary as a child running cfg (it re-executes
// os.Args[0] with -test.run=^TestChild$). Its stderr goes to a file next to the run
// log, <node>.stderr. The child is killed (SIGKILL) when the test ends, if still
// running; a data race or panic it reported fails the test then.
func StartChild(t testing.TB, cfg ChildConfig) *Child {
	t.Helper()
	var lnFile *os.File
	if cfg.Listener != nil {
		f, err := cfg.Listener.File() // a duplicate, for the child
		if err != nil {
			t.Fatal(err)
		}
		lnFile = f
		cfg.Serve = true
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &Child{Config: cfg, Stderr: filepath.Join(filepath.Dir(cfg.RunLog), cfg.Node+".stderr")}
	cmd := childproc.TestCommand(ChildTest)
	if lnFile != nil {
		cmd.ExtraFiles = []*os.File{lnFile} // descriptor 3 (listenerFD)
	}
	c.p, err = childproc.Start(cmd, childproc.Options{Name: "child " + cfg.Node, Env: []string{ChildEnv + "=" + string(raw)}, StderrFile: c.Stderr})
	if lnFile != nil {
		// The child has its own descriptors now: the parent's copies go, so that the
		// endpoint lives and dies with the child.
		lnFile.Close()
		cfg.Listener.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Kill()
		for _, report := range childproc.Failures(c.p.Stderr()) {
			t.Errorf("child %s (pid %d) reported:\n%s", c.Node(), c.PID(), report)
		}
	})
	return c
}

// Listen makes a listener on a free loopback port for a child's executor endpoint
// (ChildConfig.Listener) and returns it with its URL. It is closed when the test ends
// if no child took it.
func Listen(t testing.TB) (*net.TCPListener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.(*net.TCPListener), "http://" + ln.Addr().String()
}

// Node is the child's node name.
func (c *Child) Node() string { return c.Config.Node }

// PID is the child's process id.
func (c *Child) PID() int { return c.p.PID() }

// Kill kills the child with SIGKILL, waits until it is reaped and its last lines
// read, and returns the time the signal was sent. A child that already exited is
// left alone.
func (c *Child) Kill() time.Time {
	at, _ := c.p.Kill()
	select {
	case <-c.p.Done():
	case <-time.After(childproc.KillTimeout):
	}
	return at
}

// DiedAt returns a time by which the child was dead (after it was reaped), and false
// while it runs.
func (c *Child) DiedAt() (time.Time, bool) { return c.p.DiedAt() }

// Exited reports whether the child exited, and with what error (nil: status 0).
func (c *Child) Exited() (bool, error) { return c.p.Exited() }

// Stop sends SIGSTOP and waits until every thread of the child is stopped; it returns
// a time at which the child was certainly stopped: whatever the child does later, it
// does after Cont.
func (c *Child) Stop() (time.Time, error) { return c.p.Stop() }

// Cont sends SIGCONT and returns the time just before it was sent.
func (c *Child) Cont() (time.Time, error) { return c.p.Cont() }

// Term sends SIGTERM: the child stops its scheduler gracefully, prints STOPPED and
// exits.
func (c *Child) Term() error {
	_, err := c.p.Term()
	return err
}

// Wait waits until the child exits, at most timeout, and returns its exit error (nil:
// status 0).
func (c *Child) Wait(timeout time.Duration) error {
	select {
	case <-c.p.Done():
		_, err := c.Exited()
		return err
	case <-time.After(timeout):
		return fmt.Errorf("child %s (pid %d) still running after %v", c.Node(), c.PID(), timeout)
	}
}

// Lines returns every line the child printed so far.
func (c *Child) Lines() []Line {
	ls := c.p.Lines()
	out := make([]Line, len(ls))
	for i, l := range ls {
		out[i] = Line{l}
	}
	return out
}

// Leading reports whether the child's last leadership line is LEADING, and that
// line's epoch.
func (c *Child) Leading() (bool, int64) {
	ls := c.Lines()
	for i := len(ls) - 1; i >= 0; i-- {
		switch l := ls[i]; {
		case strings.HasPrefix(l.Text, "LEADING "):
			return true, l.Epoch()
		case strings.HasPrefix(l.Text, "FOLLOWING "):
			return false, 0
		}
	}
	return false, 0
}

// WaitLine waits, at most timeout, for a line that starts with prefix among those not
// consumed yet, and consumes it and the lines before it. A line starting with ERROR,
// or the child's exit, ends the wait with an error.
func (c *Child) WaitLine(prefix string, timeout time.Duration) (Line, error) {
	l, err := c.p.WaitLine(timeout, prefix)
	return Line{l}, err
}

// WaitFor waits, at most timeout, for a line, among all the child printed, for which
// match is true, and returns the first. The child's exit ends the wait with an error.
func (c *Child) WaitFor(timeout time.Duration, what string, match func(Line) bool) (Line, error) {
	l, err := c.p.WaitFor(timeout, what, func(l childproc.Line) bool { return match(Line{l}) })
	return Line{l}, err
}

// ErrNoLeader is returned by Leader when no child leads.
var ErrNoLeader = errors.New("no child leads")

// Leader returns the only child of cs whose last leadership line is LEADING; nil and
// ErrNoLeader when none is, an error naming them when several are (a term's end may
// not be printed yet).
func Leader(cs []*Child) (*Child, error) {
	var leaders []*Child
	for _, c := range cs {
		if exited, _ := c.Exited(); exited {
			continue
		}
		if ok, _ := c.Leading(); ok {
			leaders = append(leaders, c)
		}
	}
	switch len(leaders) {
	case 0:
		return nil, ErrNoLeader
	case 1:
		return leaders[0], nil
	}
	names := make([]string, len(leaders))
	for i, c := range leaders {
		_, epoch := c.Leading()
		names[i] = fmt.Sprintf("%s (epoch %d)", c.Node(), epoch)
	}
	return nil, fmt.Errorf("several children lead: %s", strings.Join(names, ", "))
}

// effectTx is TaskName's handler with ChildConfig.EffectTx: the effect, a row of
// EffectsTable, written in a transaction that commits after HandlerDuration, and, with
// CompleteTx, the task's completion in the same transaction. It logs its start and its
// end as the plain handler does: ResultOK once the transaction committed.
func effectTx(ctx context.Context, app *pgxpool.Pool, s *ax.Scheduler, cfg ChildConfig, rl *RunLog, out *childproc.Writer, t *ax.Task) error {
	e := Entry{Event: EventStart, Node: cfg.Node, PID: os.Getpid(), TaskID: t.ID, Name: t.Name, Key: t.Key, ExecutionID: t.ExecutionID,
		Attempt: t.Attempt, At: time.Now(), ClaimedAt: t.DispatchedAt, CtxDone: ctx.Err() != nil}
	mustLog(rl, out, e)
	e.CtxDone, e.ClaimedAt = false, time.Time{}
	end := func(err error) error {
		e.Event, e.At, e.Result = EventEnd, time.Now(), ResultOK
		if err != nil {
			e.Result, e.Err = ResultErr, err.Error()
			if ctx.Err() != nil {
				e.Result = ResultCancelled
			}
		}
		mustLog(rl, out, e)
		return err
	}
	// The database calls do not watch the handler's context, as an application's own
	// data layer often does not: only the explicit check below does, and what follows
	// it is the window no context closes.
	db := context.WithoutCancel(ctx)
	err := pgx.BeginFunc(db, app, func(tx pgx.Tx) error {
		if _, err := tx.Exec(db, `INSERT INTO `+EffectsTable+` (execution_id, task_id, node) VALUES ($1, $2, $3)`,
			t.ExecutionID, t.ID, cfg.Node); err != nil {
			return err
		}
		timer := time.NewTimer(cfg.HandlerDuration / 2)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
		}
		if err := ctx.Err(); err != nil { // the last check, as a handler would before it commits
			return err
		}
		time.Sleep(cfg.HandlerDuration / 2) // work no context check covers
		if cfg.CompleteTx {
			return s.CompleteTx(db, tx, t)
		}
		return nil
	})
	return end(err)
}
