package store

import (
	"time"
)

// MinuteStats is what one node's executions did in one minute: those whose result
// was written in that minute, by the scheduler's clock.
type MinuteStats struct {
	Node   string    // the scheduler's Config.Node: non-empty, at most MaxNameLen bytes
	Minute time.Time // UTC, a whole minute

	// The executions by outcome, as ax reports them (ax.Outcome).
	Succeeded int64
	Failed    int64 // the handler returned an error
	Panicked  int64
	TimedOut  int64
	Released  int64 // interrupted by a stop; they run again without using a retry
	Orphaned  int64 // their executor stopped heartbeating
	// Retried counts the unsuccessful executions above (not Released) that will run
	// again as a business retry; the rest failed for good.
	Retried int64

	// Lateness counts the executions that started on schedule (not a manual trigger)
	// by start − due, in the buckets of LatenessBucket; an early start counts in
	// bucket 0. MaxLateness is the largest such lateness, zero when none.
	Lateness    [LatenessBuckets]int64
	MaxLateness time.Duration // kept to the microsecond
	// Early counts the executions that started before they were due without a
	// trigger: a broken guarantee, which must stay 0.
	Early int64

	// Failures holds the names with the most unsuccessful executions (Failed,
	// Panicked, TimedOut, Orphaned) in this minute, most first: at most
	// MaxStatsNames, each name once, each count positive.
	Failures []NameCount
}

// NameCount is a task name and how many times something happened to it.
type NameCount struct {
	Name  string
	Count int64
}

// The limits of the statistics.
const (
	// MaxStatsRows is the most rows one WriteStats takes.
	MaxStatsRows = 60
	// MaxStatsNames is the most names in MinuteStats.Failures.
	MaxStatsNames = 20
	// MaxStatsNodes is how many nodes an hour of Stats is sized for.
	MaxStatsNodes = 64
	// MaxStatsRead is the most rows Stats returns: 61 minutes of MaxStatsNodes nodes.
	MaxStatsRead = 61 * MaxStatsNodes
)

// LatenessBuckets is the number of lateness buckets: one per upper edge of
// LatenessEdge, the edges of the metrics package's histograms (1 ms … 1 h), and one
// for what lies above an hour.
const LatenessBuckets = 19

// LatenessEdge returns the upper edge of bucket i, inclusive: 1ms, 2.5ms, 5ms, 10ms,
// 25ms, 50ms, 100ms, 250ms, 500ms, 1s, 2.5s, 5s, 10s, 30s, 1m, 5m, 15m, 1h; the last
// bucket, LatenessBuckets−1, has none and returns -1.
func LatenessEdge(i int) time.Duration {
	if i < 0 || i >= len(latenessEdges) {
		return -1
	}
	return latenessEdges[i]
}

// latenessEdges are LatenessEdge's values, built once: LatenessBucket runs on the
// execution path, once per finished execution.
var latenessEdges = [LatenessBuckets - 1]time.Duration{
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
	30 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour,
}

// LatenessBucket returns the bucket of lateness d: the first whose upper edge is at
// least d. A negative d (an early start) is bucket 0.
func LatenessBucket(d time.Duration) int {
	for i, edge := range latenessEdges {
		if d <= edge {
			return i
		}
	}
	return LatenessBuckets - 1
}
