package ax

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/internal/wheel"
	"github.com/axsched/ax/store"
)

// leader schedules: it keeps the tasks due within the window in a timing wheel and
// claims them when they are due. One goroutine (loop) owns the wheel and never does
// I/O; refill, claim and inspection run on their own goroutines and talk to it
// through the incoming queue and the wake channel.
//
//	refill ──┐                       ┌──► claimer ──► executor
//	submit ──┼─► incoming ─► loop ───┤
//	claimer ─┘   (mutex)   (wheel)   └──◄ wake (capacity freed, claim done)
type leader struct {
	s    *Scheduler
	exec *executor

	mu       sync.Mutex
	incoming []store.Due            // to add to the wheel
	removed  []int64                // to take out of the wheel
	watched  map[int64]*watchedTask // written in a caller's transaction, maybe uncommitted
	wake     chan struct{}

	refillNow chan struct{} // a store notification: refill at once

	blocked          map[int64]string     // task id → the key it waits for (under mu)
	keyRetry         map[string]time.Time // key → when the tasks waiting for it retry (under mu)
	keyFreed         map[string]uint64    // key → the number of the last free of it here (under mu)
	frees            uint64               // frees of keys by tasks here, counted (under mu)
	schedulesChanged chan struct{}        // re-read the schedules (pause, resume)

	// inflight counts tasks this leader claimed (or is claiming) whose execution has
	// not finished; the loop claims only while it is below maxInflight.
	inflight    atomic.Int64
	maxInflight int64
	claiming    atomic.Bool
	claims      chan []int64

	// owned by loop
	wheel    *wheel.Wheel
	ready    []int64 // due, waiting for capacity to claim: ready[head:]
	head     int
	overflow []store.Due
	expired  []wheel.Entry

	// test hooks
	afterClaim func([]store.Task)
}

func newLeader(s *Scheduler, exec *executor) *leader {
	l := &leader{
		s:         s,
		exec:      exec,
		wake:      make(chan struct{}, 1),
		refillNow: make(chan struct{}, 1),
		watched:   make(map[int64]*watchedTask),
		blocked:   make(map[int64]string),
		keyRetry:  make(map[string]time.Time),
		keyFreed:  make(map[string]uint64),

		schedulesChanged: make(chan struct{}, 1),
		claims:           make(chan []int64, 1),
		maxInflight:      int64(s.cfg.Concurrency + store.MaxBatch),
		wheel:            wheel.New(s.cfg.Tick, s.cfg.Window+2*s.cfg.RefillInterval+time.Minute, s.clock.Now()),
	}
	exec.onDone = func(n int) {
		l.inflight.Add(-int64(n))
		l.signal()
	}
	exec.onKeysFree = l.unblock
	return l
}

func (l *leader) start(ctx context.Context, wg *sync.WaitGroup, schedules []store.Schedule) {
	wg.Add(4)
	go func() { defer wg.Done(); l.loop(ctx) }()
	go func() { defer wg.Done(); l.claimer(ctx) }()
	go func() { defer wg.Done(); l.refill(ctx) }()
	go func() { defer wg.Done(); l.inspect(ctx) }()
	if n, ok := l.s.st.(store.Notifier); ok && !l.s.hooks.noNotify {
		wg.Add(1)
		go func() { defer wg.Done(); l.listen(ctx, n) }()
	}
	if !l.s.hooks.localClock {
		wg.Add(1)
		go func() { defer wg.Done(); l.remeasure(ctx) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); l.fireSchedules(ctx, schedules) }()
	if l.s.obs != nil {
		wg.Add(1)
		go func() { defer wg.Done(); l.stats(ctx) }()
	}
}

// stats reports the task table's summary to the observer every StatsInterval: one
// store query each time, whatever the number of scrapes.
func (l *leader) stats(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		now := l.s.clock.Now()
		st, err := l.s.kst.TaskStats(ctx, now)
		switch {
		case err != nil && ctx.Err() == nil:
			l.s.log.LogAttrs(ctx, slog.LevelWarn, "ax: count tasks for the observer", slog.Any("err", err))
		case err == nil:
			e := observe.Event{Kind: observe.TaskCounts, At: now, Counts: st.Counts}
			if !st.OldestDue.IsZero() {
				e.Lag = max(now.Sub(st.OldestDue), 0)
			}
			l.s.obs.Send(e)
		}
		timer.Reset(l.s.cfg.StatsInterval)
	}
}

// clockInterval is how often the leader re-measures the store's clock offset, so
// that drift between the hosts' clocks does not accumulate.
const clockInterval = time.Minute

func (l *leader) remeasure(ctx context.Context) {
	ticker := time.NewTicker(clockInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		offset, rtt, err := l.s.clock.Measure(ctx, l.s.kst, 5)
		if err != nil {
			if ctx.Err() == nil {
				l.s.log.LogAttrs(ctx, slog.LevelWarn, "ax: measure the store's clock", slog.Any("err", err))
			}
			continue
		}
		l.s.obs.Send(observe.Event{Kind: observe.ClockOffset, At: l.s.clock.Now(), Offset: offset})
		l.s.log.LogAttrs(ctx, slog.LevelDebug, "ax: clock measured", slog.Duration("offset", offset), slog.Duration("rtt", rtt))
	}
}

// listen turns the store's change notifications into immediate refills, so that a
// task committed by another process (or in a caller's transaction) is in the wheel
// at once rather than a refill interval later.
func (l *leader) listen(ctx context.Context, n store.Notifier) {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 10*time.Second) {
		err := n.Listen(ctx, func() {
			select {
			case l.refillNow <- struct{}{}:
			default:
			}
		})
		if ctx.Err() != nil {
			return
		}
		l.s.log.LogAttrs(ctx, slog.LevelWarn, "ax: store notifications lost; refilling on the interval meanwhile", slog.Any("err", err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// watchedTask is a task written in a caller's transaction. Until the transaction
// commits, its claim finds no row; rather than drop it (the refill would bring it
// back only a refill interval later), the claimer retries it with a short backoff for
// txWatch after it was due.
type watchedTask struct {
	due     time.Time
	backoff time.Duration
}

const (
	txWatch        = 10 * time.Second
	txWatchBackoff = 100 * time.Millisecond
)

func (l *leader) watch(id int64, due time.Time) {
	l.mu.Lock()
	l.watched[id] = &watchedTask{due: due, backoff: 5 * time.Millisecond}
	l.mu.Unlock()
}

// retryInvisible re-adds watched tasks that a claim did not find, and forgets the
// ones it found.
func (l *leader) retryInvisible(ids []int64, res *store.ClaimResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.watched) == 0 {
		return
	}
	found := make(map[int64]bool, len(res.Claimed)+len(res.NotDue)+len(res.Skipped)+len(res.Blocked))
	for _, ts := range [][]store.Task{res.Claimed, res.Skipped} {
		for _, t := range ts {
			found[t.ID] = true
		}
	}
	for _, d := range res.NotDue {
		found[d.ID] = true
	}
	for _, b := range res.Blocked {
		found[b.ID] = true
	}
	now := l.s.clock.Now()
	for _, id := range ids {
		w := l.watched[id]
		switch {
		case w == nil:
		case found[id] || now.Sub(w.due) > txWatch:
			delete(l.watched, id)
		default:
			w.backoff = min(2*w.backoff, txWatchBackoff)
			l.incoming = append(l.incoming, store.Due{ID: id, DueAt: now.Add(w.backoff)})
		}
	}
}

func (l *leader) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// add queues tasks for the wheel. It never blocks.
func (l *leader) add(dues ...store.Due) {
	l.mu.Lock()
	l.incoming = append(l.incoming, dues...)
	l.mu.Unlock()
	l.signal()
}

// remove takes a task out of the wheel (it was cancelled or triggered). Removing is
// an optimisation only: a stale entry's claim simply fails.
func (l *leader) remove(id int64) {
	l.mu.Lock()
	l.removed = append(l.removed, id)
	delete(l.watched, id)
	l.mu.Unlock()
	l.signal()
}

func (l *leader) loop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var in []store.Due
	var rm []int64
	var lastSize time.Time
	for {
		l.mu.Lock()
		in, l.incoming = l.incoming, in[:0]
		rm, l.removed = l.removed, rm[:0]
		l.mu.Unlock()
		for _, id := range rm {
			l.wheel.Remove(id)
		}
		now := l.s.clock.Now()
		horizon := now.Add(l.s.cfg.Window)
		if len(l.overflow) > 0 {
			in = append(in, l.overflow...)
			l.overflow = l.overflow[:0]
		}
		for _, d := range in {
			if d.DueAt.After(horizon) {
				continue // beyond the window: the refill brings it when it enters
			}
			if !l.wheel.Add(d.ID, d.DueAt) {
				l.overflow = append(l.overflow, d)
			}
		}
		l.expired = l.wheel.Advance(now, l.expired[:0])
		if l.head > 0 && l.head >= len(l.ready)/2 { // compact, amortised O(1)
			l.ready = l.ready[:copy(l.ready, l.ready[l.head:])]
			l.head = 0
		}
		for _, e := range l.expired {
			l.ready = append(l.ready, e.ID)
		}
		l.claim()
		if l.s.obs != nil && time.Since(lastSize) >= time.Second {
			lastSize = time.Now()
			l.s.obs.Send(observe.Event{Kind: observe.WheelSize, At: now, Count: l.wheel.Len()})
		}

		sleep := time.Hour
		if next, ok := l.wheel.Next(); ok {
			sleep = max(next.Sub(l.s.clock.Now()), 0)
		}
		if len(l.overflow) > 0 {
			sleep = min(sleep, l.s.cfg.RefillInterval)
		}
		timer.Reset(sleep)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-l.wake:
		}
	}
}

// claim hands the claimer the next batch of due tasks, if it is idle and there is
// capacity.
func (l *leader) claim() {
	if len(l.ready) == l.head || l.claiming.Load() {
		return
	}
	n := min(int64(len(l.ready)-l.head), l.maxInflight-l.inflight.Load(), store.MaxBatch)
	if n <= 0 {
		return
	}
	batch := make([]int64, n)
	l.head += copy(batch, l.ready[l.head:])
	l.inflight.Add(n)
	l.claiming.Store(true)
	l.claims <- batch
}

func (l *leader) claimer(ctx context.Context) {
	log := l.s.log
	for {
		var ids []int64
		select {
		case <-ctx.Done():
			return
		case ids = <-l.claims:
		}
		claims := make([]store.Claim, len(ids))
		for i, id := range ids {
			claims[i] = store.Claim{ID: id, ExecutionID: uuid.Must(uuid.NewV7()).String()}
		}
		l.mu.Lock()
		claimFrees := l.frees
		l.mu.Unlock()
		// Not cancelled by Stop: a claim cut off halfway could commit unanswered and
		// leave its tasks DISPATCHING until DispatchTimeout; answered, the tasks are
		// handed back at once.
		res, err := l.s.kst.Claim(context.WithoutCancel(ctx), claims)
		if err != nil {
			// The tasks are still SCHEDULED: try them again shortly.
			if ctx.Err() == nil {
				log.LogAttrs(ctx, slog.LevelError, "ax: claim failed", slog.Int("tasks", len(ids)), slog.Any("err", err))
			}
			retry := l.s.clock.Now().Add(time.Second)
			dues := make([]store.Due, len(ids))
			for i, id := range ids {
				dues[i] = store.Due{ID: id, DueAt: retry}
			}
			l.add(dues...)
			l.inflight.Add(-int64(len(ids)))
		} else {
			l.inflight.Add(-int64(len(ids) - len(res.Claimed)))
			if len(res.NotDue) > 0 {
				// Due by our clock, not yet by the store's: try again at its due time,
				// but no sooner than a tick from now, so that a clock offset not yet
				// measured cannot turn into a loop of claims.
				soonest := l.s.clock.Now().Add(l.s.cfg.Tick)
				for i := range res.NotDue {
					if res.NotDue[i].DueAt.Before(soonest) {
						res.NotDue[i].DueAt = soonest
					}
				}
				l.add(res.NotDue...)
			}
			l.retryInvisible(ids, res)
			l.settled(ids)
			if len(res.Blocked) > 0 {
				l.block(res.Blocked, claimFrees)
			}
			l.s.obs.Claimed(l.s.clock.Now(), res.Claimed)
			for _, t := range res.Skipped {
				log.LogAttrs(ctx, slog.LevelInfo, "ax: task skipped", append(taskAttrs(&t), slog.String("reason", t.LastError))...)
				e := observe.Event{Kind: observe.Skipped, At: l.s.clock.Now(), Name: t.Name}
				if t.TaskKey == t.Name { // a schedule's occurrence
					e.Schedule = t.Name
				}
				l.s.obs.Send(e)
			}
			if l.afterClaim != nil {
				l.afterClaim(res.Claimed)
			}
			l.exec.dispatch(res.Claimed, true)
		}
		l.claiming.Store(false)
		l.signal()
	}
}

// refill reads the tasks that entered the window or changed since the last read,
// every RefillInterval, starting with everything due within the window (overdue
// first). Each read is at most refillBatch rows; when one is full the next follows
// at once.
func (l *leader) refill(ctx context.Context) {
	p := store.RefillParams{AfterSeq: -1, Limit: refillBatch}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-l.refillNow:
			timer.Stop()
		}
		p.To = l.s.clock.Now().Add(l.s.cfg.Window)
		res, err := l.s.kst.Refill(ctx, p)
		if err != nil {
			if ctx.Err() == nil {
				l.s.log.LogAttrs(ctx, slog.LevelError, "ax: refill failed", slog.Any("err", err))
			}
			timer.Reset(l.s.cfg.RefillInterval)
			continue
		}
		p.AfterSeq = res.Seq
		if n := len(res.Entered); n > 0 && n == p.Limit {
			p.From, p.FromID = res.Entered[n-1].DueAt, res.Entered[n-1].ID
		} else {
			p.From, p.FromID = p.To, 0
		}
		if len(res.Changed)+len(res.Entered) > 0 {
			l.mu.Lock()
			l.incoming = append(append(l.incoming, res.Changed...), res.Entered...)
			l.mu.Unlock()
			l.signal()
		}
		if res.More {
			timer.Reset(0)
		} else {
			timer.Reset(l.s.cfg.RefillInterval)
		}
	}
}

const refillBatch = 10_000
