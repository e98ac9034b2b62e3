package main

import (
	"context"
	"time"
)

// config is what every backend is opened with.
type config struct {
	PG      string // base PostgreSQL DSN; each instance gets a fresh schema in it
	Redis   string // Redis address
	RedisDB int    // the Redis database number the asynq backends own
}

// backend is one system under test in one configuration.
type backend struct {
	name string
	// open returns an instance on an empty store: a fresh PostgreSQL schema, or the
	// Redis database emptied with FLUSHDB.
	open func(ctx context.Context, cfg config) (instance, error)
}

// handlerFunc is called by an instance's handler with the task's key (0..n-1),
// once per handler call, as the handler starts.
type handlerFunc func(key int)

// instance is one backend on one empty store. Keys are the integers 0..n-1 of a
// workload; all times are from the local clock.
type instance interface {
	// EnqueueOne submits one task through the library's single-insert API.
	EnqueueOne(ctx context.Context, key int, due time.Time) error
	// EnqueueBatch submits tasks keys[i] due at dues[i] through the library's batch
	// API (asynq, which has none: concurrent single enqueues).
	EnqueueBatch(ctx context.Context, keys []int, dues []time.Time) error
	// Preload writes tasks before any worker starts, by the fastest means the
	// library offers; not measured. A zero due time means "due now, no delay".
	Preload(ctx context.Context, dues []time.Time) error
	// Start starts workers, concurrency handlers at once, whose no-op handler calls h.
	Start(ctx context.Context, concurrency int, h handlerFunc) error
	// Counts reads the store's record: tasks completed successfully, tasks still
	// waiting for their due time, and all tasks it holds (any state).
	Counts(ctx context.Context) (storeCounts, error)
	// Stop stops the workers started by Start, if any, waiting for running handlers.
	Stop(ctx context.Context) error
	// Close releases the instance and removes its store (drops the schema, or
	// FLUSHDB of the backend's own Redis database).
	Close() error
}

// settler is an instance whose store can be brought to a steady state after a bulk
// load (VACUUM ANALYZE of its tables), as autovacuum would in time.
type settler interface {
	Settle(ctx context.Context) error
}

// fastBatcher is an instance with a second batch API (River's InsertManyFast, COPY).
type fastBatcher interface {
	EnqueueBatchFast(ctx context.Context, keys []int, dues []time.Time) error
}

// storeCounts is a store's record of a workload's tasks.
type storeCounts struct {
	Completed int // finished successfully
	Waiting   int // scheduled, not yet due or not yet run
	Total     int // every task the store holds, in any state (asynq: not completed ones)
}

// backends lists every backend in the order of a run.
var backends = []backend{
	{name: "ax", open: openAx},
	{name: "river-default", open: func(ctx context.Context, cfg config) (instance, error) { return openRiver(ctx, cfg, false) }},
	{name: "river-tuned", open: func(ctx context.Context, cfg config) (instance, error) { return openRiver(ctx, cfg, true) }},
	{name: "asynq-default", open: func(ctx context.Context, cfg config) (instance, error) { return openAsynq(ctx, cfg, false) }},
	{name: "asynq-tuned", open: func(ctx context.Context, cfg config) (instance, error) { return openAsynq(ctx, cfg, true) }},
}
