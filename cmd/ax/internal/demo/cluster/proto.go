package cluster

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/axsched/ax/internal/childproc"
)

// The cluster scenario (Run) runs its replicas as child processes: the parent
// writes one nodeConfig, as a line of JSON, to a replica's stdin, and keeps stdin
// open; the replica reports what it does as lines of JSON (nodeEvent) on its stdout.
// When its stdin closes (the parent asks it to stop, or died) the replica stops its
// scheduler gracefully and exits.

// nodeConfig is what the parent tells one replica.
type nodeConfig struct {
	Node      string `json:"node"`      // ax.Config.Node, e.g. "node-2"
	DB        string `json:"db"`        // the shared SQLite file
	Namespace string `json:"namespace"` // ax.Config.Namespace and the election's
	// Secret signs the dispatches between replicas (ax.ClusterConfig.Secret); the
	// parent draws it at random for the run and hands it over on stdin only.
	Secret []byte `json:"secret"`

	LeaseTTL          time.Duration `json:"lease_ttl"`
	HeartbeatInterval time.Duration `json:"heartbeat_interval"`
	OrphanAfter       time.Duration `json:"orphan_after"`
	DispatchTimeout   time.Duration `json:"dispatch_timeout"`
	RefillInterval    time.Duration `json:"refill_interval"`
	RetryBackoff      time.Duration `json:"retry_backoff"`

	// The reconciliation: every ReconcileEvery; the run of slot number n (the slot's
	// time since the Unix epoch divided by ReconcileEvery) is slow, taking
	// ReconcileSlowTook, when (n + SlowPhase) % SlowEvery == 0.
	ReconcileEvery    time.Duration `json:"reconcile_every"`
	ReconcileSlowTook time.Duration `json:"reconcile_slow_took"`
	SlowEvery         int64         `json:"slow_every"`
	SlowPhase         int64         `json:"slow_phase"`

	// LogLevel is the level of the scheduler's logs on the replica's stderr.
	LogLevel string `json:"log_level"`
}

// slowSlot reports whether the reconciliation run of the slot at t is a slow one.
func (c nodeConfig) slowSlot(t time.Time) bool {
	return slowSlot(t, c.ReconcileEvery, c.SlowEvery, c.SlowPhase)
}

func slowSlot(t time.Time, every time.Duration, slowEvery, phase int64) bool {
	if every <= 0 || slowEvery <= 0 {
		return false
	}
	n := t.UnixNano() / int64(every)
	return (n+phase)%slowEvery == 0
}

// The kinds of nodeEvent.
const (
	evReady       = "ready"       // the scheduler started; Addr is the advertised executor URL
	evLeading     = "leading"     // a term began (ax.EventLeadership); Epoch
	evFollowing   = "following"   // a term ended; Epoch, Reason
	evFenced      = "fenced"      // the store refused a write as fenced (ax.EventFenceRejected); Reason
	evHandBack    = "handback"    // a claimed task was handed back (ax.EventDispatchFailed, stuck claims); Name, Reason
	evUnreachable = "unreachable" // a dispatch to another replica failed (ax.EventExecutorRequest); Reason, Count
	evOrphan      = "orphan"      // recovery found a RUNNING task without heartbeats (ax.EventOrphanRecovered); Name
	evStart       = "start"       // a handler started: Name, Key, TaskID, Exec, Attempt, Due, Late, Slow
	evEnd         = "end"         // a handler returned: as start, with Outcome and Took
	evStopped     = "stopped"     // the scheduler stopped gracefully; the process exits
	evError       = "error"       // the replica failed and exits: Err
)

// The outcomes of a handler execution (nodeEvent.Outcome, and the outcome column of
// demo_runs).
const (
	outClosed        = "closed"         // the close timeout won: the order is closed
	outAlreadyPaid   = "already-paid"   // the user paid first: nothing to do
	outAlreadyClosed = "already-closed" // the order was closed already: a second execution
	outFailed        = "failed"         // an injected transient failure; ax retries
	outError         = "error"          // the handler failed otherwise (its store, its context)
	outReconciled    = "reconciled"     // a reconciliation run finished
)

// nodeEvent is one line a replica prints.
type nodeEvent struct {
	Ev      string        `json:"ev"`
	Node    string        `json:"node"`
	At      time.Time     `json:"at"`
	PID     int           `json:"pid,omitempty"`
	Addr    string        `json:"addr,omitempty"`
	Epoch   int64         `json:"epoch,omitempty"`
	Reason  string        `json:"reason,omitempty"`
	Name    string        `json:"name,omitempty"`
	Key     string        `json:"key,omitempty"`
	TaskID  int64         `json:"task_id,omitempty"`
	Exec    string        `json:"exec,omitempty"`
	Attempt int           `json:"attempt,omitempty"`
	Due     time.Time     `json:"due,omitzero"`
	Late    time.Duration `json:"late,omitempty"` // start minus due
	Slow    bool          `json:"slow,omitempty"`
	Outcome string        `json:"outcome,omitempty"`
	Took    time.Duration `json:"took,omitempty"`
	Count   int           `json:"count,omitempty"`
	Err     string        `json:"err,omitempty"`
}

// eventWriter writes nodeEvents as lines of JSON.
type eventWriter struct {
	out  *childproc.Writer
	node string
}

func (w *eventWriter) emit(e nodeEvent) {
	e.Node = w.node
	if e.At.IsZero() {
		e.At = time.Now()
	}
	b, err := json.Marshal(e)
	if err != nil {
		b = fmt.Appendf(nil, `{"ev":%q,"node":%q,"err":%q}`, evError, w.node, err.Error())
	}
	w.out.Printf("%s", b)
}
