// Package cputime measures CPU time for ax's benchmarks and ax bench: this
// process's (Self), and that of the database servers running on this machine
// (Of).
package cputime

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Of sums the CPU time of the local processes whose command name starts with one
// of prefixes (a database server on this machine: "postgres", "mariadbd"), from
// /proc: each one's user and system time, plus that of its exited, reaped children,
// so that the CPU of a PostgreSQL backend whose connection closed stays counted (in
// its postmaster's) and the sum never decreases between two calls. Where there is
// no /proc (not Linux) it is an error.
func Of(prefixes ...string) (time.Duration, error) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return 0, fmt.Errorf("cputime: no /proc here: %w", err)
	}
	files, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, fmt.Errorf("cputime: list /proc: %w", err)
	}
	var ticks int64
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // exited
		}
		ticks += statTicks(string(b), prefixes)
	}
	return time.Duration(ticks) * (time.Second / 100), nil // USER_HZ is 100 on Linux
}

// statTicks returns utime + stime + cutime + cstime of a /proc/PID/stat line, in
// clock ticks, when the process's command name starts with one of prefixes, and 0
// otherwise. The command name is between the first '(' and the last ')': it may
// hold either.
func statTicks(stat string, prefixes []string) int64 {
	open, closing := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || closing < open || closing+2 > len(stat) {
		return 0
	}
	comm := stat[open+1 : closing]
	match := false
	for _, p := range prefixes {
		match = match || strings.HasPrefix(comm, p)
	}
	if !match {
		return 0
	}
	fields := strings.Fields(stat[closing+2:])
	if len(fields) < 15 {
		return 0
	}
	var ticks int64
	for _, f := range fields[11:15] { // utime stime cutime cstime
		t, err := strconv.ParseInt(f, 10, 64)
		if err == nil {
			ticks += t
		}
	}
	return ticks
}
