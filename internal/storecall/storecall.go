// Package storecall bounds the store calls the scheduler makes on its own.
package storecall

import (
	"context"
	"time"

	"github.com/axsched/ax/store"
)

// Bounded returns st with every call given a timeout of its own, so that a store that
// stops answering holds no loop of the scheduler's longer than that: the call fails,
// and the loop retries or, when stopping, leaves the work to recovery. It spells out
// every method of every role, so that a method added to one fails to compile here
// rather than go unbounded. It implements none of the optional interfaces: the
// caller's transactions and the store's notifications are not the scheduler's calls.
func Bounded(st store.Store, timeout time.Duration) store.Store {
	return bounded{st: st, timeout: timeout}
}

type bounded struct {
	st      store.Store
	timeout time.Duration
}

func (b bounded) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.timeout)
}

// InNamespace returns the view of namespace ns, bounded as b is.
func (b bounded) InNamespace(ns string) (store.Store, error) {
	v, err := b.st.InNamespace(ns)
	if err != nil {
		return nil, err
	}
	return bounded{st: v, timeout: b.timeout}, nil
}

func (b bounded) Close() error { return b.st.Close() }

// The methods of store.Clock.

func (b bounded) Now(ctx context.Context) (time.Time, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Now(ctx)
}

// The methods of store.TaskWriter.

func (b bounded) Insert(ctx context.Context, tasks []store.NewTask) ([]store.Inserted, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Insert(ctx, tasks)
}

func (b bounded) Cancel(ctx context.Context, name, key, by string) (*store.Task, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Cancel(ctx, name, key, by)
}

func (b bounded) Reschedule(ctx context.Context, name, key string, at time.Time) (*store.Task, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Reschedule(ctx, name, key, at)
}

func (b bounded) Retry(ctx context.Context, id int64) (*store.Task, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Retry(ctx, id)
}

func (b bounded) Trigger(ctx context.Context, id int64, executionID string) (*store.Task, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Trigger(ctx, id, executionID)
}

func (b bounded) MakeDue(ctx context.Context, id int64) (*store.Task, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.MakeDue(ctx, id)
}

// The methods of store.TaskReader.

func (b bounded) Get(ctx context.Context, id int64) (*store.Task, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Get(ctx, id)
}

func (b bounded) Lookup(ctx context.Context, name, key string) (*store.Task, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Lookup(ctx, name, key)
}

func (b bounded) Executions(ctx context.Context, taskID int64) ([]store.Execution, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Executions(ctx, taskID)
}

func (b bounded) Tasks(ctx context.Context, q store.TaskQuery) ([]store.Task, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Tasks(ctx, q)
}

func (b bounded) CountTasks(ctx context.Context, atMost int64) (map[store.Status]int64, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.CountTasks(ctx, atMost)
}

func (b bounded) TaskStats(ctx context.Context, now time.Time) (*store.TaskStats, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.TaskStats(ctx, now)
}

// The methods of store.Queue.

func (b bounded) Refill(ctx context.Context, p store.RefillParams) (*store.RefillResult, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Refill(ctx, p)
}

func (b bounded) Claim(ctx context.Context, fence store.Fence, claims []store.Claim) (*store.ClaimResult, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Claim(ctx, fence, claims)
}

func (b bounded) ClaimStart(ctx context.Context, fence store.Fence, on store.StartOn, claims []store.Claim) (*store.ClaimResult, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.ClaimStart(ctx, fence, on, claims)
}

func (b bounded) Start(ctx context.Context, fence store.Fence, starts []store.StartParams) ([]store.StartResult, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Start(ctx, fence, starts)
}

func (b bounded) Heartbeat(ctx context.Context, refs []store.ExecRef) ([]store.Beat, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Heartbeat(ctx, refs)
}

func (b bounded) Finish(ctx context.Context, fence store.Fence, results []store.Finish) ([]bool, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Finish(ctx, fence, results)
}

func (b bounded) Requeue(ctx context.Context, fence store.Fence, requeues []store.Requeue) ([]bool, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Requeue(ctx, fence, requeues)
}

func (b bounded) Stale(ctx context.Context, status store.Status, before time.Time, limit int) ([]store.Task, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Stale(ctx, status, before, limit)
}

// The methods of store.ScheduleKeeper.

func (b bounded) RegisterSchedules(ctx context.Context, defs []store.ScheduleDef) ([]store.Schedule, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.RegisterSchedules(ctx, defs)
}

func (b bounded) PauseName(ctx context.Context, name, by string) (*store.NameState, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.PauseName(ctx, name, by)
}

func (b bounded) ResumeName(ctx context.Context, name, by string) (*store.NameState, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.ResumeName(ctx, name, by)
}

func (b bounded) SetConcurrency(ctx context.Context, name string, n int, by string) (*store.NameState, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.SetConcurrency(ctx, name, n, by)
}

func (b bounded) SetRate(ctx context.Context, name string, n int, per time.Duration, by string) (*store.NameState, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.SetRate(ctx, name, n, per, by)
}

func (b bounded) SetKeyConcurrency(ctx context.Context, name string, n int, by string) (*store.NameState, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.SetKeyConcurrency(ctx, name, n, by)
}

func (b bounded) SetKeyRate(ctx context.Context, name string, n int, per time.Duration, by string) (*store.NameState, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.SetKeyRate(ctx, name, n, per, by)
}

func (b bounded) PruneKeyStarts(ctx context.Context, limit int) (int, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.PruneKeyStarts(ctx, limit)
}

func (b bounded) Names(ctx context.Context) ([]store.NameState, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Names(ctx)
}

func (b bounded) Schedules(ctx context.Context) ([]store.Schedule, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Schedules(ctx)
}

func (b bounded) PauseSchedule(ctx context.Context, name string) (*store.Schedule, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.PauseSchedule(ctx, name)
}

func (b bounded) DeleteSchedule(ctx context.Context, name string) (int, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.DeleteSchedule(ctx, name)
}

func (b bounded) ResumeSchedule(ctx context.Context, name string, next time.Time) (*store.Schedule, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.ResumeSchedule(ctx, name, next)
}

func (b bounded) FireSchedule(ctx context.Context, p store.FireParams) (*store.FireResult, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.FireSchedule(ctx, p)
}

// The methods of store.SlotHistory.

func (b bounded) SlotGaps(ctx context.Context, name string, from, to time.Time, limit int) ([]store.SlotGap, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.SlotGaps(ctx, name, from, to, limit)
}

func (b bounded) TasksByKeys(ctx context.Context, name string, keys []string) ([]store.Task, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.TasksByKeys(ctx, name, keys)
}

func (b bounded) TasksByKeyRange(ctx context.Context, name, from, before string, limit int) ([]store.Task, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.TasksByKeyRange(ctx, name, from, before, limit)
}

// The methods of store.Fencer.

func (b bounded) RaiseFence(ctx context.Context, namespace, holder string, token int64) (store.Fence, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.RaiseFence(ctx, namespace, holder, token)
}

func (b bounded) EndLeadership(ctx context.Context, namespace, holder string, epoch int64, reason string) error {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.EndLeadership(ctx, namespace, holder, epoch, reason)
}

func (b bounded) LeadershipHistory(ctx context.Context, namespace string, n int) ([]store.LeadershipChange, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.LeadershipHistory(ctx, namespace, n)
}

// The methods of store.Leaser.

func (b bounded) AcquireLease(ctx context.Context, namespace, holder string, ttl time.Duration) (store.LeaseInfo, bool, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.AcquireLease(ctx, namespace, holder, ttl)
}

func (b bounded) RenewLease(ctx context.Context, namespace, holder string, epoch int64, ttl time.Duration) (bool, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.RenewLease(ctx, namespace, holder, epoch, ttl)
}

func (b bounded) ReleaseLease(ctx context.Context, namespace, holder string, epoch int64) (bool, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.ReleaseLease(ctx, namespace, holder, epoch)
}

func (b bounded) Lease(ctx context.Context, namespace string) (store.LeaseInfo, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Lease(ctx, namespace)
}

// The methods of store.NodeRegistry.

func (b bounded) RegisterNode(ctx context.Context, n store.NodeInfo) error {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.RegisterNode(ctx, n)
}

func (b bounded) Nodes(ctx context.Context, aliveWithin time.Duration) ([]store.NodeInfo, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Nodes(ctx, aliveWithin)
}

func (b bounded) RemoveNode(ctx context.Context, name string) error {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.RemoveNode(ctx, name)
}

func (b bounded) ExpireNodes(ctx context.Context, deadFor time.Duration) (int, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.ExpireNodes(ctx, deadFor)
}

// The methods of store.Auditor.

func (b bounded) Audit(ctx context.Context, rec store.AuditRecord) (*store.AuditRecord, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Audit(ctx, rec)
}

func (b bounded) AuditLog(ctx context.Context, q store.AuditQuery) ([]store.AuditRecord, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.AuditLog(ctx, q)
}

// The methods of store.StatsKeeper.

func (b bounded) WriteStats(ctx context.Context, rows []store.MinuteStats) error {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.WriteStats(ctx, rows)
}

func (b bounded) Stats(ctx context.Context, since time.Time) ([]store.MinuteStats, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Stats(ctx, since)
}

// The methods of store.Pruner.

func (b bounded) Prune(ctx context.Context, p store.PruneParams) (int, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.Prune(ctx, p)
}

func (b bounded) PruneAudit(ctx context.Context, before time.Time, limit int) (int, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.PruneAudit(ctx, before, limit)
}

func (b bounded) PruneStats(ctx context.Context, before time.Time, limit int) (int, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.PruneStats(ctx, before, limit)
}

func (b bounded) PruneSlotGaps(ctx context.Context, before time.Time, limit int) (int, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.PruneSlotGaps(ctx, before, limit)
}

func (b bounded) PruneLeadership(ctx context.Context, namespace string, before time.Time, keepNewest, limit int) (int, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.st.PruneLeadership(ctx, namespace, before, keepNewest, limit)
}
