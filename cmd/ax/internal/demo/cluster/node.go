package cluster

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
	"time"

	"github.com/axsched/ax"
	"github.com/axsched/ax/cmd/ax/internal/demo"
	"github.com/axsched/ax/elect/sqllease"
	"github.com/axsched/ax/internal/childproc"
	"github.com/axsched/ax/store/sqlite"
)

// clusterPayload is the payload of an order's close timeout in the cluster scenario.
type clusterPayload struct {
	OrderID     string    `json:"order_id"`
	AmountCents int64     `json:"amount_cents"`
	CreatedAt   time.Time `json:"created_at"`
	// FailOnce makes the handler's first attempt fail (an injected transient
	// failure): the replicas are separate processes, so the script travels with the
	// task.
	FailOnce bool `json:"inject_failure,omitempty"`
}

// nodeStopTimeout bounds a replica's graceful Stop.
const nodeStopTimeout = 10 * time.Second

// RunNode is one replica of the cluster scenario (Run starts it as a child
// process, through Config.NodeCommand). It reads its configuration, one line
// of JSON, from in; runs an ax scheduler on the shared SQLite file, elected by
// elect/sqllease on the same file, serving its executor endpoint
// (Scheduler.ExecutorHandler) on a loopback port it advertises; and reports what it
// does as lines of JSON on out. It stops gracefully, and returns, when in reaches
// its end (the parent closed it, or died) or ctx ends. Its logs go to logw.
func RunNode(ctx context.Context, in io.Reader, out, logw io.Writer) error {
	br := bufio.NewReader(in)
	line, err := br.ReadBytes('\n')
	if err != nil && len(line) == 0 {
		return fmt.Errorf("demo: replica: read the configuration: %w", err)
	}
	var cfg nodeConfig
	if err := json.Unmarshal(line, &cfg); err != nil {
		return fmt.Errorf("demo: replica: parse the configuration: %w", err)
	}
	ew := &eventWriter{out: childproc.NewWriter(out), node: cfg.Node}
	if err := runNode(ctx, cfg, br, ew, logw); err != nil {
		ew.emit(nodeEvent{Ev: evError, Err: err.Error()})
		return err
	}
	ew.emit(nodeEvent{Ev: evStopped})
	return nil
}

// node is a running replica.
type node struct {
	cfg nodeConfig
	s   *ax.Scheduler
	biz *bizDB
	out *eventWriter
}

func runNode(ctx context.Context, cfg nodeConfig, in io.Reader, out *eventWriter, logw io.Writer) error {
	// The parent closes our stdin to stop us, and so does its death.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		io.Copy(io.Discard, in)
		cancel()
	}()

	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		level = slog.LevelWarn
	}
	logger := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: level})).With("node", cfg.Node)

	st, err := sqlite.Open(cfg.DB)
	if err != nil {
		return fmt.Errorf("demo: replica %s: %w", cfg.Node, err)
	}
	defer st.Close()
	biz, err := openBiz(ctx, cfg.DB, cfg.Namespace, false)
	if err != nil {
		return fmt.Errorf("demo: replica %s: %w", cfg.Node, err)
	}
	defer biz.close()
	el, err := sqllease.New(st, sqllease.WithNamespace(cfg.Namespace), sqllease.WithTTL(cfg.LeaseTTL), sqllease.WithLogger(logger))
	if err != nil {
		return fmt.Errorf("demo: replica %s: %w", cfg.Node, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("demo: replica %s: listen: %w", cfg.Node, err)
	}
	advertise := "http://" + ln.Addr().String()
	s, err := ax.New(ax.Config{
		Store: st, Node: cfg.Node, OwnerService: demo.OwnerService, Logger: logger,
		Namespace: cfg.Namespace, Elector: el,
		Cluster:           ax.ClusterConfig{Advertise: advertise, Secret: cfg.Secret, Routing: ax.RouteRoundRobin},
		HeartbeatInterval: cfg.HeartbeatInterval, OrphanAfter: cfg.OrphanAfter,
		DispatchTimeout: cfg.DispatchTimeout, RefillInterval: cfg.RefillInterval,
		Observer: nodeObserver{out: out},
	})
	if err != nil {
		ln.Close()
		return fmt.Errorf("demo: replica %s: %w", cfg.Node, err)
	}
	n := &node{cfg: cfg, s: s, biz: biz, out: out}
	backoff := cfg.RetryBackoff
	s.HandleFunc(demo.TaskName, n.closeOrder, ax.WithBackoff(func(int) time.Duration { return backoff }))
	if cfg.ReconcileEvery > 0 {
		// A run cut short (its replica died) runs again as soon as recovery finds
		// it, before a later slot takes the task key and the retry is skipped.
		s.HandleFunc(demo.ReconcileName, n.reconcile, ax.WithBackoff(func(int) time.Duration { return 0 }))
		if err := s.Every(demo.ReconcileName, cfg.ReconcileEvery); err != nil {
			ln.Close()
			return fmt.Errorf("demo: replica %s: %w", cfg.Node, err)
		}
	}

	srv := &http.Server{Handler: s.ExecutorHandler(), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer scancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
		<-served
	}()

	if err := s.Start(ctx); err != nil {
		return fmt.Errorf("demo: replica %s: %w", cfg.Node, err)
	}
	out.emit(nodeEvent{Ev: evReady, PID: os.Getpid(), Addr: advertise})
	<-ctx.Done()
	if err := demo.StopScheduler(context.Background(), s); err != nil {
		return fmt.Errorf("demo: replica %s: %w", cfg.Node, err)
	}
	return nil
}

// nodeObserver reports the scheduler's leadership and recovery events to the parent.
type nodeObserver struct{ out *eventWriter }

// Observe implements ax.Observer.
func (o nodeObserver) Observe(e ax.Event) {
	switch e.Kind {
	case ax.EventLeadership:
		if e.Leader {
			o.out.emit(nodeEvent{Ev: evLeading, At: e.At, Epoch: e.Epoch})
		} else {
			o.out.emit(nodeEvent{Ev: evFollowing, At: e.At, Epoch: e.Epoch, Reason: e.Reason})
		}
	case ax.EventFenceRejected:
		o.out.emit(nodeEvent{Ev: evFenced, At: e.At, Reason: e.Reason})
	case ax.EventDispatchFailed:
		o.out.emit(nodeEvent{Ev: evHandBack, At: e.At, Name: e.Name, Reason: e.Reason})
	case ax.EventStuckClaimHandedBack:
		o.out.emit(nodeEvent{Ev: evHandBack, At: e.At, Name: e.Name, Reason: "stuck: claimed and not started within DispatchTimeout"})
	case ax.EventExecutorRequest:
		if e.Reason == "unreachable" || e.Reason == "error" {
			o.out.emit(nodeEvent{Ev: evUnreachable, At: e.At, Reason: e.Reason, Count: e.Count})
		}
	case ax.EventOrphanRecovered:
		o.out.emit(nodeEvent{Ev: evOrphan, At: e.At, Name: e.Name})
	}
}

// started records and reports the start of an execution; it returns the event,
// for the end's report, and the execution's row in demo_runs.
func (n *node) started(ctx context.Context, t *ax.Task, due time.Time, slow bool) (nodeEvent, int64, error) {
	now := time.Now()
	e := nodeEvent{
		Ev: evStart, At: now, Name: t.Name, Key: t.Key, TaskID: t.ID, Exec: t.ExecutionID, Attempt: t.Attempt,
		Due: due, Late: now.Sub(due), Slow: slow,
	}
	row, err := n.biz.startRun(ctx, bizRun{
		Name: t.Name, Key: t.Key, TaskID: t.ID, Exec: t.ExecutionID, Node: n.cfg.Node, Attempt: t.Attempt,
		Due: due, Started: now, Slow: slow,
	})
	if err != nil {
		return e, 0, err
	}
	n.out.emit(e)
	return e, row, nil
}

// ended reports the end of an execution.
func (n *node) ended(e nodeEvent, outcome string, err error) {
	e.Ev, e.Outcome, e.Took = evEnd, outcome, time.Since(e.At)
	e.At = time.Now()
	if err != nil {
		e.Err = err.Error()
	}
	n.out.emit(e)
}

// closeOrder is the handler of TaskName: check, then change, in the order tables.
func (n *node) closeOrder(ctx context.Context, t *ax.Task) error {
	e, row, err := n.started(ctx, t, t.DueAt, false)
	if err != nil {
		return err
	}
	var p clusterPayload
	if err := json.Unmarshal(t.Payload, &p); err != nil || p.OrderID != t.Key {
		err = fmt.Errorf("order %s: bad payload %q: %v", t.Key, t.Payload, err)
		n.biz.endRun(ctx, row, outError)
		n.ended(e, outError, err)
		return err
	}
	if p.FailOnce && t.Attempt == 0 {
		err := errors.New("load order: order database timed out (injected transient failure)")
		if rerr := n.biz.endRun(ctx, row, outFailed); rerr != nil {
			err = errors.Join(err, rerr)
		}
		n.ended(e, outFailed, err)
		return err
	}
	outcome, err := n.biz.closeIfUnpaid(ctx, t.Key, t.ExecutionID, row)
	if err != nil {
		n.biz.endRun(context.WithoutCancel(ctx), row, outError)
		n.ended(e, outError, err)
		return err
	}
	n.ended(e, outcome, nil)
	return nil
}

// reconcile is the handler of ReconcileName: it takes reconcileFastTook, or
// ReconcileSlowTook in a slow slot's first attempt.
func (n *node) reconcile(ctx context.Context, t *ax.Task) error {
	slot, err := time.Parse(time.RFC3339Nano, t.Key)
	if err != nil {
		slot = t.DueAt
	}
	slow := n.cfg.slowSlot(slot) && t.Attempt == 0
	e, row, err := n.started(ctx, t, slot, slow)
	if err != nil {
		return err
	}
	took := demo.ReconcileFastTook
	if slow {
		took = n.cfg.ReconcileSlowTook
	}
	timer := time.NewTimer(took)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		err := fmt.Errorf("reconcile: %w", ctx.Err())
		n.biz.endRun(context.WithoutCancel(ctx), row, outError)
		n.ended(e, outError, err)
		return err
	}
	if err := n.biz.endRun(ctx, row, outReconciled); err != nil {
		n.ended(e, outError, err)
		return err
	}
	n.ended(e, outReconciled, nil)
	return nil
}
