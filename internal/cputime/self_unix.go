//go:build unix

package cputime

import (
	"fmt"
	"syscall"
	"time"
)

// Self returns the CPU time, user and system, that this process has used so far
// on all its threads.
func Self() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("cputime: getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
