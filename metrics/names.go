package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/axsched/ax"
)

// nameSet admits at most max distinct label values, first come first served, for the
// life of the set, and gives each its series; every value beyond the cap shares the
// series of OtherName. Reading an admitted value takes a read lock and allocates
// nothing.
type nameSet[T any] struct {
	max    int
	create func(name string) *T

	mu    sync.RWMutex
	m     map[string]*T
	other *T // nil until the first value beyond the cap
}

func newNameSet[T any](max int, create func(string) *T) nameSet[T] {
	return nameSet[T]{max: max, create: create, m: make(map[string]*T)}
}

// get returns the series of name: its own if name is (or can still be) admitted,
// else that of OtherName.
func (s *nameSet[T]) get(name string) *T {
	s.mu.RLock()
	v, ok := s.m[name]
	if !ok && len(s.m) >= s.max && s.other != nil {
		v, ok = s.other, true
	}
	s.mu.RUnlock()
	if ok {
		return v
	}
	return s.admit(name)
}

func (s *nameSet[T]) admit(name string) *T {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[name]; ok {
		return v
	}
	if len(s.m) < s.max {
		v := s.create(name)
		s.m[name] = v
		return v
	}
	if s.other == nil {
		s.other = s.create(OtherName)
	}
	return s.other
}

// child caches one child of a metric vector, created at its first use, so that the
// hot path neither hashes label values nor allocates. Creating it twice, in a race,
// is harmless: a vector returns the same child for the same label values.
type child[T any] struct {
	p atomic.Pointer[T]
}

func (c *child[T]) get(create func() T) T {
	if p := c.p.Load(); p != nil {
		return *p
	}
	v := create()
	c.p.Store(&v)
	return v
}

// The label values that have cached children; others are looked up each time.
var (
	outcomes = [...]ax.Outcome{ax.OutcomeSucceeded, ax.OutcomeFailed, ax.OutcomePanicked, ax.OutcomeTimedOut, ax.OutcomeReleased, ax.OutcomeOrphaned}
	reasons  = [...]ax.DispatchReason{ax.DispatchNoHandler, ax.DispatchStopping, ax.DispatchStuck}
	results  = [...]string{ax.ScheduleDispatched, ax.ScheduleMisfired, ax.ScheduleCaughtUp, ax.ScheduleSkippedOverlap}
)

func outcomeIndex(v ax.Outcome) int       { return index(outcomes[:], v) }
func reasonIndex(v ax.DispatchReason) int { return index(reasons[:], v) }
func resultIndex(v string) int            { return index(results[:], v) }

func index[T comparable](s []T, v T) int {
	for i, w := range s {
		if w == v {
			return i
		}
	}
	return -1
}

// nameSeries holds the series of one task name (or of OtherName).
type nameSeries struct {
	name             string
	lateness         child[prometheus.Observer]
	dispatchLateness child[prometheus.Observer]
	duration         [len(outcomes)]child[prometheus.Observer]
	executions       [len(outcomes)]child[prometheus.Counter]
	dispatchFailures [len(reasons)]child[prometheus.Counter]
	retries          child[prometheus.Counter]
	skipped          child[prometheus.Counter]
	submitted        child[prometheus.Counter]
	unhandled        child[prometheus.Counter]
}

// newNameSeries admits name. Its ax_task_executions_total series start at 0 for every
// outcome, so that a first failure shows in rate() and increase(); its other series
// appear at their first event.
func (o *Observer) newNameSeries(name string) *nameSeries {
	s := &nameSeries{name: name}
	for i, out := range outcomes {
		s.executions[i].get(func() prometheus.Counter { return o.executions.WithLabelValues(name, string(out)) })
	}
	return s
}

// scheduleSeries holds the series of one schedule (or of OtherName).
type scheduleSeries struct {
	name     string
	fires    [len(results)]child[prometheus.Counter]
	nextFire child[prometheus.Gauge]
}
