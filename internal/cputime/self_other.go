//go:build !unix

package cputime

import (
	"errors"
	"time"
)

// Self returns the CPU time, user and system, that this process has used so far
// on all its threads; here, where the system does not say, an error.
func Self() (time.Duration, error) {
	return 0, errors.New("cputime: this system does not report a process's CPU time")
}
