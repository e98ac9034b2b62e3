package ax

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax/elect"
	"github.com/axsched/ax/internal/execute"
	"github.com/axsched/ax/remote"
	"github.com/axsched/ax/store"
)

// Status is the state of a task; it prints as SCHEDULED, DISPATCHING, ….
type Status = store.Status

// The states of a task (see the package documentation for the state machine).
const (
	Scheduled   Status = "SCHEDULED"
	Dispatching Status = "DISPATCHING"
	Running     Status = "RUNNING"
	Succeeded   Status = "SUCCEEDED"
	Failed      Status = "FAILED"
	Cancelled   Status = "CANCELLED"
	Skipped     Status = "SKIPPED"
)

// Snoozed is the status of an execution record only, never of a task: its handler
// returned Snooze.
const Snoozed Status = "SNOOZED"

// Store is where ax keeps its state: store/sqlite (embedded), or another driver.
type Store = store.Store

// Defaults for the zero fields of Config and for task options.
const (
	DefaultTick               = 10 * time.Millisecond
	DefaultWindow             = 5 * time.Minute
	DefaultConcurrency        = 64
	DefaultHeartbeatInterval  = 10 * time.Second
	DefaultOrphanAfter        = 5 * time.Minute
	DefaultDispatchTimeout    = 30 * time.Second
	DefaultMaxDispatchRetries = 10
	DefaultRefillInterval     = time.Second
	// DefaultNotifiedRefillInterval is the refill interval on stores that notify
	// commits (store.Notifier, e.g. PostgreSQL): notifications bring changes at once,
	// the periodic refill is the safety net.
	DefaultNotifiedRefillInterval = 5 * time.Second
	DefaultMaxPayload             = 1 << 20 // bytes
	DefaultMaxRetry               = 5
	DefaultMaxSnoozes             = 100
	DefaultTimeout                = 30 * time.Minute
	DefaultMaxCatchUp             = 100
	DefaultStatsInterval          = 15 * time.Second
	// DefaultExecutionStatsInterval is how often a scheduler writes its per-minute
	// execution statistics (Scheduler.Stats) to the store.
	DefaultExecutionStatsInterval = 10 * time.Second
	DefaultStoreTimeout           = 10 * time.Second
)

// maxCatchUp bounds Config.MaxCatchUp: the occurrences a catch-up writes go in one
// transaction.
const maxCatchUp = 10_000

// Config configures a Scheduler. Zero fields take the documented defaults.
type Config struct {
	// Store holds the scheduler's state. Required.
	Store Store
	// Node names this process in execution records. Defaults to hostname:pid.
	Node string
	// OwnerService is the owner_service of submitted tasks unless WithOwner says
	// otherwise. Defaults to empty.
	OwnerService string
	// Tick is the width of the timing wheel's slots. A task is handed out at its due
	// time, to the nanosecond of the scheduler's clock, while the tick it falls in
	// holds at most 64 tasks; in a denser tick (a burst), at the tick's end, at most
	// one tick after its due time, all of them at once. While claims fall behind —
	// 16 claims within a second took half a tick or more with a task falling due
	// behind them, as when every core is busy — every tick comes out at its end, one
	// claim per tick at most, until a minute has passed without that. It also bounds how
	// soon a claim the store answers "not due yet" (its clock ahead of ours) is tried
	// again. Defaults to DefaultTick (10ms).
	Tick time.Duration
	// Window is how far ahead the scheduler keeps due tasks in memory. Defaults to
	// DefaultWindow (5m).
	Window time.Duration
	// Concurrency is the number of handlers running at once in this process.
	// Defaults to DefaultConcurrency (64).
	Concurrency int
	// HeartbeatInterval is how often running executions are stamped alive.
	// Defaults to DefaultHeartbeatInterval (10s).
	HeartbeatInterval time.Duration
	// OrphanAfter is how long a RUNNING task may go without a heartbeat before it is
	// counted as a failed attempt and retried. Defaults to DefaultOrphanAfter (5m);
	// it must exceed HeartbeatInterval. An executor whose heartbeats have not reached
	// the store for OrphanAfter − 2 × HeartbeatInterval (a partition, or a pause
	// measured on the monotonic clock when the process resumes) cancels the handler's
	// context first — self-fencing — and records the attempt as failed, as recovery
	// would: a handler that honours its context stops before another replica can re-run
	// the task. Self-fencing needs OrphanAfter ≥ 4 × HeartbeatInterval (the defaults
	// give 30×); below that it is off.
	OrphanAfter time.Duration
	// DispatchTimeout is how long a task may stay DISPATCHING (claimed, not yet
	// started) before it is handed back as a dispatch failure. Defaults to
	// DefaultDispatchTimeout (30s).
	DispatchTimeout time.Duration
	// MaxDispatchRetries is how many dispatch failures a task survives before it
	// becomes FAILED. They never consume business retries. Defaults to
	// DefaultMaxDispatchRetries (10).
	MaxDispatchRetries int
	// RefillInterval is how often the scheduler reads tasks that other processes
	// submitted or changed. Defaults to DefaultRefillInterval (1s), or
	// DefaultNotifiedRefillInterval (5s) on a store that notifies commits.
	RefillInterval time.Duration
	// MaxPayload is the largest payload accepted, in bytes. Defaults to
	// DefaultMaxPayload (1 MiB).
	MaxPayload int
	// MaxCatchUp bounds how many missed slots a MisfireCatchUp schedule fires after
	// downtime: the most recent ones. Defaults to DefaultMaxCatchUp (100); at most
	// 10,000.
	MaxCatchUp int
	// StoreTimeout bounds each store call the scheduler makes on its own (claims,
	// refills, starts, heartbeats, results, recovery, schedule firing, and the
	// multi-row insert that carries several callers' Delay and At); a call that takes
	// longer fails and is retried as any failed call is. Other calls made for the
	// caller (Get, Cancel, SubmitMany, …) are bounded by the caller's context instead.
	// (The PostgreSQL store gives a write whose COMMIT is on its way up to 5 s more,
	// postgres.WithCommitGrace: see its package doc, "When the server fails over".)
	// Defaults to DefaultStoreTimeout (10s). Under an Elector, a leader whose store has
	// not answered for StoreTimeout ends its term and resigns, so that a replica that
	// can reach the store leads; it campaigns again once its store answers.
	StoreTimeout time.Duration
	// Logger receives the scheduler's logs. Defaults to slog.Default().
	Logger *slog.Logger
	// Observer receives the scheduler's events (see Observer), for metrics: package
	// github.com/axsched/ax/metrics is one. Nil: no events.
	Observer Observer
	// Tracer stores the trace context of each call that submits tasks with them and
	// starts the span of each execution, a child of the submitting call's on the
	// first attempt (see Tracer): package github.com/axsched/ax/tracing is one, on
	// OpenTelemetry. Give every replica one, so that executions are traced wherever
	// they run. Nil: nothing is stored or started.
	Tracer Tracer
	// StatsInterval is how often a scheduler with an Observer counts the tasks per
	// status and the queue lag (one store query each time; never per scrape).
	// Defaults to DefaultStatsInterval (15s).
	StatsInterval time.Duration
	// ExecutionStatsInterval is how often the scheduler writes the per-minute counts
	// of its finished executions to the store (see Scheduler.Stats), and once more at
	// Stop: one store call each time, and none when nothing finished. Defaults to
	// DefaultExecutionStatsInterval (10s).
	ExecutionStatsInterval time.Duration
	// Retention bounds the history of finished tasks: by default SUCCEEDED,
	// CANCELLED and SKIPPED tasks are deleted 7 days after they finished, FAILED ones
	// after 30 (see Retention).
	Retention Retention

	// Namespace names the scheduling domain whose leader is elected and fenced: the
	// store records each new leader of the namespace (its fencing token) and refuses
	// the claims, schedule fires and recovery writes of an older one. Give the Elector
	// the same namespace. Defaults to DefaultNamespace ("default").
	Namespace string
	// Elector, when set, elects one leader among the schedulers that share the store:
	// only the leader runs the scheduling loop, recovery and schedule firing, under
	// its lease and fenced in the store, while every scheduler executes. See
	// packages elect/redis and elect/sqllease, and the README's "Running several
	// replicas". Nil: no election; every scheduler schedules and claims on its own,
	// and the store's conditional writes keep them from running a task twice.
	Elector elect.Elector
	// CanLead says whether this scheduler may schedule: false makes it executor-only,
	// never a candidate (and, without an Elector, never scheduling at all: it runs
	// only the tasks it is handed, by Trigger or by a leader's dispatch). Defaults to
	// true.
	CanLead *bool
	// Cluster configures dispatch between replicas under an Elector: where this
	// replica's executor is reached, the secret requests are signed with, and how the
	// leader routes tasks.
	Cluster ClusterConfig
}

// ClusterConfig configures the executor endpoint of a replica and the leader's
// dispatch to the others (see Scheduler.ExecutorHandler).
type ClusterConfig struct {
	// Advertise is the base URL at which the other replicas reach this replica's
	// ExecutorHandler, e.g. "http://10.0.0.7:7070"; it is recorded in the node
	// registry. Empty: this replica takes no remote dispatch (the leader still runs
	// tasks in its own process).
	Advertise string
	// Secret signs and verifies every dispatch and release notice (HMAC-SHA256; at
	// least 32 bytes). The same on every replica. Empty: requests go unsigned, and
	// ExecutorHandler serves only connections to a loopback address and takes no
	// fencing token above the epoch the store recorded (store.Leaser).
	Secret []byte
	// Routing is how the leader picks among the live replicas that registered a
	// task's handler. Defaults to RouteRoundRobin.
	Routing Routing
	// RequestTimeout bounds each dispatch request; a replica that does not answer in
	// time is skipped until its health endpoint answers. Defaults to
	// DefaultRequestTimeout (5s).
	RequestTimeout time.Duration
}

// Routing is how the leader picks an executor for a task (ClusterConfig.Routing).
type Routing int

// The routings.
const (
	// RouteRoundRobin sends each task to the next replica in turn.
	RouteRoundRobin Routing = iota
	// RouteLeastInFlight sends each task to the replica with the fewest busy slots
	// (handlers running or tasks waiting for one) per slot, as last reported, counting
	// the tasks sent to it since, the leader's own replica included.
	RouteLeastInFlight
	// RouteConsistentHash sends the tasks of one key (TaskKey, else name and key) to
	// the same replica while the set of replicas is stable, spreading keys evenly
	// over the replicas (rendezvous hashing); when a replica leaves, only its keys
	// move. Every leader routes a key alike: the replicas weighed are those with the
	// task's handler and an executor endpoint (Cluster.Advertise), which every leader
	// sees. A leader without one runs a key's tasks itself only when each such replica
	// has answered busy or without the handler, is down, or has left; a replica that
	// answers with an error keeps its keys, which come back as dispatch failures.
	RouteConsistentHash
)

// DefaultRequestTimeout is ClusterConfig.RequestTimeout's default.
const DefaultRequestTimeout = 5 * time.Second

// DefaultNamespace is Config.Namespace's default.
const DefaultNamespace = "default"

// selfFenceAfter is how old an execution's last heartbeat may get before its handler's
// context is cancelled: OrphanAfter − 2 × HeartbeatInterval, so that the handler stops
// before recovery on another replica can declare it orphaned, with two heartbeats'
// margin. Zero (no self-fencing) when that bound would be under two heartbeat
// intervals (OrphanAfter < 4 × HeartbeatInterval): a healthy execution could then miss
// it between two heartbeats.
func (c Config) selfFenceAfter() time.Duration {
	if d := c.OrphanAfter - 2*c.HeartbeatInterval; d >= 2*c.HeartbeatInterval {
		return d
	}
	return 0
}

// canLead reports whether the scheduler may schedule (Config.CanLead).
func (c Config) canLead() bool { return c.CanLead == nil || *c.CanLead }

func (c Config) withDefaults() Config {
	if c.Node == "" {
		host, _ := os.Hostname()
		c.Node = host + ":" + strconv.Itoa(os.Getpid())
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.Tick, DefaultTick)
	def(&c.Window, DefaultWindow)
	def(&c.HeartbeatInterval, DefaultHeartbeatInterval)
	def(&c.OrphanAfter, DefaultOrphanAfter)
	def(&c.DispatchTimeout, DefaultDispatchTimeout)
	if _, ok := c.Store.(store.Notifier); ok {
		def(&c.RefillInterval, DefaultNotifiedRefillInterval)
	}
	def(&c.RefillInterval, DefaultRefillInterval)
	def(&c.StatsInterval, DefaultStatsInterval)
	def(&c.ExecutionStatsInterval, DefaultExecutionStatsInterval)
	def(&c.StoreTimeout, DefaultStoreTimeout)
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.MaxDispatchRetries == 0 {
		c.MaxDispatchRetries = DefaultMaxDispatchRetries
	}
	if c.MaxPayload == 0 {
		c.MaxPayload = DefaultMaxPayload
	}
	if c.MaxCatchUp == 0 {
		c.MaxCatchUp = DefaultMaxCatchUp
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	def(&c.Cluster.RequestTimeout, DefaultRequestTimeout)
	c.Retention = c.Retention.withDefaults()
	return c
}

func (c Config) validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s %s: %w", field, fmt.Sprintf(format, args...), ErrInvalid))
	}
	if c.Store == nil {
		bad("Store", "is required")
	}
	positive := map[string]time.Duration{
		"Tick": c.Tick, "Window": c.Window, "HeartbeatInterval": c.HeartbeatInterval,
		"OrphanAfter": c.OrphanAfter, "DispatchTimeout": c.DispatchTimeout, "RefillInterval": c.RefillInterval,
		"StatsInterval": c.StatsInterval, "ExecutionStatsInterval": c.ExecutionStatsInterval, "StoreTimeout": c.StoreTimeout,
	}
	for _, name := range []string{"Tick", "Window", "HeartbeatInterval", "OrphanAfter", "DispatchTimeout", "RefillInterval",
		"StatsInterval", "ExecutionStatsInterval", "StoreTimeout"} {
		if positive[name] < 0 {
			bad(name, "is negative (%v)", positive[name])
		}
	}
	if c.Tick > 0 && c.Tick < time.Millisecond {
		bad("Tick", "%v is below 1ms, finer than Go timers", c.Tick)
	}
	if c.Tick > 0 && c.Window > 0 && c.Window < 10*c.Tick {
		bad("Window", "%v is shorter than ten ticks (%v)", c.Window, 10*c.Tick)
	}
	if c.OrphanAfter > 0 && c.HeartbeatInterval > 0 && c.OrphanAfter <= c.HeartbeatInterval {
		bad("OrphanAfter", "%v must exceed HeartbeatInterval %v", c.OrphanAfter, c.HeartbeatInterval)
	}
	if c.Concurrency < 0 {
		bad("Concurrency", "is negative (%d)", c.Concurrency)
	}
	if c.MaxDispatchRetries < 0 {
		bad("MaxDispatchRetries", "is negative (%d)", c.MaxDispatchRetries)
	}
	if c.MaxPayload < 0 {
		bad("MaxPayload", "is negative (%d)", c.MaxPayload)
	}
	errs = append(errs, c.Retention.validate()...)
	if c.MaxCatchUp < 0 || c.MaxCatchUp > maxCatchUp {
		bad("MaxCatchUp", "%d is outside [0, %d]", c.MaxCatchUp, maxCatchUp)
	}
	if c.Namespace != "" {
		if err := store.CheckNamespace(c.Namespace); err != nil {
			errs = append(errs, fmt.Errorf("Namespace: %w", err))
		}
	}
	if n, ok := c.Elector.(elect.Namespaced); ok {
		if ns := cmp.Or(c.Namespace, DefaultNamespace); n.Namespace() != ns {
			bad("Elector", "elects in namespace %q, the scheduler schedules in %q: give both the same", n.Namespace(), ns)
		}
	}
	if len(c.Cluster.Secret) > 0 && len(c.Cluster.Secret) < remote.MinSecretLen {
		bad("Cluster.Secret", "is %d bytes, shorter than %d", len(c.Cluster.Secret), remote.MinSecretLen)
	}
	if c.Cluster.Routing < RouteRoundRobin || c.Cluster.Routing > RouteConsistentHash {
		bad("Cluster.Routing", "%d is not a Routing", c.Cluster.Routing)
	}
	if c.Cluster.RequestTimeout < 0 {
		bad("Cluster.RequestTimeout", "is negative (%v)", c.Cluster.RequestTimeout)
	}
	if a := c.Cluster.Advertise; a != "" {
		if u, err := url.Parse(a); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("Cluster.Advertise", "%q is not an http(s) base URL", a)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("ax: config: %w", configErrors(errs))
}

// configErrors reads as its errors joined by "; ", and unwraps to each.
type configErrors []error

func (c configErrors) Error() string {
	msgs := make([]string, len(c))
	for i, err := range c {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (c configErrors) Unwrap() []error { return c }

// Handler runs tasks. Handle is called once per execution; it may be called again
// for the same task (a retry, or a re-run after a crash) with a new execution id, so
// make it idempotent on t.ExecutionID or on the business key. A returned error, a
// panic or an expired deadline is a business failure and is retried per the task's
// MaxRetry and backoff.
type Handler interface {
	Handle(ctx context.Context, t *Task) error
}

// HandlerFunc adapts a function to the Handler interface.
type HandlerFunc func(ctx context.Context, t *Task) error

// Handle calls f(ctx, t).
func (f HandlerFunc) Handle(ctx context.Context, t *Task) error { return f(ctx, t) }

// DefaultBackoff is the delay before business retry n (n = 1 for the first retry):
// 5s × 5^(n−1), that is 5s, 25s, 125s, 625s, 3125s, … capped at 24h.
func DefaultBackoff(n int) time.Duration { return execute.DefaultBackoff(n) }
