package storecount_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/axsched/ax/internal/storecount"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/memory"
)

// Every method of store.Store is counted once per call, under its own name, and
// passes through Before with the caller's context.
func TestCountsEveryMethod(t *testing.T) {
	t.Parallel()
	type ctxKey struct{}
	ctx := context.WithValue(context.Background(), ctxKey{}, "caller")
	s := storecount.New(memory.New())
	var seen []string
	s.Before = func(c context.Context, method string) error {
		if method != "Close" && method != "InNamespace" && c.Value(ctxKey{}) != "caller" {
			t.Errorf("Before(%s) got a context that is not the caller's", method)
		}
		seen = append(seen, method)
		return nil
	}

	iface := reflect.TypeFor[store.Store]()
	want := map[string]int{}
	for i := range iface.NumMethod() {
		m := iface.Method(i)
		if m.Name == "Close" {
			continue // last: the other calls need an open store
		}
		callZero(ctx, reflect.ValueOf(s).MethodByName(m.Name))
		want[m.Name] = 1
	}
	s.Close()
	want["Close"] = 1

	got := s.Snapshot()
	if d := cmp.Diff(storecount.Counts{Calls: want}, got); d != "" {
		t.Errorf("Snapshot() after one call of each method mismatch (-want +got):\n%s", d)
	}
	if got.Total() != iface.NumMethod() {
		t.Errorf("Total() = %d, want %d", got.Total(), iface.NumMethod())
	}
	if len(seen) != iface.NumMethod() {
		t.Errorf("Before called %d times (%v), want %d", len(seen), seen, iface.NumMethod())
	}
}

// callZero calls f with ctx for its context argument and zero values for the rest.
func callZero(ctx context.Context, f reflect.Value) {
	args := make([]reflect.Value, f.Type().NumIn())
	for i := range args {
		in := f.Type().In(i)
		if in == reflect.TypeFor[context.Context]() {
			args[i] = reflect.ValueOf(ctx)
		} else {
			args[i] = reflect.Zero(in)
		}
	}
	f.Call(args)
}

// A Before that fails a call keeps it from the wrapped store; the call is counted.
func TestBeforeFailsACall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := memory.New()
	defer mem.Close()
	s := storecount.New(mem)
	errDown := errors.New("database down")
	s.Before = func(ctx context.Context, method string) error {
		if method == "Insert" {
			return errDown
		}
		return nil
	}
	if _, err := s.Insert(ctx, []store.NewTask{{Name: "job", Key: "1", DueAt: time.Now()}}); !errors.Is(err, errDown) {
		t.Fatalf("Insert with Before failing it: %v, want %v", err, errDown)
	}
	if _, err := s.Lookup(ctx, "job", "1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Lookup after a failed Insert: %v, want ErrNotFound: the call reached the store", err)
	}
	if d := cmp.Diff(map[string]int{"Insert": 1, "Lookup": 1}, s.Snapshot().Calls); d != "" {
		t.Errorf("Snapshot().Calls mismatch (-want +got):\n%s", d)
	}
}

// RefillRows adds up the rows successful refills return; a snapshot is a copy.
func TestRefillRowsAndSnapshotCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := memory.New()
	defer mem.Close()
	s := storecount.New(mem)
	now := time.Now()
	if _, err := s.Insert(ctx, []store.NewTask{{Name: "job", Key: "1", DueAt: now}, {Name: "job", Key: "2", DueAt: now}}); err != nil {
		t.Fatal(err)
	}
	// Both tasks are in the change set and in the window.
	if _, err := s.Refill(ctx, store.RefillParams{AfterSeq: 0, To: now.Add(time.Hour), Limit: 10}); err != nil {
		t.Fatal(err)
	}
	first := s.Snapshot()
	if first.RefillRows != 4 {
		t.Errorf("RefillRows = %d, want 4 (2 changed, 2 entered)", first.RefillRows)
	}
	first.Calls["Refill"] = 100
	if got := s.Snapshot().Calls["Refill"]; got != 1 {
		t.Errorf("Snapshot().Calls[Refill] = %d after changing an earlier snapshot, want 1", got)
	}
}

// notifyingTransactor is a store that implements both optional interfaces.
type notifyingTransactor struct {
	store.Store
	txMethods
}

func (notifyingTransactor) Listen(ctx context.Context, f func(store.Signal)) error { return nil }

func (n notifyingTransactor) InNamespace(string) (store.Store, error) { return n, nil }

type notifyingStore struct{ store.Store }

func (notifyingStore) Listen(ctx context.Context, f func(store.Signal)) error { return nil }

func (n notifyingStore) InNamespace(string) (store.Store, error) { return n, nil }

type txStore struct {
	store.Store
	txMethods
}

func (t txStore) InNamespace(string) (store.Store, error) { return t, nil }

// txMethods are store.Transactor's methods, binding the wrapped store itself as the
// transaction's view.
type txMethods struct{ s store.Store }

func (t txMethods) Bind(context.Context, any) (store.Tx, error) { return view{t.s}, nil }

func (t txMethods) InTx(_ context.Context, fn func(store.Tx) error) error { return fn(view{t.s}) }

// view is a store as a store.Tx.
type view struct{ store.Store }

func (view) Raw() any { return "tx" }

func (view) Complete(context.Context, store.ExecRef) (bool, error) { return false, nil }

// The Store itself hides the wrapped store's optional interfaces;
// WithOptionalInterfaces keeps exactly those the wrapped store has, and counts them.
func TestWithOptionalInterfaces(t *testing.T) {
	t.Parallel()
	mem := memory.New()
	defer mem.Close()
	for _, tc := range []struct {
		name           string
		inner          store.Store
		notifier, txer bool
	}{
		{"plain", mem, false, false},
		{"notifier", notifyingStore{mem}, true, false},
		{"tx", txStore{mem, txMethods{mem}}, false, true},
		{"both", notifyingTransactor{mem, txMethods{mem}}, true, true},
	} {
		s := storecount.New(tc.inner)
		var plain store.Store = s
		if _, ok := plain.(store.Notifier); ok {
			t.Errorf("%s: Store implements store.Notifier, want it hidden", tc.name)
		}
		if _, ok := plain.(store.Transactor); ok {
			t.Errorf("%s: Store implements store.Transactor, want it hidden", tc.name)
		}
		full := s.WithOptionalInterfaces()
		n, isNotifier := full.(store.Notifier)
		tx, isTransactor := full.(store.Transactor)
		if isNotifier != tc.notifier || isTransactor != tc.txer {
			t.Errorf("%s: WithOptionalInterfaces() is Notifier %v, Transactor %v; want %v, %v", tc.name, isNotifier, isTransactor, tc.notifier, tc.txer)
		}
		// The scheduler works on its namespace's view: it keeps them too.
		v, err := full.InNamespace("default")
		if err != nil {
			t.Fatal(err)
		}
		_, viewNotifier := v.(store.Notifier)
		_, viewTransactor := v.(store.Transactor)
		if viewNotifier != tc.notifier || viewTransactor != tc.txer {
			t.Errorf("%s: its view is Notifier %v, Transactor %v; want %v, %v", tc.name, viewNotifier, viewTransactor, tc.notifier, tc.txer)
		}
		want := map[string]int{"InNamespace": 1, "Now": 1}
		if _, err := full.Now(context.Background()); err != nil {
			t.Fatal(err)
		}
		if isNotifier {
			n.Listen(context.Background(), func(store.Signal) {})
			want["Listen"] = 1
		}
		if isTransactor {
			ctx := context.Background()
			v, err := tx.Bind(ctx, "tx")
			if err != nil || v.Raw() != "tx" {
				t.Fatalf("%s: Bind = %v, %v; want the view", tc.name, v, err)
			}
			v.Insert(ctx, nil)
			v.Cancel(ctx, "job", "k", "test")
			tx.InTx(ctx, func(v store.Tx) error { v.MakeDue(ctx, 1); return nil })
			want["Bind"], want["InTx"], want["Tx.Insert"], want["Tx.Cancel"], want["Tx.MakeDue"] = 1, 1, 1, 1, 1
		}
		if d := cmp.Diff(want, s.Snapshot().Calls); d != "" {
			t.Errorf("%s: Snapshot().Calls mismatch (-want +got):\n%s", tc.name, d)
		}
	}
}

// A fenced Start reaches the store with its fence: a stale one is refused.
func TestStartPassesFence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storecount.New(memory.New())
	defer s.Close()
	old, err := s.RaiseFence(ctx, "ns", "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	ins, err := s.Insert(ctx, []store.NewTask{{Name: "job", Key: "k", DueAt: time.Now().Add(-time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Claim(ctx, old, []store.Claim{{ID: ins[0].Task.ID, ExecutionID: "e-1"}})
	if err != nil || len(res.Claimed) != 1 {
		t.Fatalf("Claim = %+v, %v", res, err)
	}
	if _, err := s.RaiseFence(ctx, "ns", "b", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Start(ctx, old, []store.StartParams{{TaskID: ins[0].Task.ID, ExecutionID: "e-1", Name: "job"}}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("Start under the older fence: %v, want ErrFenced", err)
	}
}
