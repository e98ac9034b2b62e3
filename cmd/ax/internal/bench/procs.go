package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/axsched/ax/internal/childproc"
)

// child is one node process of the cluster bench, as the parent sees it. Its fields
// below proc are guarded by the procs' mu.
type child struct {
	node   string
	stderr string // the file its stderr (the scheduler's logs) goes to
	proc   *childproc.Process

	ready     bool
	leading   bool      // its last leadership line is LEADING
	epoch     int64     // of that line
	leadAt    time.Time // that line's stamp
	stopped   bool      // it printed STOPPED
	stopTook  time.Duration
	exited    bool
	exitErr   error
	expected  bool   // the parent killed or stopped it: its exit is no failure
	killed    bool   // the parent sent it SIGKILL
	failed    string // its ERROR line
	stats     map[int]ChildStats
	leadLines []leadLine // every LEADING line
}

// leadLine is one LEADING line of a child.
type leadLine struct {
	epoch int64
	at    time.Time // the event's stamp, from the child
}

// procs runs the node processes and waits on what they print.
type procs struct {
	ctx     context.Context
	dir     string
	base    ChildConfig
	command func(node string) (*exec.Cmd, error)

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced at each change
	children []*child      // every one started, in order
	next     int           // node numbering
	seq      int           // STATS requests
}

// notify wakes the waiters; p.mu is held.
func (p *procs) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// spawn starts the next node.
func (p *procs) spawn() (*child, error) {
	p.mu.Lock()
	p.next++
	node := fmt.Sprintf("node-%d", p.next)
	p.mu.Unlock()
	cfg := p.base
	cfg.Node, cfg.RunLog = node, filepath.Join(p.dir, node+".runlog")
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("ax: bench: %w", err)
	}
	cmd, err := p.command(node)
	if err != nil {
		return nil, err
	}
	c := &child{node: node, stderr: filepath.Join(p.dir, node+".stderr"), stats: map[int]ChildStats{}}
	c.proc, err = childproc.Start(cmd, childproc.Options{
		Name: node, Env: []string{ChildEnv + "=" + string(raw)}, Stdin: true, StderrFile: c.stderr,
		OnLine: func(l childproc.Line) { p.line(c, l) },
		OnExit: func(err error) { p.exit(c, err) },
	})
	if err != nil {
		return nil, fmt.Errorf("ax: bench: %w", err)
	}
	p.mu.Lock()
	p.children = append(p.children, c)
	p.notify()
	p.mu.Unlock()
	return c, nil
}

// line applies a line the child printed.
func (p *procs) line(c *child, l childproc.Line) {
	f := l.Fields
	if len(f) == 0 {
		return
	}
	stamp := func(i int) time.Time {
		if len(f) > i {
			if n, err := strconv.ParseInt(f[i], 10, 64); err == nil {
				return time.Unix(0, n)
			}
		}
		return l.Received
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch f[0] {
	case "READY":
		c.ready = true
	case "LEADING":
		if len(f) >= 3 {
			c.epoch, _ = strconv.ParseInt(f[1], 10, 64)
			c.leading, c.leadAt = true, stamp(2)
			c.leadLines = append(c.leadLines, leadLine{epoch: c.epoch, at: c.leadAt})
		}
	case "FOLLOWING":
		c.leading = false
	case "STATS":
		if len(f) >= 3 {
			seq, _ := strconv.Atoi(f[1])
			var s ChildStats
			if err := json.Unmarshal([]byte(strings.Join(f[2:], " ")), &s); err == nil {
				c.stats[seq] = s
			}
		}
	case "STOPPED":
		c.stopped = true
		if len(f) >= 2 {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			c.stopTook = time.Duration(n)
		}
	case childproc.ErrorPrefix:
		if c.failed == "" {
			c.failed = l.Text
		}
	}
	p.notify()
}

// exit records the child's exit.
func (p *procs) exit(c *child, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.exited, c.exitErr = true, err
	c.leading = false
	p.notify()
}

// wait calls cond, with p.mu held, at each change until it is true, a child fails
// (prints ERROR, or exits without the parent killing or stopping it), timeout passes
// or the context ends.
func (p *procs) wait(timeout time.Duration, what string, cond func() bool) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		ok := cond()
		err := p.failureLocked()
		changed := p.changed
		p.mu.Unlock()
		switch {
		case err != nil:
			return fmt.Errorf("ax: bench: waiting for %s: %w", what, err)
		case ok:
			return nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return fmt.Errorf("ax: bench: %s did not happen within %v", what, timeout)
		case <-p.ctx.Done():
			return fmt.Errorf("ax: bench: waiting for %s: %w", what, p.ctx.Err())
		}
	}
}

// failureLocked returns an error if a child failed; p.mu is held.
func (p *procs) failureLocked() error {
	for _, c := range p.children {
		switch {
		case c.failed != "":
			return fmt.Errorf("%s: %s (logs: %s)", c.node, c.failed, c.stderr)
		case c.exited && !c.expected:
			return fmt.Errorf("%s exited unexpectedly (%v); logs: %s", c.node, c.exitErr, c.stderr)
		}
	}
	return nil
}

// liveLocked returns the children running; p.mu is held.
func (p *procs) liveLocked() []*child {
	var live []*child
	for _, c := range p.children {
		if !c.exited && !c.expected {
			live = append(live, c)
		}
	}
	return live
}

// leaderLocked returns the live child that leads with the highest epoch, or nil;
// p.mu is held.
func (p *procs) leaderLocked() *child {
	var l *child
	for _, c := range p.liveLocked() {
		if c.leading && (l == nil || c.epoch > l.epoch) {
			l = c
		}
	}
	return l
}

// leader waits for a leader among the live children and returns it with its epoch
// and the stamp of its LEADING line.
func (p *procs) leader(timeout time.Duration) (c *child, epoch int64, at time.Time, err error) {
	err = p.wait(timeout, "a leader", func() bool {
		if c = p.leaderLocked(); c != nil {
			epoch, at = c.epoch, c.leadAt
		}
		return c != nil
	})
	return c, epoch, at, err
}

// nextLeader waits for a term of an epoch above after, on a child other than old,
// and returns that child, the epoch and the stamp of its first LEADING line of such
// an epoch.
func (p *procs) nextLeader(old *child, after int64, timeout time.Duration) (c *child, epoch int64, at time.Time, err error) {
	err = p.wait(timeout, "a new leader after "+old.node, func() bool {
		for _, ch := range p.children {
			if ch == old {
				continue
			}
			for _, l := range ch.leadLines {
				if l.epoch > after && (c == nil || l.epoch < epoch) {
					c, epoch, at = ch, l.epoch, l.at
				}
			}
		}
		return c != nil
	})
	return c, epoch, at, err
}

// ready waits until c printed READY.
func (p *procs) ready(c *child, timeout time.Duration) error {
	return p.wait(timeout, c.node+" ready", func() bool { return c.ready })
}

// kill sends SIGKILL to c and waits until it is reaped and its last lines read; it
// returns the time just before the signal was sent.
func (p *procs) kill(c *child) (time.Time, error) {
	p.mu.Lock()
	c.expected = true
	c.killed = c.killed || !c.exited
	p.mu.Unlock()
	at, err := c.proc.Kill()
	if err != nil {
		return at, fmt.Errorf("ax: bench: %w", err)
	}
	select {
	case <-c.proc.Done():
		return at, nil
	case <-time.After(childproc.KillTimeout):
		return at, fmt.Errorf("ax: bench: %s's output not read %v after SIGKILL", c.node, childproc.KillTimeout)
	}
}

// term sends SIGTERM to c (it stops its scheduler gracefully, prints STOPPED and
// exits) and returns the time just before the signal was sent.
func (p *procs) term(c *child) (time.Time, error) {
	p.mu.Lock()
	c.expected = true
	p.mu.Unlock()
	at, err := c.proc.Term()
	if err != nil {
		return at, fmt.Errorf("ax: bench: %w", err)
	}
	return at, nil
}

// stopped waits until c, sent SIGTERM, printed STOPPED and exited with status 0.
func (p *procs) stopped(c *child, timeout time.Duration) error {
	err := p.wait(timeout, c.node+" stopped", func() bool { return c.exited })
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !c.stopped || c.exitErr != nil {
		return fmt.Errorf("ax: bench: %s after SIGTERM: exit %v, STOPPED printed: %v; logs: %s", c.node, c.exitErr, c.stopped, c.stderr)
	}
	return nil
}

// stats asks every live child for its counters, waits for the answers (kept in each
// child's stats under the request's number) and returns the request's number.
func (p *procs) stats(timeout time.Duration) (int, error) {
	p.mu.Lock()
	p.seq++
	seq := p.seq
	live := p.liveLocked()
	p.mu.Unlock()
	var asked []*child
	for _, c := range live {
		if err := c.proc.Send(fmt.Sprintf("STATS %d", seq)); err == nil {
			asked = append(asked, c)
		}
	}
	err := p.wait(timeout, "the nodes' counters", func() bool {
		for _, c := range asked {
			if _, ok := c.stats[seq]; !ok && !c.exited {
				return false
			}
		}
		return true
	})
	return seq, err
}

// shutdown stops every live child: SIGTERM, then SIGKILL after timeout.
func (p *procs) shutdown(timeout time.Duration) {
	p.mu.Lock()
	live := p.liveLocked()
	p.mu.Unlock()
	for _, c := range live {
		p.term(c)
	}
	deadline := time.After(timeout)
	for _, c := range live {
		select {
		case <-c.proc.Done():
		case <-deadline:
			p.killAll()
			return
		}
	}
}

// killAll kills every child still running and waits until they are reaped.
func (p *procs) killAll() {
	p.mu.Lock()
	all := append([]*child(nil), p.children...)
	p.mu.Unlock()
	for _, c := range all {
		p.kill(c)
	}
}
