package sqlite_test

import (
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/sqlite"
)

// TestFenceAcrossStores raises the fence through one Store and claims through another
// opened on the same file, as two processes would: the fence rests on the row in the
// file and the file's write lock, not on anything inside one Store.
func TestFenceAcrossStores(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ax.db")
	var stores [2]*sqlite.Store
	for i := range stores {
		s, err := sqlite.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	ctx := t.Context()
	ins, err := stores[0].Insert(ctx, []store.NewTask{{Name: "fence", Key: "a", DueAt: time.Now().Add(-time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	id := ins[0].Task.ID
	old, err := stores[0].RaiseFence(ctx, "ns", "old", 1)
	if err != nil || old.Token != 1 {
		t.Fatalf("RaiseFence(old, 1) = %+v, %v; want token 1", old, err)
	}
	if f, err := stores[1].RaiseFence(ctx, "ns", "new", 1); err != nil || f.Token != 2 {
		t.Fatalf("RaiseFence(new, 1) from the other store = %+v, %v; want token 2", f, err)
	}
	_, err = stores[0].Claim(ctx, old, []store.Claim{{ID: id, ExecutionID: "e1"}})
	if !errors.Is(err, store.ErrFenced) || !strings.HasPrefix(err.Error(), "ax: sqlite: claim: ") || strings.Count(err.Error(), "ax:") != 1 {
		t.Fatalf("Claim with the old token = %v; want ax: sqlite: claim: … ErrFenced", err)
	}
	if task, err := stores[1].Get(ctx, id); err != nil || task.Status != store.Scheduled {
		t.Fatalf("task after a fenced Claim = %+v, %v; want SCHEDULED", task, err)
	}
}

// TestRaiseFenceWaitsForWriter holds the file's write lock in a transaction of another
// connection, as a fenced write in flight in another process does: RaiseFence must wait
// for it to end before it changes the epoch.
func TestRaiseFenceWaitsForWriter(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ax.db")
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	if _, err := s.RaiseFence(ctx, "ns", "old", 1); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var epoch int64
	if err := tx.QueryRowContext(ctx, `SELECT epoch FROM ax_leader WHERE namespace = 'ns'`).Scan(&epoch); err != nil || epoch != 1 {
		t.Fatalf("epoch in the writer's transaction = %d, %v; want 1", epoch, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.RaiseFence(ctx, "ns", "new", 1)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("RaiseFence returned (%v) while another transaction held the write lock", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := tx.QueryRowContext(ctx, `SELECT epoch FROM ax_leader WHERE namespace = 'ns'`).Scan(&epoch); err != nil || epoch != 1 {
		t.Fatalf("epoch still in the writer's transaction = %d, %v; want 1", epoch, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("RaiseFence after the writer committed: %v", err)
	}
	if l, err := s.Lease(ctx, "ns"); err != nil || l.Epoch != 2 || l.Holder != "new" {
		t.Fatalf("Lease after RaiseFence = %+v, %v; want new at epoch 2", l, err)
	}
}

// TestZeroFenceReadsNothing drops ax_leader: the zero Fence must not notice, as it runs
// no statement, while a fenced write fails on the missing table and writes nothing.
func TestZeroFenceReadsNothing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ax.db")
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	ins, err := s.Insert(ctx, []store.NewTask{
		{Name: "zero", Key: "a", DueAt: time.Now().Add(-time.Hour)},
		{Name: "zero", Key: "b", DueAt: time.Now().Add(-time.Hour)},
	})
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `DROP TABLE ax_leader`); err != nil {
		t.Fatal(err)
	}
	res, err := s.Claim(ctx, store.Fence{Namespace: "ns", Token: 1}, []store.Claim{{ID: ins[0].Task.ID, ExecutionID: "e1"}})
	if err == nil || !strings.Contains(err.Error(), "ax_leader") {
		t.Fatalf("fenced Claim without ax_leader = %+v, %v; want an error naming ax_leader", res, err)
	}
	if task, err := s.Get(ctx, ins[0].Task.ID); err != nil || task.Status != store.Scheduled {
		t.Fatalf("task after a failed fenced Claim = %+v, %v; want SCHEDULED", task, err)
	}
	res, err = s.Claim(ctx, store.Fence{}, []store.Claim{{ID: ins[1].Task.ID, ExecutionID: "e2"}})
	if err != nil || len(res.Claimed) != 1 {
		t.Fatalf("Claim with the zero Fence without ax_leader = %+v, %v; want it claimed", res, err)
	}
	if _, err := s.Requeue(ctx, store.Fence{}, []store.Requeue{{TaskID: ins[1].Task.ID, ExecutionID: "e2", DueAt: time.Now()}}); err != nil {
		t.Fatalf("Requeue with the zero Fence without ax_leader: %v", err)
	}
	if _, err := s.Finish(ctx, store.Fence{}, nil); err != nil {
		t.Fatalf("Finish with the zero Fence without ax_leader: %v", err)
	}
}
