// Package childproc runs child processes that report to their parent in lines: a
// test binary re-executed into one of its tests, or a program re-executed as one
// node of a cluster. The parent starts a child with Start, reads the lines it prints
// on stdout, waits for one with a deadline, and kills (SIGKILL), terminates (SIGTERM),
// pauses (SIGSTOP) or resumes (SIGCONT) it; the child's stderr is kept for the
// failure report. The child writes its lines with a Writer.
//
// The protocol is what the parent and the child share:
//
//	READY …        (by convention) the child is up; the parent waits for it with WaitLine
//	ERROR <text>   the child failed; a WaitLine in progress returns an error with the text
//	anything else  the user's own lines, one event each
//
// Pausing is Linux only (it reads /proc); the rest runs everywhere.
package childproc

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrorPrefix starts the line a child prints when it fails (Writer.Error).
const ErrorPrefix = "ERROR"

// KillTimeout bounds how long Kill waits for the child to be reaped after SIGKILL.
const KillTimeout = 30 * time.Second

// TestCommand returns a command that runs the test binary again, running only the
// test named test (of the package under test) once.
func TestCommand(test string) *exec.Cmd {
	return exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
}

// Options says how Start runs a child. The zero value runs it with the parent's
// environment, no stdin, and its stderr kept in memory.
type Options struct {
	// Name names the child in errors, e.g. "node-2". Empty: "child".
	Name string
	// Env is added to the command's environment, or to the parent's when the
	// command's is nil.
	Env []string
	// Stdin keeps a pipe to the child's stdin, for Send and CloseStdin. False: the
	// child reads from the null device.
	Stdin bool
	// StderrFile is the file the child's stderr goes to, created or truncated.
	// Empty: Stderr, or memory when Stderr is nil too. Process.Stderr reads it back
	// from either the file or memory.
	StderrFile string
	// Stderr receives the child's stderr when StderrFile is empty; it must be safe
	// for the writes of several children if they share it.
	Stderr io.Writer
	// OnLine, when set, is called with each line the child prints, in order, after
	// the line is recorded, on the goroutine that reads the child's stdout: while it
	// blocks, the child's next lines wait.
	OnLine func(Line)
	// OnExit, when set, is called once the child was reaped and its last line
	// handled, with its exit error (nil: status 0), before Done is closed.
	OnExit func(error)
}

// Line is one line a child printed on stdout.
type Line struct {
	Text     string
	Fields   []string  // Text split on white space
	Received time.Time // when the parent read it
}

// Process is a running child, as its parent sees it. Its methods are safe for
// concurrent use.
type Process struct {
	name       string
	cmd        *exec.Cmd
	pid        int
	stdin      io.WriteCloser
	stderrFile string
	stderrMem  *lockedBuffer
	onLine     func(Line)
	onExit     func(error)
	reaped     chan struct{} // closed once the process was reaped; waitErr and diedAt are set then
	waitErr    error
	diedAt     time.Time
	done       chan struct{} // closed once the exit is recorded and OnExit returned

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at each new line and at the exit
	lines   []Line
	cursor  int // the lines before it were consumed by WaitLine
	exited  bool
}

// Start starts cmd as a child that talks to the parent as opts says. cmd's Stdin,
// Stdout and Stderr must be unset; its Env, ExtraFiles and other fields are the
// caller's. On Linux the child is killed (SIGKILL) if the parent dies, so that it
// never outlives it.
func Start(cmd *exec.Cmd, opts Options) (*Process, error) {
	p := &Process{
		name: opts.Name, cmd: cmd, stderrFile: opts.StderrFile, onLine: opts.OnLine, onExit: opts.OnExit,
		reaped: make(chan struct{}), done: make(chan struct{}), changed: make(chan struct{}),
	}
	if p.name == "" {
		p.name = "child"
	}
	if len(opts.Env) > 0 {
		if cmd.Env == nil {
			cmd.Env = os.Environ()
		}
		cmd.Env = append(cmd.Env, opts.Env...)
	}
	switch {
	case opts.StderrFile != "":
		f, err := os.Create(opts.StderrFile)
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", p.name, err)
		}
		defer f.Close() // the child has its own descriptor
		cmd.Stderr = f
	case opts.Stderr != nil:
		cmd.Stderr = opts.Stderr
	default:
		p.stderrMem = &lockedBuffer{}
		cmd.Stderr = p.stderrMem
	}
	dieWithParent(cmd)
	if opts.Stdin {
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", p.name, err)
		}
		p.stdin = stdin
	}
	// A pipe of our own rather than StdoutPipe: Wait then reaps the child without
	// waiting for its stdout to be read, so that Kill returns although the reader
	// is held up by OnLine.
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", p.name, err)
	}
	cmd.Stdout = w
	err = cmd.Start()
	w.Close() // the child has its own
	if err != nil {
		r.Close()
		if p.stdin != nil {
			p.stdin.Close()
		}
		return nil, fmt.Errorf("start %s: %w", p.name, err)
	}
	p.pid = cmd.Process.Pid
	go p.reap()
	go p.read(r)
	return p, nil
}

// reap waits for the child to exit.
func (p *Process) reap() {
	err := p.cmd.Wait()
	p.waitErr, p.diedAt = err, time.Now()
	close(p.reaped)
}

// read records the child's lines until its stdout closes, then its exit.
func (p *Process) read(stdout *os.File) {
	defer stdout.Close()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := Line{Text: sc.Text(), Fields: strings.Fields(sc.Text()), Received: time.Now()}
		p.mu.Lock()
		p.lines = append(p.lines, l)
		p.notify()
		p.mu.Unlock()
		if p.onLine != nil {
			p.onLine(l)
		}
	}
	io.Copy(io.Discard, stdout) // after a line too long: let the child finish writing
	<-p.reaped
	p.mu.Lock()
	p.exited = true
	p.notify()
	p.mu.Unlock()
	if p.onExit != nil {
		p.onExit(p.waitErr)
	}
	close(p.done)
}

// notify wakes the waiters; p.mu is held.
func (p *Process) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// PID is the child's process id.
func (p *Process) PID() int { return p.pid }

// Lines returns every line the child printed so far.
func (p *Process) Lines() []Line {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Line(nil), p.lines...)
}

// WaitLine waits, at most timeout, for a line that starts with one of prefixes among
// those not consumed yet, and consumes it and the lines before it. A line starting
// with ErrorPrefix, or the child's exit, ends the wait with an error.
func (p *Process) WaitLine(timeout time.Duration, prefixes ...string) (Line, error) {
	var found Line
	what := "a line starting with " + strconv.Quote(prefixes[0])
	if len(prefixes) > 1 {
		what = fmt.Sprintf("a line starting with one of %q", prefixes)
	}
	err := p.wait(timeout, what, func() (bool, error) {
		for i := p.cursor; i < len(p.lines); i++ {
			l := p.lines[i]
			for _, prefix := range prefixes {
				if strings.HasPrefix(l.Text, prefix) {
					found, p.cursor = l, i+1
					return true, nil
				}
			}
			if strings.HasPrefix(l.Text, ErrorPrefix) {
				return false, fmt.Errorf("%s (pid %d): %s", p.name, p.pid, l.Text)
			}
		}
		return false, nil
	})
	return found, err
}

// WaitFor waits, at most timeout, for a line, among all the child printed, for which
// match is true, and returns the first. The child's exit ends the wait with an error
// that says it did not print what.
func (p *Process) WaitFor(timeout time.Duration, what string, match func(Line) bool) (Line, error) {
	var found Line
	err := p.wait(timeout, what, func() (bool, error) {
		for _, l := range p.lines {
			if match(l) {
				found = l
				return true, nil
			}
		}
		return false, nil
	})
	return found, err
}

// wait calls check, with p.mu held, at each change until it is true, fails, the
// child exits, or timeout passes.
func (p *Process) wait(timeout time.Duration, what string, check func() (bool, error)) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		ok, err := check()
		exited, changed := p.exited, p.changed
		p.mu.Unlock()
		switch {
		case err != nil:
			return err
		case ok:
			return nil
		case exited:
			return fmt.Errorf("%s (pid %d) exited (%v) before printing %s%s", p.name, p.pid, p.waitErr, what, p.stderrHint())
		}
		select {
		case <-changed:
		case <-deadline.C:
			return fmt.Errorf("%s (pid %d) did not print %s within %v%s", p.name, p.pid, what, timeout, p.stderrHint())
		}
	}
}

// stderrHint points an error at the child's stderr file, if it has one.
func (p *Process) stderrHint() string {
	if p.stderrFile == "" {
		return ""
	}
	return "; its stderr is in " + p.stderrFile
}

// Send writes line and a newline to the child's stdin (Options.Stdin).
func (p *Process) Send(line string) error {
	if p.stdin == nil {
		return fmt.Errorf("%s: no pipe to its stdin", p.name)
	}
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		return fmt.Errorf("%s (pid %d): write to its stdin: %w", p.name, p.pid, err)
	}
	return nil
}

// CloseStdin closes the child's stdin (Options.Stdin): the child reads its end.
func (p *Process) CloseStdin() error {
	if p.stdin == nil {
		return nil
	}
	return p.stdin.Close()
}

// Kill kills the child with SIGKILL (kill -9: it runs no code of its own after it)
// and waits, at most KillTimeout, until it is reaped; the lines it printed before
// may still be on their way (Done says when they are all read). It returns the time
// just before the signal was sent. A child already reaped is left alone.
func (p *Process) Kill() (time.Time, error) {
	at := time.Now()
	select {
	case <-p.reaped:
		return at, nil
	default:
	}
	p.cmd.Process.Kill() // fails only if the child is gone already
	select {
	case <-p.reaped:
		return at, nil
	case <-time.After(KillTimeout):
		return at, fmt.Errorf("%s (pid %d) not reaped %v after SIGKILL", p.name, p.pid, KillTimeout)
	}
}

// Term sends SIGTERM to the child and returns the time just before it was sent.
func (p *Process) Term() (time.Time, error) {
	at := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return at, fmt.Errorf("SIGTERM %s (pid %d): %w", p.name, p.pid, err)
	}
	return at, nil
}

// Done returns a channel closed once the child exited and its exit was recorded
// (after OnExit).
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the child exited, and with what error (nil: status 0).
func (p *Process) Exited() (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.exited {
		return false, nil
	}
	return true, p.waitErr
}

// DiedAt returns a time by which the child was dead (when it was reaped), and false
// while it runs.
func (p *Process) DiedAt() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.exited {
		return time.Time{}, false
	}
	return p.diedAt, true
}

// Stderr returns what the child wrote to stderr so far, from its file
// (Options.StderrFile) or memory; "" when it went to Options.Stderr.
func (p *Process) Stderr() string {
	if p.stderrFile != "" {
		b, _ := os.ReadFile(p.stderrFile)
		return string(b)
	}
	if p.stderrMem != nil {
		return p.stderrMem.String()
	}
	return ""
}

// failureMarkers start the reports of a Go program's failures on stderr: the race
// detector's, a panic's, the runtime's fatal errors.
var failureMarkers = []string{"WARNING: DATA RACE", "panic: ", "fatal error: "}

// Failures returns the first report of a data race, of a panic and of a fatal
// runtime error in stderr (a child's), each from its first line and at most 4000
// bytes long. A child killed after a data race leaves its report there only.
func Failures(stderr string) []string {
	var reports []string
	for _, marker := range failureMarkers {
		if i := strings.Index(stderr, marker); i >= 0 {
			reports = append(reports, stderr[i:min(len(stderr), i+4000)])
		}
	}
	return reports
}

// lockedBuffer is a bytes.Buffer safe for a writer and readers at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
