// Package dispatch is the scheduling loop: it keeps the tasks due within the window
// in a timing wheel and claims them when they are due, then hands the claimed tasks
// to the executor. One goroutine (loop) owns the wheel and never does I/O; refill,
// claims and store notifications run on their own goroutines and talk to it through
// the incoming queue and the wake channel.
//
//	refill ──┐                       ┌──► claimer ──► executor
//	submit ──┼─► incoming ─► loop ───┤
//	claimer ─┘   (mutex)   (wheel)   └──◄ wake (capacity freed, claim done)
//
// It also holds the task-key waits: tasks a claim left Blocked because another task
// with their key was running are retried together, at once when a holder here frees
// the key, else every second. And it parks the tasks a claim left Limited, their
// name at a limit: per name (per name and key for a rate per key, so that one key's
// wait holds back no other), in due order, offered a limit's worth at a time — at
// once when a task of the name leaves a slot here or in another process (the store's
// signal), or when the last offer found room; a rate's, when the store said its
// window admits the next; else probed with one task every limitRetry. Every claim is
// a conditional write, so any number of loops may share a store; the loop's own bookkeeping (the wheel, in-flight counts)
// is an optimisation that a stale entry cannot break.
//
// Run blocks until its context ends and the loop's goroutines have stopped.
package dispatch

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/axsched/ax/internal/clock"
	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/internal/wheel"
	"github.com/axsched/ax/store"
)

// Executor takes the tasks the loop claimed.
type Executor interface {
	// Dispatch takes claimed tasks; it must not wait for them to run. Each one
	// counts against the loop's capacity until the executor calls Loop.Done for it.
	// It reports whether it took them (false: it handed them back, stopping).
	Dispatch(tasks []store.Task) (accepted bool)
}

// Starter is implemented by an Executor that can have the claim itself start the tasks
// it runs in this process (store.ClaimStart): one write per task instead of a claim
// then a start.
type Starter interface {
	// Reserve takes room for up to n of the tasks about to be claimed, and returns
	// what the claim may start and how many (k). wait: claim nothing now; the
	// executor calls Loop.Wake when it has room.
	Reserve(n int) (on store.StartOn, k int, wait bool)
	// Launch takes what a claim with a reservation of k started, sent at sent; with
	// a zero sent, the claim was not sent and the room goes back.
	Launch(started []store.Task, k int, sent time.Time)
	// ClaimFailed takes a claim with a reservation of k whose answer was an error: it
	// may have committed. It tells the loop Done for the tasks it did not start.
	ClaimFailed(claims []store.Claim, k int, sent time.Time)
}

// Store is what the loop asks of the store: the refill of its wheel and the claim.
type Store interface {
	Refill(ctx context.Context, p store.RefillParams) (*store.RefillResult, error)
	ClaimStart(ctx context.Context, fence store.Fence, on store.StartOn, claims []store.Claim) (*store.ClaimResult, error)
}

// Config is what a Loop needs.
type Config struct {
	Store Store       // each call bounded by a timeout of its own
	Fence store.Fence // carried by every claim: the lease's token, or zero without an elector
	// Valid, when set, is asked right before each claim: nil while the lease the loop
	// runs under is held. A claim it refuses is not sent; the loop is about to end.
	Valid    func() error
	Notifier store.Notifier // the store's change notifications; nil: refill on the interval only
	Clock    *clock.Clock
	Log      *slog.Logger
	Observe  *observe.Queue
	Executor Executor

	Tick           time.Duration // the wheel's resolution
	Window         time.Duration // how far ahead tasks are kept in the wheel
	RefillInterval time.Duration // how often the store is read for changes
	Capacity       int           // tasks claimed and not finished, at most

	// AfterClaim, when set, sees each claim's tasks before dispatch (tests): those
	// claimed DISPATCHING and those started.
	AfterClaim func(claimed, started []store.Task)
}

// Loop is the scheduling loop. Its methods are safe for concurrent use and never
// block.
type Loop struct {
	cfg     Config
	exec    Executor
	starter Starter // exec, when it can start tasks in the claim; else nil

	mu       sync.Mutex
	incoming []store.Due            // to add to the wheel
	removed  []int64                // to take out of the wheel
	watched  map[int64]*watchedTask // written in a caller's transaction, maybe uncommitted
	wake     chan struct{}

	refillNow chan struct{} // a store notification: refill at once

	blocked   map[int64]string     // task id → the key it waits for (under mu)
	keyRetry  map[string]time.Time // key → when the tasks waiting for it retry (under mu)
	keyFreed  map[string]uint64    // key → the number of the last free of it here (under mu)
	frees     uint64               // frees of keys by tasks here, counted (under mu)
	parked    map[string]*parked   // parkGroup → its tasks waiting for a slot or a start (under mu)
	parkedIn  map[int64]*parked    // task id → the group it is parked in, waiting or offered (under mu)
	nameFreed map[string]uint64    // name → the number of the last free of a slot here (under mu)

	// inflight counts tasks this loop claimed (or is claiming) whose execution has
	// not finished; the loop claims only while it is below maxInflight.
	inflight    atomic.Int64
	maxInflight int64
	claiming    atomic.Bool
	claims      chan claimBatch

	// owned by loop
	wheel    *wheel.Wheel
	ready    []int64 // due, waiting for capacity to claim: ready[head:]
	head     int
	overflow []store.Due
	expired  []wheel.Entry
	crowd    crowding // whether the wheel hands tasks out at their dues (loop only)
	// claimSent is when the loop last handed the claimer a batch; unjudged, that
	// crowd has not yet seen its end; behind, that a task fell due behind it (loop
	// only). claimTook is how long the claimer's last claim took (nanoseconds).
	claimSent        time.Time
	unjudged, behind bool
	claimTook        atomic.Int64
}

// New returns a loop for cfg; Run runs it.
func New(cfg Config) *Loop {
	return &Loop{
		cfg:       cfg,
		exec:      cfg.Executor,
		starter:   starterOf(cfg.Executor),
		wake:      make(chan struct{}, 1),
		refillNow: make(chan struct{}, 1),
		watched:   make(map[int64]*watchedTask),
		blocked:   make(map[int64]string),
		keyRetry:  make(map[string]time.Time),
		keyFreed:  make(map[string]uint64),
		parked:    make(map[string]*parked),
		parkedIn:  make(map[int64]*parked),
		nameFreed: make(map[string]uint64),

		claims:      make(chan claimBatch, 1),
		maxInflight: int64(cfg.Capacity),
		wheel:       wheel.New(cfg.Tick, cfg.Window+2*cfg.RefillInterval+time.Minute, cfg.Clock.Now()),
	}
}

// starterOf returns exec as a Starter, or nil.
func starterOf(exec Executor) Starter {
	st, _ := exec.(Starter)
	return st
}

// Run runs the loop until ctx ends, and returns once its goroutines have stopped.
func (l *Loop) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { l.loop(ctx) })
	wg.Go(func() { l.claimer(ctx) })
	wg.Go(func() { l.refill(ctx) })
	if l.cfg.Notifier != nil {
		wg.Go(func() { l.listen(ctx, l.cfg.Notifier) })
	}
	wg.Wait()
}

// Done tells the loop that n tasks it claimed are finished or gone: capacity to
// claim more.
func (l *Loop) Done(n int) {
	l.inflight.Add(-int64(n))
	l.signal()
}

// Wake tells the loop that its executor has room to start tasks (Starter).
func (l *Loop) Wake() { l.signal() }

// RefillNow has the loop refill at once, not at its next interval: the store changed
// what it would find (a name resumed).
func (l *Loop) RefillNow() {
	select {
	case l.refillNow <- struct{}{}:
	default:
	}
}

// listen turns the store's change notifications into immediate refills, so that a
// task committed by another process (or in a caller's transaction) is in the wheel
// at once rather than a refill interval later, and its signals of freed slots into
// offers of the parked tasks.
func (l *Loop) listen(ctx context.Context, n store.Notifier) {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 10*time.Second) {
		err := n.Listen(ctx, func(sig store.Signal) {
			switch sig {
			case store.SignalFreed:
				l.offerParked()
				return
			case store.SignalMarked:
				return // this scheduler's own insert, whose tasks it added to the wheel
			}
			select {
			case l.refillNow <- struct{}{}:
			default:
			}
		})
		if ctx.Err() != nil {
			return
		}
		l.cfg.Log.LogAttrs(ctx, slog.LevelWarn, "ax: store notifications lost; refilling on the interval meanwhile", slog.Any("err", err))
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

// Watch marks a task written in a caller's transaction: its claim is retried
// until it is visible (see watchedTask).
func (l *Loop) Watch(id int64, due time.Time) {
	l.mu.Lock()
	l.watched[id] = &watchedTask{due: due, backoff: 5 * time.Millisecond}
	l.mu.Unlock()
}

// retryInvisible re-adds watched tasks that a claim did not find, and forgets the
// ones it found.
func (l *Loop) retryInvisible(ids []int64, res *store.ClaimResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.watched) == 0 {
		return
	}
	found := make(map[int64]bool, len(res.Claimed)+len(res.Started)+len(res.NotDue)+len(res.Skipped)+len(res.Blocked)+len(res.Paused)+len(res.Limited))
	for _, ts := range [][]store.Task{res.Claimed, res.Started, res.Skipped} {
		for _, t := range ts {
			found[t.ID] = true
		}
	}
	for _, d := range res.NotDue {
		found[d.ID] = true
	}
	for _, d := range res.Paused { // left out of the wheel: resuming the name restamps them for the refill
		found[d.ID] = true
	}
	for _, b := range res.Blocked {
		found[b.ID] = true
	}
	for _, lt := range res.Limited { // parked: offered again as slots free
		found[lt.ID] = true
	}
	now := l.cfg.Clock.Now()
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

func (l *Loop) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Add queues tasks for the wheel.
func (l *Loop) Add(dues ...store.Due) {
	l.mu.Lock()
	l.incoming = append(l.incoming, dues...)
	l.mu.Unlock()
	l.signal()
}

// Remove takes a task out of the wheel (it was cancelled or triggered). Removing is
// an optimisation only: a stale entry's claim simply fails.
func (l *Loop) Remove(id int64) {
	l.mu.Lock()
	l.removed = append(l.removed, id)
	delete(l.watched, id)
	l.unpark(id)
	l.mu.Unlock()
	l.signal()
}

func (l *Loop) loop(ctx context.Context) {
	timer := newWaker()
	defer timer.stop()
	defer l.unqueue()
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
		now := l.cfg.Clock.Now()
		horizon := now.Add(l.cfg.Window)
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
		l.setCoarse(ctx, now)
		l.expired = l.wheel.Advance(now, l.expired[:0])
		if l.claiming.Load() {
			l.watchBehind()
		} else if l.judge(now) {
			l.setCoarse(ctx, now)
		}
		if l.head > 0 && l.head >= len(l.ready)/2 { // compact, amortised O(1)
			l.ready = l.ready[:copy(l.ready, l.ready[l.head:])]
			l.head = 0
		}
		for _, e := range l.expired {
			l.ready = append(l.ready, e.ID)
		}
		l.claim()
		if l.cfg.Observe != nil && time.Since(lastSize) >= time.Second {
			lastSize = time.Now()
			l.cfg.Observe.Send(observe.Event{Kind: observe.WheelSize, At: now, Count: l.wheel.Len()})
		}

		sleep := time.Hour
		if next, ok := l.wheel.Next(); ok {
			sleep = max(next.Sub(l.cfg.Clock.Now()), 0)
		}
		if len(l.overflow) > 0 {
			sleep = min(sleep, l.cfg.RefillInterval)
		}
		timer.reset(sleep)
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		case <-l.wake:
		}
	}
}

// claimBatch is one claim for the claimer: the tasks, in the order they fell due, and
// what the executor reserved for them (Starter): the first k are asked to start.
type claimBatch struct {
	ids []int64
	on  store.StartOn
	k   int
}

// claim hands the claimer the next batch of due tasks, if it is idle and there is
// capacity: for an executor that starts tasks in the claim, as many as it has room
// for, else as many as the loop's capacity allows.
func (l *Loop) claim() {
	if len(l.ready) == l.head || l.claiming.Load() {
		return
	}
	l.judge(l.cfg.Clock.Now()) // the claim before, if its end came after the loop looked
	n := min(int64(len(l.ready)-l.head), l.maxInflight-l.inflight.Load(), store.MaxBatch)
	if n <= 0 {
		return
	}
	var b claimBatch
	if l.starter != nil {
		var wait bool
		if b.on, b.k, wait = l.starter.Reserve(int(n)); wait {
			return
		}
		if b.k > 0 {
			n = int64(b.k)
		}
	}
	b.ids = make([]int64, n)
	l.head += copy(b.ids, l.ready[l.head:])
	l.inflight.Add(n)
	l.claimSent, l.unjudged, l.behind = l.cfg.Clock.Now(), true, false
	l.claiming.Store(true)
	l.claims <- b
}

// watchBehind notes whether a task of l.expired, just handed out, fell due behind
// the claim out: due after it was sent (see crowding).
func (l *Loop) watchBehind() {
	for _, e := range l.expired {
		if l.behind = l.behind || e.Due.After(l.claimSent); l.behind {
			return
		}
	}
}

// judge has crowd count the claim last sent, once it has ended, if a task fell due
// behind it and it took half a tick or more; it reports whether it counted it. It
// judges each claim once.
func (l *Loop) judge(now time.Time) bool {
	if !l.unjudged {
		return false
	}
	l.unjudged = false
	if !l.behind || time.Duration(l.claimTook.Load()) < l.cfg.Tick/2 {
		return false
	}
	l.crowd.claimBehind(now)
	return true
}

// setCoarse has the wheel hand tasks out as crowd says at now, and logs a change.
func (l *Loop) setCoarse(ctx context.Context, now time.Time) {
	on := l.crowd.coarse(now)
	if on != l.wheel.Coarse() {
		if on {
			l.cfg.Log.LogAttrs(ctx, slog.LevelInfo, "ax: claims fall behind the tasks falling due: tasks handed out at their ticks' ends until claims keep up for a minute",
				slog.Int("claims_behind", crowdedAfter), slog.Duration("within", crowdWindow), slog.Duration("tick", l.cfg.Tick))
		} else {
			l.cfg.Log.LogAttrs(ctx, slog.LevelInfo, "ax: claims keep up: tasks handed out at their due times again")
		}
	}
	l.wheel.SetCoarse(on)
}

// unqueue gives back the room reserved for a batch the claimer did not take: the
// claimer may have ended (ctx) before the loop's last claim queued it. It runs when
// the loop, the only sender, has ended, so nothing is queued after it; the executor
// outlives the term, and its Stop waits for every reservation.
func (l *Loop) unqueue() {
	select {
	case b := <-l.claims:
		if b.k > 0 {
			l.starter.Launch(nil, b.k, time.Time{})
		}
	default:
	}
}

// valid reports whether the loop may claim.
func (l *Loop) valid() error {
	if l.cfg.Valid == nil {
		return nil
	}
	if err := l.cfg.Valid(); err != nil {
		return fmt.Errorf("lease ended: %w", err)
	}
	return nil
}

func (l *Loop) claimer(ctx context.Context) {
	log := l.cfg.Log
	for {
		var b claimBatch
		select {
		case <-ctx.Done():
			return // a batch left queued is given back by the loop, its only sender
		case b = <-l.claims:
		}
		ids := b.ids
		claims := make([]store.Claim, len(ids))
		for i, id := range ids {
			claims[i] = store.Claim{ID: id, ExecutionID: uuid.Must(uuid.NewV7()).String(), Start: i < b.k}
		}
		l.mu.Lock()
		claimFrees := l.frees
		l.mu.Unlock()
		// Not cancelled by Stop: a claim cut off halfway could commit unanswered and
		// leave its tasks DISPATCHING until DispatchTimeout; answered, the tasks are
		// handed back at once.
		var res *store.ClaimResult
		sent := time.Now()
		resolving := 0 // tasks asked to start whose fate ClaimFailed settles, Done included
		err := l.valid()
		switch {
		case err != nil && b.k > 0:
			l.starter.Launch(nil, b.k, time.Time{}) // not sent: the room goes back
		case err == nil:
			res, err = l.cfg.Store.ClaimStart(context.WithoutCancel(ctx), l.cfg.Fence, b.on, claims)
			if err != nil && b.k > 0 {
				l.starter.ClaimFailed(claims, b.k, sent)
				resolving = b.k
			}
		}
		if err != nil {
			// The tasks are still SCHEDULED: try them again shortly.
			if ctx.Err() == nil {
				log.LogAttrs(ctx, slog.LevelError, "ax: claim failed", slog.Int("tasks", len(ids)), slog.Any("err", err))
			}
			retry := l.cfg.Clock.Now().Add(time.Second)
			dues := make([]store.Due, len(ids))
			for i, id := range ids {
				dues[i] = store.Due{ID: id, DueAt: retry}
			}
			l.Add(dues...)
			l.inflight.Add(-int64(len(ids) - resolving))
		} else {
			l.inflight.Add(-int64(len(ids) - len(res.Claimed) - len(res.Started)))
			if len(res.NotDue) > 0 {
				// Due by our clock, not yet by the store's: try again at its due time,
				// but no sooner than a tick from now, so that a clock offset not yet
				// measured cannot turn into a loop of claims.
				soonest := l.cfg.Clock.Now().Add(l.cfg.Tick)
				for i := range res.NotDue {
					if res.NotDue[i].DueAt.Before(soonest) {
						res.NotDue[i].DueAt = soonest
					}
				}
				l.Add(res.NotDue...)
			}
			l.retryInvisible(ids, res)
			l.settled(ids)
			if len(res.Blocked) > 0 {
				l.block(res.Blocked, claimFrees)
			}
			l.park(ids, res, claimFrees)
			l.reportLimited(res.Limited)
			l.cfg.Observe.Claimed(l.cfg.Clock.Now(), res.Claimed)
			l.cfg.Observe.Claimed(l.cfg.Clock.Now(), res.Started)
			for _, t := range res.Skipped {
				log.LogAttrs(ctx, slog.LevelInfo, "ax: task skipped", append(observe.TaskAttrs(&t), slog.String("reason", t.LastError))...)
				e := observe.Event{Kind: observe.Skipped, At: l.cfg.Clock.Now(), Name: t.Name}
				if t.TaskKey == t.Name { // a schedule's occurrence
					e.Schedule = t.Name
				}
				l.cfg.Observe.Send(e)
			}
			if l.cfg.AfterClaim != nil {
				l.cfg.AfterClaim(res.Claimed, res.Started)
			}
			if b.k > 0 {
				l.starter.Launch(res.Started, b.k, sent)
			}
			l.exec.Dispatch(res.Claimed)
		}
		l.claimTook.Store(int64(time.Since(sent)))
		l.claiming.Store(false)
		l.signal()
	}
}

// refill reads the tasks that entered the window or changed since the last read,
// every RefillInterval, starting with everything due within the window (overdue
// first). Each read is at most refillBatch rows; when one is full the next follows
// at once.
func (l *Loop) refill(ctx context.Context) {
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
		p.To = l.cfg.Clock.Now().Add(l.cfg.Window)
		res, err := l.cfg.Store.Refill(ctx, p)
		if err != nil {
			if ctx.Err() == nil {
				l.cfg.Log.LogAttrs(ctx, slog.LevelError, "ax: refill failed", slog.Any("err", err))
			}
			// The database may have failed over meanwhile, to a server whose refill
			// sequence is not the one read so far: the next read starts over, with
			// everything due within the window, as the first did.
			p = store.RefillParams{AfterSeq: -1, Limit: refillBatch}
			timer.Reset(l.cfg.RefillInterval)
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
			timer.Reset(l.cfg.RefillInterval)
		}
	}
}

const refillBatch = 10_000

// blockedRetry is how often the loop retries tasks waiting for a task key that a
// task of another process holds; keys freed in this process retry them at once.
// The tasks waiting for one key are retried together, in one claim, so that the
// store starts the earliest.
const blockedRetry = time.Second

// block remembers tasks a claim left waiting for their key, and schedules their
// retry: with the others waiting for the key, or at once if a local holder freed the
// key while the claim was in flight (after free number claimFrees).
func (l *Loop) block(bs []store.Blocked, claimFrees uint64) {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	for _, b := range bs {
		l.blocked[b.ID] = b.TaskKey
		at, ok := l.keyRetry[b.TaskKey]
		if !ok || !at.After(now) {
			at = now.Add(blockedRetry)
			l.keyRetry[b.TaskKey] = at
		}
		if l.keyFreed[b.TaskKey] > claimFrees {
			at = l.atOnce(now)
		}
		l.incoming = append(l.incoming, store.Due{ID: b.ID, DueAt: at})
	}
	l.mu.Unlock()
	l.signal()
}

// Unblock retries at once, together, the tasks waiting for keys that were just freed
// here, and offers the parked tasks of names whose slots were.
func (l *Loop) Unblock(keys, names []string) {
	if len(keys)+len(names) == 0 {
		return
	}
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	freed := make(map[string]bool, len(keys))
	l.frees++
	n := 0
	for _, name := range names {
		l.nameFreed[name] = l.frees
		if p := l.parked[name]; p != nil {
			n += l.offer(p, now)
		}
	}
	if len(l.nameFreed) > 1024 { // only frees during a claim in flight matter (see park)
		for k, f := range l.nameFreed {
			if l.frees-f > 1024 {
				delete(l.nameFreed, k)
			}
		}
	}
	for _, k := range keys {
		freed[k] = true
		l.keyFreed[k] = l.frees
		delete(l.keyRetry, k)
	}
	for id, k := range l.blocked {
		if len(freed) == 0 {
			break // no key freed: nothing to scan for
		}
		if freed[k] {
			l.incoming = append(l.incoming, store.Due{ID: id, DueAt: l.atOnce(now)})
			delete(l.blocked, id)
			n++
		}
	}
	if len(l.keyFreed) > 1024 { // only frees during a claim in flight matter (see block)
		for k, n := range l.keyFreed {
			if l.frees-n > 1024 {
				delete(l.keyFreed, k)
			}
		}
	}
	l.mu.Unlock()
	if n > 0 {
		l.signal()
	}
}

// settled forgets the waiting tasks a claim asked for: it took them, skipped them,
// found them gone, or left them blocked again (block remembers those anew).
func (l *Loop) settled(ids []int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.blocked) == 0 {
		return
	}
	for _, id := range ids {
		delete(l.blocked, id)
	}
}

// limitRetry is how often the loop probes, with one task, a name whose tasks wait for
// a slot when no free was seen: without store notifications the tasks of another
// process free slots unseen, and with them a probe covers what they do not signal
// (a hand-back, a recovery) and what a loaded machine delivers late. A probe that
// finds room has the rest offered at once; one claim of one task, 40 a second at
// most, is its cost.
const limitRetry = 25 * time.Millisecond

// parked is a name's tasks that a claim left Limited by the name's limits, or the
// tasks of one key of a name that its rate per key left Limited (parkGroup): one
// key's wait never holds back the name's other tasks.
type parked struct {
	group   string // its key in Loop.parked
	name    string
	waiting []store.Due    // in (DueAt, ID) order, each id once
	limit   int            // the name's limit, as the last claim read it
	out     map[int64]bool // offered: in the wheel or a claim, not answered yet
	// retryAt, when a rate held the last claim back, is when the rate admits the
	// next start (store.Limited.RetryAt): no offer is made before it.
	retryAt time.Time
}

// parkGroup is the key of l.parked a Limited task waits in: its name, or its name
// and key when the name's rate per key held it back.
func parkGroup(lt store.Limited) string {
	if lt.TaskKey == "" {
		return lt.Name
	}
	return lt.Name + "\x00" + lt.TaskKey // a name holds no NUL
}

// park settles the parked tasks a claim of ids asked for, and parks the ones it left
// Limited. A name whose offer found room (none of its tasks came back Limited) is
// offered again at once: more may fit. One that found none is offered again when a
// task of it leaves a slot here — at once if that happened while the claim was in
// flight (after free number claimFrees) — or after limitRetry.
func (l *Loop) park(ids []int64, res *store.ClaimResult, claimFrees uint64) {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(res.Limited) == 0 && len(l.parked) == 0 {
		return
	}
	// The groups this answer touches: those whose offers it answered, and those it
	// left tasks Limited in. Only these change; with a rate per key there may be a
	// group for each of many keys, so no other is visited.
	touched := make(map[*parked]bool)
	answered := make(map[*parked]bool)
	for _, id := range ids {
		if p := l.parkedIn[id]; p != nil && p.out[id] {
			delete(p.out, id)
			delete(l.parkedIn, id)
			answered[p], touched[p] = true, true
		}
	}
	full := make(map[*parked]bool)
	for _, lt := range res.Limited {
		group := parkGroup(lt)
		p := l.parked[group]
		if p == nil {
			p = &parked{group: group, name: lt.Name, out: make(map[int64]bool)}
			l.parked[group] = p
		}
		if was := l.parkedIn[lt.ID]; was != nil && was != p {
			l.unpark(lt.ID) // held back by another limit now
		}
		p.limit, p.retryAt = lt.Limit, lt.RetryAt
		p.add(lt.Due)
		l.parkedIn[lt.ID] = p
		full[p], touched[p] = true, true
	}
	n := 0
	for p := range touched {
		switch {
		case len(p.waiting) == 0 && len(p.out) == 0:
			delete(l.parked, p.group)
		case len(p.out) > 0: // an offer still in flight decides
		case full[p] && !p.retryAt.IsZero():
			n += l.offerAt(p, l.retryTime(p, now), p.limit)
		case full[p] && l.nameFreed[p.name] <= claimFrees:
			n += l.offerAt(p, l.retryTime(p, now), 1) // a probe
		case full[p] || answered[p]:
			n += l.offer(p, now)
		}
	}
	if n > 0 {
		l.signal()
	}
}

// add parks d in due order, unless it is parked already.
func (p *parked) add(d store.Due) {
	i, found := slices.BinarySearchFunc(p.waiting, d, func(a, b store.Due) int {
		if c := a.DueAt.Compare(b.DueAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	if found {
		return
	}
	if slices.ContainsFunc(p.waiting, func(w store.Due) bool { return w.ID == d.ID }) {
		return // parked before with another due: the first one stands
	}
	p.waiting = slices.Insert(p.waiting, i, d)
}

// offer puts p's first waiting tasks, up to its limit less those offered already, in
// the wheel due now, and moves there the ones offered already, waiting for a retry
// (an offer in a claim is answered once: the repeat finds the task taken or left
// Limited again). It returns how many it put. The caller holds mu.
func (l *Loop) offer(p *parked, now time.Time) int {
	if p.retryAt.After(now) {
		return 0 // its rate admits none before then: the offer waiting for it stands
	}
	// At once: not at the end of now's tick, which would leave the slot idle for up to
	// a tick.
	now = l.atOnce(now)
	for id := range p.out {
		l.incoming = append(l.incoming, store.Due{ID: id, DueAt: now})
	}
	return len(p.out) + l.offerAt(p, now, p.limit)
}

// atOnce is the due that has the wheel hand a task out at its next Advance: a tick
// back, so that neither a dense tick nor a coarse wheel keeps it to the end of now's
// tick. The task's own due is long past; the claim checks it, not this.
func (l *Loop) atOnce(now time.Time) time.Time { return now.Add(-l.cfg.Tick) }

// retryTime is when a name whose last claim found no room is offered again: when its
// rate admits the next (RetryAt), else after limitRetry; never sooner than a tick
// from now (the store's clock may lag the loop's, and an offer before RetryAt only
// comes back Limited), and never later than half the window from now, so that the
// wheel takes the offer (one past the window would be dropped, and the refill does
// not bring a due task back).
func (l *Loop) retryTime(p *parked, now time.Time) time.Time {
	at := p.retryAt
	if at.IsZero() {
		at = now.Add(limitRetry)
	}
	if soonest := now.Add(l.cfg.Tick); at.Before(soonest) {
		at = soonest
	}
	if latest := now.Add(l.cfg.Window / 2); at.After(latest) {
		at = latest
	}
	return at
}

// offerAt puts p's first waiting tasks, up to most less those offered already (at
// least one while none is), in the wheel due at at, and returns how many. The caller
// holds mu.
func (l *Loop) offerAt(p *parked, at time.Time, most int) int {
	k := max(min(max(most, 1)-len(p.out), len(p.waiting)), 0)
	for _, d := range p.waiting[:k] {
		p.out[d.ID] = true
		l.incoming = append(l.incoming, store.Due{ID: d.ID, DueAt: at})
	}
	p.waiting = p.waiting[k:]
	return k
}

// unpark forgets task id, taken out of the wheel, wherever it is parked; a name whose
// offer it was, with none left in flight, has its waiting tasks offered as a retry
// would (nothing else would answer for them). The caller holds mu, and signals.
func (l *Loop) unpark(id int64) {
	p := l.parkedIn[id]
	if p == nil {
		return
	}
	delete(l.parkedIn, id)
	if p.out[id] {
		delete(p.out, id)
		if len(p.out) == 0 && len(p.waiting) > 0 {
			l.offerAt(p, l.retryTime(p, l.cfg.Clock.Now()), p.limit)
		}
	}
	p.waiting = slices.DeleteFunc(p.waiting, func(d store.Due) bool { return d.ID == id })
	if len(p.waiting) == 0 && len(p.out) == 0 {
		delete(l.parked, p.group)
	}
}

// offerParked offers at once the tasks parked for slots of every name: the store
// signalled that slots freed (in any process).
func (l *Loop) offerParked() {
	l.mu.Lock()
	n := 0
	now := l.cfg.Clock.Now()
	for _, p := range l.parked {
		n += l.offer(p, now)
	}
	l.mu.Unlock()
	if n > 0 {
		l.signal()
	}
}

// Offer offers at once the tasks parked for slots or starts of name, of every key:
// its limits were changed.
func (l *Loop) Offer(name string) {
	l.mu.Lock()
	n := 0
	for _, p := range l.parked {
		if p.name == name {
			p.limit = max(p.limit, 1<<20) // the next answer brings the new one
			p.retryAt = time.Time{}
			n += l.offer(p, l.cfg.Clock.Now())
		}
	}
	l.mu.Unlock()
	if n > 0 {
		l.signal()
	}
}

// reportLimited sends Limited for each name of a claim's limited tasks.
func (l *Loop) reportLimited(ls []store.Limited) {
	if len(ls) == 0 || l.cfg.Observe == nil {
		return
	}
	now := l.cfg.Clock.Now()
	type by struct {
		name   string
		reason string
	}
	count, limit := map[by]int{}, map[by]int{}
	var keys []by
	for _, lt := range ls {
		k := by{lt.Name, observe.LimitConcurrency}
		switch {
		case lt.TaskKey != "":
			k.reason = observe.LimitKeyRate
		case !lt.RetryAt.IsZero():
			k.reason = observe.LimitRate
		}
		if count[k] == 0 {
			keys = append(keys, k)
		}
		count[k]++
		limit[k] = lt.Limit
	}
	for _, k := range keys {
		l.cfg.Observe.Send(observe.Event{Kind: observe.Limited, At: now, Name: k.name, Reason: k.reason, Count: count[k], Limit: limit[k]})
	}
}

// Waiting returns how many due tasks of name the loop holds waiting for a slot or a
// start, of every key.
func (l *Loop) Waiting(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, p := range l.parked {
		if p.name == name {
			n += len(p.waiting) + len(p.out)
		}
	}
	return n
}
