package store

import (
	"testing"
	"time"
)

// TestLatenessBucket: an edge belongs to its own bucket, a lateness just above it to
// the next; an early start is bucket 0 and anything over an hour the last.
func TestLatenessBucket(t *testing.T) {
	t.Parallel()
	for i := range LatenessBuckets - 1 {
		edge := LatenessEdge(i)
		if got := LatenessBucket(edge); got != i {
			t.Errorf("LatenessBucket(%v) = %d, want %d", edge, got, i)
		}
		if got := LatenessBucket(edge + 1); got != i+1 {
			t.Errorf("LatenessBucket(%v) = %d, want %d", edge+1, got, i+1)
		}
	}
	for _, c := range []struct {
		d    time.Duration
		want int
	}{{-time.Hour, 0}, {0, 0}, {2 * time.Hour, LatenessBuckets - 1}} {
		if got := LatenessBucket(c.d); got != c.want {
			t.Errorf("LatenessBucket(%v) = %d, want %d", c.d, got, c.want)
		}
	}
	if got := LatenessEdge(LatenessBuckets - 1); got != -1 {
		t.Errorf("LatenessEdge(%d) = %v, want -1", LatenessBuckets-1, got)
	}
}
