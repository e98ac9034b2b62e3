//go:build !linux

package pgcluster

import (
	"errors"
)

// The cluster runs on Linux only (Start skips elsewhere); these keep the package
// building on other systems.

var (
	errUnsupported = errors.New("pgcluster: Linux only")
)

func alive(int) bool              { return false }
func cmdlineHas(int, string) bool { return false }
func children(int) []int          { return nil }
func stopped(int) bool            { return false }
func sigkill(int) error           { return errUnsupported }
func sigstop(int) error           { return errUnsupported }
func sigcont(int) error           { return errUnsupported }
