// Package stats counts this node's finished executions per minute and writes the
// counts to the store's statistics (store.StatsKeeper), for the console's overview:
// executions by outcome, lateness as a histogram, early starts, the names failing most.
//
// Record is called on the execution path, so it only counts, under a mutex held for a
// few map operations, and never does I/O. A goroutine (Start to Stop) writes the
// minutes that changed every Interval and at Stop, each write bounded by Timeout. A
// written row holds the minute's totals so far and replaces the stored one: a write
// repeated after an unknown outcome changes nothing, and a failed one is retried
// whole by the next flush.
//
// Memory is bounded: the current and previous minute are kept, and older minutes
// while they wait to be written, up to MaxMinutes. An execution whose minute is no
// longer kept is dropped and counted, and so is a failing name past MaxNames in one
// minute, or one the store cannot hold (with a line break); the next flush logs the
// counts. A nil *Aggregator takes every call and does nothing.
//
// Its lifecycle is two-phase, Start then Stop(ctx), not a Run(ctx): the executor
// records results until it has stopped, after the scheduler's loops have ended, and
// Stop writes them last.
package stats

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/store"
)

// Writer is where the statistics go: the store.
type Writer interface {
	WriteStats(ctx context.Context, rows []store.MinuteStats) error
}

// Config is what an Aggregator needs.
type Config struct {
	Store    Writer
	Node     string // the rows' node: this scheduler's Config.Node
	Log      *slog.Logger
	Interval time.Duration // between two flushes
	Timeout  time.Duration // bounds each store call
}

// The bounds of an Aggregator's memory.
const (
	// MaxMinutes is the most minutes held: those not written yet while the store
	// fails, beyond the current and previous one.
	MaxMinutes = 10
	// MaxNames is the most failing names counted in one minute.
	MaxNames = 1000
)

// Aggregator counts executions per minute and writes them. Its methods are safe for
// concurrent use.
type Aggregator struct {
	cfg  Config
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	minutes map[int64]*minute // by Unix second of the minute
	newest  int64             // the newest minute recorded
	dropped int64             // executions not counted since the last log
	names   int64             // failing names not counted since the last log
	started bool
	stopped bool
}

// minute is one minute's counts, as written to the store but for its failing names,
// which are all kept until the top store.MaxStatsNames are taken at each write.
type minute struct {
	row      store.MinuteStats
	failures map[string]int64
	version  int64 // bumped by every Record
	written  int64 // the version the store holds
}

// New returns an Aggregator for cfg; Start starts its writes.
func New(cfg Config) *Aggregator {
	return &Aggregator{cfg: cfg, stop: make(chan struct{}), done: make(chan struct{}), minutes: make(map[int64]*minute)}
}

// Record counts one execution whose result was written at at (by the scheduler's
// clock): t is the task as it ran (its DueAt, StartedAt and trigger stamps give its
// lateness), outcome one of observe's outcomes, and retried whether it will run again
// as a business retry.
func (a *Aggregator) Record(at time.Time, t *store.Task, outcome string, retried bool) {
	if a == nil {
		return
	}
	m := at.UTC().Truncate(time.Minute)
	key := m.Unix()
	a.mu.Lock()
	defer a.mu.Unlock()
	mm := a.minutes[key]
	if mm == nil {
		if key < a.newest-60 {
			a.dropped++ // a minute no longer kept: written already, or given up
			return
		}
		mm = &minute{row: store.MinuteStats{Node: a.cfg.Node, Minute: m}, failures: make(map[string]int64)}
		a.minutes[key] = mm
		if key > a.newest {
			a.newest = key
			a.evictLocked()
		}
	}
	mm.version++
	r := &mm.row
	failed := true
	switch outcome {
	case observe.Succeeded:
		r.Succeeded++
		failed = false
	case observe.Failed:
		r.Failed++
	case observe.Panicked:
		r.Panicked++
	case observe.TimedOut:
		r.TimedOut++
	case observe.Released:
		r.Released++
		failed = false
	case observe.Orphaned:
		r.Orphaned++
	default:
		failed = false
	}
	if failed && retried {
		r.Retried++
	}
	if failed {
		if _, ok := mm.failures[t.Name]; ok || len(mm.failures) < MaxNames && storable(t.Name) {
			mm.failures[t.Name]++
		} else {
			a.names++
		}
	}
	if !observe.Manual(t) && !t.StartedAt.IsZero() && !t.DueAt.IsZero() {
		late := t.StartedAt.Sub(t.DueAt)
		r.Lateness[store.LatenessBucket(late)]++
		if late < 0 {
			r.Early++
		}
		r.MaxLateness = max(r.MaxLateness, late.Truncate(time.Microsecond))
	}
}

// evictLocked forgets the minutes before the previous one that are written, and the
// oldest beyond MaxMinutes whatever they hold (counted as dropped).
func (a *Aggregator) evictLocked() {
	keys := slices.Sorted(maps.Keys(a.minutes))
	for i, k := range keys {
		mm := a.minutes[k]
		switch {
		case len(keys)-i > MaxMinutes:
			if mm.version != mm.written {
				a.dropped += count(&mm.row)
			}
			delete(a.minutes, k)
		case k < a.newest-60 && mm.version == mm.written:
			delete(a.minutes, k)
		}
	}
}

// storable reports whether the store takes name as a failing name: ax's task names
// all are, but for one holding a line break, which the store's encoding uses.
func storable(name string) bool {
	return name != "" && len(name) <= store.MaxNameLen && utf8.ValidString(name) && !strings.ContainsAny(name, "\x00\n")
}

// count returns how many executions a row counts.
func count(r *store.MinuteStats) int64 {
	return r.Succeeded + r.Failed + r.Panicked + r.TimedOut + r.Released + r.Orphaned
}

// Start starts writing every Interval, until Stop.
func (a *Aggregator) Start() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started || a.stopped {
		return
	}
	a.started = true
	go a.run()
}

func (a *Aggregator) run() {
	defer close(a.done)
	ticker := time.NewTicker(a.cfg.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-ticker.C:
			a.flushAndLog(context.Background())
		}
	}
}

// Stop ends the writes every Interval and writes what changed once more, bounded by
// Timeout and ctx; it returns that write's error. Records after Stop are counted but
// never written.
func (a *Aggregator) Stop(ctx context.Context) error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	started, stopped := a.started, a.stopped
	a.stopped = true
	a.mu.Unlock()
	if stopped {
		return nil
	}
	if started {
		close(a.stop)
		select {
		case <-a.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return a.flushAndLog(ctx)
}

// flushAndLog flushes and logs, at WARN, a failure and what was dropped since the
// last log: once per flush, so once per Interval at most.
func (a *Aggregator) flushAndLog(ctx context.Context) error {
	err := a.Flush(ctx)
	a.mu.Lock()
	dropped, names := a.dropped, a.names
	a.dropped, a.names = 0, 0
	a.mu.Unlock()
	switch {
	case err != nil:
		a.cfg.Log.LogAttrs(ctx, slog.LevelWarn, "ax: write execution statistics; the next flush tries again",
			slog.Any("err", err), slog.Int64("dropped", dropped), slog.Int64("names_dropped", names))
	case dropped > 0 || names > 0:
		a.cfg.Log.LogAttrs(ctx, slog.LevelWarn, "ax: execution statistics dropped",
			slog.Int64("dropped", dropped), slog.Int64("names_dropped", names))
	}
	return err
}

// Flush writes the minutes that changed since their last write, each as its totals
// so far, in one store call bounded by Timeout. Nothing changed: no call.
func (a *Aggregator) Flush(ctx context.Context) error {
	if a == nil {
		return nil
	}
	type sent struct {
		key, version int64
	}
	var (
		rows []store.MinuteStats
		vs   []sent
	)
	a.mu.Lock()
	for _, k := range slices.Sorted(maps.Keys(a.minutes)) {
		mm := a.minutes[k]
		if mm.version == mm.written {
			continue
		}
		r := mm.row
		r.Failures = top(mm.failures, store.MaxStatsNames)
		rows, vs = append(rows, r), append(vs, sent{k, mm.version})
	}
	a.mu.Unlock()
	if len(rows) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	if err := a.cfg.Store.WriteStats(ctx, rows); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, v := range vs {
		if mm := a.minutes[v.key]; mm != nil {
			mm.written = max(mm.written, v.version)
		}
	}
	a.evictLocked()
	return nil
}

// top returns the n names with the highest counts, highest first, then by name.
func top(counts map[string]int64, n int) []store.NameCount {
	out := make([]store.NameCount, 0, len(counts))
	for name, c := range counts {
		out = append(out, store.NameCount{Name: name, Count: c})
	}
	slices.SortFunc(out, func(a, b store.NameCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Name, b.Name))
	})
	return out[:min(len(out), n)]
}
