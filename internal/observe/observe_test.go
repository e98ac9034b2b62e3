package observe

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/axsched/ax/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Events are delivered in order on one goroutine; those sent before Start wait for
// it; Close delivers what is queued; a nil queue takes everything and does nothing.
func TestQueueDeliversInOrder(t *testing.T) {
	var mu sync.Mutex
	var got []int
	q := NewQueue(func(e Event) {
		mu.Lock()
		got = append(got, e.Count)
		mu.Unlock()
	})
	for i := range 100 {
		q.Send(Event{Kind: Submitted, Count: i})
	}
	q.Start()
	for i := 100; i < 200; i++ {
		q.Send(Event{Kind: Submitted, Count: i})
	}
	q.Close(context.Background())
	q.Send(Event{Kind: Submitted, Count: 999}) // after Close: dropped
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 200 {
		t.Fatalf("%d events delivered, want 200", len(got))
	}
	for i, n := range got {
		if n != i {
			t.Fatalf("event %d carries %d: out of order", i, n)
		}
	}
	var nilQueue *Queue
	nilQueue.Send(Event{Kind: Submitted})
	nilQueue.Start()
	nilQueue.Close(context.Background())
}

// A full queue drops and never blocks; the next event delivered counts the drops.
func TestQueueDropsWhenFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var dropped, delivered int
		q := NewQueue(func(e Event) {
			if e.Count == -1 {
				<-release // a slow observer
			}
			dropped += e.Dropped
			delivered++
		})
		q.Start()
		q.Send(Event{Kind: Submitted, Count: -1})
		synctest.Wait() // the observer holds the first event
		for range Size + 10 {
			q.Send(Event{Kind: Submitted})
		}
		close(release)
		q.Close(context.Background())
		if delivered != Size+1 || dropped != 10 {
			t.Errorf("delivered %d, dropped %d; want %d and 10", delivered, dropped, Size+1)
		}
	})
}

func TestStartedMarksEarlyAndManual(t *testing.T) {
	var got []Event
	q := NewQueue(func(e Event) { got = append(got, e) })
	q.Start()
	due := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q.Started(due, &store.Task{Name: "a", DueAt: due, StartedAt: due.Add(5 * time.Millisecond)})
	q.Started(due, &store.Task{Name: "b", DueAt: due, StartedAt: due.Add(-time.Millisecond)})
	trig := due.Add(-time.Hour)
	q.Started(due, &store.Task{Name: "c", DueAt: due, StartedAt: trig, DispatchedAt: trig, TriggeredAt: trig})
	q.Close(context.Background())
	if len(got) != 3 || got[0].Lateness != 5*time.Millisecond || got[0].Early ||
		!got[1].Early || got[2].Early || !got[2].Manual || got[2].Lateness != 0 {
		t.Errorf("started events = %+v; want on time, early, manual (not early)", got)
	}
}
