package childproc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// StopTimeout bounds how long Stop waits for every thread of the child to stop.
const StopTimeout = 5 * time.Second

// dieWithParent makes the kernel kill the child (SIGKILL) when the parent dies.
func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// Stop sends SIGSTOP to the child and waits, at most StopTimeout, until every one of
// its threads is stopped, as /proc says. It returns a time at which the child was
// certainly stopped: whatever it does next, it does after Cont.
func (p *Process) Stop() (time.Time, error) {
	if err := syscall.Kill(p.pid, syscall.SIGSTOP); err != nil {
		return time.Time{}, fmt.Errorf("SIGSTOP %s (pid %d): %w", p.name, p.pid, err)
	}
	deadline := time.Now().Add(StopTimeout)
	for !stopped(p.pid) {
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%s (pid %d) not stopped %v after SIGSTOP", p.name, p.pid, StopTimeout)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Now(), nil
}

// Cont sends SIGCONT to the child and returns the time just before it was sent.
func (p *Process) Cont() (time.Time, error) {
	at := time.Now()
	if err := syscall.Kill(p.pid, syscall.SIGCONT); err != nil {
		return at, fmt.Errorf("SIGCONT %s (pid %d): %w", p.name, p.pid, err)
	}
	return at, nil
}

// stopped reports whether every thread of the process pid is stopped.
func stopped(pid int) bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			return false
		}
		// "pid (comm) S …": the state follows the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) || (s[i+2] != 'T' && s[i+2] != 't') {
			return false
		}
	}
	return true
}
