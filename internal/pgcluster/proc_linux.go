package pgcluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// procStat reads /proc/pid/stat: the state letter and the parent's pid.
func procStat(pid int) (state byte, ppid int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// "pid (comm) S ppid …": comm may hold spaces and parentheses; it ends at the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: too short", pid)
	}
	ppid, err = strconv.Atoi(f[1])
	return f[0][0], ppid, err
}

// alive reports whether pid runs (a zombie does not count).
func alive(pid int) bool {
	st, _, err := procStat(pid)
	return err == nil && st != 'Z' && st != 'X'
}

// cmdlineHas reports whether pid runs and its command line contains s.
func cmdlineHas(pid int, s string) bool {
	if !alive(pid) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})), s)
}

// children returns the pids whose parent is pid. PostgreSQL's backends each run in a
// session of their own, so only their parent ties them to the postmaster.
func children(pid int) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []int
	for _, d := range dirs {
		p, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if _, ppid, err := procStat(p); err == nil && ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

// stopped reports whether every thread of pid is stopped (state T or t).
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
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false
		}
	}
	return true
}

func sigkill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
func sigstop(pid int) error { return syscall.Kill(pid, syscall.SIGSTOP) }
func sigcont(pid int) error { return syscall.Kill(pid, syscall.SIGCONT) }
