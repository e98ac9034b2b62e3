//go:build linux

// Package proctest pauses and resumes child processes for tests: SIGSTOP that returns
// only once every thread of the child has stopped, so that whatever the child does
// next, it does after the matching SIGCONT. It reads /proc: Linux only.
package proctest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Stop sends SIGSTOP to the process pid and waits, at most timeout, until every one
// of its threads is stopped. It returns a time at which the process was certainly
// stopped.
func Stop(pid int, timeout time.Duration) (time.Time, error) {
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return time.Time{}, fmt.Errorf("SIGSTOP %d: %w", pid, err)
	}
	deadline := time.Now().Add(timeout)
	for !stopped(pid) {
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("process %d not stopped %v after SIGSTOP", pid, timeout)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Now(), nil
}

// Cont sends SIGCONT to the process pid and returns the time just before it was sent.
func Cont(pid int) (time.Time, error) {
	at := time.Now()
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		return at, fmt.Errorf("SIGCONT %d: %w", pid, err)
	}
	return at, nil
}

// stopped reports whether every thread of the process pid is stopped, as /proc says.
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
