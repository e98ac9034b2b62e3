package cluster

import (
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/axsched/ax/internal/childproc"
)

// replica is one replica process as the parent sees it. The fields below the line
// are the main loop's own.
type replica struct {
	name    string
	proc    *childproc.Process
	pid     int
	spawned time.Time
	exitErr error // set before its exit event is sent

	ready    bool
	readyAt  time.Time
	addr     string
	leading  bool
	epoch    int64
	inflight map[string]nodeEvent // executions started and not ended, by execution id
	runs     int                  // executions started
	gone     bool                 // its exit was seen
	killed   bool                 // the parent killed it
	stopping bool                 // the parent closed its stdin
}

// replicaEvent is a line a replica printed, or its exit (exit true).
type replicaEvent struct {
	r    *replica
	ev   nodeEvent
	exit bool
	bad  string // a line that is not a nodeEvent
}

// spawn starts a replica running cfg: NodeCommand's process, cfg on its stdin, its
// lines passed to events until its stdout closes, then its exit. Sends stop when
// quit is closed.
func spawn(cmd *exec.Cmd, cfg nodeConfig, stderr io.Writer, events chan<- replicaEvent, quit <-chan struct{}) (*replica, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("replica %s: %w", cfg.Node, err)
	}
	r := &replica{name: cfg.Node, spawned: time.Now(), inflight: map[string]nodeEvent{}}
	send := func(e replicaEvent) {
		select {
		case events <- e:
		case <-quit:
		}
	}
	r.proc, err = childproc.Start(cmd, childproc.Options{
		Name: "replica " + cfg.Node, Stdin: true, Stderr: stderr,
		OnLine: func(l childproc.Line) {
			var ev nodeEvent
			if err := json.Unmarshal([]byte(l.Text), &ev); err != nil || ev.Ev == "" {
				send(replicaEvent{r: r, bad: strings.TrimSpace(l.Text)})
				return
			}
			send(replicaEvent{r: r, ev: ev})
		},
		OnExit: func(err error) {
			r.exitErr = err
			send(replicaEvent{r: r, exit: true})
		},
	})
	if err != nil {
		return nil, err
	}
	r.pid = r.proc.PID()
	if err := r.proc.Send(string(raw)); err != nil {
		r.proc.Kill()
		return r, fmt.Errorf("replica %s: write its configuration: %w", cfg.Node, err)
	}
	return r, nil
}

// kill sends SIGKILL (kill -9): the process ends at once, without running any code
// of its own. It returns the time just before the signal, once the process is reaped.
func (r *replica) kill() (time.Time, error) { return r.proc.Kill() }

// stop asks the replica to stop gracefully: it closes its stdin.
func (r *replica) stop() {
	r.stopping = true
	r.proc.CloseStdin()
}

// hasExited reports whether the process was reaped.
func (r *replica) hasExited() bool {
	exited, _ := r.proc.Exited()
	return exited
}

// lockedWriter serialises writes from the replicas' stderr copiers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
