package storetest

import (
	"errors"
	"slices"
	"time"

	"github.com/axsched/ax/store"
)

var nodeTests = []test{
	{"RegisterAndList", testNodesRegister},
	{"ClockOffset", testNodesClockOffset},
	{"Alive", testNodesAlive},
	{"RemoveAndExpire", testNodesRemoveExpire},
	{"Namespaced", testNodesNamespaced},
	{"Invalid", testNodesInvalid},
}

func testNodesRegister(e *env) {
	r := e.s
	lo := e.now()
	b := store.NodeInfo{Name: "b", Advertise: "http://127.0.0.1:7001", Handlers: []string{"email", "order.close"}, Capacity: 64, InFlight: 3}
	for _, n := range []store.NodeInfo{b, {Name: "a", Capacity: 8}} {
		if err := r.RegisterNode(e.ctx, n); err != nil {
			e.t.Fatalf("RegisterNode(%+v) error: %v", n, err)
		}
	}
	hi := e.now()
	got := e.listNodes(r, time.Hour)
	if len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" {
		e.t.Fatalf("Nodes = %+v, want a and b, by name", got)
	}
	want := b
	want.StartedAt, want.HeartbeatAt = got[1].StartedAt, got[1].HeartbeatAt
	if d := diff(want, got[1]); d != "" {
		e.t.Errorf("Nodes[b] differs (-want +got):\n%s", d)
	}
	e.stamped("StartedAt", got[1].StartedAt, lo, hi)
	e.stamped("HeartbeatAt", got[1].HeartbeatAt, lo, hi)
	// A heartbeat replaces the fields and keeps the start.
	e.after(hi.Add(2 * slack))
	b.InFlight, b.Handlers, b.StartedAt = 0, []string{"email"}, got[1].StartedAt
	if err := r.RegisterNode(e.ctx, b); err != nil {
		e.t.Fatal(err)
	}
	again := e.listNodes(r, time.Hour)[1]
	if again.InFlight != 0 || !slices.Equal(again.Handlers, []string{"email"}) || !again.StartedAt.Equal(got[1].StartedAt) || !again.HeartbeatAt.After(got[1].HeartbeatAt) {
		e.t.Fatalf("Nodes[b] after a heartbeat = %+v, want its new fields, the same start, a newer heartbeat", again)
	}
}

func testNodesAlive(e *env) {
	r := e.s
	if err := r.RegisterNode(e.ctx, store.NodeInfo{Name: "old", Capacity: 1}); err != nil {
		e.t.Fatal(err)
	}
	e.after(e.now().Add(time.Second))
	if err := r.RegisterNode(e.ctx, store.NodeInfo{Name: "new", Capacity: 1}); err != nil {
		e.t.Fatal(err)
	}
	all := e.listNodes(r, time.Hour)
	if len(all) != 2 || all[0].Name != "new" || all[1].Name != "old" {
		e.t.Fatalf("Nodes(1h) = %+v, want new and old", all)
	}
	// A window that ends halfway between the two heartbeats, measured now: new is in
	// it unless this listing comes half the gap (half a second) after the last one.
	mid := all[1].HeartbeatAt.Add(all[0].HeartbeatAt.Sub(all[1].HeartbeatAt) / 2)
	within := e.now().Sub(mid)
	got := e.listNodes(r, within)
	if len(got) != 1 || got[0].Name != "new" {
		e.t.Fatalf("Nodes(%v) = %+v, want only the node that beat within it", within, got)
	}
}

func testNodesRemoveExpire(e *env) {
	r := e.s
	for _, name := range []string{"a", "b", "c"} {
		if err := r.RegisterNode(e.ctx, store.NodeInfo{Name: name}); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := r.RemoveNode(e.ctx, "a"); err != nil {
		e.t.Fatal(err)
	}
	if err := r.RemoveNode(e.ctx, "a"); err != nil {
		e.t.Fatalf("RemoveNode of a missing node: %v, want nil", err)
	}
	e.after(e.now().Add(300 * time.Millisecond))
	if err := r.RegisterNode(e.ctx, store.NodeInfo{Name: "c"}); err != nil {
		e.t.Fatal(err)
	}
	n, err := r.ExpireNodes(e.ctx, 200*time.Millisecond)
	if err != nil || n != 1 {
		e.t.Fatalf("ExpireNodes(200ms) = %d, %v; want 1 (b)", n, err)
	}
	if got := e.listNodes(r, time.Hour); len(got) != 1 || got[0].Name != "c" {
		e.t.Fatalf("Nodes after remove and expire = %+v, want c", got)
	}
}

func testNodesNamespaced(e *env) {
	a, b := e.view("a"), e.view("b")
	if err := a.s.RegisterNode(e.ctx, store.NodeInfo{Name: "x", Capacity: 1}); err != nil {
		e.t.Fatal(err)
	}
	if err := b.s.RegisterNode(e.ctx, store.NodeInfo{Name: "x", Capacity: 2}); err != nil {
		e.t.Fatal(err)
	}
	if err := b.s.RemoveNode(e.ctx, "x"); err != nil {
		e.t.Fatal(err)
	}
	if got := a.listNodes(a.s, time.Hour); len(got) != 1 || got[0].Capacity != 1 {
		e.t.Fatalf("Nodes in a = %+v, want a's x (capacity 1), untouched by b", got)
	}
	if got := b.listNodes(b.s, time.Hour); len(got) != 0 {
		e.t.Fatalf("Nodes in b = %+v, want none", got)
	}
}

func testNodesInvalid(e *env) {
	r := e.s
	for i, n := range []store.NodeInfo{{}, {Name: "a", Capacity: -1}, {Name: "a", InFlight: -1}, {Name: "a", Handlers: []string{"x", ""}},
		{Name: "a", Handlers: []string{"a\nb"}}} {
		if err := r.RegisterNode(e.ctx, n); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("RegisterNode(case %d: %+v) error %v, want ErrInvalid", i, n, err)
		}
	}
	if _, err := r.Nodes(e.ctx, 0); !errors.Is(err, store.ErrInvalid) {
		e.t.Errorf("Nodes(0) error %v, want ErrInvalid", err)
	}
	if _, err := r.ExpireNodes(e.ctx, -time.Second); !errors.Is(err, store.ErrInvalid) {
		e.t.Errorf("ExpireNodes(-1s) error %v, want ErrInvalid", err)
	}
	if got := e.listNodes(r, time.Hour); len(got) != 0 {
		e.t.Fatalf("Nodes after refused registrations = %+v, want none", got)
	}
}

// testNodesClockOffset: each registration writes the node's clock offset, signed,
// kept in whole microseconds (truncated toward zero), and the next replaces it.
func testNodesClockOffset(e *env) {
	r := e.s
	for _, c := range []struct{ offset, want time.Duration }{
		{-(1500*time.Millisecond + 1234*time.Nanosecond), -1500001 * time.Microsecond},
		{42*time.Microsecond + 999*time.Nanosecond, 42 * time.Microsecond},
		{-3 * time.Hour, -3 * time.Hour},
		{0, 0},
	} {
		if err := r.RegisterNode(e.ctx, store.NodeInfo{Name: "skewed", Capacity: 1, ClockOffset: c.offset}); err != nil {
			e.t.Fatalf("RegisterNode(offset %v) error: %v", c.offset, err)
		}
		got := e.listNodes(r, time.Hour)
		if len(got) != 1 || got[0].ClockOffset != c.want {
			e.t.Errorf("Nodes after RegisterNode(offset %v) = %+v, want ClockOffset %v", c.offset, got, c.want)
		}
	}
}
