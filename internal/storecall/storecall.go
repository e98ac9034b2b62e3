// Package storecall bounds the store calls the scheduler makes on its own.
package storecall

import (
	"context"
	"time"

	"github.com/axsched/ax/store"
)

// Bounded returns st with every call given a timeout of its own, so that a store that
// stops answering holds no loop of the scheduler's longer than that: the call fails,
// and the loop retries or, when stopping, leaves the work to recovery. Calls not
// listed here (Listen, Close, the caller's own) pass through unchanged.
func Bounded(st store.Store, timeout time.Duration) store.Store {
	return boundedStore{Store: st, timeout: timeout}
}

type boundedStore struct {
	store.Store
	timeout time.Duration
}

func (b boundedStore) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.timeout)
}

func (b boundedStore) Now(ctx context.Context) (time.Time, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.Store.Now(ctx)
}

func (b boundedStore) Insert(ctx context.Context, tasks []store.NewTask) ([]store.Inserted, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.Store.Insert(ctx, tasks)
}

func (b boundedStore) Get(ctx context.Context, id int64) (*store.Task, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.Store.Get(ctx, id)
}

func (b boundedStore) Refill(ctx context.Context, p store.RefillParams) (*store.RefillResult, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.Store.Refill(ctx, p)
}

func (b boundedStore) Claim(ctx context.Context, fence store.Fence, claims []store.Claim) (*store.ClaimResult, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.Store.Claim(ctx, fence, claims)
}

func (b boundedStore) ClaimStart(ctx context.Context, fence store.Fence, on store.StartOn, claims []store.Claim) (*store.ClaimResult, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.Store.ClaimStart(ctx, fence, on, claims)
}

func (b boundedStore) Start(ctx context.Context, fence store.Fence, starts []store.StartParams) ([]store.StartResult, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.Store.Start(ctx, fence, starts)
}

func (b boundedStore) Heartbeat(ctx context.Context, refs []store.ExecRef) ([]bool, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.Store.Heartbeat(ctx, refs)
}

func (b boundedStore) Finish(ctx context.Context, fence store.Fence, results []store.Finish) ([]bool, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.Store.Finish(ctx, fence, results)
}

func (b boundedStore) Requeue(ctx context.Context, fence store.Fence, requeues []store.Requeue) ([]bool, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.Store.Requeue(ctx, fence, requeues)
}

func (b boundedStore) Stale(ctx context.Context, status store.Status, before time.Time, limit int) ([]store.Task, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.Store.Stale(ctx, status, before, limit)
}

func (b boundedStore) RegisterSchedules(ctx context.Context, defs []store.ScheduleDef) ([]store.Schedule, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.Store.RegisterSchedules(ctx, defs)
}

func (b boundedStore) Schedules(ctx context.Context) ([]store.Schedule, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.Store.Schedules(ctx)
}

func (b boundedStore) RaiseFence(ctx context.Context, namespace, holder string, token int64) (store.Fence, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.Store.RaiseFence(ctx, namespace, holder, token)
}

func (b boundedStore) FireSchedule(ctx context.Context, p store.FireParams) (*store.FireResult, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.Store.FireSchedule(ctx, p)
}

func (b boundedStore) TaskStats(ctx context.Context, now time.Time) (*store.TaskStats, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.Store.TaskStats(ctx, now)
}

// Registry returns reg with every call given a timeout of its own, as Bounded does.
func Registry(reg store.NodeRegistry, timeout time.Duration) store.NodeRegistry {
	return boundedRegistry{reg: reg, timeout: timeout}
}

type boundedRegistry struct {
	reg     store.NodeRegistry
	timeout time.Duration
}

func (b boundedRegistry) RegisterNode(ctx context.Context, n store.NodeInfo) error {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return b.reg.RegisterNode(ctx, n)
}

func (b boundedRegistry) Nodes(ctx context.Context, aliveWithin time.Duration) ([]store.NodeInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return b.reg.Nodes(ctx, aliveWithin)
}

func (b boundedRegistry) RemoveNode(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return b.reg.RemoveNode(ctx, name)
}

func (b boundedRegistry) ExpireNodes(ctx context.Context, deadFor time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return b.reg.ExpireNodes(ctx, deadFor)
}
