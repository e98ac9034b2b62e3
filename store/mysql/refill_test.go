package mysql_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/mysql"
)

// Chained Refill cursors against concurrent writers — short and long transactions,
// commits and rollbacks: every committed task reaches Changed.
func TestRefillConcurrentWriters(t *testing.T) {
	t.Parallel()
	s, db := openWithDB(t)
	mysql.SetHoldGrace(s, 20*time.Millisecond) // reap rolled-back holds quickly
	ctx := t.Context()
	now, _ := s.Now(ctx)
	run := 2 * time.Second
	if testing.Short() {
		run = 500 * time.Millisecond
	}
	stop := time.Now().Add(run)
	var (
		mu        sync.Mutex
		committed = map[int64]bool{}
		keys      atomic.Int64
		wg        sync.WaitGroup
	)
	newKey := func() string { return fmt.Sprintf("w-%d", keys.Add(1)) }
	for w := range 6 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for time.Now().Before(stop) && !t.Failed() {
				nts := make([]store.NewTask, 1+rng.IntN(4))
				for i := range nts {
					nts[i] = newTask(newKey(), now)
				}
				if rng.IntN(2) == 0 {
					res, err := s.Insert(ctx, nts)
					if err != nil {
						t.Errorf("Insert: %v", err)
						return
					}
					mu.Lock()
					for _, r := range res {
						committed[r.Task.ID] = true
					}
					mu.Unlock()
					continue
				}
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Errorf("BeginTx: %v", err)
					return
				}
				v, err := s.Bind(ctx, tx)
				if err != nil {
					tx.Rollback()
					t.Errorf("Bind: %v", err)
					return
				}
				res, err := v.Insert(ctx, nts)
				if err != nil {
					tx.Rollback()
					t.Errorf("Insert in a bound tx: %v", err)
					return
				}
				time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond) // a long transaction
				if rng.IntN(5) == 0 {
					tx.Rollback()
					continue
				}
				if err := tx.Commit(); err != nil {
					t.Errorf("Commit: %v", err)
					return
				}
				mu.Lock()
				for _, r := range res {
					committed[r.Task.ID] = true
				}
				mu.Unlock()
			}
		})
	}
	seen := map[int64]bool{}
	seq := int64(0)
	poll := func() {
		for {
			r := changed(t, s, seq)
			if r.Seq < seq {
				t.Fatalf("Refill moved the cursor back from %d to %d", seq, r.Seq)
			}
			seq = r.Seq
			for _, d := range r.Changed {
				seen[d.ID] = true
			}
			if !r.More {
				return
			}
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		default:
			poll()
			time.Sleep(time.Millisecond)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		poll()
		missing := 0
		for id := range committed {
			if !seen[id] {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d committed tasks never reached Changed (cursor %d)", missing, len(committed), seq)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for id := range seen {
		if !committed[id] {
			t.Errorf("Changed held task %d, which was never committed", id)
		}
	}
	t.Logf("%d committed tasks, all seen through chained cursors (final cursor %d)", len(committed), seq)
}
