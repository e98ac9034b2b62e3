package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/axsched/ax/store"
)

// The Leadership group checks [store.LeadershipLog]: RaiseFence appends a term's
// "acquired" change in its write, EndLeadership its "ended" one, each once; the history
// reads newest first, a namespace apart from the others; pruning keeps the newest.

var leadershipTests = []test{
	{"RaiseRecordsAcquired", testLeadershipRaiseRecordsAcquired},
	{"RaiseAfterLease", testLeadershipRaiseAfterLease},
	{"ConcurrentRaises", testLeadershipConcurrentRaises},
	{"EndThenNext", testLeadershipEndThenNext},
	{"NoEndRecorded", testLeadershipNoEndRecorded},
	{"LateEnd", testLeadershipLateEnd},
	{"EndOnce", testLeadershipEndOnce},
	{"Limit", testLeadershipLimit},
	{"NamespacesApart", testLeadershipNamespacesApart},
	{"Invalid", testLeadershipInvalid},
	{"PruneByCount", testLeadershipPruneByCount},
	{"PruneByAge", testLeadershipPruneByAge},
	{"PruneStopsAtKept", testLeadershipPruneStopsAtKept},
}

func (e *env) endLeadership(ns, node string, epoch int64, reason string) {
	e.t.Helper()
	if err := e.s.EndLeadership(e.ctx, ns, node, epoch, reason); err != nil {
		e.t.Fatalf("EndLeadership(%q, %q, %d, %q) error: %v", ns, node, epoch, reason, err)
	}
}

func (e *env) history(ns string, n int) []store.LeadershipChange {
	e.t.Helper()
	h, err := e.s.LeadershipHistory(e.ctx, ns, n)
	if err != nil {
		e.t.Fatalf("LeadershipHistory(%q, %d) error: %v", ns, n, err)
	}
	for _, c := range h {
		if c.At.Location() != time.UTC {
			e.t.Errorf("LeadershipHistory: At %v is not UTC", c.At)
		}
	}
	return h
}

// change is what the tests compare of a LeadershipChange: At and Reason are checked
// apart.
type change struct {
	Epoch int64
	Node  string
	Kind  string
}

func changes(h []store.LeadershipChange) []change {
	out := []change{}
	for _, c := range h {
		out = append(out, change{c.Epoch, c.Holder, c.Kind})
	}
	return out
}

func (e *env) wantHistory(ns string, n int, want ...change) []store.LeadershipChange {
	e.t.Helper()
	h := e.history(ns, n)
	if d := diff(want, changes(h)); d != "" {
		e.t.Fatalf("LeadershipHistory(%q, %d) mismatch (-want +got):\n%s", ns, n, d)
	}
	for _, c := range h {
		if c.Namespace != ns {
			e.t.Errorf("LeadershipHistory(%q): a change of namespace %q", ns, c.Namespace)
		}
	}
	return h
}

func acquired(epoch int64, node string) change { return change{epoch, node, store.LeadershipAcquired} }
func ended(epoch int64, node string) change    { return change{epoch, node, store.LeadershipEnded} }

// wantReason fails unless reason holds every part.
func (e *env) wantReason(c store.LeadershipChange, parts ...string) {
	e.t.Helper()
	for _, p := range parts {
		if !strings.Contains(c.Reason, p) {
			e.t.Errorf("change %+v: Reason %q does not mention %q", c, c.Reason, p)
		}
	}
}

// RaiseFence appends the "acquired" change of the epoch it returns, stamped by the
// store's clock; a repeat appends nothing.
func testLeadershipRaiseRecordsAcquired(e *env) {
	lo := e.now()
	e.raise("ns", "a", 3, 3)
	hi := e.now()
	h := e.wantHistory("ns", 10, acquired(3, "a"))
	e.stamped("acquired At", h[0].At, lo, hi)
	if h[0].Reason == "" {
		e.t.Errorf("the first acquired change has no Reason")
	}
	e.raise("ns", "a", 3, 3) // a repeat whose answer was lost
	e.wantHistory("ns", 10, acquired(3, "a"))
	e.raise("ns", "b", 3, 4)
	e.wantHistory("ns", 10, acquired(4, "b"), acquired(3, "a"))
}

// A lease acquired through the Leaser raises the epoch itself; the RaiseFence that
// follows (elect/sqllease's leader) appends its "acquired" change, once.
func testLeadershipRaiseAfterLease(e *env) {
	l := e.s
	info, ok := e.acquire(l, "ns", "a", time.Minute)
	if !ok {
		e.t.Fatalf("AcquireLease of a free lease refused: %+v", info)
	}
	e.raise("ns", "a", info.Epoch, info.Epoch)
	e.raise("ns", "a", info.Epoch, info.Epoch)
	e.wantHistory("ns", 10, acquired(info.Epoch, "a"))
}

// The next leader's "acquired" change names its predecessor's recorded end.
func testLeadershipEndThenNext(e *env) {
	e.raise("ns", "a", 1, 1)
	lo := e.now()
	e.endLeadership("ns", "a", 1, "scheduler stopping")
	hi := e.now()
	e.raise("ns", "b", 1, 2)
	h := e.wantHistory("ns", 10, acquired(2, "b"), ended(1, "a"), acquired(1, "a"))
	e.stamped("ended At", h[1].At, lo, hi)
	if h[1].Reason != "scheduler stopping" {
		e.t.Errorf("ended Reason = %q, want %q", h[1].Reason, "scheduler stopping")
	}
	e.wantReason(h[0], "a", "1", "scheduler stopping")
	if !h[0].At.After(h[1].At) && !h[0].At.Equal(h[1].At) {
		e.t.Errorf("acquired At %v before the end it follows, %v", h[0].At, h[1].At)
	}
}

// A term without a recorded end (its leader crashed) is named by the next "acquired",
// by its candidate's name (an elector's holder value: a campaign id, a space, the
// name).
func testLeadershipNoEndRecorded(e *env) {
	e.raise("ns", "C1 node-a", 1, 1)
	e.raise("ns", "C2 node-b", 1, 2)
	h := e.wantHistory("ns", 10, acquired(2, "C2 node-b"), acquired(1, "C1 node-a"))
	e.wantReason(h[0], "node-a", "epoch 1", "no end")
	if strings.Contains(h[0].Reason, "C1") {
		e.t.Errorf("reason %q names the campaign, want the candidate alone", h[0].Reason)
	}
}

// An end recorded after the next leader began (a leader frozen past its lease) sorts
// with its own term: the history is in epoch order.
func testLeadershipLateEnd(e *env) {
	e.raise("ns", "a", 1, 1)
	e.raise("ns", "b", 1, 2)
	e.endLeadership("ns", "a", 1, "fenced by a newer leader")
	e.wantHistory("ns", 10, acquired(2, "b"), ended(1, "a"), acquired(1, "a"))
}

// An end appended twice keeps the first.
func testLeadershipEndOnce(e *env) {
	e.raise("ns", "a", 1, 1)
	e.endLeadership("ns", "a", 1, "first")
	e.endLeadership("ns", "a", 1, "second")
	h := e.wantHistory("ns", 10, ended(1, "a"), acquired(1, "a"))
	if h[0].Reason != "first" {
		e.t.Errorf("ended Reason = %q, want the first one's", h[0].Reason)
	}
}

// terms records n terms of namespace ns, alternating nodes a and b, each ended.
func (e *env) terms(ns string, n int) {
	e.t.Helper()
	for i := range n {
		node := []string{"a", "b"}[i%2]
		e.raise(ns, node, 1, int64(i+1))
		e.endLeadership(ns, node, int64(i+1), "resigned")
	}
}

// LeadershipHistory returns at most n changes, the newest.
func testLeadershipLimit(e *env) {
	e.terms("ns", 3)
	e.wantHistory("ns", 3, ended(3, "a"), acquired(3, "a"), ended(2, "b"))
	e.wantHistory("ns", 1, ended(3, "a"))
	if h := e.history("ns", store.MaxLeadershipHistory); len(h) != 6 {
		e.t.Errorf("LeadershipHistory(%d) = %d changes, want 6", store.MaxLeadershipHistory, len(h))
	}
	e.wantHistory("empty", 10)
}

// Each namespace has its own history, whichever view of the store reads it.
func testLeadershipNamespacesApart(e *env) {
	e.raise("one", "a", 1, 1)
	e.raise("two", "b", 7, 7)
	e.endLeadership("two", "b", 7, "stopping")
	e.wantHistory("one", 10, acquired(1, "a"))
	e.wantHistory("two", 10, ended(7, "b"), acquired(7, "b"))
	e.view("two").wantHistory("one", 10, acquired(1, "a"))
}

func testLeadershipInvalid(e *env) {
	l := e.s
	e.raise("ns", "a", 1, 1)
	long := strings.Repeat("x", store.MaxLeadershipReason+1)
	for _, c := range []struct {
		ns, node string
		epoch    int64
		reason   string
	}{
		{"", "a", 1, ""},
		{"has space", "a", 1, ""},
		{strings.Repeat("n", store.MaxNamespace+1), "a", 1, ""},
		{"ns", "", 1, ""},
		{"ns", strings.Repeat("x", store.MaxLeadershipHolder+1), 1, ""},
		{"ns", "a\x00", 1, ""},
		{"ns", "a", 0, ""},
		{"ns", "a", -1, ""},
		{"ns", "a", 1, long},
		{"ns", "a", 1, "\xff"},
	} {
		if err := l.EndLeadership(e.ctx, c.ns, c.node, c.epoch, c.reason); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("EndLeadership(%.20q, %.20q, %d, %.20q) error %v, want ErrInvalid", c.ns, c.node, c.epoch, c.reason, err)
		}
	}
	e.wantHistory("ns", 10, acquired(1, "a"))
	for _, n := range []int{0, -1, store.MaxLeadershipHistory + 1} {
		if _, err := l.LeadershipHistory(e.ctx, "ns", n); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("LeadershipHistory(%d) error %v, want ErrInvalid", n, err)
		}
	}
	if _, err := l.LeadershipHistory(e.ctx, "", 1); !errors.Is(err, store.ErrInvalid) {
		e.t.Errorf("LeadershipHistory of an empty namespace: error %v, want ErrInvalid", err)
	}
	now := e.now()
	for _, c := range []struct {
		ns          string
		before      time.Time
		keep, limit int
	}{
		{"", now, 0, 10},
		{"ns", time.Time{}, 0, 10},
		{"ns", now, -1, 10},
		{"ns", now, 0, 0},
		{"ns", now, 0, store.MaxPrune + 1},
	} {
		if n, err := l.PruneLeadership(e.ctx, c.ns, c.before, c.keep, c.limit); !errors.Is(err, store.ErrInvalid) || n != 0 {
			e.t.Errorf("PruneLeadership(%q, %v, %d, %d) = %d, %v, want ErrInvalid", c.ns, c.before, c.keep, c.limit, n, err)
		}
	}
	e.wantHistory("ns", 10, acquired(1, "a"))
}

func (e *env) pruneLeadership(ns string, before time.Time, keep, limit, want int) {
	e.t.Helper()
	n, err := e.s.PruneLeadership(e.ctx, ns, before, keep, limit)
	if err != nil {
		e.t.Fatalf("PruneLeadership(%q, %v, %d, %d) error: %v", ns, before, keep, limit, err)
	}
	if n != want {
		e.t.Fatalf("PruneLeadership(%q, %v, %d, %d) = %d, want %d", ns, before, keep, limit, n, want)
	}
}

// PruneLeadership keeps the newest keepNewest, deleting at most limit a call, oldest
// first, and only of its namespace.
func testLeadershipPruneByCount(e *env) {
	e.terms("ns", 4) // 8 changes
	e.terms("other", 2)
	e.pruneLeadership("ns", time.Time{}, 5, 2, 2) // the two oldest of the three beyond
	e.wantHistory("ns", 10, ended(4, "b"), acquired(4, "b"), ended(3, "a"), acquired(3, "a"), ended(2, "b"), acquired(2, "b"))
	e.pruneLeadership("ns", time.Time{}, 5, 10, 1)
	e.pruneLeadership("ns", time.Time{}, 5, 10, 0)
	e.wantHistory("ns", 10, ended(4, "b"), acquired(4, "b"), ended(3, "a"), acquired(3, "a"), ended(2, "b"))
	e.wantHistory("other", 10, ended(2, "b"), acquired(2, "b"), ended(1, "a"), acquired(1, "a"))
	e.raise("ns", "c", 1, 5) // the history goes on after a prune, its reason from what is left
	h := e.wantHistory("ns", 1, acquired(5, "c"))
	e.wantReason(h[0], "b", "4", "resigned")
}

// PruneLeadership deletes what was recorded before a time.
func testLeadershipPruneByAge(e *env) {
	e.terms("ns", 2)
	cut := e.after(e.now())
	e.after(cut)
	e.terms("ns2", 1)
	e.raise("ns", "a", 1, 3)
	e.pruneLeadership("ns", cut, 0, 10, 4)
	e.wantHistory("ns", 10, acquired(3, "a"))
	e.pruneLeadership("ns", cut, 0, 10, 0)
	e.pruneLeadership("ns2", cut, 0, 10, 0)
}

// PruneLeadership deletes from the oldest on and stops at the first change it keeps:
// an end recorded late keeps the older-looking changes after it.
func testLeadershipPruneStopsAtKept(e *env) {
	e.raise("ns", "a", 1, 1)
	e.raise("ns", "b", 1, 2)
	cut := e.after(e.now())
	e.after(cut)
	e.endLeadership("ns", "a", 1, "fenced by a newer leader") // recorded after cut
	e.pruneLeadership("ns", cut, 0, 10, 1)
	e.wantHistory("ns", 10, acquired(2, "b"), ended(1, "a"))
}

// Concurrent raises append their changes in turn: each reason names the term the
// history held just before it, so the raise read the change the previous one wrote.
func testLeadershipConcurrentRaises(e *env) {
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if _, err := e.s.RaiseFence(e.ctx, "ns", fmt.Sprintf("C%d node-%d", i, i), 1); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		e.t.Fatalf("RaiseFence error: %v", err)
	}
	h := e.history("ns", store.MaxLeadershipHistory)
	if len(h) != n {
		e.t.Fatalf("LeadershipHistory after %d raises = %d changes, want %d", n, len(h), n)
	}
	for i, c := range h {
		if c.Kind != store.LeadershipAcquired || c.Epoch != int64(n-i) {
			e.t.Fatalf("change %d = %+v, want acquired with epoch %d", i, c, n-i)
		}
		if i == n-1 {
			break
		}
		prev := h[i+1]
		_, name, _ := strings.Cut(prev.Holder, " ")
		e.wantReason(c, name+" recorded no end", fmt.Sprintf("epoch %d", prev.Epoch))
	}
}
