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
	{"TriggerWhileHeld", testTxTriggerWhileHeld},
	{"RollbackHoldsNothingBack", testInTxRollbackHoldsNothingBack},
	{"Writes", testTxWrites},
	{"Bind", testTxBind},
	{"Complete", testTxComplete},
}

// txStore returns the store as a store.Transactor, skipping the test when it is not
// one (a store that writes in no transaction: its other tests still run).
func (e *env) txStore() store.Transactor {
	e.t.Helper()
	txs, ok := e.s.(store.Transactor)
	if !ok {
		e.t.Skipf("%T does not implement store.Transactor", e.s)
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
func (e *env) act(tx store.Tx, f txFixture, at time.Time) (*store.AuditRecord, string) {
	e.t.Helper()
	ctx := e.ctx
	if got, err := tx.Reschedule(ctx, f.later.Name, f.later.Key, at); err != nil || got.ID != f.later.ID || !got.DueAt.Equal(at) {
		e.t.Fatalf("Tx.Reschedule = %+v, %v; want task %d due %v", got, err, f.later.ID, at)
	}
	if got, err := tx.Retry(ctx, f.failed.ID); err != nil || got.Status != store.Scheduled || got.Attempt != 0 {
		e.t.Fatalf("Tx.Retry = %+v, %v; want SCHEDULED, attempt 0", got, err)
	}
	exec := newExecID()
	if got, err := tx.Trigger(ctx, f.due.ID, exec); err != nil || got.Status != store.Dispatching || got.ExecutionID != exec || got.TriggeredAt.IsZero() {
		e.t.Fatalf("Tx.Trigger = %+v, %v; want DISPATCHING under %s, triggered", got, err, exec)
	}
	if sc, err := tx.PauseSchedule(ctx, f.schedule); err != nil || !sc.Paused {
		e.t.Fatalf("Tx.PauseSchedule = %+v, %v; want it paused", sc, err)
	}
	if got, err := tx.Get(ctx, f.due.ID); err != nil || got.Status != store.Dispatching {
		e.t.Fatalf("Tx.Get after Tx.Trigger = %+v, %v; want its own change, DISPATCHING", got, err)
	}
	rec, err := tx.Audit(ctx, store.AuditRecord{Actor: "ops", Role: "operator", Action: "task.trigger",
		Target: "task", Result: "ok", StatusBefore: store.Scheduled, StatusAfter: store.Dispatching, ExecutionID: exec})
	if err != nil || rec.ID == 0 || rec.At.IsZero() {
		e.t.Fatalf("Tx.Audit = %+v, %v; want the record with an id and a time", rec, err)
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
	if err := txs.InTx(e.ctx, func(tx store.Tx) error {
		rec, exec = e.act(tx, f, at)
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
	if err := txs.InTx(e.ctx, func(tx store.Tx) error {
		_, err := tx.ResumeSchedule(e.ctx, f.schedule, at)
		return err
	}); err != nil {
		e.t.Fatalf("InTx(Tx.ResumeSchedule) error: %v", err)
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
	err := txs.InTx(e.ctx, func(tx store.Tx) error {
		e.act(tx, f, e.future().Add(time.Hour))
		return boom
	})
	if !errors.Is(err, boom) {
		e.t.Fatalf("InTx error = %v, want fn's", err)
	}
	e.unchanged("a rolled-back Tx.Reschedule", f.later)
	e.unchanged("a rolled-back Tx.Retry", f.failed)
	e.unchanged("a rolled-back Tx.Trigger", f.due)
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
	err := txs.InTx(e.ctx, func(tx store.Tx) error {
		if got, err := tx.Reschedule(e.ctx, running.Name, running.Key, e.future()); !errors.Is(err, store.ErrNotReschedulable) || got == nil || got.ID != running.ID {
			e.t.Errorf("Tx.Reschedule(RUNNING) = %+v, %v; want ErrNotReschedulable with the task", got, err)
		}
		if got, err := tx.Retry(e.ctx, scheduled.ID); !errors.Is(err, store.ErrNotRetryable) || got == nil || got.ID != scheduled.ID {
			e.t.Errorf("Tx.Retry(SCHEDULED) = %+v, %v; want ErrNotRetryable with the task", got, err)
		}
		if got, err := tx.Trigger(e.ctx, running.ID, newExecID()); !errors.Is(err, store.ErrNotTriggerable) || got == nil || got.ID != running.ID {
			e.t.Errorf("Tx.Trigger(RUNNING) = %+v, %v; want ErrNotTriggerable with the task", got, err)
		}
		if _, err := tx.Trigger(e.ctx, scheduled.ID, ""); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("Tx.Trigger without an execution id = %v, want ErrInvalid", err)
		}
		if _, err := tx.Get(e.ctx, 1<<40); !errors.Is(err, store.ErrNotFound) {
			e.t.Errorf("Tx.Get(missing) = %v, want ErrNotFound", err)
		}
		if _, err := tx.PauseSchedule(e.ctx, "no-such-schedule"); !errors.Is(err, store.ErrNotFound) {
			e.t.Errorf("Tx.PauseSchedule(missing) = %v, want ErrNotFound", err)
		}
		if _, err := tx.Audit(e.ctx, store.AuditRecord{Actor: "ops"}); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("Tx.Audit without an action or result = %v, want ErrInvalid", err)
		}
		var err error
		rec, err = tx.Audit(e.ctx, store.AuditRecord{Actor: "ops", Action: "task.retry", Result: "conflict"})
		return err
	})
	if err != nil {
		e.t.Fatalf("InTx after the refusals: %v, want the transaction usable", err)
	}
	e.unchanged("a refused Tx.Reschedule", running)
	e.unchanged("a refused Tx.Retry", scheduled)
	if log := e.auditLog(store.AuditQuery{Limit: 10}); len(log) != 1 || log[0].ID != rec.ID {
		e.t.Errorf("audit log %+v, want the record written after the refusals", log)
	}
}

// Tx.Trigger applies a task key's rule as Trigger does: refused, naming the
// holder, while another task holds the key.
func testTxTriggerWhileHeld(e *env) {
	txs := e.txStore()
	key := "tx-manual"
	holder := e.holding(key, store.OverlapSkip, store.Running)
	other := e.insert(e.keyed(e.future(), key, store.OverlapSkip))[0]
	free := e.insert(e.keyed(e.future(), "tx-free", store.OverlapSkip))[0]
	exec := newExecID()
	if err := txs.InTx(e.ctx, func(tx store.Tx) error {
		got, err := tx.Trigger(e.ctx, other.ID, newExecID())
		var held *store.KeyHeldError
		if !errors.As(err, &held) || held.Holder != holder.ID || got == nil || got.ID != other.ID {
			e.t.Errorf("Tx.Trigger(key held) = %+v, %v; want a KeyHeldError naming task %d", got, err, holder.ID)
		}
		_, err = tx.Trigger(e.ctx, free.ID, exec)
		return err
	}); err != nil {
		e.t.Fatalf("InTx: %v", err)
	}
	e.unchanged("a refused Tx.Trigger", other)
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
	if err := txs.InTx(e.ctx, func(tx store.Tx) error {
		if _, err := tx.Retry(e.ctx, later.ID); !errors.Is(err, store.ErrNotRetryable) {
			e.t.Errorf("Tx.Retry(SCHEDULED) = %v, want ErrNotRetryable", err)
		}
		if _, err := tx.Retry(e.ctx, failed.ID); err != nil {
			return err
		}
		if _, err := tx.Reschedule(e.ctx, later.Name, later.Key, e.future().Add(time.Hour)); err != nil {
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

// A Tx inserts, cancels and makes due in its transaction: nothing of it is visible
// after a rollback, all of it after the commit.
func testTxWrites(e *env) {
	txs := e.txStore()
	later, cancel := e.scheduled(e.future()), e.scheduled(e.future())
	nt := e.newTask(e.future())
	nt.Trace = traceparent(1)
	writes := func(tx store.Tx) (*store.Task, error) {
		res, err := tx.Insert(e.ctx, []store.NewTask{nt})
		if err != nil || len(res) != 1 || res[0].Err != nil || res[0].Task.ID == 0 || res[0].Task.Trace != nt.Trace {
			e.t.Fatalf("Tx.Insert = %+v, %v; want the stored task, with its trace", res, err)
		}
		if got, err := tx.Cancel(e.ctx, cancel.Name, cancel.Key, "storetest"); err != nil || got.Status != store.Cancelled {
			e.t.Fatalf("Tx.Cancel = %+v, %v; want CANCELLED", got, err)
		}
		if got, err := tx.MakeDue(e.ctx, later.ID); err != nil || got.Status != store.Scheduled || got.TriggeredAt.IsZero() {
			e.t.Fatalf("Tx.MakeDue = %+v, %v; want SCHEDULED, triggered", got, err)
		}
		if _, err := tx.MakeDue(e.ctx, cancel.ID); !errors.Is(err, store.ErrNotTriggerable) {
			e.t.Errorf("Tx.MakeDue(cancelled in the transaction) = %v, want ErrNotTriggerable", err)
		}
		return tx.Get(e.ctx, res[0].Task.ID)
	}
	errBoom := errors.New("boom")
	if err := txs.InTx(e.ctx, func(tx store.Tx) error {
		if _, err := writes(tx); err != nil {
			e.t.Fatalf("Tx.Get of the inserted task: %v", err)
		}
		return errBoom
	}); !errors.Is(err, errBoom) {
		e.t.Fatalf("InTx error = %v, want fn's", err)
	}
	e.unchanged("a rolled-back Tx.Cancel", cancel)
	e.unchanged("a rolled-back Tx.MakeDue", later)
	if _, err := e.s.Lookup(e.ctx, nt.Name, nt.Key); !errors.Is(err, store.ErrNotFound) {
		e.t.Errorf("Lookup of a rolled-back Tx.Insert: %v, want ErrNotFound", err)
	}
	var inserted *store.Task
	if err := txs.InTx(e.ctx, func(tx store.Tx) error {
		var err error
		inserted, err = writes(tx)
		return err
	}); err != nil {
		e.t.Fatalf("InTx error: %v", err)
	}
	if got := e.get(inserted.ID); got.Status != store.Scheduled || got.Key != nt.Key || got.Trace != nt.Trace {
		e.t.Errorf("the committed Tx.Insert: %+v, want it SCHEDULED, with trace %q", got, nt.Trace)
	}
	if got := e.get(cancel.ID); got.Status != store.Cancelled {
		e.t.Errorf("the committed Tx.Cancel: %s, want CANCELLED", got.Status)
	}
	if got := e.get(later.ID); !got.DueAt.Before(later.DueAt) || got.TriggeredAt.IsZero() {
		e.t.Errorf("the committed Tx.MakeDue: due %v, triggered %v; want it due now, triggered", got.DueAt, got.TriggeredAt)
	}
}

// Bind takes a transaction of the store's own kind and database — InTx's, here —
// and refuses anything else, before writing.
func testTxBind(e *env) {
	txs := e.txStore()
	later := e.scheduled(e.future())
	for _, bad := range []any{nil, "not a transaction", 42} {
		if v, err := txs.Bind(e.ctx, bad); !errors.Is(err, store.ErrInvalid) {
			e.t.Errorf("Bind(%#v) = %v, %v; want ErrInvalid", bad, v, err)
		}
	}
	if err := txs.InTx(e.ctx, func(tx store.Tx) error {
		if _, err := tx.MakeDue(e.ctx, later.ID); err != nil {
			return err
		}
		v, err := txs.Bind(e.ctx, tx.Raw())
		if err != nil {
			e.t.Fatalf("Bind(InTx's own transaction) error: %v", err)
		}
		if v.Raw() != tx.Raw() {
			e.t.Errorf("Bind(tx).Raw() = %v, want tx, %v", v.Raw(), tx.Raw())
		}
		got, err := v.Get(e.ctx, later.ID)
		if err != nil || got.TriggeredAt.IsZero() {
			e.t.Errorf("Get through the bound view = %+v, %v; want the transaction's own change", got, err)
		}
		return err
	}); err != nil {
		e.t.Fatalf("InTx error: %v", err)
	}
}

// Tx.Complete finishes the current execution of a RUNNING task as a success when the
// transaction commits, and not at all when it rolls back; it refuses, changing
// nothing, an execution that is not the task's current one, and a Finish of the
// completed execution then does not apply.
func testTxComplete(e *env) {
	txs := e.txStore()
	kept, dropped, other := e.inState(store.Running), e.inState(store.Running), e.inState(store.Running)
	boom := errors.New("boom")
	err := txs.InTx(e.ctx, func(tx store.Tx) error {
		ok, err := tx.Complete(e.ctx, store.ExecRef{TaskID: dropped.ID, ExecutionID: dropped.ExecutionID})
		if err != nil || !ok {
			e.t.Fatalf("Tx.Complete(running %d) = %v, %v; want true", dropped.ID, ok, err)
		}
		return boom
	})
	if !errors.Is(err, boom) {
		e.t.Fatalf("InTx error = %v, want fn's", err)
	}
	e.unchanged("a rolled-back Tx.Complete", dropped)

	lo := e.settle(kept)
	err = txs.InTx(e.ctx, func(tx store.Tx) error {
		for _, ref := range []store.ExecRef{{TaskID: other.ID, ExecutionID: newExecID()}, {TaskID: other.ID + 1000, ExecutionID: newExecID()}} {
			if ok, err := tx.Complete(e.ctx, ref); err != nil || ok {
				e.t.Errorf("Tx.Complete(%+v, not current) = %v, %v; want false", ref, ok, err)
			}
		}
		ok, err := tx.Complete(e.ctx, store.ExecRef{TaskID: kept.ID, ExecutionID: kept.ExecutionID})
		if err != nil || !ok {
			e.t.Fatalf("Tx.Complete(running %d) = %v, %v; want true", kept.ID, ok, err)
		}
		if got, err := tx.Get(e.ctx, kept.ID); err != nil || got.Status != store.Succeeded {
			e.t.Errorf("Tx.Get after Tx.Complete = %+v, %v; want SUCCEEDED", got, err)
		}
		return nil
	})
	hi := e.now()
	if err != nil {
		e.t.Fatalf("InTx error: %v", err)
	}
	e.unchanged("a refused Tx.Complete", other)
	got := e.get(kept.ID)
	e.stamped("Tx.Complete: FinishedAt", got.FinishedAt, lo, hi)
	want := *kept
	want.Status, want.FinishedAt, want.UpdatedAt = store.Succeeded, got.FinishedAt, got.UpdatedAt
	if d := diff(&want, got); d != "" {
		e.t.Errorf("Tx.Complete mismatch (-want +got):\n%s", d)
	}
	e.checkClosed(kept, store.Succeeded, "", lo, hi)
	ok, err := e.s.Finish(e.ctx, store.Fence{}, []store.Finish{{TaskID: kept.ID, ExecutionID: kept.ExecutionID, Status: store.Succeeded}})
	if err != nil || len(ok) != 1 || ok[0] {
		e.t.Errorf("Finish after Tx.Complete = %v, %v; want [false]", ok, err)
	}
}
