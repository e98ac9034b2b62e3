package wheel

import (
	"container/heap"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/internal/cputime"
)

// The benchmarks compare three ways to hold n pending timers, each keyed by
// an int64 id so it can be cancelled: this wheel, a container/heap min-heap
// with an id index, and one time.AfterFunc timer per task. Each operation
// handles all n timers; ns/timer divides by n.

const (
	benchTick   = 10 * time.Millisecond
	benchWindow = 5 * time.Minute
)

var benchSizes = []struct {
	name string
	n    int
}{
	{"size=10k", 10_000},
	{"size=1M", 1_000_000},
}

// benchDues returns n random offsets in (0, benchWindow] and a random
// permutation of the ids 0..n-1 (the order to remove them in).
func benchDues(n int) ([]time.Duration, []int64) {
	r := rand.New(rand.NewPCG(uint64(n), 7))
	dues := make([]time.Duration, n)
	for i := range dues {
		dues[i] = 1 + time.Duration(r.Int64N(int64(benchWindow)))
	}
	perm := make([]int64, n)
	for i := range perm {
		perm[i] = int64(i)
	}
	r.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	return dues, perm
}

// forEachImpl runs bench for every implementation and size.
func forEachImpl(b *testing.B, bench map[string]func(b *testing.B, n int)) {
	for _, impl := range []string{"wheel", "heap", "timer"} {
		b.Run(impl, func(b *testing.B) {
			for _, size := range benchSizes {
				b.Run(size.name, func(b *testing.B) {
					b.ReportAllocs()
					bench[impl](b, size.n)
				})
			}
		})
	}
}

// cpuClock accumulates the process CPU time (all threads, so including the
// garbage collector's background work) over the timed parts of a benchmark.
// On a shared machine it is steadier than wall time, which also counts the
// time other processes hold the CPU.
type cpuClock struct {
	total, since time.Duration
}

// processCPU is the process's CPU time, 0 where the system does not say (and then
// cpu-ns/timer is left out).
func processCPU() time.Duration {
	d, _ := cputime.Self()
	return d
}

// begin starts the CPU clock alone, for the b.Loop loop that starts the
// benchmark timer.
func (c *cpuClock) begin() { c.since = processCPU() }

// end stops the CPU clock alone.
func (c *cpuClock) end() { c.total += processCPU() - c.since }

// start starts both the benchmark timer and the CPU clock.
func (c *cpuClock) start(b *testing.B) {
	b.StartTimer()
	c.since = processCPU()
}

// stop stops both the CPU clock and the benchmark timer.
func (c *cpuClock) stop(b *testing.B) {
	c.total += processCPU() - c.since
	b.StopTimer()
}

// report reports ns/timer (wall) and cpu-ns/timer for b.N operations on n
// timers each.
func (c *cpuClock) report(b *testing.B, n int) {
	per := float64(b.N) * float64(n)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/per, "ns/timer")
	if c.total > 0 {
		b.ReportMetric(float64(c.total.Nanoseconds())/per, "cpu-ns/timer")
	}
}

// measureMemory builds one structure holding n pending timers and reports
// what it costs while it stays pending: bytes/timer, the heap bytes it keeps
// alive, and gc-ns/timer, the GC CPU time of a full collection with it
// alive, less that of one without (runtime/metrics' estimate, averaged over
// 5 forced collections). It runs before the timed loop, so that earlier
// iterations' garbage does not blur it; drop undoes build (stopping timers).
// It returns a func that reports both; call it after the loop, since b.Loop
// resets the reported metrics when it starts.
func measureMemory[T any](b *testing.B, n int, build func() T, drop func(T)) (report func()) {
	var before, after runtime.MemStats
	runtime.GC()
	empty := gcCPU(5)
	runtime.ReadMemStats(&before)
	kept := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	full := gcCPU(5)
	drop(kept)
	runtime.GC()
	return func() {
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(n), "bytes/timer")
		b.ReportMetric(max(0, float64(full-empty))/5/float64(n), "gc-ns/timer")
	}
}

// gcCPU forces k collections and returns the GC CPU time they took.
func gcCPU(k int) time.Duration {
	sample := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(sample)
	start := sample[0].Value.Float64()
	for range k {
		runtime.GC()
	}
	metrics.Read(sample)
	return time.Duration((sample[0].Value.Float64() - start) * 1e9)
}

// timerHeap is the usual container/heap priority queue of pointers, with a
// map from id for removal.
type timerHeap struct {
	items []*heapItem
	byID  map[int64]*heapItem
}

type heapItem struct {
	id, due int64 // due in Unix nanoseconds
	index   int
}

func newTimerHeap() *timerHeap { return &timerHeap{byID: make(map[int64]*heapItem)} }

func (h *timerHeap) Len() int           { return len(h.items) }
func (h *timerHeap) Less(i, j int) bool { return h.items[i].due < h.items[j].due }
func (h *timerHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].index = i
	h.items[j].index = j
}
func (h *timerHeap) Push(x any) {
	it := x.(*heapItem)
	it.index = len(h.items)
	h.items = append(h.items, it)
}
func (h *timerHeap) Pop() any {
	last := len(h.items) - 1
	it := h.items[last]
	h.items[last] = nil
	h.items = h.items[:last]
	return it
}

func (h *timerHeap) add(id, due int64) {
	if it, ok := h.byID[id]; ok {
		it.due = due
		heap.Fix(h, it.index)
		return
	}
	it := &heapItem{id: id, due: due}
	heap.Push(h, it)
	h.byID[id] = it
}

func (h *timerHeap) remove(id int64) {
	if it, ok := h.byID[id]; ok {
		heap.Remove(h, it.index)
		delete(h.byID, id)
	}
}

func (h *timerHeap) expire(now int64, dst []int64) []int64 {
	for len(h.items) > 0 && h.items[0].due <= now {
		it := heap.Pop(h).(*heapItem)
		delete(h.byID, it.id)
		dst = append(dst, it.id)
	}
	return dst
}

func noop() {}

func addWheel(dues []time.Duration) *Wheel {
	w := New(benchTick, benchWindow, origin)
	for i, d := range dues {
		w.Add(int64(i), origin.Add(d))
	}
	return w
}

func addHeap(dues []time.Duration) *timerHeap {
	h := newTimerHeap()
	base := origin.UnixNano()
	for i, d := range dues {
		h.add(int64(i), base+int64(d))
	}
	return h
}

func addTimers(dues []time.Duration) map[int64]*time.Timer {
	timers := make(map[int64]*time.Timer)
	for i, d := range dues {
		timers[int64(i)] = time.AfterFunc(d, noop)
	}
	return timers
}

func stopTimers(timers map[int64]*time.Timer) {
	for _, t := range timers {
		t.Stop()
	}
}

// BenchmarkAdd schedules n timers due at random within 5 minutes, into a new
// structure. It also reports what n pending timers cost in memory and GC time
// (see measureMemory).
func BenchmarkAdd(b *testing.B) {
	forEachImpl(b, map[string]func(*testing.B, int){
		"wheel": func(b *testing.B, n int) {
			dues, _ := benchDues(n)
			reportMemory := measureMemory(b, n, func() *Wheel { return addWheel(dues) }, func(*Wheel) {})
			var c cpuClock
			c.begin()
			for b.Loop() {
				addWheel(dues)
			}
			c.end()
			c.report(b, n)
			reportMemory()
		},
		"heap": func(b *testing.B, n int) {
			dues, _ := benchDues(n)
			reportMemory := measureMemory(b, n, func() *timerHeap { return addHeap(dues) }, func(*timerHeap) {})
			var c cpuClock
			c.begin()
			for b.Loop() {
				addHeap(dues)
			}
			c.end()
			c.report(b, n)
			reportMemory()
		},
		"timer": func(b *testing.B, n int) {
			dues, _ := benchDues(n)
			reportMemory := measureMemory(b, n, func() map[int64]*time.Timer { return addTimers(dues) }, stopTimers)
			var c cpuClock
			c.begin()
			for b.Loop() {
				timers := addTimers(dues)
				c.stop(b)
				stopTimers(timers)
				c.start(b)
			}
			c.end()
			c.report(b, n)
			reportMemory()
		},
	})
}

// BenchmarkAddRemove schedules n timers, then cancels all of them in random
// order.
func BenchmarkAddRemove(b *testing.B) {
	forEachImpl(b, map[string]func(*testing.B, int){
		"wheel": func(b *testing.B, n int) {
			dues, perm := benchDues(n)
			var c cpuClock
			c.begin()
			for b.Loop() {
				w := addWheel(dues)
				for _, id := range perm {
					w.Remove(id)
				}
			}
			c.end()
			c.report(b, n)
		},
		"heap": func(b *testing.B, n int) {
			dues, perm := benchDues(n)
			var c cpuClock
			c.begin()
			for b.Loop() {
				h := addHeap(dues)
				for _, id := range perm {
					h.remove(id)
				}
			}
			c.end()
			c.report(b, n)
		},
		"timer": func(b *testing.B, n int) {
			dues, perm := benchDues(n)
			var c cpuClock
			c.begin()
			for b.Loop() {
				timers := addTimers(dues)
				for _, id := range perm {
					timers[id].Stop()
					delete(timers, id)
				}
			}
			c.end()
			c.report(b, n)
		},
	})
}

// BenchmarkExpire measures handing out n pending timers due at random within
// 5 minutes. The wheel and the heap are swept by a simulated clock in 10ms
// steps; setting them up is not timed. Runtime timers cannot be swept by a
// fake clock outside a synctest bubble, so the timer case schedules n
// AfterFunc timers (not timed) due within a compressed window of 2µs per timer
// (500k expiries a second) and waits for every callback: its cpu-ns/timer,
// the CPU time from the end of scheduling to the last callback, is the figure
// to compare; its ns/timer is mostly the window. Compressing further is unfair
// to timers: a burst of simultaneous expiries starts one goroutine per
// callback before any finishes.
func BenchmarkExpire(b *testing.B) {
	forEachImpl(b, map[string]func(*testing.B, int){
		"wheel": func(b *testing.B, n int) {
			dues, _ := benchDues(n)
			dst := make([]Entry, 0, n)
			var c cpuClock
			for b.Loop() {
				b.StopTimer()
				w := addWheel(dues)
				runtime.GC()
				c.start(b)
				fired := 0
				for now := origin; fired < n; {
					now = now.Add(benchTick)
					dst = w.Advance(now, dst[:0])
					fired += len(dst)
				}
				c.stop(b)
				b.StartTimer()
			}
			c.report(b, n)
		},
		"heap": func(b *testing.B, n int) {
			dues, _ := benchDues(n)
			dst := make([]int64, 0, n)
			var c cpuClock
			for b.Loop() {
				b.StopTimer()
				h := addHeap(dues)
				runtime.GC()
				c.start(b)
				fired := 0
				for now := origin.UnixNano(); fired < n; {
					now += int64(benchTick)
					dst = h.expire(now, dst[:0])
					fired += len(dst)
				}
				c.stop(b)
				b.StartTimer()
			}
			c.report(b, n)
		},
		"timer": func(b *testing.B, n int) {
			dues, _ := benchDues(n)
			window := time.Duration(n) * 2 * time.Microsecond
			scale := benchWindow / window
			gap := 20*time.Millisecond + window
			var c cpuClock
			for b.Loop() {
				b.StopTimer()
				var fired atomic.Int64
				done := make(chan struct{})
				f := func() {
					if fired.Add(1) == int64(n) {
						close(done)
					}
				}
				first := time.Now().Add(gap)
				for _, d := range dues {
					time.AfterFunc(time.Until(first.Add(d/scale)), f)
				}
				runtime.GC() // the garbage of scheduling is not the expiry's
				if time.Now().After(first) {
					gap *= 2 // some timers fired before the measurement: leave more room
					b.Logf("scheduling %d timers took longer than %v", n, gap/2)
				}
				c.begin()
				time.Sleep(time.Until(first))
				b.StartTimer()
				<-done
				c.stop(b)
				b.StartTimer()
			}
			c.report(b, n)
		},
	})
}
