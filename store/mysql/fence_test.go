package mysql_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/store"
)

// The zero Fence adds no statement to a claim; a non-zero one adds its shared-lock
// read; a refused one stops there, is rolled back and is not retried.
func TestFenceStatements(t *testing.T) {
	t.Parallel()
	s, db := newWithDB(t, func(cfg *gomysql.Config) { cfg.InterpolateParams = true })
	db.SetMaxOpenConns(1)
	ctx := t.Context()
	now, _ := s.Now(ctx)
	var nts []store.NewTask
	for i := range 3 {
		nts = append(nts, newTask(fmt.Sprintf("fence-cost-%d", i), now.Add(-time.Second)))
	}
	res, err := s.Insert(ctx, nts)
	if err != nil {
		t.Fatal(err)
	}
	old, err := s.RaiseFence(ctx, "ns", "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	claim := func(f store.Fence, i int) (*store.ClaimResult, int, error) {
		before := statements(t, db)
		got, err := s.Claim(ctx, f, []store.Claim{{ID: res[i].Task.ID, ExecutionID: fmt.Sprintf("exec-%d", i)}})
		return got, statements(t, db) - before - 1, err // the second SHOW counts itself
	}
	const plain = 6 // SET TRANSACTION, START TRANSACTION, SELECT … FOR UPDATE, UPDATE, SELECT, COMMIT
	if got, n, err := claim(store.Fence{}, 0); err != nil || len(got.Claimed) != 1 || n != plain {
		t.Errorf("Claim without a fence: %+v, %v in %d statements, want claimed in %d", got, err, n, plain)
	}
	if got, n, err := claim(old, 1); err != nil || len(got.Claimed) != 1 || n != plain+1 {
		t.Errorf("Claim with the current fence: %+v, %v in %d statements, want claimed in %d", got, err, n, plain+1)
	}
	if _, err := s.RaiseFence(ctx, "ns", "b", 1); err != nil {
		t.Fatal(err)
	}
	// SET TRANSACTION, START TRANSACTION, the fence read, ROLLBACK: one attempt.
	_, n, err := claim(old, 2)
	if !errors.Is(err, store.ErrFenced) || n != 4 {
		t.Errorf("Claim with a stale fence: %v in %d statements, want ErrFenced in 4", err, n)
	}
	if msg := fmt.Sprint(err); !strings.HasPrefix(msg, "ax: mysql: claim: ") || strings.Count(msg, "ax:") != 1 {
		t.Errorf("Claim with a stale fence: error %q, want one \"ax: mysql: claim: \" prefix", msg)
	}
	if got, _ := s.Get(ctx, res[2].Task.ID); got.Status != store.Scheduled {
		t.Errorf("after a fenced Claim the task is %s, want SCHEDULED", got.Status)
	}
}

// The two halves of the mechanism on the ax_leader row: RaiseFence waits for a
// transaction holding the row's shared lock (a fenced write in flight), and a fenced
// write waits for a transaction holding it exclusively (a raise in flight), then reads
// the epoch it committed.
func TestFenceLocks(t *testing.T) {
	t.Parallel()
	s, db := openWithDB(t)
	ctx := t.Context()
	if _, err := s.RaiseFence(ctx, "ns", "a", 1); err != nil {
		t.Fatal(err)
	}
	const blocked = 300 * time.Millisecond

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var epoch int64
	if err := tx.QueryRowContext(ctx, `SELECT epoch FROM ax_leader WHERE namespace = 'ns' LOCK IN SHARE MODE`).Scan(&epoch); err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	raised := make(chan store.Fence, 1)
	go func() {
		f, err := s.RaiseFence(ctx, "ns", "b", 1)
		if err != nil {
			t.Errorf("RaiseFence: %v", err)
		}
		raised <- f
	}()
	select {
	case f := <-raised:
		t.Errorf("RaiseFence returned %+v while a shared lock was held", f)
	case <-time.After(blocked):
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if f := <-raised; f.Token != 2 {
		t.Errorf("RaiseFence after the shared lock ended = %+v, want token 2", f)
	}

	now, _ := s.Now(ctx)
	ins, err := s.Insert(ctx, []store.NewTask{newTask("fence-lock", now.Add(-time.Second))})
	if err != nil {
		t.Fatal(err)
	}
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE ax_leader SET holder = 'c', epoch = 3 WHERE namespace = 'ns'`); err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	claimed := make(chan error, 1)
	go func() {
		_, err := s.Claim(ctx, store.Fence{Namespace: "ns", Token: 2}, []store.Claim{{ID: ins[0].Task.ID, ExecutionID: "exec"}})
		claimed <- err
	}()
	select {
	case err := <-claimed:
		t.Errorf("Claim returned %v while the leader row was locked exclusively", err)
	case <-time.After(blocked):
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-claimed; !errors.Is(err, store.ErrFenced) {
		t.Errorf("Claim with token 2 after epoch 3 committed: error %v, want ErrFenced", err)
	}
	if got, _ := s.Get(ctx, ins[0].Task.ID); got.Status != store.Scheduled {
		t.Errorf("after a fenced Claim the task is %s, want SCHEDULED", got.Status)
	}
}
