package cluster

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// replica is one replica process as the parent sees it. The fields below the line
// are the main loop's own.
type replica struct {
	name    string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	pid     int
	spawned time.Time
	exited  chan struct{} // closed once the process was reaped; exitErr is set then
	exitErr error

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
// stdout read into events until it closes. Sends stop when quit is closed.
func spawn(cmd *exec.Cmd, cfg nodeConfig, stderr io.Writer, events chan<- replicaEvent, quit <-chan struct{}, wg *sync.WaitGroup) (*replica, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("replica %s: %w", cfg.Node, err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("replica %s: %w", cfg.Node, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("replica %s: %w", cfg.Node, err)
	}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("replica %s: start %s: %w", cfg.Node, cmd.Path, err)
	}
	r := &replica{
		name: cfg.Node, cmd: cmd, stdin: stdin, pid: cmd.Process.Pid, spawned: time.Now(),
		exited: make(chan struct{}), inflight: map[string]nodeEvent{},
	}
	wg.Add(1)
	go r.read(stdout, events, quit, wg)
	if _, err := stdin.Write(append(raw, '\n')); err != nil {
		r.cmd.Process.Kill()
		return r, fmt.Errorf("replica %s: write its configuration: %w", cfg.Node, err)
	}
	return r, nil
}

// read passes the replica's lines to events until its stdout closes, then reaps it.
func (r *replica) read(stdout io.Reader, events chan<- replicaEvent, quit <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	send := func(e replicaEvent) {
		select {
		case events <- e:
		case <-quit:
		}
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev nodeEvent
		if err := json.Unmarshal(line, &ev); err != nil || ev.Ev == "" {
			send(replicaEvent{r: r, bad: strings.TrimSpace(string(line))})
			continue
		}
		send(replicaEvent{r: r, ev: ev})
	}
	io.Copy(io.Discard, stdout) // after a read error: let the process finish writing
	r.exitErr = r.cmd.Wait()
	close(r.exited)
	send(replicaEvent{r: r, exit: true})
}

// kill sends SIGKILL (kill -9): the process ends at once, without running any code
// of its own.
func (r *replica) kill() error {
	if err := r.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("kill %s (pid %d): %w", r.name, r.pid, err)
	}
	return nil
}

// stop asks the replica to stop gracefully: it closes its stdin.
func (r *replica) stop() {
	r.stopping = true
	r.stdin.Close()
}

// hasExited reports whether the process was reaped.
func (r *replica) hasExited() bool {
	select {
	case <-r.exited:
		return true
	default:
		return false
	}
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
