//go:build !linux

package scriptcluster

import (
	"errors"
	"os"
)

// ErrLocked is LockFile's error when another process holds the lock.
var ErrLocked = errors.New("locked by another process")

// LockFile needs Linux, as the clusters do (Start skips elsewhere).
func LockFile(string) (*os.File, error) { return nil, errors.New("scriptcluster: Linux only") }
