package demo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/axsched/ax"
)

// ReconcileName is the name of the payment reconciliation schedule, of its handler
// and the task key of its occurrences.
const ReconcileName = "payment.reconcile"

// DefaultReconcileEvery is the default interval of the payment reconciliation.
const DefaultReconcileEvery = 2 * time.Second

const (
	// ReconcileFastTook is how long an ordinary reconciliation run takes.
	ReconcileFastTook = 100 * time.Millisecond
	// reconcileSettle: after a run's handler returns, ax still records the result
	// and frees the task key, so a slot less than reconcileSettle after the end of
	// a run may still be skipped.
	reconcileSettle = 100 * time.Millisecond
	// defaultReconcileOnTime bounds the lateness of the first run after a slow one:
	// 200ms (Config.reconcileOnTime).
	defaultReconcileOnTime = 200 * time.Millisecond
	// reconcilePoll is how often the demo reads the occurrences whose slot passed.
	reconcilePoll = 50 * time.Millisecond
	// reconcilePauseTimeout bounds the PauseSchedule of an interrupted run.
	reconcilePauseTimeout = 2 * time.Second
)

// reconcilePlan is the scripted reconciliation: which of the observed slots have a
// slow run. Slots are numbered from 0, the first slot after Start.
type reconcilePlan struct {
	every, slowTook time.Duration
	onTime          time.Duration // bound on the lateness of the run after a slow one
	slots           int           // slots observed
	slow            []bool        // by slot: the run of that slot is slow
}

// reconcileSlots is how many slots a run observes: enough to last about as long as
// the orders, and at least enough for one slow run and the slot after it.
func reconcileSlots(cfg Config) int {
	return max(CeilDiv(cfg.MaxTimeout+cfg.RetryBackoff, cfg.ReconcileEvery),
		1+freedAfter(cfg.ReconcileSlowTook, cfg.ReconcileEvery, cfg.reconcileOnTime))
}

// reconcileSpan is how long the reconciliation lasts at most, from Start.
func reconcileSpan(cfg Config) time.Duration {
	return reconcileLeftoverHorizon + time.Duration(reconcileSlots(cfg)+1)*cfg.ReconcileEvery + cfg.ReconcileSlowTook
}

// freedAfter is how many slots after its own the first slot a slow run leaves free
// is, with room for the run's own lateness (up to onTime) and for ax to free the
// key.
func freedAfter(slowTook, every, onTime time.Duration) int {
	return CeilDiv(slowTook+reconcileSettle+onTime, every)
}

func CeilDiv(a, b time.Duration) int {
	return int((a + b - 1) / b)
}

// newReconcilePlan makes roughly every 4th run slow, from an offset drawn from
// cfg.Seed, but only where the slot after the slow run is still observed; when that
// leaves no slow run, the run of slot 0 is slow.
func newReconcilePlan(cfg Config) *reconcilePlan {
	p := &reconcilePlan{
		every: cfg.ReconcileEvery, slowTook: cfg.ReconcileSlowTook, onTime: cfg.reconcileOnTime,
		slots: reconcileSlots(cfg),
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x7263)) // "rc"
	offset := rng.IntN(4)
	if p.simulate(func(run, _ int) bool { return (run+offset)%4 == 0 }) == 0 {
		p.simulate(func(_, slot int) bool { return slot == 0 })
	}
	return p
}

// simulate plays the slots with runs taking their planned time, marks the runs
// wantSlow picks as slow where the slot after them is observed, and returns how many
// are slow.
func (p *reconcilePlan) simulate(wantSlow func(run, slot int) bool) int {
	p.slow = make([]bool, p.slots)
	var busyUntil time.Duration
	run, slow := 0, 0
	for i := range p.slots {
		at := time.Duration(i) * p.every
		if at < busyUntil {
			continue // skipped
		}
		took := ReconcileFastTook
		if wantSlow(run, i) && i+freedAfter(p.slowTook, p.every, p.onTime) < p.slots {
			p.slow[i], took = true, p.slowTook
			slow++
		}
		busyUntil = at + took + reconcileSettle
		run++
	}
	return slow
}

// reconcileRun is one execution of the reconciliation handler.
type reconcileRun struct {
	slot           int // the observed slot; -1 for another (of an earlier run)
	taskID         int64
	slow           bool
	late           time.Duration // start minus the slot
	started, ended time.Time     // ended is zero while it runs
}

// reconciler runs the payment reconciliation: its handler, and the watch that reads
// every observed slot's task until it is terminal. Its methods are safe for
// concurrent use.
type reconciler struct {
	r     *run
	plan  *reconcilePlan
	made  time.Time     // before Start: occurrences created earlier are an earlier run's
	first time.Time     // slot 0: the first slot after Start, fixed by begin
	ready chan struct{} // closed by begin once first is fixed; handlers wait for it
	quit  chan struct{} // closed when Run ends: a slow run stops waiting
	once  sync.Once     // closes quit

	mu        sync.Mutex
	active    int // runs in the handler now
	maxActive int
	runs      []reconcileRun // executions for observed slots, in start order
	others    []reconcileRun // executions for other slots: stale, or after the last
	status    []ax.Status    // by slot, once terminal
	reason    []string       // by slot: LastError, or the lookup error while not terminal
	paused    bool

	cancel context.CancelFunc
	done   chan struct{} // closed when every slot is terminal or the watch stopped
	err    error         // set before done if the watch failed
}

func newReconciler(r *run, plan *reconcilePlan) *reconciler {
	return &reconciler{
		r: r, plan: plan, made: time.Now(), ready: make(chan struct{}), quit: make(chan struct{}),
		status: make([]ax.Status, plan.slots), reason: make([]string, plan.slots),
	}
}

// register registers the handler and the schedule (before Start).
func (rc *reconciler) register() error {
	rc.r.s.HandleFunc(ReconcileName, rc.handle)
	var opts []ax.ScheduleOption
	if p := rc.r.cfg.reconcileOverlap; p != "" {
		opts = append(opts, ax.WithOverlap(p))
	}
	return rc.r.s.Every(ReconcileName, rc.plan.every, opts...)
}

// reconcileLeftoverHorizon is how far ahead of now an earlier run on a kept
// database may have written occurrences: ax writes them about 2s before their slot.
const reconcileLeftoverHorizon = 5 * time.Second

// begin resumes the schedule if an earlier run on a kept database paused it, and
// fixes slot 0 (after Start): the first slot after now, and after every occurrence
// an earlier run left terminal. Pausing that run cancelled the occurrences it had
// written ahead; their keys are taken, so ax does not fire those slots again.
func (rc *reconciler) begin(ctx context.Context) error {
	defer close(rc.ready)
	if err := rc.r.s.ResumeSchedule(ctx, ReconcileName); err != nil {
		return err
	}
	// The slots of s.Every are 1970-01-01T00:00:00Z + k×every.
	every := rc.plan.every
	rc.first = time.Unix(0, 0).Add((time.Since(time.Unix(0, 0))/every + 1) * every)
	horizon := time.Now().Add(reconcileLeftoverHorizon)
	for at := rc.first; !at.After(horizon); at = at.Add(every) {
		t, err := rc.r.s.Lookup(ctx, ReconcileName, SlotKey(at))
		switch {
		case errors.Is(err, ax.ErrNotFound):
		case err != nil:
			return err
		case t.Status.Terminal():
			rc.first = at.Add(every)
		}
	}
	return nil
}

// slot returns the time of slot i.
func (rc *reconciler) slot(i int) time.Time { return rc.first.Add(time.Duration(i) * rc.plan.every) }

// slotIndex returns the observed slot at t, if any.
func (rc *reconciler) slotIndex(t time.Time) (int, bool) {
	d := t.Sub(rc.first)
	if d < 0 || d%rc.plan.every != 0 {
		return 0, false
	}
	i := int(d / rc.plan.every)
	return i, i < rc.plan.slots
}

// handle is the handler of ReconcileName: it stands for reconciling the day's
// payments with the provider, and takes reconcileFastTook, or plan.slowTook in a
// slow run.
func (rc *reconciler) handle(ctx context.Context, t *ax.Task) error {
	// An occurrence left by an earlier run may fire before begin returns.
	if err := await(ctx, rc.quit, rc.ready); err != nil {
		return err
	}
	started := time.Now()
	rc.mu.Lock()
	rc.active++
	rc.maxActive = max(rc.maxActive, rc.active)
	overlapping := rc.active > 1
	rc.mu.Unlock()
	defer func() {
		rc.mu.Lock()
		rc.active--
		rc.mu.Unlock()
	}()
	out := rc.r.out
	// The occurrence's key is its slot; a retry keeps the key, not the DueAt.
	slot, err := time.Parse(time.RFC3339Nano, t.Key)
	if err != nil {
		slot = t.DueAt
	}
	if overlapping {
		out.Line("reconcile slot %s: BUG: run started while another run is in progress", Clock(slot))
	}

	i, ok := rc.slotIndex(slot)
	if !ok {
		rc.mu.Lock()
		rc.others = append(rc.others, reconcileRun{slot: -1, taskID: t.ID, started: started})
		n := len(rc.others) - 1
		rc.mu.Unlock()
		defer func() {
			rc.mu.Lock()
			rc.others[n].ended = time.Now()
			rc.mu.Unlock()
		}()
		switch {
		case t.CreatedAt.Before(rc.made):
			rc.r.tally.update(func(tl *tally) { tl.stale++ })
			out.Line("reconcile slot %s: not a slot of this run (left by an earlier run?), ignored", Clock(slot))
		case slot.Before(rc.first):
			// Start fired it before begin fixed slot 0.
			out.Line("reconcile slot %s: before the first slot the demo observes (%s), not counted", Clock(slot), Clock(rc.first))
		}
		// Otherwise a slot after the last observed one: the schedule is being paused.
		return nil
	}
	late := started.Sub(slot)
	slow := rc.plan.slow[i] && t.Attempt == 0
	rc.mu.Lock()
	afterSlow := len(rc.runs) > 0 && rc.runs[len(rc.runs)-1].slow
	rc.runs = append(rc.runs, reconcileRun{slot: i, taskID: t.ID, slow: slow, late: late, started: started})
	n := len(rc.runs) - 1
	rc.mu.Unlock()

	took, what := ReconcileFastTook, ""
	if slow {
		took, what = rc.plan.slowTook, fmt.Sprintf(": a SLOW run, takes %s", Secs(rc.plan.slowTook))
	} else if afterSlow {
		what = ", the first run after the slow one"
	}
	if late < 0 {
		out.Line("reconcile slot %s: EARLY: the run started %v before its slot", Clock(slot), -late)
	}
	out.Line("reconcile slot %s: run started %s after its slot%s", Clock(slot), Ms(late), what)

	timer := time.NewTimer(took)
	defer timer.Stop()
	if err := await(ctx, rc.quit, timer.C); err != nil {
		return err
	}
	ended := time.Now()
	rc.mu.Lock()
	rc.runs[n].ended = ended
	rc.mu.Unlock()
	out.Line("reconcile slot %s: run finished after %s", Clock(slot), Secs(ended.Sub(started)))
	return nil
}

// await waits for ch, or returns the handler's error when ctx ends or quit is closed
// (the demo is stopping) first.
func await[T any](ctx context.Context, quit <-chan struct{}, ch <-chan T) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("reconcile: %w", ctx.Err())
	case <-quit:
		return errors.New("reconcile: interrupted, the demo is stopping")
	}
}

// SlotKey is the task key of the occurrence of the slot at t, as ax writes it.
func SlotKey(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// start starts the watch on its own goroutine.
func (rc *reconciler) start(ctx context.Context) {
	ctx, rc.cancel = context.WithCancel(ctx)
	rc.done = make(chan struct{})
	go rc.watch(ctx)
}

// stop ends the watch and waits for it.
func (rc *reconciler) stop() {
	if rc.cancel != nil {
		rc.cancel()
		<-rc.done
	}
}

// watch reads the task of every slot that passed, every reconcilePoll, until it is
// terminal, and prints the skipped ones; ax decides the skips, at the claim. When
// every observed slot is terminal it pauses the schedule.
func (rc *reconciler) watch(ctx context.Context) {
	defer close(rc.done)
	tick := time.NewTicker(reconcilePoll)
	defer tick.Stop()
	from := 0 // slots before from are terminal
	for from < rc.plan.slots {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		for i := from; i < rc.plan.slots && !rc.slot(i).After(now); i++ {
			rc.mu.Lock()
			terminal := rc.status[i] != ""
			rc.mu.Unlock()
			if terminal {
				continue
			}
			key := SlotKey(rc.slot(i))
			t, err := rc.r.s.Lookup(ctx, ReconcileName, key)
			switch {
			case errors.Is(err, ax.ErrNotFound):
				// Not written (yet): the wait's deadline reports it if it stays so.
				rc.mu.Lock()
				rc.reason[i] = "no task"
				rc.mu.Unlock()
				continue
			case err != nil:
				if ctx.Err() == nil {
					rc.err = fmt.Errorf("demo: reconcile slot %s: %w", key, err)
				}
				return
			case !t.Status.Terminal():
				rc.mu.Lock()
				rc.reason[i] = "task " + t.Status.String()
				rc.mu.Unlock()
				continue
			}
			rc.mu.Lock()
			rc.status[i], rc.reason[i] = t.Status, t.LastError
			holder := rc.holder(t.LastError)
			rc.mu.Unlock()
			if t.Status == ax.Skipped {
				rc.r.out.Line("reconcile slot %s: SKIPPED by ax (%s%s)", Clock(rc.slot(i)), strings.TrimPrefix(t.LastError, "skipped: "), holder)
			}
		}
		rc.mu.Lock()
		for from < rc.plan.slots && rc.status[from] != "" {
			from++
		}
		rc.mu.Unlock()
	}
	if err := rc.r.s.PauseSchedule(ctx, ReconcileName); err != nil {
		if ctx.Err() == nil {
			rc.err = fmt.Errorf("demo: pause the reconciliation: %w", err)
		}
		return
	}
	rc.mu.Lock()
	rc.paused = true
	rc.mu.Unlock()
	rc.r.out.Line("reconcile: the %d slots observed are settled; s.PauseSchedule(%q) for the rest of the demo", rc.plan.slots, ReconcileName)
}

// holder names the run of an observed slot that a skip's reason names as holding the
// key, as ": the run of slot …", or returns "". The caller holds mu.
func (rc *reconciler) holder(reason string) string {
	if run, ok := rc.holderRun(reason); ok && run.slot >= 0 {
		return ": the run of slot " + Clock(rc.slot(run.slot))
	}
	return ""
}

// holderRun returns the last execution this run saw of the task a skip's reason
// ("… held by task 42") names. The caller holds mu.
func (rc *reconciler) holderRun(reason string) (reconcileRun, bool) {
	var found reconcileRun
	ok := false
	for _, runs := range [][]reconcileRun{rc.runs, rc.others} {
		for _, run := range runs {
			if strings.HasSuffix(reason, " task "+strconv.FormatInt(run.taskID, 10)) && (!ok || run.started.After(found.started)) {
				found, ok = run, true
			}
		}
	}
	return found, ok
}

// end stops the slow run in progress, if any, and pauses the schedule if the watch
// did not (an interrupted run), so that a kept database holds no pending occurrence.
func (rc *reconciler) end(ctx context.Context) {
	rc.once.Do(func() { close(rc.quit) })
	rc.mu.Lock()
	paused := rc.paused
	rc.mu.Unlock()
	if paused {
		return
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reconcilePauseTimeout)
	defer cancel()
	if err := rc.r.s.PauseSchedule(pctx, ReconcileName); err != nil {
		rc.r.cfg.Logger.WarnContext(pctx, "demo: pause the reconciliation", "err", err)
	}
}

// pending names the observed slots whose task is not terminal yet.
func (rc *reconciler) pending() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []string
	for i, st := range rc.status {
		if st == "" {
			why := rc.reason[i]
			if why == "" {
				why = "not read yet"
			}
			out = append(out, fmt.Sprintf("reconcile slot %s (%s)", Clock(rc.slot(i)), why))
		}
	}
	return out
}

// counts returns the runs and the skipped slots so far, for the progress line.
func (rc *reconciler) counts() (runs, skipped int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, st := range rc.status {
		if st == ax.Skipped {
			skipped++
		}
	}
	return len(rc.runs), skipped
}

// fill copies the reconciliation's counters into sum.
func (rc *reconciler) fill(sum *Summary) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	sum.ReconcileFrom, sum.ReconcileSlots = rc.first, rc.plan.slots
	sum.ReconcileRuns, sum.ReconcileMaxConcurrent = len(rc.runs), rc.maxActive
	var lat []time.Duration
	for _, run := range rc.runs {
		lat = append(lat, run.late)
		if run.slow {
			sum.ReconcileSlow++
		}
	}
	for _, st := range rc.status {
		if st == ax.Skipped {
			sum.ReconcileSkipped++
		}
	}
	slices.Sort(lat)
	sum.ReconcileLatenessP99 = Percentile(lat, 0.99)
	if len(lat) > 0 {
		sum.ReconcileLatenessMax = lat[len(lat)-1]
	}
	for _, next := range rc.afterSlow() {
		if next >= 0 && next < len(rc.runs) {
			sum.ReconcileAfterSlowLate = max(sum.ReconcileAfterSlowLate, rc.runs[next].late)
		}
	}
}

// afterSlow returns, for each slow run, the index in runs of the run of the first
// slot after it ended, passing over a slot SKIPPED less than reconcileSettle after
// the end (ax had not freed the key yet): -1 when that slot has no run, -2 when it
// is past the last observed slot. The caller holds mu.
func (rc *reconciler) afterSlow() []int {
	var out []int
	for _, run := range rc.runs {
		if !run.slow {
			continue
		}
		next := -2
		for j := run.slot + 1; j < rc.plan.slots; j++ {
			at := rc.slot(j)
			if at.Before(run.ended) || rc.status[j] == ax.Skipped && at.Before(run.ended.Add(reconcileSettle)) {
				continue
			}
			next = slices.IndexFunc(rc.runs, func(r reconcileRun) bool { return r.slot == j })
			break
		}
		out = append(out, next)
	}
	return out
}

// verify checks the reconciliation once every observed slot is terminal: each slot
// SUCCEEDED with one run or SKIPPED with none, a skipped slot fell inside a run,
// never two runs at once, a slow run made ax skip, and the first slot after each slow
// run started on time. It returns the problems, or the line to print.
func (rc *reconciler) verify(sum Summary) (problems []string, ok string) {
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if sum.ReconcileMaxConcurrent > 1 {
		bad("%d reconciliation runs overlapped (max concurrent %d, want 1)", sum.ReconcileMaxConcurrent, sum.ReconcileMaxConcurrent)
	}
	succeeded, skipped := 0, 0
	for i, st := range rc.status {
		runs := 0
		for _, run := range rc.runs {
			if run.slot == i {
				runs++
			}
		}
		at := Clock(rc.slot(i))
		switch st {
		case ax.Succeeded:
			succeeded++
			if runs != 1 {
				bad("reconcile slot %s SUCCEEDED after %d runs, want 1", at, runs)
			}
		case ax.Skipped:
			skipped++
			if runs != 0 {
				bad("reconcile slot %s SKIPPED but ran %d times", at, runs)
			}
			// The run holding the key, if it is one this run saw, had not ended
			// (until ax freed the key) at the slot.
			if run, ok := rc.holderRun(rc.reason[i]); ok && !run.ended.IsZero() && run.ended.Add(reconcileSettle).Before(rc.slot(i)) {
				bad("reconcile slot %s SKIPPED, but the run holding the key ended at %s (%s)", at, Clock(run.ended), rc.reason[i])
			}
		default:
			bad("reconcile slot %s is %s, want SUCCEEDED or SKIPPED (last error %q)", at, st, rc.reason[i])
		}
	}
	for _, run := range rc.runs {
		if run.late < 0 {
			bad("reconcile slot %s: the run started %v before its slot", Clock(rc.slot(run.slot)), -run.late)
		}
	}
	if sum.ReconcileSlow > 0 && sum.ReconcileSkipped == 0 {
		bad("%d slow reconciliation runs and no slot skipped", sum.ReconcileSlow)
	}
	slow := slices.DeleteFunc(slices.Clone(rc.runs), func(r reconcileRun) bool { return !r.slow })
	for k, next := range rc.afterSlow() {
		run := slow[k]
		at, end := Clock(rc.slot(run.slot)), Clock(run.ended)
		switch {
		case next == -2:
			bad("slow reconciliation run of slot %s ended at %s, after the last observed slot", at, end)
		case next == -1:
			bad("slow reconciliation run of slot %s ended at %s; the next slot did not run", at, end)
		case rc.runs[next].late > rc.plan.onTime:
			bad("slow reconciliation run of slot %s ended at %s; the next run, of slot %s, started %s late, want at most %v",
				at, end, Clock(rc.slot(rc.runs[next].slot)), Ms(rc.runs[next].late), rc.plan.onTime)
		}
	}
	return problems, fmt.Sprintf("reconciliation: %d slots (%d SUCCEEDED, %d SKIPPED), never two runs at once; the run after each slow one started within %v of its slot",
		len(rc.status), succeeded, skipped, rc.plan.onTime)
}

// header describes the reconciliation under the run's header.
func (rc *reconciler) header() {
	var slow []string
	for i, s := range rc.plan.slow {
		if s {
			slow = append(slow, Clock(rc.slot(i)))
		}
	}
	policy := "skip (the default)"
	if p := rc.r.cfg.reconcileOverlap; p != "" {
		policy = string(p)
	}
	out := rc.r.out
	out.Plain("  schedule: s.Every(%q, %s), alongside the orders: a run takes %s, a slow one %s",
		ReconcileName, rc.plan.every, Secs(ReconcileFastTook), Secs(rc.plan.slowTook))
	out.Plain("  overlap:  %s: a slot that comes due while a run holds the task key is SKIPPED", policy)
	out.Plain("  slots:    %d from %s; slow runs at %s", rc.plan.slots, Clock(rc.first), strings.Join(slow, ", "))
}

// summary prints the reconciliation's summary lines.
func (rc *reconciler) summary(sum Summary) {
	out := rc.r.out
	overlap := "no overlap"
	if sum.ReconcileMaxConcurrent > 1 {
		overlap = "OVERLAP"
	}
	out.Plain("reconcile: runs %d (slow %d) | skipped %d | max concurrent %d, %s | lateness p99 %s max %s | after a slow run %s",
		sum.ReconcileRuns, sum.ReconcileSlow, sum.ReconcileSkipped, sum.ReconcileMaxConcurrent, overlap,
		Ms(sum.ReconcileLatenessP99), Ms(sum.ReconcileLatenessMax), Ms(sum.ReconcileAfterSlowLate))
	out.Plain("  %d slots of s.Every(%q, %s); lateness is the run's start minus its slot; a slot is skipped, not queued, while a run holds the key",
		sum.ReconcileSlots, ReconcileName, rc.plan.every)
}

// Clock formats an instant as its UTC time of day, e.g. "10:15:04Z" or
// "10:15:04.5Z".
func Clock(t time.Time) string {
	return t.UTC().Format("15:04:05.999Z07:00")
}
