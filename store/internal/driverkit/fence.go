package driverkit

import (
	"fmt"

	"github.com/axsched/ax/store"
)

// Admits reports whether a write fenced with f may apply when the namespace's recorded
// epoch is recorded (0 when none is): f is the zero Fence, or its token is at least the
// recorded epoch.
func Admits(f store.Fence, recorded int64) bool { return f.Token == 0 || f.Token >= recorded }

// RaisedEpoch is the epoch RaiseFence records for holder with token over a row that
// records recordedHolder at recorded (0 and "" when there is no row): recorded itself
// when the row already names holder at token, else max(token, recorded+1).
func RaisedEpoch(recordedHolder string, recorded int64, holder string, token int64) int64 {
	if recordedHolder == holder && recorded == token {
		return recorded
	}
	return max(token, recorded+1)
}

// FencedError is the error a driver returns for a write that fence does not admit:
// it wraps ErrFenced and names both epochs.
func FencedError(f store.Fence, recorded int64) error {
	return fmt.Errorf("token %d below epoch %d of namespace %q: %w", f.Token, recorded, f.Namespace, store.ErrFenced)
}
