package storetest

import (
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/store"
)

var txTests = []test{
	{"Commit", testInTxCommit},
	{"Rollback", testInTxRollback},
	{"Refusals", testInTxRefusals},
	{"TriggerWhileHeld", testClaimTriggerTxWhileHeld},
	{"RollbackHoldsNothingBack", testInTxRollbackHoldsNothingBack},
}

// txStore returns the store as a store.TxStore, skipping the test when it is not one.
func (e *env) txStore() store.TxStore {
	e.t.Helper()
	txs, ok := e.s.(store.TxStore)
	if !ok {
		e.t.Skipf("%T does not implement store.TxStore", e.s)
	}
	return txs
}

// txFixture is what the InTx tests act on: a SCHEDULED task due in an hour, a FAILED
// one, a SCHEDULED one due now, and a schedule.
type txFixture struct {
	later, failed, due *store.Task
	schedule           string
}

func (e *env) txFixture() txFixture {
	e.t.Helper()
	name := fmt.Sprintf("nightly-%d", e.n.Add(1))
	e.register(def(name, e.future()))
	return txFixture{later: e.scheduled(e.future()), failed: e.inState(store.Failed), due: e.scheduled(e.past()), schedule: name}
}

// act does, in tx, every transactional operation on f and checks what each returns,
// and that tx reads its own changes. It returns the audit record and the execution id
// of the trigger.
func (e *env) act(txs store.TxStore, tx any, f txFixture, at time.Time) (*store.AuditRecord, string) {
	e.t.Helper()
	ctx := e.ctx
	if got, err := txs.RescheduleTx(ctx, tx, f.later.Name, f.later.Key, at); err != nil || got.ID != f.later.ID || !got.DueAt.Equal(at) {
		e.t.Fatalf("RescheduleTx = %+v, %v; want task %d due %v", got, err, f.later.ID, at)
	}
	if got, err := txs.RetryTx(ctx, tx, f.failed.ID); err != nil || got.Status != store.Scheduled || got.Attempt != 0 {
		e.t.Fatalf("RetryTx = %+v, %v; want SCHEDULED, attempt 0", got, err)
	}
	exec := newExecID()
	if got, err := txs.ClaimTriggerTx(ctx, tx, f.due.ID, exec); err != nil || got.Status != store.Dispatching || got.ExecutionID != exec || got.TriggeredAt.IsZero() {
		e.t.Fatalf("ClaimTriggerTx = %+v, %v; want DISPATCHING under %s, triggered", got, err, exec)
	}
	if sc, err := txs.PauseScheduleTx(ctx, tx, f.schedule); err != nil || !sc.Paused {
		e.t.Fatalf("PauseScheduleTx = %+v, %v; want it paused", sc, err)
	}
	if got, err := txs.GetTx(ctx, tx, f.due.ID); err != nil || got.Status != store.Dispatching {
		e.t.Fatalf("GetTx after ClaimTriggerTx = %+v, %v; want its own change, DISPATCHING", got, err)
	}
	rec, err := txs.AuditTx(ctx, tx, store.AuditRecord{Actor: "ops", Role: "operator", Action: "task.trigger",
		Target: "task", Result: "ok", StatusBefore: store.Scheduled, StatusAfter: store.Dispatching, ExecutionID: exec})
	if err != nil || rec.ID == 0 || rec.At.IsZero() {
		e.t.Fatalf("AuditTx = %+v, %v; want the record with an id and a time", rec, err)
	}
	return rec, exec
}

// InTx commits what fn did in its transaction: every change, visible together, the
// moved tasks stamped for the refill.
func testInTxCommit(e *env) {
	txs := e.txStore()
	f := e.txFixture()
	cur := e.cursor()
	at := e.future().Add(time.Hour).Truncate(time.Microsecond)
	var rec *store.AuditRecord
	var exec string
	var mid *store.RefillResult
	if err := txs.InTx(e.ctx, func(tx any) error {
		rec, exec = e.act(txs, tx, f, at)
		// A refill while the transaction is open neither sees its rows nor moves its
		// cursor past them.
		mid = e.changed(cur, at.Add(time.Hour), 10)
		return nil
	}); err != nil {
		e.t.Fatalf("InTx error: %v", err)
	}
	for _, d := range mid.Changed {
		if d.ID == f.later.ID || d.ID == f.failed.ID {
			e.t.Errorf("Refill during the transaction: changed %v holds its uncommitted task %d", mid.Changed, d.ID)
		}
	}
	if got := e.get(f.later.ID); !got.DueAt.Equal(at) {
		e.t.Errorf("committed: the rescheduled task is due %v, want %v", got.DueAt, at)
	}
	if got := e.get(f.failed.ID); got.Status != store.Scheduled {
		e.t.Errorf("committed: the retried task is %s, want SCHEDULED", got.Status)
	}
	if got := e.get(f.due.ID); got.Status != store.Dispatching || got.ExecutionID != exec {
		e.t.Errorf("committed: the triggered task is %s under %q, want DISPATCHING under %s", got.Status, got.ExecutionID, exec)
	}
	if sc := e.schedule(f.schedule); !sc.Paused {
		e.t.Errorf("committed: the schedule is not paused")
	}
	if log := e.auditLog(store.AuditQuery{Limit: 10}); len(log) != 1 || log[0].ID != rec.ID || log[0].ExecutionID != exec {
		e.t.Errorf("committed: audit log %+v, want the one record %d", log, rec.ID)
	}
	res := e.changed(mid.Seq, at.Add(time.Hour), 10)
	seen := map[int64]bool{}
	for _, d := range res.Changed {
		seen[d.ID] = true
	}
	if !seen[f.later.ID] || !seen[f.failed.ID] {
		e.t.Errorf("Refill after the commit, from the cursor of one during it: changed %v, want tasks %d and %d", res.Changed, f.later.ID, f.failed.ID)
	}
	// Resumed in another transaction, the schedule fires again.
	if err := txs.InTx(e.ctx, func(tx any) error {
		_, err := txs.ResumeScheduleTx(e.ctx, tx, f.schedule, at)
		return err
	}); err != nil {
		e.t.Fatalf("InTx(ResumeScheduleTx) error: %v", err)
	}
	if sc := e.schedule(f.schedule); sc.Paused || !sc.NextFireAt.Equal(at) {
		e.t.Errorf("resumed: %+v, want not paused, next fire at %v", sc, at)
	}
}

// InTx rolls back what fn did when fn fails, and returns fn's error.
func testInTxRollback(e *env) {
	txs := e.txStore()
	f := e.txFixture()
	boom := errors.New("boom")
	err := txs.InTx(e.ctx, func(tx any) error {
		e.act(txs, tx, f, e.future().Add(time.Hour))
		return boom
	})
	if !errors.Is(err, boom) {
		e.t.Fatalf("InTx error = %v, want fn's", err)
	}
	e.unchanged("a rolled-back RescheduleTx", f.later)
	e.unchanged("a rolled-back RetryTx", f.failed)
	e.unchanged("a rolled-back ClaimTriggerTx", f.due)
	if sc := e.schedule(f.schedule); sc.Paused {
		e.t.Errorf("rolled back: the schedule is paused")
	}
	if log := e.auditLog(store.AuditQuery{Limit: 10}); len(log) != 0 {
		e.t.Errorf("rolled back: audit log %+v, want empty", log)
	}
}

// The transactional operations refuse what their plain versions refuse, with the
// unchanged task, and leave the transaction usable: what follows commits.
func testInTxRefusals(e *env) {
	txs := e.txStore()
	running := e.inState(store.Running)
	scheduled := e.scheduled(e.future())
	var rec *store.AuditRecord
	err := txs.InTx(e.ctx, func(tx any) error {
		if got, err := txs.RescheduleTx(e.ctx, tx, running.Name, running.Key, e.future()); !errors.Is(err, store.ErrNotReschedulable) || got == nil || got.ID != running.ID {
			e.t.Errorf("RescheduleTx(RUNNING) = %+v, %v; want ErrNotReschedulable with the task", got, err)
		}
		if got, err := txs.RetryTx(e.ctx, tx, scheduled.ID); !errors.Is(err, store.ErrNotRetryable) || got == nil || got.ID != scheduled.ID {
			e.t.Errorf("RetryTx(SCHEDULED) = %+v, %v; want ErrNotRetryable with the task", got, err)
		}
		if got, err := txs.ClaimTriggerTx(e.ctx, tx, running.ID, newExecID()); !errors.Is(err, store.ErrNotTriggerable) || got == nil || got.ID != running.ID {
			e.t.Errorf("ClaimTriggerTx(RUNNING) = %+v, %v; want ErrNotTriggerable with the task", got, err)
		}
		if _, err := txs.ClaimTriggerTx(e.ctx, tx, scheduled.ID, ""); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("ClaimTriggerTx without an execution id = %v, want ErrInvalid", err)
		}
		if _, err := txs.GetTx(e.ctx, tx, 1<<40); !errors.Is(err, store.ErrNotFound) {
			e.t.Errorf("GetTx(missing) = %v, want ErrNotFound", err)
		}
		if _, err := txs.PauseScheduleTx(e.ctx, tx, "no-such-schedule"); !errors.Is(err, store.ErrNotFound) {
			e.t.Errorf("PauseScheduleTx(missing) = %v, want ErrNotFound", err)
		}
		if _, err := txs.AuditTx(e.ctx, tx, store.AuditRecord{Actor: "ops"}); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("AuditTx without an action or result = %v, want ErrInvalid", err)
		}
		var err error
		rec, err = txs.AuditTx(e.ctx, tx, store.AuditRecord{Actor: "ops", Action: "task.retry", Result: "conflict"})
		return err
	})
	if err != nil {
		e.t.Fatalf("InTx after the refusals: %v, want the transaction usable", err)
	}
	e.unchanged("a refused RescheduleTx", running)
	e.unchanged("a refused RetryTx", scheduled)
	if log := e.auditLog(store.AuditQuery{Limit: 10}); len(log) != 1 || log[0].ID != rec.ID {
		e.t.Errorf("audit log %+v, want the record written after the refusals", log)
	}
}

// ClaimTriggerTx applies a task key's rule as Trigger does: refused, naming the
// holder, while another task holds the key.
func testClaimTriggerTxWhileHeld(e *env) {
	txs := e.txStore()
	key := "tx-manual"
	holder := e.holding(key, store.OverlapSkip, store.Running)
	other := e.insert(e.keyed(e.future(), key, store.OverlapSkip))[0]
	free := e.insert(e.keyed(e.future(), "tx-free", store.OverlapSkip))[0]
	exec := newExecID()
	if err := txs.InTx(e.ctx, func(tx any) error {
		got, err := txs.ClaimTriggerTx(e.ctx, tx, other.ID, newExecID())
		var held *store.KeyHeldError
		if !errors.As(err, &held) || held.Holder != holder.ID || got == nil || got.ID != other.ID {
			e.t.Errorf("ClaimTriggerTx(key held) = %+v, %v; want a KeyHeldError naming task %d", got, err, holder.ID)
		}
		_, err = txs.ClaimTriggerTx(e.ctx, tx, free.ID, exec)
		return err
	}); err != nil {
		e.t.Fatalf("InTx: %v", err)
	}
	e.unchanged("a refused ClaimTriggerTx", other)
	if got := e.get(free.ID); got.Status != store.Dispatching || got.ExecutionID != exec {
		e.t.Errorf("the keyed task with a free key is %s under %q, want DISPATCHING under %s", got.Status, got.ExecutionID, exec)
	}
}

// A rolled-back InTx, whose moves applied or were refused, leaves nothing that holds
// the refill back: a task written after it is in the very next refill.
func testInTxRollbackHoldsNothingBack(e *env) {
	txs := e.txStore()
	failed := e.inState(store.Failed)
	later := e.scheduled(e.future())
	cur := e.cursor()
	boom := errors.New("boom")
	if err := txs.InTx(e.ctx, func(tx any) error {
		if _, err := txs.RetryTx(e.ctx, tx, later.ID); !errors.Is(err, store.ErrNotRetryable) {
			e.t.Errorf("RetryTx(SCHEDULED) = %v, want ErrNotRetryable", err)
		}
		if _, err := txs.RetryTx(e.ctx, tx, failed.ID); err != nil {
			return err
		}
		if _, err := txs.RescheduleTx(e.ctx, tx, later.Name, later.Key, e.future().Add(time.Hour)); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		e.t.Fatalf("InTx = %v, want fn's error", err)
	}
	fresh := e.scheduled(e.future())
	res := e.changed(cur, e.future().Add(2*time.Hour), 10)
	if len(res.Changed) != 1 || res.Changed[0].ID != fresh.ID {
		e.t.Errorf("Refill after a rolled-back InTx and an insert: changed %v, want task %d alone", res.Changed, fresh.ID)
	}
}
