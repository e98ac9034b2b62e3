// Package route is the leader's dispatch to executors: it picks, for each claimed task,
// a live replica that registered the task's handler — by round-robin, least in flight,
// or a consistent hash of the task's key — and hands the task to this process's
// executor directly or POSTs it, in one batch per replica, to the replica's executor
// endpoint (package remote), in requests of at most remote.MaxDispatchTasks tasks. A
// replica that answers busy (for some tasks, or for the whole request: 503), without the
// handler, or with a refusal (another secret, say; a body too large is first split in
// halves) is passed over for the next candidate; one that cannot be reached is skipped until its health
// endpoint answers again. A task no candidate takes is handed back as a dispatch
// failure — after waiting in the leader, up to BusyFor, if one of them was busy. An
// executor that has seen a newer leader ends the term.
//
// A Router lives for one term, whose context New takes. It is driven by the
// scheduling loop's dispatches, not by a Run: Probe blocks until the term's context
// ends, and Wait, called once the loop has stopped dispatching, waits for the
// requests in flight.
package route

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/axsched/ax/internal/clock"
	"github.com/axsched/ax/internal/execute"
	"github.com/axsched/ax/internal/observe"
	"github.com/axsched/ax/remote"
	"github.com/axsched/ax/store"
)

// Policy chooses among the replicas that can run a task.
type Policy int

// The policies.
const (
	RoundRobin     Policy = iota // each task to the next candidate in turn
	LeastInFlight                // to the candidate with the fewest running per slot
	ConsistentHash               // by the task's key (TaskKey, else Key): the same key to the same replica while the set is stable
)

// Config is what a Router needs.
type Config struct {
	Namespace string
	Local     string // this replica's node name
	// Advertised: this replica advertises an executor endpoint, so that the other
	// replicas, when they lead, route to it too. Consistent hashing weighs this
	// replica only then (see pick).
	Advertised bool
	Token      int64 // the term's fencing token
	Policy     Policy
	Exec       *execute.Executor // this replica's executor
	Src        *execute.Source   // the term's source of tasks
	Client     *remote.Client    // the other replicas' executor endpoints
	// LocalHandles reports whether this replica has a handler for name.
	LocalHandles func(name string) bool
	// Fenced ends the term: an executor has seen a newer leader.
	Fenced func(error)
	// Nodes, when set, reads the live replicas from the registry: the router asks it
	// (at most every second) before handing back a task no known replica can take,
	// so that a replica that registered since the last refresh is found.
	Nodes func(ctx context.Context) ([]store.NodeInfo, error)
	// BusyFor is how long a task every candidate refused as busy waits in the leader
	// (DISPATCHING) before it is handed back; the scheduler gives DispatchTimeout/2,
	// so that recovery never takes it for stuck meanwhile. Defaults to 15s.
	BusyFor time.Duration
	Observe *observe.Queue
	Now     func() time.Time
	Log     *slog.Logger
}

// busyTask is a task waiting in the leader for a free executor.
type busyTask struct {
	since time.Time
	tries int
}

// node is a replica as the router sees it.
type node struct {
	store.NodeInfo
	handles  map[string]bool
	assigned int // tasks sent since its last report
}

// Router dispatches a term's claimed tasks. Its methods are safe for concurrent use.
type Router struct {
	cfg Config
	ctx context.Context // the term's; requests in flight end with it

	mu        sync.Mutex
	busy      map[int64]*busyTask // tasks every candidate refused, waiting to be routed again
	refreshed time.Time           // the last read of Nodes on a miss
	nodes     map[string]*node    // live remote replicas, by name (not the local one)
	synced    bool                // SetNodes was called: nodes is the registry's view
	names     []string            // the keys of nodes, sorted: the candidates' order
	down      map[string]struct{} // replicas that did not answer, until their health does
	rr        uint64
	assigned  int // tasks picked for this replica and not yet offered to its executor
	wg        sync.WaitGroup
}

// New returns a router for a term whose context is ctx.
func New(ctx context.Context, cfg Config) *Router {
	if cfg.BusyFor <= 0 {
		cfg.BusyFor = 15 * time.Second
	}
	return &Router{cfg: cfg, ctx: ctx, nodes: map[string]*node{}, down: map[string]struct{}{}, busy: map[int64]*busyTask{}}
}

// SetNodes replaces the replicas known, from the node registry: those that advertise an
// executor endpoint, other than this one.
func (r *Router) SetNodes(ns []store.NodeInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.synced = true
	seen := map[string]bool{}
	for _, n := range ns {
		if n.Name == r.cfg.Local || n.Advertise == "" {
			continue
		}
		seen[n.Name] = true
		h := make(map[string]bool, len(n.Handlers))
		for _, name := range n.Handlers {
			h[name] = true
		}
		r.nodes[n.Name] = &node{NodeInfo: n, handles: h}
	}
	r.names = r.names[:0]
	for name := range r.nodes {
		if !seen[name] {
			delete(r.nodes, name)
			continue
		}
		r.names = append(r.names, name)
	}
	slices.Sort(r.names)
}

// local is the name standing for this replica among the candidates.
const local = ""

// pick chooses a candidate for t other than those in tried: a remote replica's name,
// local for this one, or false when none is left.
func (r *Router) pick(t *store.Task, tried map[string]bool) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var cands []string
	if !tried[local] && r.cfg.LocalHandles(t.Name) {
		cands = append(cands, local)
	}
	for _, name := range r.names { // sorted, and local ("") before them
		if _, isDown := r.down[name]; !isDown && !tried[name] && r.nodes[name].handles[t.Name] {
			cands = append(cands, name)
		}
	}
	if len(cands) == 0 {
		return "", false
	}
	var c string
	switch r.cfg.Policy {
	case LeastInFlight:
		best := -1.0
		for _, name := range cands {
			if load := r.loadLocked(name); best < 0 || load < best {
				c, best = name, load
			}
		}
	case ConsistentHash:
		key := t.TaskKey
		if key == "" {
			key = t.Name + "\x00" + t.Key
		}
		// Rendezvous hashing: the candidate with the highest weight, ties to the
		// smaller name, over the candidates every leader sees. A replica without an
		// endpoint is a candidate only of its own terms (the others never see it), so
		// while it leads it takes a key only when no other candidate is left:
		// otherwise it and the other leaders would route the key differently.
		var best uint64
		bestName, found := "", false
		for _, cand := range cands {
			name := cand
			if cand == local {
				if !r.cfg.Advertised && len(cands) > 1 {
					continue
				}
				name = r.cfg.Local // weigh this replica by its name, as the others see it
			}
			if w := weight(name, key); !found || w > best || (w == best && name < bestName) {
				c, best, bestName, found = cand, w, name, true
			}
		}
	default:
		c = cands[r.rr%uint64(len(cands))]
		r.rr++
	}
	if c == local {
		r.assigned++
	} else {
		r.nodes[c].assigned++
	}
	return c, true
}

// weight is a candidate's rendezvous weight for a key: FNV-1a of both, then
// MurmurHash3's 64-bit finalizer. FNV alone does not mix its last bytes into the high
// bits, so the candidates' weights for a key kept nearly one order: of 300 keys over
// three replicas, one took 290 and another none. The weight depends on the names and
// the key only, so every leader routes a key alike.
func weight(name, key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(key))
	w := h.Sum64()
	w ^= w >> 33
	w *= 0xff51afd7ed558ccd
	w ^= w >> 33
	w *= 0xc4ceb9fe1a85ec53
	w ^= w >> 33
	return w
}

// loadLocked is a candidate's busy slots per slot: the tasks running or waiting for a
// slot, as last known, plus those picked for it since; r.mu is held.
func (r *Router) loadLocked(name string) float64 {
	if name == local {
		_, free := r.cfg.Exec.Load()
		slots := r.cfg.Exec.Slots()
		return float64(slots-free+r.assigned) / float64(max(slots, 1))
	}
	n := r.nodes[name]
	return float64(n.InFlight+n.assigned) / float64(max(n.Capacity, 1))
}

// Dispatch routes claimed tasks; it does not wait for remote answers.
func (r *Router) Dispatch(tasks []store.Task) bool {
	r.route(tasks, nil)
	return true
}

// Reserve has the claim start the tasks itself while this replica is the only one
// that takes dispatches (no other live replica advertises an executor endpoint, as
// the registry last said): then every task it has a handler for runs here anyway, and
// one write claims and starts it. With other replicas, or before the registry was
// read, tasks are claimed DISPATCHING and routed.
func (r *Router) Reserve(n int) (store.StartOn, int, bool) {
	r.mu.Lock()
	alone := len(r.names) == 0 && r.synced
	r.mu.Unlock()
	if !alone {
		return store.StartOn{}, 0, false
	}
	return r.cfg.Exec.Reserve(n)
}

// Launch runs what a claim started here (see Reserve).
func (r *Router) Launch(started []store.Task, k int, sent time.Time) {
	r.cfg.Exec.Launch(r.cfg.Src, started, k, sent)
}

// ClaimFailed settles a failed claim that asked to start tasks here (see Reserve).
func (r *Router) ClaimFailed(claims []store.Claim, k int, sent time.Time) {
	r.cfg.Exec.ClaimFailed(r.cfg.Src, claims, k, sent)
}

// route sends each task to a candidate not in tried. A task no candidate takes waits
// in the leader, still DISPATCHING, and is routed again with a backoff for up to
// BusyFor (every replica with its handler was full); then, or when no replica has its
// handler at all, it is handed back as a dispatch failure.
func (r *Router) route(tasks []store.Task, tried map[string]bool) {
	r.routeOr(tasks, tried, nil)
}

// routeOr is route, with left, when not nil, given the tasks no candidate is left for
// instead.
func (r *Router) routeOr(tasks []store.Task, tried map[string]bool, left func([]store.Task)) {
	groups := map[string][]store.Task{}
	var none []store.Task
	for _, t := range tasks {
		c, ok := r.pick(&t, tried)
		if !ok {
			none = append(none, t)
			continue
		}
		groups[c] = append(groups[c], t)
	}
	if len(none) > 0 && r.refresh() {
		again := none
		none = nil
		for _, t := range again {
			c, ok := r.pick(&t, tried)
			if !ok {
				none = append(none, t)
				continue
			}
			groups[c] = append(groups[c], t)
		}
	}
	if len(none) > 0 {
		if left != nil {
			left(none)
		} else if len(tried) == 0 {
			r.forget(none)
			r.cfg.Exec.HandBackUnhandled(r.cfg.Src, none)
		} else {
			r.wait(none)
		}
	}
	for c, group := range groups {
		if c == local {
			busy := r.cfg.Exec.Offer(r.cfg.Src, group, store.MaxBatch)
			r.mu.Lock()
			r.assigned -= len(group) // the executor's load counts those it took
			r.mu.Unlock()
			r.forget(others(group, busy))
			if len(busy) > 0 {
				r.markBusy(busy)
				r.route(busy, with(tried, local))
			}
			continue
		}
		for _, part := range split(group, maxBatchBytes) {
			r.wg.Go(func() { r.send(c, part, with(tried, c)) })
		}
	}
}

// others returns the tasks of all that are not in some, in order.
func others(all, some []store.Task) []store.Task {
	in := make(map[int64]bool, len(some))
	for _, t := range some {
		in[t.ID] = true
	}
	var out []store.Task
	for _, t := range all {
		if !in[t.ID] {
			out = append(out, t)
		}
	}
	return out
}

// with returns tried and name, as a new set.
func with(tried map[string]bool, name string) map[string]bool {
	next := map[string]bool{name: true}
	for k := range tried {
		next[k] = true
	}
	return next
}

// maxBatchBytes bounds the estimated size of one dispatch request, well under the
// executor's body limit (remote.DefaultMaxBodyBytes).
const maxBatchBytes = remote.DefaultMaxBodyBytes / 2

// split cuts tasks into consecutive batches of at most remote.MaxDispatchTasks tasks
// whose estimated JSON size stays under max (a task larger than that goes alone).
func split(tasks []store.Task, max int) [][]store.Task {
	var out [][]store.Task
	start, size := 0, 0
	for i, t := range tasks {
		n := len(t.Payload)*4/3 + len(t.LastError) + len(t.Name) + len(t.Key) + 1024
		if i > start && (size+n > max || i-start == remote.MaxDispatchTasks) {
			out = append(out, tasks[start:i])
			start, size = i, 0
		}
		size += n
	}
	return append(out, tasks[start:])
}

// wait keeps tasks every candidate refused as busy and routes them again after a
// backoff, until BusyFor has passed since they were first refused: then, or when the
// term ends, they are handed back.
func (r *Router) wait(tasks []store.Task) {
	now := time.Now()
	var keep, give []store.Task
	delay := time.Duration(0)
	r.mu.Lock()
	for _, t := range tasks {
		b, ok := r.busy[t.ID]
		if !ok {
			b = &busyTask{since: now}
			r.busy[t.ID] = b
		}
		b.tries++
		if now.Sub(b.since) >= r.cfg.BusyFor {
			delete(r.busy, t.ID)
			give = append(give, t)
			continue
		}
		keep = append(keep, t)
		delay = max(delay, min(50*time.Millisecond<<min(b.tries-1, 5), time.Second))
	}
	r.mu.Unlock()
	if len(give) > 0 {
		r.cfg.Exec.HandBack(r.cfg.Src, give, observe.Busy, "every executor with its handler was busy")
	}
	if len(keep) == 0 {
		return
	}
	r.wg.Go(func() {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-r.ctx.Done():
			r.forget(keep)
			r.cfg.Exec.HandBack(r.cfg.Src, keep, observe.LeaseEnded, "leadership ended while every executor was busy")
		case <-t.C:
			r.route(keep, nil)
		}
	})
}

// markBusy records that a candidate answered busy for tasks, from now unless they
// were before: a task no other candidate takes then waits (see wait), even if a later
// candidate refused it.
func (r *Router) markBusy(tasks []store.Task) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range tasks {
		if _, ok := r.busy[t.ID]; !ok {
			r.busy[t.ID] = &busyTask{since: now}
		}
	}
}

// splitBusy splits tasks into those a candidate answered busy for (see markBusy) and
// the others.
func (r *Router) splitBusy(tasks []store.Task) (busy, others []store.Task) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range tasks {
		if _, ok := r.busy[t.ID]; ok {
			busy = append(busy, t)
		} else {
			others = append(others, t)
		}
	}
	return busy, others
}

// forget drops the busy records of tasks that were placed or handed back.
func (r *Router) forget(tasks []store.Task) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range tasks {
		delete(r.busy, t.ID)
	}
}

// send POSTs one batch to replica name and routes what it does not take elsewhere.
// A request under way when the term ends is let finish (bounded by the client's
// timeout): it was sent under a valid lease, and its answer says where the tasks are.
func (r *Router) send(name string, tasks []store.Task, tried map[string]bool) {
	r.mu.Lock()
	n := r.nodes[name]
	r.mu.Unlock()
	if n == nil { // dropped from the registry meanwhile
		r.route(tasks, tried)
		return
	}
	// The tasks count as picked for name until this request ends, whatever its
	// outcome, unless they go on in two smaller requests, which count them then.
	halved := false
	defer func() {
		if !halved {
			r.unassign(name, len(tasks))
		}
	}()
	if err := r.valid(); err != nil {
		r.forget(tasks)
		r.cfg.Exec.HandBack(r.cfg.Src, tasks, observe.LeaseEnded, "claimed under a lease that ended: "+err.Error())
		return
	}
	begin := time.Now()
	resp, err := r.cfg.Client.Dispatch(context.WithoutCancel(r.ctx), n.Advertise, remote.DispatchRequest{
		Namespace: r.cfg.Namespace, Node: name, Token: r.cfg.Token, Tasks: tasks,
	})
	result := observe.RequestOK
	switch {
	case errors.Is(err, remote.ErrFenced):
		result = observe.RequestFenced
	case errors.Is(err, remote.ErrUnreachable):
		result = observe.RequestUnreachable
	case errors.Is(err, remote.ErrTooLarge):
		result = observe.RequestTooLarge
	case errors.Is(err, remote.ErrBusy):
		result = observe.RequestBusy
	case err != nil:
		result = observe.RequestError
	case len(resp.Busy) > 0:
		result = observe.RequestBusy
	}
	r.cfg.Observe.Send(observe.Event{Kind: observe.ExecutorRequest, At: r.cfg.Now(), Reason: result, Duration: time.Since(begin), Count: len(tasks)})
	switch {
	case errors.Is(err, remote.ErrFenced):
		r.cfg.Log.LogAttrs(r.ctx, slog.LevelWarn, "ax: an executor has seen a newer leader; stepping down", slog.String("executor", name), slog.Any("err", err))
		r.forget(tasks)
		r.cfg.Exec.HandBack(r.cfg.Src, tasks, observe.Fenced, "an executor has seen a newer leader")
		r.cfg.Fenced(err)
		return
	case errors.Is(err, remote.ErrUnreachable):
		// The executor may have taken some of them (a duplicate delivery runs nothing):
		// they go back in line, a dispatch failure each, and the next claim routes them
		// past this replica until its health endpoint answers.
		r.cfg.Log.LogAttrs(r.ctx, slog.LevelWarn, "ax: executor unreachable; its tasks are handed back", slog.String("executor", name), slog.Int("tasks", len(tasks)), slog.Any("err", err))
		r.markDown(name)
		r.forget(tasks)
		r.cfg.Exec.HandBack(r.cfg.Src, tasks, observe.Unreachable, fmt.Sprintf("executor %s unreachable", name))
		return
	case errors.Is(err, remote.ErrTooLarge) && len(tasks) > 1:
		halved = true
		r.send(name, tasks[:len(tasks)/2], tried)
		r.send(name, tasks[len(tasks)/2:], tried)
		return
	case errors.Is(err, remote.ErrBusy):
		// It took none, busy with other requests: as if it had answered each busy.
		r.markBusy(tasks)
		r.route(tasks, tried)
		return
	case err != nil:
		// A refusal (another secret, a request it cannot read):
		// the replica took none of them, so they go to the next candidates, as busy
		// ones do. Handed back at once, a task whose key hashes to this replica would
		// come back to it at every claim until its dispatch retries ran out. A task no
		// candidate is left for waits in the leader if one of them answered busy (it
		// may take it in a moment), and is handed back otherwise: every candidate
		// refused it.
		r.cfg.Log.LogAttrs(r.ctx, slog.LevelWarn, "ax: executor refused a dispatch; its tasks go to the next candidates", slog.String("executor", name), slog.Int("tasks", len(tasks)), slog.Any("err", err))
		msg := fmt.Sprintf("executor %s refused it: %v", name, err)
		r.routeOr(tasks, tried, func(none []store.Task) {
			waited, refused := r.splitBusy(none)
			if len(waited) > 0 {
				r.wait(waited)
			}
			if len(refused) > 0 {
				r.cfg.Exec.HandBack(r.cfg.Src, refused, observe.Refused, msg)
			}
		})
		return
	}
	r.report(name, resp)
	if len(resp.Accepted) > 0 && r.cfg.Src.Done != nil {
		r.cfg.Src.Done(len(resp.Accepted))
	}
	refused := map[int64]bool{}
	busy := map[int64]bool{}
	for _, id := range resp.Busy {
		refused[id], busy[id] = true, true
	}
	for _, id := range resp.Unhandled {
		refused[id] = true
	}
	var again, placed, full []store.Task
	for _, t := range tasks {
		switch {
		case busy[t.ID]:
			full = append(full, t)
			fallthrough
		case refused[t.ID]:
			again = append(again, t)
		default:
			placed = append(placed, t)
		}
	}
	r.forget(placed)
	r.markBusy(full)
	if len(again) > 0 {
		r.route(again, tried)
	}
}

// refresh re-reads the live replicas, unless it did less than a second ago, and reports
// whether it did.
func (r *Router) refresh() bool {
	if r.cfg.Nodes == nil {
		return false
	}
	r.mu.Lock()
	if time.Since(r.refreshed) < time.Second {
		r.mu.Unlock()
		return false
	}
	r.refreshed = time.Now()
	r.mu.Unlock()
	ns, err := r.cfg.Nodes(r.ctx)
	if err != nil {
		r.cfg.Log.LogAttrs(r.ctx, slog.LevelWarn, "ax: read the live nodes", slog.Any("err", err))
		return false
	}
	r.SetNodes(ns)
	return true
}

// valid reports whether the term's tasks may still be dispatched.
func (r *Router) valid() error {
	if r.cfg.Src.Valid == nil {
		return nil
	}
	return r.cfg.Src.Valid()
}

// report records a replica's load as its executor answered: its busy slots are its
// slots (the registry's Capacity, its Concurrency) less those free, the tasks waiting
// for a slot with those running.
func (r *Router) report(name string, resp *remote.DispatchResponse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.nodes[name]
	if n == nil {
		return
	}
	if n.Capacity <= 0 {
		n.Capacity = resp.Running + resp.Free
	}
	n.InFlight = max(n.Capacity-resp.Free, resp.Running)
}

// unassign stops counting sent tasks as picked for a replica: the request that
// carried them ended (other requests to it may still be under way).
func (r *Router) unassign(name string, sent int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.nodes[name]; n != nil {
		n.assigned = max(n.assigned-sent, 0)
	}
}

// markDown skips a replica until its health endpoint answers.
func (r *Router) markDown(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down[name] = struct{}{}
}

// Probe checks, every interval until ctx ends, the health of the replicas marked
// down, and routes to each again once it answers.
func (r *Router) Probe(ctx context.Context, interval time.Duration) {
	clock.Every(ctx, interval, func() {
		r.mu.Lock()
		var check []*node
		for name := range r.down {
			if n := r.nodes[name]; n != nil {
				check = append(check, n)
			} else {
				delete(r.down, name)
			}
		}
		r.mu.Unlock()
		for _, n := range check {
			hctx, cancel := context.WithTimeout(ctx, interval)
			err := r.cfg.Client.Health(hctx, n.Advertise)
			cancel()
			if err == nil {
				r.mu.Lock()
				delete(r.down, n.Name)
				r.mu.Unlock()
				r.cfg.Log.LogAttrs(ctx, slog.LevelInfo, "ax: executor answers again", slog.String("executor", n.Name))
			}
		}
	})
}

// Wait waits for the requests in flight, which end with the term's context.
func (r *Router) Wait() { r.wg.Wait() }
