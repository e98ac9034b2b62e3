package scriptcluster

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// ErrLocked is LockFile's error when another process holds the lock.
var ErrLocked = errors.New("locked by another process")

// LockFile opens (creating) path and takes an exclusive flock on it without waiting:
// ErrLocked when another process holds it. The lock lasts until the file is closed or
// the process dies, so a crashed test leaves no stale lock behind.
func LockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrLocked
		}
		return nil, fmt.Errorf("flock %s: %w", path, err)
	}
	return f, nil
}
